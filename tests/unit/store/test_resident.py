"""The commit log's pages behind its tail dropped from the page tables (rmqpy/store/resident.py):
the pages leave the process' RSS and no byte changes, through the mapping or the file; the pass
drops only flushed pages a window behind the end, and older files one per pass; a store with it
reads back every message, and every message acknowledged before a kill -9 survives."""
from __future__ import annotations

import logging
import mmap
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from twisted.internet.task import Clock

from rmqpy.protocol.message import decode_record
from rmqpy.store import resident
from rmqpy.store.mapped_file import MappedFile, MappedFileQueue
from rmqpy.store.message_store import GetMessageStatus, MessageStore
from rmqpy.store.resident import ResidentWindow, window_from_env

from .conftest import STORE_HOST, StoreHarness, msg, small_config

KIB = 1024
PAGE = mmap.PAGESIZE


def mapped_rss(path: str | Path) -> int:
    """Resident bytes of this process' mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(None, 5)
        if head and "-" in head[0] and not head[0].endswith(":"):
            inside = len(head) > 5 and head[5].strip() == str(path)
        elif inside and head and head[0] == "Rss:":
            total += int(head[1]) * 1024
    return total


def written_file(tmp_path: Path, size: int = 256 * KIB) -> tuple[MappedFile, bytes]:
    mf = MappedFile(str(tmp_path / "00000000000000000000"), size)
    data = os.urandom(size)
    assert mf.append(data)
    return mf, data


# ---------------------------------------------------------------------- MappedFile.release

def test_release_drops_the_pages_and_keeps_every_byte(tmp_path: Path) -> None:
    mf, data = written_file(tmp_path)
    try:
        assert mapped_rss(mf.path) >= 256 * KIB  # written through the mapping: resident
        assert mf.release(0, 192 * KIB) == 192 * KIB  # dirty pages, not flushed yet
        assert mapped_rss(mf.path) <= 64 * KIB
        assert os.pread(mf.fd, 256 * KIB, 0) == data  # the page cache kept them
        mf.flush_sync()
        with open(mf.path, "rb") as f:
            assert f.read() == data
        assert mf.read(0, 256 * KIB) == data  # read back through the mapping: mapped again
        assert mapped_rss(mf.path) >= 256 * KIB
    finally:
        mf.destroy()


def test_release_keeps_partly_covered_pages_and_clips(tmp_path: Path) -> None:
    mf, data = written_file(tmp_path)
    try:
        assert mf.release(100, 3 * PAGE + 5) == 2 * PAGE  # whole pages inside only
        assert mf.release(-5, 10 ** 9) == 256 * KIB  # clipped to the mapping
        assert mf.release(5 * PAGE, 5 * PAGE + 10) == 0
        assert mf.read(0, 256 * KIB) == data
        mf.close()
        assert mf.release(0, 256 * KIB) == 0  # unmapped: nothing to drop
    finally:
        mf.destroy()


def test_release_on_a_closed_mmap_is_nothing(tmp_path: Path) -> None:
    mf, _ = written_file(tmp_path)
    try:
        assert mf.mm is not None
        mf.mm.close()  # closed under the pass (a file deleted meanwhile)
        assert mf.release(0, 256 * KIB) == 0
    finally:
        mf.mm = None
        mf.destroy()


# ---------------------------------------------------------------------- ResidentWindow

class _Spy:
    """A MappedFile stand-in that records the ranges released."""

    def __init__(self, start: int, size: int) -> None:
        self.file_from_offset, self.file_size = start, size
        self.end_offset = start + size
        self.calls: list[tuple[int, int]] = []

    def release(self, start: int, end: int) -> int:
        self.calls.append((start, end))
        return end - start


def _window(sizes: int, n: int, window: int) -> tuple[ResidentWindow, list[_Spy]]:
    q = MappedFileQueue("/nonexistent", sizes)
    spies = [_Spy(i * sizes, sizes) for i in range(n)]
    q.files = spies  # type: ignore[assignment]
    return ResidentWindow(q, window), spies


def test_limit_is_flushed_and_a_window_behind_the_end() -> None:
    rw, _ = _window(100, 1, 30)
    assert rw.limit(flushed=50, written=100) == 50
    assert rw.limit(flushed=90, written=100) == 70
    assert rw.limit(flushed=10, written=20) == 0


def test_trim_advances_over_files_then_sweeps_the_files_behind_in_turn() -> None:
    rw, (a, b, c) = _window(100, 3, 30)
    rw.sweep = 100  # one file a pass
    assert rw.trim(150) == 150 + 100  # [0,150), then the sweep: a whole
    assert a.calls == [(0, 100), (0, 100)] and b.calls == [(0, 50)] and c.calls == []
    assert rw.released_to == 150
    assert rw.trim(150) == 50  # nothing new: only the sweep, of b up to 150
    assert b.calls[-1] == (0, 50)
    assert rw.trim(250) == 100 + 100  # [150,250); the sweep back at a
    assert b.calls[-1] == (50, 100) and c.calls == [(0, 50)] and a.calls[-1] == (0, 100)
    rw.trim(250)
    rw.trim(250)
    assert b.calls[-1] == (0, 100) and c.calls[-1] == (0, 50)  # one file per pass: b, then c
    assert (len(a.calls), len(b.calls), len(c.calls)) == (3, 4, 2)


def test_a_pass_sweeps_its_budget_of_files() -> None:
    rw, spies = _window(100, 5, 0)
    rw.sweep = 250  # three files of 100 a pass: the budget is spent after the third
    rw.trim(500)
    assert [len(s.calls) for s in spies] == [2, 2, 2, 1, 1]
    rw.trim(500)
    assert [len(s.calls) for s in spies] == [3, 2, 2, 2, 2]
    rw.sweep = resident.SWEEP  # the default: every file of a small store
    rw.trim(500)
    assert [len(s.calls) for s in spies] == [4, 3, 3, 3, 3]


def test_trim_after_the_log_was_truncated_back() -> None:
    rw, (a, b) = _window(100, 2, 0)
    rw.sweep = 0  # no sweep: only the advance
    rw.trim(180)
    rw.trim(120)  # truncated to 120: the next pass starts there again
    assert rw.released_to == 120
    rw.trim(160)
    assert b.calls[-1] == (20, 60)


def test_trim_of_an_empty_queue() -> None:
    rw, _ = _window(100, 0, 0)
    assert rw.trim(500) == 0 and rw.released_to == 0


@pytest.mark.parametrize(("raw", "expect"), [("", resident.WINDOW), ("0", None), ("-1", None),
                                              ("2", 2 << 20), ("0.5", 512 * KIB), ("x", resident.WINDOW)])
def test_window_from_env(monkeypatch: pytest.MonkeyPatch, raw: str, expect: int | None) -> None:
    monkeypatch.setenv(resident.ENV, raw)
    assert window_from_env() == expect


# ---------------------------------------------------------------------- in the store

def test_store_drops_old_pages_and_reads_every_message_back(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    monkeypatch.setenv(resident.ENV, str(16 / 1024))  # a 16 KiB window
    h = StoreHarness(tmp_path / "s", mappedFileSizeCommitLog=256 * KIB)
    s = h.open()
    assert s.resident is not None and s.resident.window == 16 * KIB
    bodies = [os.urandom(1000 + i % 7) for i in range(600)]  # ~2.4 files of 256 KiB
    for i, body in enumerate(bodies):
        r = h.put(msg(qid=i % 2, body=body, uniq=f"U{i}"))
        assert r.put_message_status.value == 0
    files = list(s.commit_log.queue.files)
    assert len(files) == 3
    before = sum(mapped_rss(f.path) for f in files)
    assert before >= 600 * 1000 - 64 * KIB  # everything written is resident
    h.clock.advance(11)  # the thorough flush (10 s), then passes of the window
    assert s.commit_log.queue.flushed_where == s.commit_log.get_max_offset()
    for _ in range(3):
        h.clock.advance(1)
    after = sum(mapped_rss(f.path) for f in files)
    assert after <= 16 * KIB + 2 * PAGE, (before, after)
    assert s.resident.released_to == s.commit_log.get_max_offset() - 16 * KIB
    seen = []
    for q in range(2):
        off = 0
        while off < s.get_max_offset_in_queue("T", q):
            g = s.get_message("G", "T", q, off, 32)
            assert g.status == GetMessageStatus.FOUND
            seen += [decode_record(raw, check_crc=True) for raw in g.message_list]
            off = g.next_begin_offset
    assert sorted((m.uniq_key, m.body) for m in seen) == sorted((f"U{i}", b) for i, b in enumerate(bodies))
    assert sum(mapped_rss(f.path) for f in files) > before // 2  # the reads mapped them again
    h.clock.advance(1)  # and the next pass drops them again
    # the window, and what a read's fault maps around it (the kernel's fault-around, 64 KiB)
    assert sum(mapped_rss(f.path) for f in files) <= 16 * KIB + 64 * KIB + 2 * PAGE
    h.close()


def test_off_keeps_the_pages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(resident.ENV, "0")
    h = StoreHarness(tmp_path / "s", mappedFileSizeCommitLog=256 * KIB)
    s = h.open()
    assert s.resident is None
    for _ in range(300):
        h.put(msg(body=os.urandom(1000)))
    h.clock.advance(15)
    assert sum(mapped_rss(f.path) for f in s.commit_log.queue.files) >= 300 * 1000 - 64 * KIB
    h.close()


def test_a_failed_pass_is_logged_and_the_next_one_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    h = StoreHarness(tmp_path / "s")
    s = h.open()
    assert s.resident is not None
    calls = []

    def boom(limit: int) -> int:
        calls.append(limit)
        raise OSError("no")

    monkeypatch.setattr(s.resident, "trim", boom)
    with caplog.at_level(logging.ERROR, logger="rmqpy.store.message_store"):
        h.clock.advance(1)
        h.clock.advance(1)
    assert len(calls) == 2
    assert "dropping the commit log's old pages failed: no" in caplog.text
    h.close()


# ---------------------------------------------------------------------- kill -9

WRITER = textwrap.dedent("""
    import sys
    from twisted.internet import reactor, defer
    from rmqpy.protocol.message import MessageExtBrokerInner
    from rmqpy.store.config import MessageStoreConfig
    from rmqpy.store.message_store import MessageStore
    root, start = sys.argv[1], int(sys.argv[2])
    cfg = MessageStoreConfig(storePathRootDir=root, mappedFileSizeCommitLog=256 * 1024,
                             mappedFileSizeConsumeQueue=20 * 5000, maxHashSlotNum=64, maxIndexNum=256)
    s = MessageStore(cfg, ("127.0.0.1", 10911), reactor)
    s.resident.interval = 0.02
    s.load(); s.start()
    n = [start]
    def ack(r, uniq):
        a = r.append_message_result
        sys.stdout.write("ACK %s %d %d %d\\n" % (uniq, a.wrote_offset, r.put_message_status.value,
                                                s.resident.released_to))
        sys.stdout.flush()
    def batch():
        for _ in range(16):
            i = n[0]; n[0] += 1
            uniq = "U%08d" % i
            m = MessageExtBrokerInner(topic="K", queue_id=i % 3, body=(b"%d." % i) * (1 + i % 300),
                                      properties={"UNIQ_KEY": uniq})
            defer.maybeDeferred(s.put_message, m).addCallback(ack, uniq)
        reactor.callLater(0.001, batch)
    reactor.callWhenRunning(batch)
    sys.stdout.write("READY\\n"); sys.stdout.flush()
    reactor.run()
