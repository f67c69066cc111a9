"""Queue hand-over between the members of a clustering group: who holds a queue, and when it let go.

When a group changes, the broker tells every member (NOTIFY_CONSUMER_IDS_CHANGED). Each member then
reads the member list (GET_CONSUMER_LIST_BY_GROUP) and computes its queues. The member that gives a
queue up commits the offset it consumed up to (a oneway UPDATE_CONSUMER_OFFSET,
``RebalancePushImpl.removeUnnecessaryMessageQueue``; the Go client's ``removeUnnecessaryMessageQueue``
alike); the member that takes it asks for that offset (QUERY_CONSUMER_OFFSET). Both follow the same
notice by about one round trip, so the query often comes first and reads an older offset: whatever the
old owner consumed since its last commit is consumed again. The Java brokers (4.9.7, 5.3.3) answer
the query at once and have this race; nothing in the clients orders the two.

rmqpy answers such a query only once the queue's holders have let go of it, at most
:data:`HANDOVER_MAX_MS` later. A member *holds* a queue from its first PULL_MESSAGE of it (commit or
not: a member that has consumed but not yet committed holds it too) until it sends
UPDATE_CONSUMER_OFFSET for it after having read a newer member list than the one it knew when it began
to hold the queue. An update without such a read (the client's periodic ``persistAll``, every 5 s) is
not a hand-over: the member still consumes the queue. The requests of one member travel on its one
connection, in the order it sent them; a member list is told apart from an older one by the group's
generation (:attr:`ConsumerManager.generation`, counted up at each change). A member that keeps a queue
across a change and then commits it periodically counts as having let go until its next pull reaches the
broker: a narrow residue, as the queue would have to change hands again in that moment.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from twisted.internet import defer
from twisted.logger import Logger

from rmqpy.broker.clients import ConsumerManager

#: a query this soon after a group change may be one for a queue changing hands (ms): a new member's
#: first rebalance (a fresh JVM) often asks more than a second after it registered
HANDOVER_WINDOW_MS = 10_000
#: the longest a query waits for the holders to let go (ms; the clients wait 5 s for the answer)
HANDOVER_MAX_MS = 2000
#: a member that pulled a queue this recently still holds it (ms): a held pull is answered within
#: brokerSuspendMaxTimeMillis (15 s) and the member pulls again at once
HOLDING_MS = 20_000

Key = tuple[str, str, int]  # (group, topic, queueId)


@dataclass
class _Hold:
    pulled_ms: int  # its last pull
    since: int  # the generation of the member list the member had read when it began to hold the queue
    released: bool = False


@dataclass(eq=False)
class _Waiter:
    key: Key
    pending: set[str]
    answer: Callable[[], Any]
    deferred: defer.Deferred = field(default_factory=defer.Deferred)
    timer: Any = None


class QueueHandover:
    """Tracks, per (group, topic, queueId), which member connections hold the queue, and holds the
    offset queries of a new owner until the holders let go. Client addresses (``ip:port`` of the
    connection) name the members, as the consumer table does."""

    log = Logger()

    def __init__(self, now_ms: Callable[[], int], call_later: Callable[..., Any], consumers: ConsumerManager) -> None:
        self.now_ms = now_ms
        self.call_later = call_later
        self.consumers = consumers
        self.holds: dict[Key, dict[str, _Hold]] = {}
        # (group, client address) -> generation of the member list it read last
        self.read: dict[tuple[str, str], int] = {}
        self.keys_of: dict[str, set[Key]] = {}  # client address -> its keys, to forget it when it closes
        self.waiters: list[_Waiter] = []

    # ------------------------------------------------------------------ what the members do
    def member_list_read(self, address: str, group: str) -> None:
        """GET_CONSUMER_LIST_BY_GROUP: the member now knows the group's current members."""
        self.read[(group, address)] = self.consumers.generation.get(group, 0)

    def pulled(self, address: str, group: str, topic: str, queue_id: int) -> None:
        """A PULL_MESSAGE (its first execution; not a held pull woken up)."""
        key = (group, topic, queue_id)
        holders = self.holds.setdefault(key, {})
        hold = holders.get(address)
        if hold is None or hold.released:
            holders[address] = _Hold(self.now_ms(), self.read.get((group, address), 0))
            self.keys_of.setdefault(address, set()).add(key)
        else:
            hold.pulled_ms = self.now_ms()

    def offset_updated(self, address: str, group: str, topic: str, queue_id: int) -> None:
        """UPDATE_CONSUMER_OFFSET: a hand-over if the member has read a newer member list since it began
        to hold the queue."""
        key = (group, topic, queue_id)
        hold = self.holds.get(key, {}).get(address)
        if hold is None or hold.released or self.read.get((group, address), 0) <= hold.since:
            return
        hold.released = True
        for waiter in list(self.waiters):
            if waiter.key == key:
                waiter.pending.discard(address)
                if not waiter.pending:
                    self._answer(waiter)

    def channel_closed(self, address: str) -> None:
        for key in self.keys_of.pop(address, ()):
            holders = self.holds.get(key)
            if holders is not None:
                holders.pop(address, None)
                if not holders:
                    del self.holds[key]
        for read_key in [k for k in self.read if k[1] == address]:
            del self.read[read_key]
        for waiter in list(self.waiters):
            waiter.pending.discard(address)
            if not waiter.pending:
                self._answer(waiter)

    # ------------------------------------------------------------------ the new owner's query
    def holders(self, address: str, group: str, topic: str, queue_id: int) -> set[str]:
        """The other current members that hold the queue, while a change of the group is recent."""
        info = self.consumers.get(group)
        changed = self.consumers.changed_at.get(group)
        now = self.now_ms()
        if info is None or changed is None or info.message_model != "CLUSTERING" or now - changed >= HANDOVER_WINDOW_MS:
            return set()
        members = {c.address for c in info.channels.values()} - {address}
        return {m for m, h in self.holds.get((group, topic, queue_id), {}).items()
                if m in members and not h.released and now - h.pulled_ms < HOLDING_MS}

    def after_handover(self, address: str, group: str, topic: str, queue_id: int, answer: Callable[[], Any]) -> Any:
        """``answer()`` now if no other member holds the queue, else a Deferred firing with it once they
        have let go, or after HANDOVER_MAX_MS."""
        pending = self.holders(address, group, topic, queue_id)
        if not pending:
            return answer()
        self.log.info("hand-over: offset query of {g} {t} {q} from {c} waits for {p} to let go",
                      g=group, t=topic, q=queue_id, c=address, p=sorted(pending))
        waiter = _Waiter((group, topic, queue_id), pending, answer)
        self.waiters.append(waiter)
        waiter.timer = self.call_later(HANDOVER_MAX_MS / 1000.0, self._answer, waiter)
        return waiter.deferred

    def _answer(self, waiter: _Waiter) -> None:
        if waiter not in self.waiters:
            return
        self.waiters.remove(waiter)
        if waiter.timer is not None and waiter.timer.active():
            waiter.timer.cancel()
        elif waiter.pending:
            self.log.info("hand-over: {p} did not let go of {g} {t} {q} in time", g=waiter.key[0],
                          t=waiter.key[1], q=waiter.key[2], p=sorted(waiter.pending))
        waiter.deferred.callback(waiter.answer())
