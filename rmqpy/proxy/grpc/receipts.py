"""Receipt handles of PushConsumer receives, renewed while the client holds the messages.

5.3.3's proxy (``ReceiptHandleProcessor``, ``DefaultReceiptHandleManager``): a receive with
``auto_renew`` pops with ``defaultInvisibleTimeMills`` and keeps each message's handle per client
and group. Every ``renewSchedulePeriodMillis`` a scan renews the handles that become visible within
``renewAheadTimeMillis``, by CHANGE_MESSAGE_INVISIBLETIME with ``RenewStrategyPolicy``'s next time
(1m 3m 5m 10m 30m 1h by the renewals so far); the broker's new handle replaces the old one, and an
ack, DLQ forward or changeInvisibleDuration with the client's original handle takes the current one
(and the handle out of the table). A failed renewal is retried on the next scans up to
``maxRenewRetryTimes``; a refused one (the handle is no longer valid) ends the renewal. Once a
message is held longer than ``renewMaxTimeMillis`` it is given back with the group's retry delay for
its reconsume times and no longer renewed, as the proxy's STOP_RENEW does. The handles of a client
that terminates or is no longer in the group's consumer table get ``invisibleTimeMillisWhenClear``,
so that the messages come back soon to the group's other consumers.

rmqpy differs in two bounds Java does not have: at most ``MAX_PER_GROUP`` handles per client and
group (a newer one pushes the oldest out, left to come back after its invisible time) and
``MAX_TRACKED`` in all (beyond, new handles are not tracked). An ack that arrives while a renewal of
its handle is in flight waits for it and takes the handle it gave (the proxy's per-handle lock).
Runs on the reactor; the clock is injected so that unit tests drive the scans with ``task.Clock``.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from twisted.internet import defer, task

from rmqpy.remoting.ratelimit import RateLimitedLogger

RENEW_NEXT_MS = [60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000]  # RenewStrategyPolicy.next
MAX_PER_GROUP = 4096
MAX_TRACKED = 65_536


class InvalidHandle(Exception):
    """The broker refused the handle (it was acked, or its message came back): no retry."""


@dataclass
class RenewConfig:
    """ProxyConfig's keys of 5.3.3 and their defaults."""

    renewSchedulePeriodMillis: int = 5_000  # noqa: N815 (the proxy's key names)
    renewAheadTimeMillis: int = 10_000  # noqa: N815
    renewMaxTimeMillis: int = 3 * 3600 * 1000  # noqa: N815
    maxRenewRetryTimes: int = 3  # noqa: N815
    invisibleTimeMillisWhenClear: int = 1_000  # noqa: N815


@dataclass
class Tracked:
    """``MessageReceiptHandle``: one delivered message of an auto-renewed receive."""

    client_id: str
    group: str
    topic: str
    message_id: str
    original: str  # the handle the client got, and uses to ack
    handle: str  # the current one, after the renewals
    reconsume_times: int
    consumed_at: int  # ms: the original handle's pop time
    renew_times: int = 0
    retry_times: int = 0
    busy: bool = False  # a CHANGE_MESSAGE_INVISIBLETIME of it is in flight
    cleared: bool = False  # its client left while it was in flight: given back when it ends
    waiters: list[defer.Deferred[str]] = field(default_factory=list)

    def next_visible(self) -> int:
        parts = self.handle.split(" ")
        return int(parts[1]) + int(parts[2])


def pop_time(handle: str) -> int:
    return int(handle.split(" ")[1])


# change(tracked, invisible ms) -> the new handle; InvalidHandle when the broker refuses it
Change = Callable[[Tracked, int], "defer.Deferred[str]"]


