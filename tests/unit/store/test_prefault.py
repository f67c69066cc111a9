"""The commit log's next pages faulted in by a thread (rmqpy/store/prefault.py, issue 29 item 2):
``populate_write`` changes no byte and does fault the pages in; the thread follows the writer,
never behind its write position nor past the file's end, stops for good where the kernel refuses;
a store with it writes the same files as one without, and recovers the same after a crash."""
from __future__ import annotations

import errno
import mmap
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rmqpy.protocol.message import MessageExtBatch, encode_batch_body
from rmqpy.speedups import native
from rmqpy.store.mapped_file import MappedFile
from rmqpy.store.prefault import Prefaulter

from .conftest import StoreHarness

needs_native = pytest.mark.skipif(native is None, reason="rmqpy._speedups not built (or RMQPY_PURE_PYTHON)")

KIB = 1024


def _wait(cond: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


# ---------------------------------------------------------------------- populate_write (C)

@needs_native
def test_populate_write_faults_pages_in_and_changes_no_byte(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.ftruncate(fd, 1024 * KIB)  # sparse: a populated page gets its block, a hole has none
        mm = mmap.mmap(fd, 1024 * KIB)
        mm[5000:5004] = b"abcd"
        before = mm[:]
        blocks = os.fstat(fd).st_blocks
        assert native.populate_write(mm, 8 * KIB + 100, 256 * KIB) == 256 * KIB
        assert os.fstat(fd).st_blocks * 512 >= blocks * 512 + 256 * KIB
        assert mm[:] == before
        mm.close()
        with open(path, "rb") as f:
            assert f.read() == before
    finally:
        os.close(fd)


@needs_native
def test_populate_write_range_and_refusals(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        os.ftruncate(fd, 64 * KIB)
        mm = mmap.mmap(fd, 64 * KIB)
        assert native.populate_write(mm, 64 * KIB - 10, 100) == 10  # clipped to the buffer
        assert native.populate_write(mm, 64 * KIB, 5) == 0
        with pytest.raises(ValueError):
            native.populate_write(mm, 64 * KIB + 1, 1)
        with pytest.raises(ValueError):
            native.populate_write(mm, -1, 1)
        with pytest.raises(ValueError):
            native.populate_write(mm, 0, -1)
        with pytest.raises((TypeError, BufferError)):
            native.populate_write(b"read only", 0, 1)
        ro = mmap.mmap(fd, 64 * KIB, access=mmap.ACCESS_READ)
        with pytest.raises((TypeError, BufferError)):
            native.populate_write(ro, 0, 1)
        ro.close()
        mm.close()
        with pytest.raises(ValueError):  # a closed mmap exports no buffer: the thread skips it
            native.populate_write(mm, 0, 1)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------- the thread

class _Recorder:
    """A populate that records its calls; raises ``fail`` once when set."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []
        self.fail: OSError | None = None
        self.lock = threading.Lock()

    def __call__(self, buf: Any, offset: int, length: int) -> int:
        if self.fail is not None:
            e, self.fail = self.fail, None
            raise e
        with self.lock:
            self.calls.append((offset, length))
        return length


def _file(tmp_path: Path, name: str = "00000000000000262144", size: int = 256 * KIB) -> MappedFile:
    return MappedFile(str(tmp_path / name), size)


def test_thread_follows_the_writer(tmp_path: Path) -> None:
    rec = _Recorder()
    p = Prefaulter(rec, lead=64 * KIB, chunk=16 * KIB)
    mf = _file(tmp_path)
    p.start()
    try:
        mf.wrote_position = 1000
        # the next request when a write ends past 1000 + chunk, as a commit log offset
        assert p.ahead(mf, 1000) == 256 * KIB + 1000 + 16 * KIB
        _wait(lambda: rec.calls == [(1000, 64 * KIB)])
        mf.wrote_position = 1000 + 16 * KIB
        p.ahead(mf, mf.wrote_position)
        _wait(lambda: len(rec.calls) == 2)
        assert rec.calls[1] == (1000 + 64 * KIB, 16 * KIB)  # from where the last one ended
        # the writer overtook what was populated (a burst): from its position, never behind it
        mf.wrote_position = 200 * KIB
        p.ahead(mf, mf.wrote_position)
        _wait(lambda: len(rec.calls) == 3)
        assert rec.calls[2] == (200 * KIB, 56 * KIB)  # to the file's end, not past it
        assert p.ahead(mf, 250 * KIB) == 256 * KIB + 256 * KIB  # next: the file's end
        time.sleep(0.05)
        assert len(rec.calls) == 3  # nothing left in this file
        # the next file: from its write position
        nf = _file(tmp_path, "00000000000000524288")
        nf.wrote_position = 3000
        p.ahead(nf, 3000)
        _wait(lambda: len(rec.calls) == 4)
        assert rec.calls[3] == (3000, 64 * KIB)
        assert p.populated == sum(n for _o, n in rec.calls)
        nf.close()
    finally:
        p.stop()
        mf.close()
    assert p._thread is None
    p.ahead(mf, 0)  # after stop: a request nobody takes, no hang


def test_closed_file_skipped_and_error_logged_then_continues(tmp_path: Path) -> None:
    rec = _Recorder()
    p = Prefaulter(rec, lead=64 * KIB, chunk=16 * KIB)
    p.start()
    try:
        gone = _file(tmp_path)
        gone.close()  # mm None
        p.ahead(gone, 0)
        mf = _file(tmp_path, "00000000000000524288")
        rec.fail = OSError(errno.EFAULT, "Bad address")
        p.ahead(mf, 0)
        _wait(lambda: rec.fail is None)
        time.sleep(0.02)
        assert rec.calls == [] and p.disabled is None
        mf.wrote_position = 16 * KIB
        p.ahead(mf, 16 * KIB)
        _wait(lambda: rec.calls == [(16 * KIB, 64 * KIB)])
        mf.close()
    finally:
        p.stop()


@pytest.mark.parametrize("code", [errno.EINVAL, errno.ENOSYS])
def test_kernel_refusal_stops_it_for_good(tmp_path: Path, code: int) -> None:
    rec = _Recorder()
    rec.fail = OSError(code, os.strerror(code))
    p = Prefaulter(rec, lead=64 * KIB, chunk=16 * KIB)
    p.start()
    mf = _file(tmp_path)
    try:
        p.ahead(mf, 0)
        _wait(lambda: p.disabled is not None)
        assert p._thread is not None
        p._thread.join(2)
        assert not p._thread.is_alive()
    finally:
        p.stop()
        mf.close()
    p.start()  # disabled: not started again
    assert p._thread is None


# ---------------------------------------------------------------------- in the store

_CFG = dict(mappedFileSizeCommitLog=256 * KIB, mappedFileSizeConsumeQueue=20 * 64, maxHashSlotNum=64,
            maxIndexNum=512)


def _batches(n: int) -> list[MessageExtBatch]:
    out = []
    for i in range(n):
        items = [(j, bytes([(i + j) & 0xFF]) * (700 + 37 * j),
                  {"UNIQ_KEY": "%032X" % (i * 100 + j), **({"KEYS": f"k{i} k{j}"} if j % 3 == 0 else {})})
                 for j in range(8)]
        out.append(MessageExtBatch(topic="T", queue_id=i % 3, body=encode_batch_body(items),
                                   properties_string="WAIT\x01true\x02", born_host=("10.1.2.3", 5555),
                                   born_timestamp=77))
    return out


def _put_all(h: StoreHarness, batches: list[MessageExtBatch]) -> None:
    s = h.store
    assert s is not None
    for b in batches:
        r = s.put_messages_now(b)
        assert not hasattr(r, "addCallback") and r.append_message_result is not None  # type: ignore[union-attr]
        h.clock.advance(1.3)


def _files(root: Path) -> dict[str, bytes]:
    out = {}
    for d in ("commitlog", "consumequeue", "index"):
        for dirpath, _dirs, names in os.walk(root / d):
            for name in names:
                p = Path(dirpath) / name
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


@needs_native
def test_store_with_the_thread_writes_the_same_files(tmp_path: Path) -> None:
    batches = _batches(60)  # ~340 KiB: the commit log rolls over once
    roots = []
    for name, prefault in (("plain", False), ("prefault", True)):
        h = StoreHarness(tmp_path / name, **_CFG)
        s = h.open()
        assert s.prefaulter is not None
        if prefault:
            s.prefaulter.lead, s.prefaulter.chunk = 32 * KIB, 8 * KIB
            s.start_prefault()
        _put_all(h, batches)
        if prefault:
            _wait(lambda s=s: s.prefaulter.populated > 256 * KIB)
            thread = s.prefaulter._thread
        h.close()
        if prefault:
            assert thread is not None and not thread.is_alive()  # shutdown stopped it
        roots.append(h.root)
    plain, with_thread = (_files(r) for r in roots)
    assert plain.keys() == with_thread.keys() and len(plain) > 3
    for k in plain:
        assert plain[k] == with_thread[k], k


@needs_native
def test_crash_with_the_thread_recovers_every_put(tmp_path: Path) -> None:
    h = StoreHarness(tmp_path / "s", **_CFG)
    s = h.open()
    assert s.prefaulter is not None
    s.prefaulter.lead, s.prefaulter.chunk = 32 * KIB, 8 * KIB
    s.start_prefault()
    batches = _batches(40)
    _put_all(h, batches)
    end = s.commit_log.get_max_offset()
    offsets = {q: s.get_max_offset_in_queue("T", q) for q in range(3)}
    _wait(lambda: s.prefaulter.populated > 0)
    prefaulter = s.prefaulter
    h.crash()  # kill -9: no shutdown (the thread dies with the process: stopped here)
    prefaulter.stop()
    s2 = h.open()
    assert s2.commit_log.get_max_offset() == end
    assert {q: s2.get_max_offset_in_queue("T", q) for q in range(3)} == offsets
    for q in range(3):  # every message readable again
        got = 0
        while got < offsets[q]:
            r = s2.get_message("g", "T", q, got, 32)
            assert r.status.name == "FOUND", (q, got, r.status)
            got += len(r.message_list)
        assert got == offsets[q] >= 8


def test_off_unless_asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from rmqpy.store import prefault
    for value, on in (("", False), ("0", False), ("1", True)):
        monkeypatch.setenv(prefault.ENABLE_ENV, value)
        assert prefault.prefault_enabled() is on
    monkeypatch.setenv(prefault.ENABLE_ENV, "1")
    h = StoreHarness(tmp_path / "s", **_CFG)
    s = h.open()  # a task.Clock: no reactor threads, so not started even when asked
    try:
        assert s.commit_log.prefault is None
        assert s.prefaulter is None or s.prefaulter._thread is None
    finally:
        h.close()


def test_release_waits_for_a_populate_of_the_file_and_drops_its_request(tmp_path: Path) -> None:
    """A replica's truncation closes the files past the cut off the writer's thread: closing a
    mapping while a populate holds its buffer would raise BufferError, so release() returns only
    once no populate of that file runs, and a request for it not yet taken is dropped."""
    entered, go = threading.Event(), threading.Event()
    seen: list[tuple[int, int]] = []

    def populate(buf: Any, offset: int, length: int) -> int:
        with memoryview(buf):  # the buffer exported for the whole call, as the C function does
            entered.set()
            assert go.wait(5)
        seen.append((offset, length))
        return length

    p = Prefaulter(populate, lead=64 * KIB, chunk=16 * KIB)
    mf, other = _file(tmp_path), _file(tmp_path, "00000000000000524288")
    p.start()
    try:
        p.ahead(mf, 0)
        assert entered.wait(5)
        p.ahead(other, 0)  # queued behind the running populate; released below before it is taken
        released = threading.Event()
        threading.Thread(target=lambda: (p.release(mf), released.set()), daemon=True).start()
        time.sleep(0.05)
        assert not released.is_set()  # the populate of mf still holds its buffer
        with pytest.raises(BufferError):
            mf.mm.close()  # type: ignore[union-attr]  # what the truncation's close would have met
        p.release(other)  # not running: returns at once, and its request is gone
        go.set()
        assert released.wait(5)
        mf.close()  # no BufferError now
        time.sleep(0.05)
        assert seen == [(0, 64 * KIB)]  # other's request was dropped
    finally:
        go.set()
        p.stop()
        other.close()
