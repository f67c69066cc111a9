"""The published tables are generated from the code and must match it."""
from pathlib import Path

from rmqpy.tools import codes_table

ROOT = Path(__file__).resolve().parents[2]


def test_request_code_table_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "request-codes.md").read_text()
    assert committed == codes_table.render(), "run: python -m rmqpy.tools.codes_table > docs/request-codes.md"


def test_compatibility_report_keeps_the_hand_written_notes() -> None:
    from tests.interop.compat_report import NOTES_MARKER, kept_notes
    committed = (ROOT / "docs" / "compatibility.md").read_text()
    assert NOTES_MARKER in committed
    notes = kept_notes(committed)
    assert notes.startswith("\n" + NOTES_MARKER) and committed.endswith(notes.lstrip("\n"))
    assert kept_notes("| table |\n") == ""


def test_configuration_reference_is_up_to_date() -> None:
    from rmqpy.tools import config_table
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == config_table.render(), "run: python -m rmqpy.tools.config_table > docs/configuration.md"


def test_configuration_reference_tells_used_accepted_and_java_only_keys_apart() -> None:
    from rmqpy.tools import config_table
    text = config_table.render()
    assert "| `listenPort` | `10911` | `10911` | used (NettyServerConfig) |" in text      # broker
    assert "| `listenPort` | `9876` | `9876` | used (NettyServerConfig) |" in text       # name server
    assert "| `storePathRootDir` | `~/store` | `~/store` | used (MessageStoreConfig) |" in text
    assert "| `serverWorkerThreads` | `8` | `8` | accepted (NettyServerConfig) |" in text
    assert "| `enablePopBufferMerge` |" in text and "| Java only |" in text
    assert not config_table.is_used("noSuchKeyAnywhere")


def test_no_doc_installs_rmqpy_from_pypi() -> None:
    """rmqpy is not on PyPI: ``pip install rmqpy`` (or ``"rmqpy[spark]"``, ``-U rmqpy``) fails for a reader."""
    import re
    docs = [ROOT / "README.md", ROOT / "spark" / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    pypi = re.compile(r"""pip3? install\s+(?:-\S+\s+)*["']?rmqpy(?:\[[^\]]*\])?["']?(?=\s|$|`)""", re.M)
    found = [f"{d.relative_to(ROOT)}: {m.group(0)}" for d in docs for m in pypi.finditer(d.read_text())]
    assert found == []
    assert pypi.search("pip install -U rmqpy") and pypi.search('pip install "rmqpy[spark]"')   # what it catches
    assert not pypi.search('pip install ".[spark]"') and not pypi.search("pip install rmqpy-client")
