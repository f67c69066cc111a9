"""tests/reference.py: a reference run is skipped only on the very inputs it passed on."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import reference

MODULE = "tests/interop/test_pop_java.py"


def test_the_digest_covers_the_module_and_the_shared_inputs_but_not_other_test_modules() -> None:
    files = {p.relative_to(reference.ROOT).as_posix() for p in reference._files()}
    assert {"tests/interop/jvm.py", "tests/interop/java/pom.xml", "rmqpy/protocol/command.py"} <= files
    assert not any(f.rsplit("/", 1)[-1].startswith("test_") for f in files)
    assert reference.digest(MODULE) != reference.digest("tests/interop/test_go_client.py")


def test_a_changed_input_changes_the_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    before = reference.digest(MODULE)
    path = reference.ROOT / "tests/interop/jvm.py"
    text = path.read_bytes()
    monkeypatch.setattr(reference, "_digests", {})
    monkeypatch.setattr(Path, "read_bytes", lambda self: text + b"#" if self == path else Path.open(self, "rb").read())
    assert reference.digest(MODULE) != before


def test_the_record_names_tests_of_modules_that_exist() -> None:
    """Every recorded node id is a test of a module that exists (a stale entry is harmless, but a typo
    would be a record that skips nothing)."""
    if not reference.RECORD.exists():
        pytest.skip("no reference recorded yet")
    for nodeid, digest in json.loads(reference.RECORD.read_text()).items():
        assert (reference.ROOT / nodeid.split("::")[0]).is_file(), nodeid
        assert len(digest) == 64, nodeid


def test_reference_modules_and_the_harness_import_no_rmqpy_package_outside_the_inputs() -> None:
    """A reference's outcome may depend on rmqpy code only through what the digest covers."""
    import re

    modules = {item for item in (reference.ROOT / "tests" / "interop").glob("*.py")
               if not item.name.startswith("test_")}
    modules |= {p for p in (reference.ROOT / "tests" / "interop").glob("test_*.py") if "mark.reference" in p.read_text()}
    allowed = tuple(p.replace("/", ".") for p in reference.SHARED_INPUTS if p.startswith("rmqpy/"))
    imported = {(p.name, m) for p in modules for m in re.findall(r"^\s*(?:from|import) (rmqpy[\w.]*)", p.read_text(), re.M)}
    # the autoswitch helpers run rmqpy's own store in a subprocess of rmqpy-only tests, never a reference
    outside = {(n, m) for n, m in imported if not m.startswith(allowed) and not n.startswith("autoswitch_")}
    assert not outside, outside


def test_only_references_skipped_as_proven_are_left_out_of_what_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module's fixture starts servers ahead for the tests that will run: a proven reference is not
    one, while a reference whose record is stale and a plain test are; another module's tests are not
    this module's concern."""
    from types import SimpleNamespace

    class Item(SimpleNamespace):
        def get_closest_marker(self, name: str):
            return object() if name == reference.MARK and self.ref else None

    here, other = object(), object()
    proven, unproven, plain = (Item(module=here, ref=r, stash=pytest.Stash(), nodeid=f"m.py::t{i}")
                               for i, r in enumerate((True, True, False)))
    foreign = Item(module=other, ref=False, stash=pytest.Stash(), nodeid="o.py::t")
    session = SimpleNamespace(items=[proven, unproven, plain, foreign])
    monkeypatch.setattr(reference, "mode", lambda: "")
    monkeypatch.setattr(reference, "load", lambda: {"m.py::t0": "d", "m.py::t1": "old"})
    monkeypatch.setattr(reference, "digest", lambda module: "d")
    added: list = []
    for item in session.items:
        item.add_marker = added.append
    reference.pytest_collection_modifyitems(session, None, session.items)  # type: ignore[arg-type]
    assert [reference.is_proven(i) for i in session.items] == [True, False, False, False]
    assert len(added) == 1
    request = SimpleNamespace(session=session, module=here)
    assert list(reference.to_run(request)) == [unproven, plain]  # type: ignore[arg-type]
