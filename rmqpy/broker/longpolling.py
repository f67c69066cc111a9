"""PullRequestHoldService: parked PULL_MESSAGE requests (long polling), facts §9.4.

A pull that finds nothing and carries the SUSPEND flag is held here until a message for
its queue arrives (the store's arrive listener calls :meth:`notify_message_arriving`),
or until its suspend timeout has passed (checked every 5 s, or every second with short
polling). Then it is executed again without suspension and its Deferred fires with
the response.

Java holds without bound. Here at most ``max_total`` requests are held (``maxPullPollingSize``,
named after Java's ``maxPopPollingSize`` for POP) and at most ``max_per_channel`` from one
connection (``maxPullPollingSizePerChannel``): a pull that cannot be held is answered at
once as Java answers a pull it does not suspend (PULL_NOT_FOUND, "no new message").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from twisted.internet import defer
from twisted.internet.task import LoopingCall

from rmqpy.remoting.ratelimit import RateLimitedLogger


@dataclass(eq=False)
class PullRequest:
    request: Any
    channel: Any
    timeout_ms: int
    suspend_ts: int
    pull_from_offset: int
    message_filter: Any
    deferred: defer.Deferred = field(default_factory=defer.Deferred)


class PullRequestHoldService:
    #: lines on message arrival or per held request: rate-limited (a failing filter would log per message)
    log = RateLimitedLogger()

    def __init__(self, clock: Any, now_ms: Callable[[], int], max_offset: Callable[[str, int], int],
                 wakeup: Callable[[PullRequest], None], long_polling: bool = True,
                 short_polling_ms: int = 1000, max_total: int = 0, max_per_channel: int = 0) -> None:
        self.clock = clock
        self.log = self.log.on(clock)
        self.now_ms = now_ms
        self.max_offset = max_offset
        self.wakeup = wakeup
        self.long_polling = long_polling
        self.short_polling_ms = short_polling_ms
        self.table: dict[tuple[str, int], list[PullRequest]] = {}
        self._loop: LoopingCall | None = None
        self.max_total = max_total  # <= 0: no bound
        self.max_per_channel = max_per_channel
        self._held = 0
        self._per_channel: dict[Any, int] = {}
        self.refused = 0

    # ------------------------------------------------------------------ service
    def start(self) -> None:
        self._loop = LoopingCall(self._tick)
        self._loop.clock = self.clock
        self._loop.start(5.0 if self.long_polling else self.short_polling_ms / 1000.0, now=False)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def _tick(self) -> None:
        try:
            self.check_hold_requests()
        except Exception:  # a failing check must not end the loop
            self.log.failure("check hold requests failed")

    # ------------------------------------------------------------------ API
    def suspend(self, topic: str, queue_id: int, req: PullRequest) -> defer.Deferred | None:
        """Hold ``req``; None when the service is full (the caller answers it now)."""
        per_channel = self._per_channel.get(req.channel, 0)
        if (0 < self.max_total <= self._held) or (0 < self.max_per_channel <= per_channel):
            self.refused += 1
            return None
        self._held += 1
        self._per_channel[req.channel] = per_channel + 1
        self.table.setdefault((topic, queue_id), []).append(req)
        return req.deferred

    def held_count(self) -> int:
        return self._held

    def _release(self, req: PullRequest) -> None:
        self._held -= 1
        n = self._per_channel.get(req.channel, 0) - 1
        if n > 0:
            self._per_channel[req.channel] = n
        else:
            self._per_channel.pop(req.channel, None)

    def check_hold_requests(self) -> None:
        for topic, queue_id in list(self.table):
            self.notify_message_arriving(topic, queue_id, self.max_offset(topic, queue_id))

    def is_holding(self, topic: str, queue_id: int) -> bool:
        """Whether a pull waits on the queue (else :meth:`notify_message_arriving` does nothing)."""
        return bool(self.table.get((topic, queue_id)))

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None,
                                store_ts: int = 0, properties: Mapping[str, str] | None = None) -> None:
        key = (topic, queue_id)
        reqs = self.table.get(key)
        if not reqs:
            return
        keep = []
        now = self.now_ms()
        for req in reqs:
            if not req.channel.connected_:
                self._release(req)
                continue  # the client went away; nobody to answer
            try:
                match = self._arrived_for(req, topic, queue_id, max_offset, tags_code, properties)
            except Exception:  # noqa: BLE001 - one request's failure must not keep the others waiting
                self.log.failure("matching a held pull request failed; it waits for its timeout")
                match = False
            if match:
                self._release(req)
                self._wake(req)
                continue
            if now >= req.suspend_ts + req.timeout_ms:
                self._release(req)
                self._wake(req)
                continue
            keep.append(req)
        if keep:
            self.table[key] = keep
        else:
            self.table.pop(key, None)

    def _arrived_for(self, req: PullRequest, topic: str, queue_id: int, max_offset: int, tags_code: int | None,
                     properties: Mapping[str, str] | None) -> bool:
        """Whether ``req`` is to be answered now: its queue has grown past its offset and the
        message (when it is known) passes its filter."""
        newest = max_offset
        if newest <= req.pull_from_offset:
            newest = self.max_offset(topic, queue_id)
        if newest <= req.pull_from_offset:
            return False
        if req.message_filter is None:
            return True
        match: bool = req.message_filter.is_matched_by_consume_queue(tags_code)
        if match and properties is not None:
            match = req.message_filter.is_matched_by_commit_log(None, properties)
        return match

    def _wake(self, req: PullRequest) -> None:
        try:
            self.wakeup(req)
        except Exception:
            self.log.failure("waking a held pull request failed")
