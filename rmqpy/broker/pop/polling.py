"""PopLongPollingService: pops that found nothing wait for a message (Java's ``PopLongPollingService``).

A held pop is filed under the topics it reads (the topic and its pop retry topic). When a
message arrives on one of them (:meth:`notify`), held pops are re-run one by one until one
finds something (Java wakes one per arrival); a re-run that finds nothing keeps waiting. At
``poll_ms`` the pop is re-run a last time and answered whatever it finds. Takes injected
callables, not the broker: ``clock`` (``IReactorTime``) for the deadlines.

Bounded as Java bounds it: at most ``max_total`` pops held in all (``maxPopPollingSize``) and
``max_per_topic`` per topic (``popPollingSize``); a pop that cannot be held is answered at once
with POLLING_FULL.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from twisted.internet import defer

from rmqpy.remoting.ratelimit import RateLimitedLogger


@dataclass(eq=False)
class HeldPop:
    topics: tuple[str, ...]
    channel: Any
    run: Callable[[bool], Any]  # run(last) -> a result, or None to keep waiting (only when not last)
    key: tuple[str, str, int] = ("", "", -1)  # (topic, group, queueId) of the request: POLLING_INFO counts these
    takes: bool = True  # a pop takes what it finds; a NOTIFICATION does not, so the next waiter runs too
    deferred: defer.Deferred = field(default_factory=defer.Deferred)
    timer: Any = None
    done: bool = False


class PopLongPollingService:
    #: a failing re-run may recur on every arrival: rate-limited
    log = RateLimitedLogger()

    def __init__(self, clock: Any, max_total: int = 100000, max_per_topic: int = 1024) -> None:
        self.clock = clock
        self.log = self.log.on(clock)
        self.max_total = max_total
        self.max_per_topic = max_per_topic
        self.table: dict[str, list[HeldPop]] = {}
        self.held = 0
        self.refused = 0
        self.by_key: dict[tuple[str, str, int], int] = {}

    def hold(self, held: HeldPop, poll_ms: int) -> defer.Deferred | None:
        """Hold ``held`` up to ``poll_ms``; None when full (the caller answers POLLING_FULL)."""
        if (0 < self.max_total <= self.held) or any(
                0 < self.max_per_topic <= len(self.table.get(t, ())) for t in held.topics):
            self.refused += 1
            return None
        self.held += 1
        self.by_key[held.key] = self.by_key.get(held.key, 0) + 1
        for topic in held.topics:
            self.table.setdefault(topic, []).append(held)
        held.timer = self.clock.callLater(max(poll_ms, 0) / 1000.0, self._expire, held)
        return held.deferred

    def _remove(self, held: HeldPop) -> None:
        if held.done:
            return
        held.done = True
        self.held -= 1
        left = self.by_key.get(held.key, 0) - 1
        if left > 0:
            self.by_key[held.key] = left
        else:
            self.by_key.pop(held.key, None)
        for topic in held.topics:
            waiting = self.table.get(topic)
            if waiting is not None:
                try:
                    waiting.remove(held)
                except ValueError:
                    pass
                if not waiting:
                    del self.table[topic]
        if held.timer is not None and held.timer.active():
            held.timer.cancel()

    def _expire(self, held: HeldPop) -> None:
        held.timer = None
        self._remove(held)
        self._deliver(held, self._run(held, True))

    def _run(self, held: HeldPop, last: bool) -> Any:
        try:
            return held.run(last)
        except Exception as exc:  # noqa: BLE001 - the pop's own error goes to its requester
            self.log.failure("re-running a held pop failed")
            return defer.fail(exc)

    @staticmethod
    def _deliver(held: HeldPop, result: Any) -> None:
        if isinstance(result, defer.Deferred):
            result.chainDeferred(held.deferred)
        else:
            held.deferred.callback(result)

    def is_holding(self, topic: str) -> bool:
        """Whether a pop waits on ``topic`` (else :meth:`notify` does nothing)."""
        return bool(self.table.get(topic))

    def notify(self, topic: str) -> None:
        """A message arrived on ``topic``: re-run held pops until one finds something."""
        waiting = self.table.get(topic)
        if not waiting:
            return
        for held in list(waiting):
            if held.done:
                continue
            if not held.channel.connected_:
                self._remove(held)  # the client went away: nobody to answer
                continue
            result = self._run(held, False)
            if result is None:
                continue  # found nothing (a filter, or another pop was faster): waits on
            self._remove(held)
            self._deliver(held, result)
            if held.takes:
                return

    def polling_num(self, topic: str, group: str, queue_id: int) -> int:
        return self.by_key.get((topic, group, queue_id), 0)

    def stop(self) -> None:
        for waiting in list(self.table.values()):
            for held in list(waiting):
                self._remove(held)
