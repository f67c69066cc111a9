"""NOTIFY_CONSUMER_IDS_CHANGED: a group's members told that its member list changed, coalesced when
the group is large.

Java (``DefaultConsumerIdsChangeListener``) tells every member at every change, so a group of N
members that all join costs N x N notifications: 5,000 clients of one group meant 11.5 million
frames, the broker at 100 % CPU for minutes, 2.3 GB of write buffers and heartbeats answered a
minute late (issue 31, case 3). A notification only asks a member to rebalance now rather than at
its next 20 s rebalance, so what it must carry is the newest member list, not one per change.

Here a group of at most :data:`IMMEDIATE_MAX_MEMBERS` members is told at once, as Java tells it.
A larger group's changes are gathered for ``members x`` :data:`DELAY_PER_MEMBER_S`, doubled for each
round told since the group was last quiet for :data:`QUIET_S` (at most :data:`MAX_DELAY_S`), and then
told once, to the members it has then. Each member told asks for the whole list (a 5,000-member group's
is about 100 KB: 500 MB a round), so a round tells a few members per :data:`TICK_S`, as many as ask for
:data:`ROUND_BYTES_PER_S` between them (a 5,000-member round takes about 4 s): told all at once, their
answers queued ahead of the heartbeats for a second or more and held hundreds of MB of write buffers.
A round that starts while the last one is still telling tells the members that one had not reached
first. A member is told at most :data:`MAX_DELAY_S` plus one round's length after a change (a member's
own rebalance comes every 20 s anyway); a member that joins is told in the round after it. Measured
with bench/consumer_group_probe.py (bench/README.md). A small group with a round already pending or
in progress joins that round.
"""
from __future__ import annotations

from collections import deque
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
#: each round told since the group was last quiet this long (s) doubles the next window
QUIET_S = 20.0
#: a large group's round tells its members a few at a time: each tick (s) ...
TICK_S = 0.05
#: ... as many as ask for this many bytes of member lists a second between them
ROUND_BYTES_PER_S = 128 * 2**20


class ConsumerIdsNotifier:
    log = RateLimitedLogger()

    def __init__(self, clock: IReactorTime, members: Callable[[str], list[Any]],
                 enabled: Callable[[], bool] = lambda: True, list_bytes: Callable[[str], int] = lambda g: 0) -> None:
        self.log = self.log.on(clock)
        self.clock = clock
        self.members = members
        self.enabled = enabled
        self.list_bytes = list_bytes  # the size of the group's member list answer
        self.pending: dict[str, Any] = {}  # group -> the delayed call that starts its next round
        self.rounds: dict[str, tuple[int, float]] = {}  # group -> (rounds since it was last quiet, the last one's time)
        self.untold: dict[str, deque[Any]] = {}  # group -> the members its round has still to tell, in order
        self.ticks: dict[str, Any] = {}  # group -> the delayed call that tells the next of them
        self.sent = 0  # notifications written (a count for tests and probes)

    def changed(self, group: str, size: int) -> None:
        """The member list or the subscriptions of ``group`` (now ``size`` members) changed."""
        if size == 0:
            self.rounds.pop(group, None)
        if not self.enabled() or group in self.pending:
            return
        if size <= IMMEDIATE_MAX_MEMBERS and group not in self.untold:
            self.tell(group, self.members(group))
            return
        rounds, last = self.rounds.get(group, (0, 0.0))
        if self.clock.seconds() - last > QUIET_S:
            rounds = 0
        delay = min(MAX_DELAY_S, max(1, size) * DELAY_PER_MEMBER_S * 2 ** min(rounds, 16))
        self.pending[group] = self.clock.callLater(delay, self._flush, group)

    def _flush(self, group: str) -> None:
        self.pending.pop(group, None)
        members = self.members(group) if self.enabled() else []
        if not members:  # a group gone (or notifications turned off) keeps no state here
            self.rounds.pop(group, None)
            self.untold.pop(group, None)
            return
        rounds, last = self.rounds.get(group, (0, 0.0))
        now = self.clock.seconds()
        self.rounds[group] = (0 if now - last > QUIET_S else rounds) + 1, now
        # the members a round still in progress has not told yet come first, then the others
        current = set(members)
        first = [c for c in self.untold.get(group, ()) if c in current]
        queued = set(first)
        self.untold[group] = deque(first + [c for c in members if c not in queued])
        if group not in self.ticks:
            self._tick(group)

    def _tick(self, group: str) -> None:
        """Tell the next members of ``group``'s round: as many as :data:`ROUND_BYTES_PER_S` of member
        lists per :data:`TICK_S`, as each member told asks for the list."""
        self.ticks.pop(group, None)
        queue = self.untold.get(group)
        if not queue:
            self.untold.pop(group, None)
            return
        n = max(1, int(ROUND_BYTES_PER_S * TICK_S) // max(1, self.list_bytes(group)))
        self.tell(group, [queue.popleft() for _ in range(min(n, len(queue)))])
        if queue:
            self.ticks[group] = self.clock.callLater(TICK_S, self._tick, group)
        else:
            del self.untold[group]

    def tell(self, group: str, channels: list[Any]) -> None:
        header = NotifyConsumerIdsChangedRequestHeader(consumerGroup=group)
        for channel in channels:
            try:
                channel.invoke_oneway(RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, header,
                                                              oneway=True))
                self.sent += 1
            except Exception:  # noqa: BLE001 (one member's dead channel must not spare the others)
                self.log.failure("notifyConsumerIdsChanged to {c} failed", c=getattr(channel, "remote_address", "?"))

    def stop(self) -> None:
        for call in [*self.pending.values(), *self.ticks.values()]:
            if call.active():
                call.cancel()
        self.pending.clear()
        self.ticks.clear()
        self.untold.clear()
