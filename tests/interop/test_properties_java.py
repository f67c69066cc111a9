"""Our properties reader and writer against the real java.util.Properties (JDK on PATH).

The attack of issue 11 row 3 was a value holding a newline that became a key of the
broker's -c file. Here the JDK is the judge: what we write, Java loads back to the same
keys and values, what Java stores we read back, and on thousands of odd texts our reader
splits keys and values exactly where Java's does.
"""
from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from rmqpy.common.properties import PropertiesError, parse_properties, store_properties

pytestmark = [pytest.mark.interop,
              pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK (java on PATH)")]

PROBE = Path(__file__).resolve().parent / "props" / "PropsProbe.java"

# characters that matter to the properties syntax, plus non-ASCII (one supplementary)
ALPHABET = "ab=: \t\f\\\n\r#!u0AF" + "é€😀\x00\x7f"


def _hex(text: str) -> str:
    units = text.encode("utf-16-be", "surrogatepass")
    return "x" + units.hex()


def _unhex(text: str) -> str:
    return bytes.fromhex(text[1:]).decode("utf-16-be", "surrogatepass")


def _probe(mode: str, files: list[Path]) -> None:
    subprocess.run(["java", str(PROBE), mode, *map(str, files)], check=True, timeout=120)


def _java_result(path: Path) -> dict[str, str] | str:
    text = (path.parent / (path.name + ".out")).read_text("ascii")
    if text.startswith("ERROR"):
        return "ERROR"
    return dict((_unhex(k), _unhex(v)) for k, v in (line.split(" ") for line in text.splitlines()))


def _random_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, n)))


def test_java_loads_what_we_write(tmp_path: Path) -> None:
    """Our writer's file, loaded by Properties.load(InputStream) as BrokerStartup loads -c."""
    rng = random.Random(11)
    cases = [{"msgTraceTopicName": "X\ntls.server.mode=disabled", " lead": " v ", "k=:#!": "\r\n\\"}]
    cases += [{_random_text(rng, 12): _random_text(rng, 20) for _ in range(rng.randint(1, 5))} for _ in range(300)]
    files = []
    for i, case in enumerate(cases):
        f = tmp_path / f"w{i}"
        f.write_bytes(store_properties(case.items()).encode("ascii"))   # ASCII by construction
        files.append(f)
    _probe("load", files)
    for f, case in zip(files, cases):
        assert _java_result(f) == case, f.read_text()


def test_we_load_what_java_stores(tmp_path: Path) -> None:
    rng = random.Random(12)
    cases = [{_random_text(rng, 12): _random_text(rng, 20) for _ in range(rng.randint(1, 5))} for _ in range(300)]
    files = []
    for i, case in enumerate(cases):
        f = tmp_path / f"s{i}"
        f.write_text("".join(f"{_hex(k)} {_hex(v)}\n" for k, v in case.items()), "ascii")
        files.append(f)
    _probe("store", files)
    for f, case in zip(files, cases):
        stored = (tmp_path / (f.name + ".out")).read_text("latin-1")
        assert parse_properties(stored) == case, stored


def test_reader_splits_like_java(tmp_path: Path) -> None:
    """Arbitrary text (continuations, comments, escapes, CR/LF mixes): same keys, values, errors."""
    rng = random.Random(13)
    texts = ["a=b\\\n  #c", "\\\n#x\r\ny=1", "k\\", "x\\u00", "a:=b", "a =: b", "a\\\r\n\n b=c", "!\\\nq=1"]
    texts += [_random_text(rng, 60) for _ in range(3000)]
    files = []
    for i, text in enumerate(texts):
        f = tmp_path / f"r{i}"
        f.write_bytes(text.encode("utf-8", "surrogatepass"))
        files.append(f)
    _probe("loadutf8", files)
    mismatches = []
    for f, text in zip(files, texts):
        try:
            ours: dict[str, str] | str = parse_properties(text)
        except PropertiesError:
            ours = "ERROR"
        if ours != _java_result(f):
            mismatches.append((text, ours, _java_result(f)))
    assert not mismatches, mismatches[:5]
