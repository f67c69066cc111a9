"""The commit log's flush thread (GroupCommitThread) and the FIFO timeout watch of SYNC_FLUSH
puts: no request is lost while a flush runs, a put is answered only by a flush whose target
covers it, timeouts are answered oldest first."""

import queue
import threading

from twisted.internet import defer

from rmqpy.store.flush import GroupCommitThread
from rmqpy.store.results import PutMessageStatus

from .test_store import msg


class _ThreadReactor:
    """callFromThread into a queue that the test thread drains (the reactor thread's part)."""

    def __init__(self) -> None:
        self.calls: queue.Queue = queue.Queue()

    def callFromThread(self, f, *a):  # noqa: N802 (Twisted's name)
        self.calls.put((f, a))


def test_a_request_during_a_flush_gets_a_flush_of_its_own():
    reactor = _ThreadReactor()
    end = [100]
    in_flush = threading.Event()
    release = threading.Event()
    flushed_targets = []

    def flush():
        target = end[0]  # read before the sync, as FlushService does
        in_flush.set()
        release.wait(10)
        return target, 7

    done = []
    t = GroupCommitThread(reactor, flush, lambda target, ts, secs: done.append((target, ts)),
                          lambda f: done.append(f))
    t.start()
    try:
        t.request()
        assert in_flush.wait(10)
        end[0] = 250  # a put written while the first flush runs ...
        t.request()   # ... asks for a flush
        in_flush.clear()
        release.set()
        for _ in range(2):
            f, a = reactor.calls.get(timeout=10)
            f(*a)
            flushed_targets.append(a[0])
        assert flushed_targets == [100, 250]
        assert done == [(100, 7), (250, 7)]
    finally:
        release.set()
        t.stop()
    assert reactor.calls.empty()


def test_a_failed_flush_is_handed_to_the_reactor_and_the_thread_goes_on():
    reactor = _ThreadReactor()
    outcomes = iter([OSError(5, "EIO"), (300, 1)])

    def flush():
        o = next(outcomes)
        if isinstance(o, Exception):
            raise o
        return o

    seen = []
    t = GroupCommitThread(reactor, flush, lambda target, ts, secs: seen.append(target),
                          lambda f: seen.append(f.getErrorMessage()))
    t.start()
    try:
        t.request()
        f, a = reactor.calls.get(timeout=10)
        f(*a)
        t.request()
        f, a = reactor.calls.get(timeout=10)
        f(*a)
    finally:
        t.stop()
    assert seen == ["[Errno 5] EIO", 300]


def test_timeouts_are_answered_oldest_first_and_the_watch_ends_with_the_waiters(harness, monkeypatch):
    s = harness.open(flushDiskType="SYNC_FLUSH", syncFlushTimeout=100)
    monkeypatch.setattr(s.blocking, "run", lambda fn, *a: defer.Deferred())  # flushes never finish
    out = []
    s.put_message(msg()).addCallback(lambda r: out.append(("a", r.put_message_status)))
    harness.clock.advance(0.05)
    s.put_message(msg()).addCallback(lambda r: out.append(("b", r.put_message_status)))
    harness.clock.advance(0.06)  # a's deadline passed, b's not
    assert out == [("a", PutMessageStatus.FLUSH_DISK_TIMEOUT)]
    harness.clock.advance(0.05)
    assert out[1] == ("b", PutMessageStatus.FLUSH_DISK_TIMEOUT)
    assert all(c.func != s.flush_service._expire for c in harness.clock.getDelayedCalls())
    # a put acknowledged by a flush covering it cancels the watch
    s.put_message(msg()).addCallback(lambda r: out.append(("c", r.put_message_status)))
    s.flush_service.flush_done(s.commit_log.get_max_offset(), 0)
    assert out[2] == ("c", PutMessageStatus.PUT_OK)
    assert all(c.func != s.flush_service._expire for c in harness.clock.getDelayedCalls())