class ReceiptHandles:
    log = RateLimitedLogger()

    def __init__(self, clock: Any, change: Change, online: Callable[[str, str], bool],
                 retry_delay_ms: Callable[[str, int], int], config: RenewConfig | None = None) -> None:
        self.clock, self.change, self.online, self.retry_delay_ms = clock, change, online, retry_delay_ms
        self.config = config or RenewConfig()
        self.groups: dict[tuple[str, str], OrderedDict[str, Tracked]] = {}
        self.tracked = 0
        self._loop: task.LoopingCall | None = None

    def now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._loop is None:
            self._loop = task.LoopingCall(self.scan)
            self._loop.clock = self.clock
            self._loop.start(self.config.renewSchedulePeriodMillis / 1000.0, now=False).addErrback(
                lambda f: self.log.failure("receipt handle renewal stopped", f))

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    # ------------------------------------------------------------------ table
    def add(self, client_id: str, group: str, topic: str, message_id: str, handle: str, reconsume_times: int) -> None:
        entries = self.groups.setdefault((client_id, group), OrderedDict())
        if handle in entries:
            return
        if len(entries) >= MAX_PER_GROUP:
            entries.popitem(last=False)[1].busy = False
            self.tracked -= 1
        if self.tracked >= MAX_TRACKED:
            self.log.warn("{n} receipt handles tracked: not renewing more", n=MAX_TRACKED)
            if not entries:
                del self.groups[(client_id, group)]
            return
        entries[handle] = Tracked(client_id, group, topic, message_id, handle, handle, reconsume_times,
                                  pop_time(handle))
        self.tracked += 1

    def _drop(self, t: Tracked) -> bool:
        key = (t.client_id, t.group)
        entries = self.groups.get(key)
        if entries is None or entries.get(t.original) is not t:
            return False
        del entries[t.original]
        self.tracked -= 1
        if not entries:
            del self.groups[key]
        return True

    def remove(self, client_id: str, group: str, handle: str) -> defer.Deferred[str]:
        """Stop renewing ``handle`` (the client acks it, forwards it to the DLQ or changes its
        invisible time): the handle to use instead, once a renewal in flight has ended."""
        entries = self.groups.get((client_id, group))
        t = entries.get(handle) if entries is not None else None
        if t is None or not self._drop(t):
            return defer.succeed(handle)
        if not t.busy:
            return defer.succeed(t.handle)
        d: defer.Deferred[str] = defer.Deferred()
        t.waiters.append(d)
        return d

    def clear_client(self, client_id: str) -> None:
        for key in [k for k in self.groups if k[0] == client_id]:
            self.clear_group(key)

    def clear_group(self, key: tuple[str, str]) -> None:
        """The client left the group: its messages back after ``invisibleTimeMillisWhenClear``."""
        for t in list(self.groups.get(key, {}).values()):
            self._drop(t)
            if t.busy:
                t.cleared = True  # given back once the renewal in flight ends
                continue
            self._give_back(t, self.config.invisibleTimeMillisWhenClear)

    # ------------------------------------------------------------------ renewal
    def scan(self) -> None:
        """``scheduleRenewTask``: renew what becomes visible within renewAheadTimeMillis."""
        now = self.now_ms()
        for key in list(self.groups):
            if not self.online(*key):
                self.clear_group(key)
                continue
            for t in list(self.groups.get(key, {}).values()):
                if not t.busy and t.next_visible() - now <= self.config.renewAheadTimeMillis:
                    self._renew(t, now)

    def _renew(self, t: Tracked, now: int) -> None:
        if t.retry_times >= self.config.maxRenewRetryTimes:
            self.log.warn("receipt handle of {m} failed {n} renewals: left to come back", m=t.message_id[:64],
                          n=t.retry_times)
            self._drop(t)
            return
        if now - t.consumed_at >= self.config.renewMaxTimeMillis:  # STOP_RENEW: the group's retry delay
            self._drop(t)
            self._give_back(t, self.retry_delay_ms(t.group, t.reconsume_times))
            return
        t.busy = True
        invisible = RENEW_NEXT_MS[min(t.renew_times, len(RENEW_NEXT_MS) - 1)]
        defer.maybeDeferred(self.change, t, invisible).addCallbacks(self._renewed, self._failed,
                                                                    callbackArgs=(t,), errbackArgs=(t,))

    def _renewed(self, handle: str, t: Tracked) -> None:
        t.handle, t.retry_times = handle, 0
        t.renew_times += 1
        self._done(t)

    def _failed(self, failure: Any, t: Tracked) -> None:
        if failure.check(InvalidHandle):
            self._drop(t)
        else:
            t.retry_times += 1
            self.log.warn("renewing the receipt handle of {m} failed: {e}", m=t.message_id[:64],
                          e=failure.getErrorMessage()[:200])
        self._done(t)

    def _done(self, t: Tracked) -> None:
        t.busy = False
        if t.cleared:
            self._give_back(t, self.config.invisibleTimeMillisWhenClear)
        waiters, t.waiters = t.waiters, []
        for d in waiters:
            d.callback(t.handle)

    def _give_back(self, t: Tracked, invisible_ms: int) -> None:
        defer.maybeDeferred(self.change, t, max(invisible_ms, 0)).addErrback(
            lambda f: self.log.warn("giving back {m} failed: {e}", m=t.message_id[:64], e=f.getErrorMessage()[:200]))
