"""RebalanceLockManager: per consumer group, which client holds which message queue.

Orderly push consumers lock their queues with LOCK_BATCH_MQ and renew the locks every
20 s; a lock not renewed for ``rocketmq.broker.rebalance.lockMaxLiveTime`` (60 s) expires
and may be taken by another client. Time comes from the injected ``now_ms``.

Java's table grows without bound. Here a group holds at most ``max_per_group`` queue locks and
the table at most ``max_total``: a LOCK_BATCH_MQ that would need more new locks (after expired
ones are dropped) raises :class:`LockTableFull`, which the processor answers with an error that
names the bound; the orderly consumer logs it and tries again at its next rebalance.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from twisted.logger import Logger

from rmqpy.remoting.ratelimit import clip, limiter_for

REBALANCE_LOCK_MAX_LIVE_TIME = 60_000
#: queue locks one consumer group may hold on this broker (an orderly group locks every queue of
#: every topic it consumes here: 4096 is, e.g., 256 topics of 16 queues)
MAX_LOCKS_PER_GROUP = 4096
#: queue locks of all groups together
MAX_LOCKS_TOTAL = 65536
#: a full table is swept for expired locks of every group at most this often (the sweep is
#: O(table); a client repeating refused requests must not make each one pay it)
FULL_SWEEP_INTERVAL_MS = 1000


class LockTableFull(Exception):
    """A LOCK_BATCH_MQ would take the group or the broker over its queue-lock bound."""

# a message queue as (topic, brokerName, queueId)
MQ = tuple[str, str, int]


@dataclass
class LockEntry:
    client_id: str
    last_update: int

    def expired(self, now: int, max_live: int) -> bool:
        return now - self.last_update > max_live


class RebalanceLockManager:
    log = Logger()

    def __init__(self, now_ms: Callable[[], int], max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME,
                 clock: Any = None, max_per_group: int = MAX_LOCKS_PER_GROUP,
                 max_total: int = MAX_LOCKS_TOTAL) -> None:
        self.now_ms = now_ms
        self.max_live_ms = max_live_ms
        self.max_per_group = max_per_group
        self.max_total = max_total
        self.table: dict[str, dict[MQ, LockEntry]] = {}
        self.total = 0  # entries over every group's table
        self._swept_at: int | None = None
        #: a line per queue and request, with the client's group and ID in it: any client can
        #: write them at will, so they are rate-limited (per kind) and their values clipped
        self.limiter = limiter_for(clock)

    def is_locked(self, group: str, mq: MQ, client_id: str) -> bool:
        """True (and renewed) when ``client_id`` holds a live lock on ``mq``."""
        entry = self.table.get(group, {}).get(mq)
        now = self.now_ms()
        if entry is not None and entry.client_id == client_id and not entry.expired(now, self.max_live_ms):
            entry.last_update = now
            return True
        return False

    def _drop_expired(self, group: str, now: int) -> None:
        table = self.table.get(group) or {}
        for mq in [mq for mq, e in table.items() if e.expired(now, self.max_live_ms)]:
            del table[mq]
            self.total -= 1
        if not table:
            self.table.pop(group, None)

    def _make_room(self, group: str, new: int) -> None:
        """Raises :class:`LockTableFull` unless ``new`` more locks of ``group`` fit the bounds."""
        now = self.now_ms()
        if len(self.table.get(group) or {}) + new > self.max_per_group:
            self._drop_expired(group, now)
            held = len(self.table.get(group) or {})
            if held + new > self.max_per_group:
                raise LockTableFull(f"group {clip(group)} holds {held} queue locks; {new} more would pass "
                                    f"the bound of {self.max_per_group} per group")
        if self.total + new > self.max_total:
            if self._swept_at is None or now - self._swept_at >= FULL_SWEEP_INTERVAL_MS:
                self._swept_at = now
                for g in list(self.table):
                    self._drop_expired(g, now)
            if self.total + new > self.max_total:
                raise LockTableFull(f"the broker holds {self.total} queue locks; {new} more would pass "
                                    f"the bound of {self.max_total}")

    def try_lock_batch(self, group: str, mqs: Iterable[MQ], client_id: str) -> list[MQ]:
        """The queues of ``mqs`` that ``client_id`` holds now; raises :class:`LockTableFull`
        (and locks nothing) when the queues not yet in the table would pass a bound."""
        mqs = list(dict.fromkeys(mqs))
        known = self.table.get(group) or {}
        new = sum(1 for mq in mqs if mq not in known)
        if new:
            self._make_room(group, new)
        locked: list[MQ] = []
        table = self.table.setdefault(group, {})
        for mq in mqs:
            if self.is_locked(group, mq, client_id):
                locked.append(mq)
                continue
            now = self.now_ms()
            entry = table.get(mq)
            if entry is None:
                table[mq] = LockEntry(client_id, now)
                self.total += 1
                self.limiter.info("lock-acquired", self.log,
                                  "tryLockBatch, message queue not locked, I got it. Group: {g} NewClientId: {c} {mq}",
                                  g=group, c=client_id, mq=mq)
                locked.append(mq)
            elif entry.expired(now, self.max_live_ms):
                self.limiter.warn("lock-expired", self.log,
                                  "tryLockBatch, message queue lock expired, I got it. Group: {g} OldClientId: {o} "
                                  "NewClientId: {c} {mq}", g=group, o=entry.client_id, c=client_id, mq=mq)
                entry.client_id, entry.last_update = client_id, now
                locked.append(mq)
            else:
                self.limiter.warn("lock-conflict", self.log,
                                  "tryLockBatch, message queue locked by other client. Group: {g} OtherClientId: {o} "
                                  "NewClientId: {c} {mq}", g=group, o=entry.client_id, c=client_id, mq=mq)
        if not table:
            del self.table[group]
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MQ], client_id: str) -> None:
        table = self.table.get(group)
        if not table:
            self.limiter.warn("unlock-no-group", self.log, "unlockBatch, group not exist, Group: {g} {c}", g=group, c=client_id)
            return
        for mq in mqs:
            entry = table.get(mq)
            if entry is None:
                self.limiter.warn("unlock-not-locked", self.log, "unlockBatch, but mq not locked, Group: {g} {c} {mq}",
                                  g=group, c=client_id, mq=mq)
            elif entry.client_id == client_id:
                del table[mq]
                self.total -= 1
                self.limiter.info("unlock", self.log, "unlockBatch, Group: {g} {c} {mq}", g=group, c=client_id, mq=mq)
            else:
                self.limiter.warn("unlock-conflict", self.log, "unlockBatch, but mq locked by other client: {o}, Group: {g} {c} {mq}",
                                  o=entry.client_id, g=group, c=client_id, mq=mq)
        if not table:
            del self.table[group]

    def unlock_all(self, group: str, client_id: str) -> list[MQ]:
        """Drops every lock ``client_id`` holds in ``group`` (it left the group); returns the queues."""
        table = self.table.get(group) or {}
        freed = [mq for mq, entry in table.items() if entry.client_id == client_id]
        for mq in freed:
            del table[mq]
        self.total -= len(freed)
        if not table:
            self.table.pop(group, None)
        if freed:
            self.limiter.info("unlock-all", self.log, "unlockAll, client left the group, Group: {g} {c} {mqs}",
                              g=group, c=client_id, mqs=freed)
        return freed
