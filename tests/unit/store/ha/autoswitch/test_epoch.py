"""The epoch file (Java ``EpochFileCache`` over ``CheckpointFile``): its bytes, Apache's own class
writing and reading it, the consistent point and the truncations."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet import defer

from rmqpy.store.epoch import (
    LAST_EPOCH_END_OFFSET,
    EpochCache,
    EpochEntry,
    EpochFile,
    EpochFileError,
    decode_epoch_file,
    encode_epoch_file,
    read_epoch_file,
)
from tests import java_probe

HERE = Path(__file__).resolve().parent


def inline(fn, *args):
    return defer.maybeDeferred(fn, *args)


def test_file_bytes_field_by_field(tmp_path):
    """Count line, CRC line (java.util.zip.CRC32 of the entry lines & 0x7fffffff), one
    ``epoch-start`` line each, every line ended by \\n; the value below is what Apache's
    EpochFileCache wrote for these entries (test_java_writes_and_reads_the_same_file)."""
    text = encode_epoch_file([EpochEntry(3, 0), EpochEntry(5, 1000), EpochEntry(9, 5000)])
    assert text == "3\n2070557278\n3-0\n5-1000\n9-5000\n"


def test_file_round_trip_with_bak(tmp_path):
    path = str(tmp_path / "epochFileCheckpoint")
    f = EpochFile(path, inline)
    assert len(f) == 0 and f.last_epoch() == -1
    assert f.append(EpochEntry(1, 0))
    assert f.append(EpochEntry(2, 4096))
    assert not f.append(EpochEntry(2, 8192))  # not a later epoch
    assert not f.append(EpochEntry(3, 4096))  # not a later start
    assert Path(path).read_text() == encode_epoch_file([EpochEntry(1, 0), EpochEntry(2, 4096)])
    assert Path(path + ".bak").read_text() == encode_epoch_file([EpochEntry(1, 0)])  # the content before
    again = EpochFile(path, inline)
    assert again.entries() == [EpochEntry(1, 0, 4096), EpochEntry(2, 4096, LAST_EPOCH_END_OFFSET)]
    # a corrupt file: its .bak is read
    Path(path).write_text("2\n12345\n1-0\n2-4096\n")
    assert read_epoch_file(path) == [EpochEntry(1, 0, LAST_EPOCH_END_OFFSET)]
    Path(path + ".bak").write_text("x\n")
    with pytest.raises(EpochFileError):
        read_epoch_file(path)


def test_truncating_every_entry_leaves_the_file_as_java_does(tmp_path):
    path = str(tmp_path / "epochFileCheckpoint")
    f = EpochFile(path, inline)
    f.append(EpochEntry(4, 100))
    f.truncate_suffix_by_offset(0)
    assert len(f) == 0
    assert Path(path).read_text() == encode_epoch_file([EpochEntry(4, 100)])
    assert read_epoch_file(path) == [EpochEntry(4, 100)]


def test_decode_checks_count_and_crc():
    good = encode_epoch_file([EpochEntry(7, 7000), EpochEntry(8, 8000)])
    assert [e.epoch for e in decode_epoch_file(good)] == [7, 8]
    lines = good.split("\n")
    with pytest.raises(ValueError):
        decode_epoch_file("\n".join(["3"] + lines[1:]))
    with pytest.raises(ValueError):
        decode_epoch_file("\n".join([lines[0], str(int(lines[1]) + 1)] + lines[2:]))
    assert len(decode_epoch_file("\n".join([lines[0], "0"] + lines[2:]))) == 2  # CRC 0: not checked
    assert len(decode_epoch_file(good.replace("\n", "\r\n"))) == 2


def _probe_classes() -> Path:
    """EpochFileProbe.java compiled against the 5.3.3 server jars."""
    if not java_probe.available():
        pytest.skip("no JDK or no tests/interop/java/target/lib-5.3.3-server (tests/interop/java/build.sh)")
    return java_probe.compile_probe(HERE / "EpochFileProbe.java")


def test_java_writes_and_reads_the_same_file(tmp_path):
    """Apache's EpochFileCache (5.3.3) appends entries to a file rmqpy reads back, and reads a
    file rmqpy wrote: same entries both ways, and the same bytes."""
    classes = _probe_classes()
    java_file, ours = tmp_path / "java" / "epochFileCheckpoint", tmp_path / "rmqpy" / "epochFileCheckpoint"
    entries = [EpochEntry(1, 0), EpochEntry(2, 1 << 20), EpochEntry(5, 3 << 20), EpochEntry(6, (1 << 40) + 7)]
    mine = EpochFile(str(ours), inline)
    for e in entries:
        assert mine.append(e)
    run = subprocess.run(
        ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", f"-Duser.home={tmp_path}",
         "-cp", java_probe.classpath(classes), "EpochFileProbe", str(java_file), str(ours),
         *(f"{e.epoch}-{e.start_offset}" for e in entries), "3-5"],
        capture_output=True, text=True, timeout=60, check=True)
    lines = [line for line in run.stdout.splitlines() if line.startswith(("entry ", "refused ", "unreadable"))]
    assert lines[0] == "refused 3-5"  # Java refuses an earlier epoch as rmqpy does
    assert lines[1:] == [f"entry {e.epoch} {e.start_offset} {e.end_offset}" for e in mine.entries()]
    assert java_file.read_bytes() == ours.read_bytes()
    assert read_epoch_file(str(java_file)) == mine.entries()


# ---------------------------------------------------------------------- consistent point, truncation
def _spec(epochs: list[int], gaps: list[int]) -> list[EpochEntry]:
    out, start = [], 0
    for ep, gap in zip(epochs, gaps):
        out.append(EpochEntry(ep, start))
        start += gap
    return out


def _reference_point(local: list[EpochEntry], local_end: int, master: list[EpochEntry], master_end: int) -> int:
    """Java's findConsistentPoint, written from its loop over the descending local map."""
    def ends(entries, end):
        return {e.epoch: (entries[i + 1].start_offset if i + 1 < len(entries) else end)
                for i, e in enumerate(entries)}
    lend, mend = ends(local, local_end), ends(master, master_end)
    mstart = {e.epoch: e.start_offset for e in master}
    for e in sorted(local, key=lambda x: -x.epoch):
        if mstart.get(e.epoch) == e.start_offset:
            return min(lend[e.epoch], mend[e.epoch])
    return -1


