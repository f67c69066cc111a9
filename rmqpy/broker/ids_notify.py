"""NOTIFY_CONSUMER_IDS_CHANGED: a group's members told that its member list changed, coalesced when
the group is large.

Java (``DefaultConsumerIdsChangeListener``) tells every member at every change, so a group of N
members that all join costs N x N notifications: 5,000 clients of one group meant 11.5 million
frames, the broker at 100 % CPU for minutes, 2.3 GB of write buffers and heartbeats answered a
minute late (issue 31, case 3). A notification only asks a member to rebalance now rather than at
its next 20 s rebalance, so what it must carry is the newest member list, not one per change.

Here a group of at most :data:`IMMEDIATE_MAX_MEMBERS` members is told at once, as Java tells it.
A larger group's changes are gathered for ``members x`` :data:`DELAY_PER_MEMBER_S` (at most
:data:`MAX_DELAY_S`) and then told once, to the members it has then: 5,000 members joining over
two minutes are told about 25 times, not 5,000 times, and never later than 5 s after a change.
A small group with a round already pending joins that round.
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.internet.interfaces import IReactorTime

from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import NotifyConsumerIdsChangedRequestHeader
from rmqpy.remoting.ratelimit import RateLimitedLogger

#: a group this small is told at each change, as Java tells it
IMMEDIATE_MAX_MEMBERS = 64
#: a larger group's changes are gathered this long per member (s) ...
DELAY_PER_MEMBER_S = 0.001
#: ... and never longer than this (s): a member's own rebalance period is 20 s
MAX_DELAY_S = 5.0


class ConsumerIdsNotifier:
    log = RateLimitedLogger()

    def __init__(self, clock: IReactorTime, members: Callable[[str], list[Any]],
                 enabled: Callable[[], bool] = lambda: True) -> None:
        self.log = self.log.on(clock)
        self.clock = clock
        self.members = members
        self.enabled = enabled
        self.pending: dict[str, Any] = {}  # group -> the delayed call that tells it
        self.sent = 0  # notifications written (a count for tests and probes)

    def changed(self, group: str, size: int) -> None:
        """The member list or the subscriptions of ``group`` (now ``size`` members) changed."""
        if not self.enabled() or group in self.pending:
            return
        if size <= IMMEDIATE_MAX_MEMBERS:
            self.tell(group)
            return
        delay = min(MAX_DELAY_S, size * DELAY_PER_MEMBER_S)
        self.pending[group] = self.clock.callLater(delay, self._flush, group)

    def _flush(self, group: str) -> None:
        self.pending.pop(group, None)
        if self.enabled():
            self.tell(group)

    def tell(self, group: str) -> None:
        header = NotifyConsumerIdsChangedRequestHeader(consumerGroup=group)
        for channel in self.members(group):
            try:
                channel.invoke_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, header,
                                                              oneway=True))
                self.sent += 1
            except Exception:  # noqa: BLE001 (one member's dead channel must not spare the others)
                self.log.failure("notifyConsumerIdsChanged to {c} failed", c=getattr(channel, "remote_address", "?"))

    def stop(self) -> None:
        for call in self.pending.values():
            if call.active():
                call.cancel()
        self.pending.clear()