""")


def test_kill9_with_a_tiny_window_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """ASYNC_FLUSH, a 4 KiB window and a pass every 20 ms: pages of acknowledged records leave the
    page tables while the writer runs, then kill -9; each acknowledged record is where its answer
    said, intact."""
    root = tmp_path / "store"
    env = {**os.environ, resident.ENV: str(4 / 1024),
           "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    acked: dict[str, int] = {}
    for rnd in range(2):
        p = subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(rnd * 1_000_000)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        assert p.stdout is not None and p.stdout.readline().startswith(b"READY"), p.communicate()
        deadline = time.monotonic() + 30
        released = start = -1
        while time.monotonic() < deadline:  # until the pages of two files were dropped
            parts = p.stdout.readline().split()
            if len(parts) == 5 and parts[0] == b"ACK" and parts[3] == b"0":
                acked[parts[1].decode()] = int(parts[2])
                start = int(parts[2]) if start < 0 else start
                released = int(parts[4])
                if released > start + 512 * KIB:
                    break
        os.kill(p.pid, signal.SIGKILL)
        out, _err = p.communicate()
        for ln in out.decode().splitlines():
            parts = ln.split()
            if len(parts) == 5 and parts[0] == "ACK" and parts[3] == "0":
                acked[parts[1]] = int(parts[2])
        assert released > start + 512 * KIB, ("no pages were dropped while the writer ran", _err[-2000:])
        s = MessageStore(small_config(root, mappedFileSizeCommitLog=256 * KIB,
                                      mappedFileSizeConsumeQueue=20 * 5000), STORE_HOST, Clock())
        assert s.load()
        try:
            assert len(s.commit_log.queue.files) > 2
            found = {}
            for off, d in s.commit_log.iter_records(s.get_min_phy_offset()):
                if d.success:
                    rec = decode_record(s.commit_log.queue.find_mapped_file_by_offset(off).read(
                        off % (256 * KIB), d.size), check_crc=True)
                    found[rec.uniq_key] = off
            for uniq, off in acked.items():
                assert found.get(uniq) == off, f"acknowledged {uniq} at {off} lost or moved"
        finally:
            s.shutdown()
