"""The elect policy (Java ``DefaultElectPolicy``).

A new master is looked for among the in-sync replicas first, then (``enableElectUncleanMaster``)
among all replicas; in each, only the valid (alive) ones count. The old master stays if it is
still valid and no other broker is asked for; an asked-for broker wins if valid and nothing else
does; otherwise the best heartbeat wins: highest epoch, then highest max offset, then lowest
``electionPriority`` value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Protocol


class LiveInfo(Protocol):
    brokerId: int
    epoch: int
    maxOffset: int
    electionPriority: int


#: (clusterName, brokerName, brokerId) -> alive?
ValidPredicate = Callable[[str, str, int], bool]
#: (clusterName, brokerName, brokerId) -> its last heartbeat, or None
LiveInfoGetter = Callable[[str, str, int], "LiveInfo | None"]


def _java_int(value: int) -> int:
    """A Java ``(int)`` cast of a long: the low 32 bits, signed."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def compare(a: LiveInfo, b: LiveInfo) -> int:
    """Java's comparator, statement for statement, including its ``(int)`` cast of the offsets'
    difference: two offsets 2^32 apart compare equal, as in Java."""
    if a.epoch == b.epoch:
        if a.maxOffset == b.maxOffset:
            return _java_int(a.electionPriority - b.electionPriority)
        return _java_int(b.maxOffset - a.maxOffset)
    return _java_int(b.epoch - a.epoch)


@dataclass
class DefaultElectPolicy:
    valid: ValidPredicate | None = None
    live_info: LiveInfoGetter | None = None

    def elect(self, cluster: str, broker_name: str, sync_state_brokers: Iterable[int] | None,
              all_replica_brokers: Iterable[int] | None, old_master: int | None,
              prefer_broker_id: int | None) -> int | None:
        new_master = None
        if sync_state_brokers is not None:
            new_master = self._try_elect(cluster, broker_name, sync_state_brokers, old_master, prefer_broker_id)
        if new_master is not None:
            return new_master
        if all_replica_brokers is not None:
            new_master = self._try_elect(cluster, broker_name, all_replica_brokers, old_master, prefer_broker_id)
        return new_master

    def _try_elect(self, cluster: str, broker_name: str, brokers: Iterable[int], old_master: int | None,
                   prefer: int | None) -> int | None:
        # sorted: Java iterates a HashSet<Long>, which for the small ids a controller assigns is
        # ascending order; rmqpy makes it so for any ids
        candidates = sorted(set(brokers))
        if self.valid is not None:
            candidates = [b for b in candidates if self.valid(cluster, broker_name, b)]
        if not candidates:
            return None
        if old_master in candidates and (prefer is None or prefer == old_master):
            return old_master
        if prefer is not None:
            return prefer if prefer in candidates else None
        if self.live_info is not None:
            best: LiveInfo | None = None
            for broker_id in candidates:  # Java's TreeSet.first(): the least; ties keep the first added
                info = self.live_info(cluster, broker_name, broker_id)
                if info is None:
                    continue
                if best is None or compare(info, best) < 0:
                    best = info
            if best is not None:
                return best.brokerId
        return candidates[0]
