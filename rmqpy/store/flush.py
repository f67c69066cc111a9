"""Flushing the store to disk: Java's ``CommitLog.GroupCommitService`` (SYNC_FLUSH),
``FlushRealTimeService`` (ASYNC_FLUSH) and ``DefaultMessageStore.FlushConsumeQueueService``.

fsync is blocking disk work, so it runs off the reactor thread: the commit log's in
:class:`GroupCommitThread` (one thread of its own, like Java's ``GroupCommitService``), the rest
through :class:`BlockingRunner` (a small thread pool); both run inline under a ``task.Clock``.
What a flush decides (which waiters fire, what the checkpoint says) runs on the reactor thread.

Group commit: a SYNC_FLUSH put waits in a FIFO for the first flush whose target (the commit log's
end read *before* its fsync began) is at or past the put's end offset; every put acknowledged by a
flush is therefore on disk. Requests that arrive while a flush runs are served by the next one,
started by the flush thread at once without a trip through the reactor. Timeouts are watched
in FIFO order by one timer, as Java's ``FlushDiskWatcher`` does (``syncFlushTimeout``, answered
FLUSH_DISK_TIMEOUT).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure

from rmqpy.remoting.ratelimit import limiter_for
from rmqpy.store.checkpoint import StoreCheckpoint
from rmqpy.store.commitlog import CommitLog
from rmqpy.store.config import MessageStoreConfig
from rmqpy.store.dispatch import CommitLogDispatcher
from rmqpy.store.results import AppendMessageResult, PutMessageResult, PutMessageStatus
from rmqpy.store.stats import StoreStats

if TYPE_CHECKING:
    from twisted.python.threadpool import ThreadPool

log = logging.getLogger(__name__)


class BlockingRunner:
    """Runs blocking disk work off the reactor thread: in a 1-2 thread pool once
    :meth:`start` found a reactor with threads, else inline (a ``task.Clock`` in tests)."""

    def __init__(self, reactor: Any):
        self.reactor = reactor
        self._threadpool: ThreadPool | None = None

    def start(self) -> None:
        from twisted.internet.interfaces import IReactorThreads
        if IReactorThreads.providedBy(self.reactor):
            from twisted.python.threadpool import ThreadPool
            self._threadpool = ThreadPool(1, 2, name="rmqpy-store-flush")
            self._threadpool.start()

    def stop(self) -> None:
        if self._threadpool is not None:
            self._threadpool.stop()
            self._threadpool = None

    @property
    def threaded(self) -> bool:
        return self._threadpool is not None

    def run(self, fn: Callable[..., Any], *args: Any) -> defer.Deferred[Any]:
        if self._threadpool is not None:
            from twisted.internet.threads import deferToThreadPool
            return deferToThreadPool(self.reactor, self._threadpool, fn, *args)
        return defer.maybeDeferred(fn, *args)


class GroupCommitThread:
    """The commit log's flush thread: flushes whenever :meth:`request` was called since its last
    flush began, and hands each outcome to the reactor thread (``reactor.callFromThread``).

    ``flush()`` runs in the thread and returns ``(target, store_timestamp)``: it must read both
    before it syncs, so that ``target`` is known to be on disk once it returns."""

    def __init__(self, reactor: Any, flush: Callable[[], tuple[int, int]],
                 done: Callable[[int, int, float], None], failed: Callable[[Failure], None]):
        self.reactor = reactor
        self._flush = flush
        self._done = done
        self._failed = failed
        self._cond = threading.Condition(threading.Lock())
        self._requested = False
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="rmqpy-group-commit", daemon=True)
        self._thread.start()

    def request(self) -> None:
        with self._cond:
            if not self._requested:
                self._requested = True
                self._cond.notify()

    def stop(self) -> None:
        """Ends the thread after the flush it runs (joined: no sync runs once this returns)."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._requested and not self._stopping:
                    cond.wait()
                if self._stopping:
                    return
                # cleared before the target is read: a request made after this point is
                # served by another flush, one made before is covered by this one
                self._requested = False
            t0 = time.perf_counter()
            try:
                target, ts = self._flush()
            except Exception as e:  # noqa: BLE001 (handed to the reactor thread, which logs it)
                self.reactor.callFromThread(self._failed, Failure(e))  # type: ignore[no-untyped-call]
                continue
            self.reactor.callFromThread(self._done, target, ts, time.perf_counter() - t0)