epochs_st = st.lists(st.integers(1, 40), min_size=1, max_size=8, unique=True).map(sorted)
gaps_st = st.lists(st.integers(1, 5000), min_size=8, max_size=8)


@settings(max_examples=100, deadline=None)
@given(common=st.integers(0, 8), shared=epochs_st, gaps=gaps_st, mine=epochs_st, theirs=epochs_st,
       tail_mine=st.integers(0, 5000), tail_theirs=st.integers(0, 5000))
def test_consistent_point_matches_java(common, shared, gaps, mine, theirs, tail_mine, tail_theirs):
    """Two logs sharing a prefix of epochs, each then going on with epochs of its own."""
    base = _spec(shared[:common], gaps)
    start = base[-1].start_offset + gaps[len(base) - 1] if base else 0
    top = base[-1].epoch if base else 0
    local = base + _spec([top + e for e in mine], gaps)
    master = base + _spec([top + 100 + e for e in theirs], gaps)
    local = base + [EpochEntry(e.epoch, e.start_offset + start) for e in local[len(base):]]
    master = base + [EpochEntry(e.epoch, e.start_offset + start + 1) for e in master[len(base):]]
    local_end = local[-1].start_offset + tail_mine
    master_end = master[-1].start_offset + tail_theirs
    a, b = EpochCache(local), EpochCache(master)
    a.set_last_end_offset(local_end)
    b.set_last_end_offset(master_end)
    point = a.find_consistent_point(b)
    assert point == _reference_point(local, local_end, master, master_end)
    if base:
        assert 0 <= point <= min(local_end, master_end)
        assert point >= base[-1].start_offset
    else:
        assert point == -1


@settings(max_examples=100, deadline=None)
@given(epochs=epochs_st, gaps=gaps_st, cut=st.integers(0, 40000))
def test_truncations(epochs, gaps, cut):
    entries = _spec(epochs, gaps)
    c = EpochCache(entries)
    c.truncate_suffix_by_offset(cut)
    kept = [e for e in entries if e.start_offset < cut]
    assert [(e.epoch, e.start_offset) for e in c.entries()] == [(e.epoch, e.start_offset) for e in kept]
    if kept:
        assert c.last() is not None and c.last().end_offset == LAST_EPOCH_END_OFFSET
    c = EpochCache(entries)
    c.truncate_suffix_by_epoch(epochs[len(epochs) // 2])
    assert [e.epoch for e in c.entries()] == epochs[:len(epochs) // 2]
    c = EpochCache(entries)
    c.truncate_prefix_by_offset(cut)
    assert [e.epoch for e in c.entries()] == [e.epoch for e in EpochCache(entries).entries() if e.end_offset > cut]
    # an entry for every offset it holds
    c = EpochCache(entries)
    for e in c.entries():
        assert c.find_by_offset(e.start_offset) == e
        assert c.next_entry(e.epoch - 1) == e
