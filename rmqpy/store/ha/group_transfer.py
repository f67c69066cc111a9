"""GroupTransferService: SYNC_MASTER puts waiting until a slave acknowledged their bytes.

Java parks each put's GroupCommitRequest and wakes them when a slave's report moves
``push2SlaveMaxOffset``; here a waiter is a Deferred keyed by the offset it needs, kept in
offset order, so one report fires every put it covers (many producers, one transfer). A waiter
not covered within ``slaveTimeout`` fires with FLUSH_SLAVE_TIMEOUT.
"""
from __future__ import annotations

import bisect
import itertools
from typing import Any, Generic, TypeVar

from twisted.internet import defer

S = TypeVar("S")


class GroupTransferService(Generic[S]):
    def __init__(self, clock: Any, ok: S, timeout: S) -> None:
        self.clock = clock
        self.ok = ok
        self.timeout_status = timeout
        self.acked = 0  # the highest offset a slave reported (Java push2SlaveMaxOffset)
        self._seq = itertools.count()
        # (needed offset, sequence, deferred, timeout call)
        self._waiters: list[tuple[int, int, defer.Deferred[S], Any]] = []

    def wait(self, offset: int, timeout_ms: int) -> defer.Deferred[S]:
        d: defer.Deferred[S] = defer.Deferred()
        if self.acked >= offset:
            d.callback(self.ok)
            return d
        entry: tuple[int, int, defer.Deferred[S], Any] = (offset, next(self._seq), d, None)
        call = self.clock.callLater(timeout_ms / 1000.0, self._expire, entry)
        entry = entry[:3] + (call,)
        bisect.insort(self._waiters, entry, key=lambda e: (e[0], e[1]))
        return d

    def notify_transfer_some(self, offset: int) -> None:
        if offset <= self.acked:
            return
        self.acked = offset
        n = 0
        for n, entry in enumerate(self._waiters):  # noqa: B007
            if entry[0] > offset:
                break
        else:
            n = len(self._waiters)
        done, self._waiters = self._waiters[:n], self._waiters[n:]
        for _off, _seq, d, call in done:
            if call is not None and call.active():
                call.cancel()
            d.callback(self.ok)

    def _expire(self, entry: tuple[int, int, defer.Deferred[S], Any]) -> None:
        for i, e in enumerate(self._waiters):
            if e[1] == entry[1]:
                del self._waiters[i]
                e[2].callback(self.timeout_status)
                return

    def pending(self) -> int:
        return len(self._waiters)

    def shutdown(self) -> None:
        waiters, self._waiters = self._waiters, []
        for _off, _seq, d, call in waiters:
            if call is not None and call.active():
                call.cancel()
            d.callback(self.timeout_status)