class _FlushWaiter:
    """A SYNC_FLUSH put waiting for the commit log to be flushed past ``end``."""
    __slots__ = ("end", "deferred", "deadline", "result")

    def __init__(self, end: int, deferred: defer.Deferred[PutMessageResult], result: PutMessageResult,
                 deadline: float):
        self.end = end
        self.deferred = deferred
        self.deadline = deadline
        self.result = result

    def fire(self, status: PutMessageStatus | None = None) -> None:
        if status is not None:
            self.result.put_message_status = status
        self.deferred.callback(self.result)


class FlushService:
    """The commit log's group commit and periodic flush, and the consume queues' flush with the
    checkpoint written after it."""

    def __init__(self, config: MessageStoreConfig, reactor: IReactorTime, commit_log: CommitLog,
                 dispatcher: CommitLogDispatcher, runner: BlockingRunner, stats: StoreStats,
                 running: Callable[[], bool]):
        self.config = config
        self.reactor = reactor
        self.commit_log = commit_log
        self.dispatcher = dispatcher
        self.runner = runner
        self.stats = stats
        self.running = running
        self.checkpoint: StoreCheckpoint | None = None  # set by the store's load
        self.flushing = False
        self.flush_failures = 0  # commit log flushes failed in a row (logged once, then rate-limited)
        self._waiters: deque[_FlushWaiter] = deque()  # in put order
        self._watch: Any = None  # IDelayedCall of the oldest waiter's deadline
        self._thread: GroupCommitThread | None = None
        self._cq_flushing = False
        self._last_flush_thorough = 0

    def start(self) -> None:
        """The flush thread, when the reactor has threads (else flushes run through the runner)."""
        from twisted.internet.interfaces import IReactorThreads
        if IReactorThreads.providedBy(self.reactor) and self._thread is None:
            self._thread = GroupCommitThread(self.reactor, self._flush_in_thread, self._thread_done,
                                             self.flush_failed)
            self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    def _flush_in_thread(self) -> tuple[int, int]:
        cl = self.commit_log
        ts = cl.last_store_timestamp  # read first: a record at or before the target's
        target = cl.get_max_offset()
        cl.flush_blocking()
        return target, ts

    def _thread_done(self, target: int, ts: int, seconds: float) -> None:
        self.flush_done(target, ts, seconds)

    def _now(self) -> int:
        return int(self.reactor.seconds() * 1000)

    # ------------------------------------------------------------------ a put's flush
    def flush_result(self, result: AppendMessageResult, wait_prop: str | None
                     ) -> PutMessageResult | defer.Deferred[PutMessageResult]:
        """The PutMessageResult now (ASYNC_FLUSH, or WAIT=false), else a Deferred of it that
        fires when the commit log is flushed past the record (or FLUSH_DISK_TIMEOUT)."""
        ok = PutMessageResult(PutMessageStatus.PUT_OK, result)
        if not self.config.sync_flush:
            return ok
        wait = wait_prop is None or wait_prop.lower() == "true"
        if not wait:
            self.kick()
            return ok
        d: defer.Deferred[PutMessageResult] = defer.Deferred()
        timeout = self.config.syncFlushTimeout / 1000.0
        self._waiters.append(_FlushWaiter(result.wrote_offset + result.wrote_bytes, d, ok,
                                          self.reactor.seconds() + timeout))
        if self._watch is None:
            self._watch = self.reactor.callLater(timeout, self._expire)
        self.kick()
        return d

    def _expire(self) -> None:
        """Answer FLUSH_DISK_TIMEOUT to the waiters past their deadline, oldest first (Java's
        ``FlushDiskWatcher``), and watch the next one."""
        self._watch = None
        now = self.reactor.seconds()
        waiters = self._waiters
        while waiters and waiters[0].deadline <= now:
            waiters.popleft().fire(PutMessageStatus.FLUSH_DISK_TIMEOUT)
        if waiters:
            self._watch = self.reactor.callLater(max(0.0, waiters[0].deadline - now), self._expire)

    def kick(self) -> None:
        """Start a commit log flush unless one is running (with the flush thread: make sure one
        starts after every put so far)."""
        if self._thread is not None:
            self._thread.request()
            return
        if self.flushing:
            return
        self.flushing = True
        target = self.commit_log.get_max_offset()
        ts = self.commit_log.last_store_timestamp
        t0 = time.perf_counter()
        dd = self.runner.run(self.commit_log.flush_blocking)
        dd.addCallbacks(lambda _: self.flush_done(target, ts, time.perf_counter() - t0), self.flush_failed)

    def flush_done(self, target: int, ts: int, seconds: float = 0.0) -> None:
        self.flushing = False
        self.stats.flush_done(seconds)
        if self.flush_failures:
            log.info("commit log flush succeeded again after %d failed attempts", self.flush_failures)
            self.flush_failures = 0
        queue = self.commit_log.queue
        queue.flushed_where = max(queue.flushed_where, target)
        if self.checkpoint is not None and ts:
            self.checkpoint.physic_msg_timestamp = ts
        self.fire_waiters(target)
        if self._waiters and self.running() and self._thread is None:
            self.kick()

    def flush_failed(self, f: Failure) -> None:
        self.flushing = False
        self.flush_failures += 1
        if self.flush_failures == 1 or limiter_for(self.reactor).allow("store-flush-failed"):
            log.error("commit log flush failed (%d in a row): %s", self.flush_failures, f.getErrorMessage())
        waiters, self._waiters = self._waiters, deque()
        for w in waiters:
            w.fire(PutMessageStatus.FLUSH_DISK_TIMEOUT)

    def fire_waiters(self, flushed: int) -> None:
        """Answer the puts whose records end at or before ``flushed``, in put order (a put that
        ends later than a younger one, should one ever be queued so, holds the younger back:
        late, never early)."""
        waiters = self._waiters
        while waiters and waiters[0].end <= flushed:
            waiters.popleft().fire()
        if not waiters and self._watch is not None:
            if self._watch.active():
                self._watch.cancel()
            self._watch = None

    # ------------------------------------------------------------------ timers
    def commitlog_tick(self) -> None:
        """``flushIntervalCommitLog``: flush when SYNC_FLUSH, when ``flushCommitLogLeastPages``
        pages are dirty, or every ``flushCommitLogThoroughInterval``."""
        if self.flushing:
            return
        dirty = self.commit_log.get_max_offset() - self.commit_log.queue.flushed_where
        now = self._now()
        thorough = now - self._last_flush_thorough >= self.config.flushCommitLogThoroughInterval
        if dirty > 0 and (self.config.sync_flush or thorough
                          or dirty >= self.config.flushCommitLogLeastPages * 4096):
            if thorough:
                self._last_flush_thorough = now
            self.kick()

    def consume_queue_tick(self) -> None:
        """``flushIntervalConsumeQueue``: flush the consume queues and the index, then the
        checkpoint with the times they are flushed to."""
        if self._cq_flushing:
            return
        self._cq_flushing = True
        logics_ts = self.dispatcher.last_logics_ts

        def done(index_ts: int) -> defer.Deferred[Any] | None:
            self._cq_flushing = False
            cp = self.checkpoint
            if cp is None or not self.running():
                return None
            if logics_ts:
                cp.logics_msg_timestamp = logics_ts
            if index_ts:
                cp.index_msg_timestamp = index_ts
            cp.confirm_phy_offset = self.commit_log.queue.flushed_where
            return self.runner.run(cp.flush)

        def failed(f: Failure) -> None:
            self._cq_flushing = False
            if limiter_for(self.reactor).allow("store-cq-flush-failed"):
                log.error("consume queue flush failed: %s", f.getErrorMessage())

        self.runner.run(self.dispatcher.flush_blocking).addCallbacks(done, failed)

    # ------------------------------------------------------------------ everything
    def flush_all(self) -> defer.Deferred[None]:
        """Flush everything now (commit log, consume queues, index, checkpoint)."""
        def all_() -> None:
            self.commit_log.flush_blocking()
            self.dispatcher.flush_blocking()
        target = self.commit_log.get_max_offset()
        ts = self.commit_log.last_store_timestamp
        lts = self.dispatcher.last_logics_ts

        def done(_: object) -> None:
            queue = self.commit_log.queue
            queue.flushed_where = max(queue.flushed_where, target)
            self.fire_waiters(target)
            cp = self.checkpoint
            if cp is not None:
                cp.physic_msg_timestamp = ts or cp.physic_msg_timestamp
                cp.logics_msg_timestamp = lts or cp.logics_msg_timestamp
                cp.index_msg_timestamp = max(cp.index_msg_timestamp, lts)
                cp.confirm_phy_offset = target
                cp.flush()
        return self.runner.run(all_).addCallback(done)

    def flush_at_shutdown(self) -> None:
        """Everything flushed, inline, and the checkpoint written for a clean restart."""
        cl = self.commit_log
        cl.flush_blocking()
        self.fire_waiters(cl.get_max_offset())
        self.dispatcher.flush_blocking()
        cp = self.checkpoint
        if cp is not None:
            cp.physic_msg_timestamp = max(cp.physic_msg_timestamp, cl.last_store_timestamp)
            lts = self.dispatcher.last_logics_ts
            if lts:
                cp.logics_msg_timestamp = lts
                if self.config.messageIndexEnable:
                    cp.index_msg_timestamp = max(cp.index_msg_timestamp, lts)
            cp.confirm_phy_offset = cl.get_max_offset()
            cp.flush()
