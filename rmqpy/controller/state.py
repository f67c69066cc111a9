"""The controller's replicated state and the events that change it (Java ``ReplicasInfoManager``'s
two tables, ``BrokerReplicaInfo``, ``SyncStateInfo`` and ``impl/event``).

Every replica of the controller holds a :class:`ReplicasState` and changes it only by
:meth:`ReplicasState.apply` of an event from the replicated log, in log order: the apply is
deterministic (no clock, no liveness, no randomness), so the replicas agree. Deciding *which*
events to log is the leader's job (:mod:`rmqpy.controller.replicas`), against this state and its
own view of broker liveness.

Events travel through the log as plain tuples (:meth:`Event.to_wire`): PySyncObj pickles a
command's arguments, and a tuple of str/int/None/tuple is read back by any later rmqpy version.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

#: Java ``MixAll.FIRST_BROKER_CONTROLLER_ID``
FIRST_BROKER_CONTROLLER_ID = 1


@dataclass
class BrokerReplicaInfo:
    """One broker set: its cluster, the replicas by id with (address, register check code), and
    the next id the controller hands out (Java ``BrokerReplicaInfo``)."""
    clusterName: str
    brokerName: str
    nextAssignBrokerId: int = FIRST_BROKER_CONTROLLER_ID
    brokers: dict[int, tuple[str, str]] = field(default_factory=dict)

    def add_broker(self, broker_id: int, address: str, check_code: str) -> None:
        self.brokers[broker_id] = (address, check_code)
        self.nextAssignBrokerId += 1  # Java: incremented on every add, whatever the id

    def address(self, broker_id: int | None) -> str | None:
        if broker_id is None:
            return None
        entry = self.brokers.get(broker_id)
        return entry[0] if entry else None

    def check_code(self, broker_id: int | None) -> str | None:
        if broker_id is None:
            return None
        entry = self.brokers.get(broker_id)
        return entry[1] if entry else None

    def id_table(self) -> dict[int, str]:
        return {i: a for i, (a, _) in self.brokers.items()}


@dataclass
class SyncStateInfo:
    """The master of a set, its epoch, the in-sync replicas and their epoch (Java ``SyncStateInfo``)."""
    clusterName: str
    brokerName: str
    masterEpoch: int = 0
    syncStateSetEpoch: int = 0
    syncStateSet: frozenset[int] = frozenset()
    masterBrokerId: int | None = None

    def update_master(self, master: int | None) -> None:
        self.masterBrokerId = master
        self.masterEpoch += 1

    def update_sync_state_set(self, new_set: frozenset[int]) -> None:
        self.syncStateSet = frozenset(new_set)
        self.syncStateSetEpoch += 1

    @property
    def first_time_for_elect(self) -> bool:
        return self.masterEpoch == 0


class Event:
    """An event of the replicated log; ``kind`` names it on the wire."""
    kind: ClassVar[str]

    def to_wire(self) -> tuple[Any, ...]:
        return (self.kind, *(getattr(self, f.name) for f in fields(self)))  # type: ignore[arg-type]


@dataclass(frozen=True)
class ApplyBrokerIdEvent(Event):
    kind: ClassVar[str] = "ApplyBrokerId"
    clusterName: str
    brokerName: str
    brokerAddress: str
    newBrokerId: int
    registerCheckCode: str


@dataclass(frozen=True)
class ElectMasterEvent(Event):
    """``newMasterElected`` False: the old master is gone and none was elected."""
    kind: ClassVar[str] = "ElectMaster"
    brokerName: str
    newMasterElected: bool
    newMasterBrokerId: int | None


@dataclass(frozen=True)
class AlterSyncStateSetEvent(Event):
    kind: ClassVar[str] = "AlterSyncStateSet"
    brokerName: str
    newSyncStateSet: tuple[int, ...]


@dataclass(frozen=True)
class UpdateBrokerAddressEvent(Event):
    kind: ClassVar[str] = "UpdateBrokerAddress"
    clusterName: str
    brokerName: str
    brokerAddress: str
    brokerId: int


@dataclass(frozen=True)
class CleanBrokerDataEvent(Event):
    """``brokerIdSetToClean`` empty: the whole set."""
    kind: ClassVar[str] = "CleanBrokerData"
    brokerName: str
    brokerIdSetToClean: tuple[int, ...]


EVENT_TYPES: dict[str, type[Event]] = {t.kind: t for t in (
    ApplyBrokerIdEvent, ElectMasterEvent, AlterSyncStateSetEvent, UpdateBrokerAddressEvent, CleanBrokerDataEvent)}


def event_from_wire(wire: tuple[Any, ...] | list[Any]) -> Event:
    kind, *values = wire
    cls = EVENT_TYPES[kind]
    return cls(*(tuple(v) if isinstance(v, list) else v for v in values))


class ReplicasState:
    """``replicaInfoTable`` and ``syncStateSetInfoTable`` by broker name, and the events' apply."""

    def __init__(self) -> None:
        self.replica_info: dict[str, BrokerReplicaInfo] = {}
        self.sync_state: dict[str, SyncStateInfo] = {}

    def contains(self, broker_name: str) -> bool:
        """Java ``isContainsBroker``: the set is in both tables."""
        return broker_name in self.replica_info and broker_name in self.sync_state

    def apply(self, event: Event) -> None:
        if isinstance(event, AlterSyncStateSetEvent):
            if self.contains(event.brokerName):
                self.sync_state[event.brokerName].update_sync_state_set(frozenset(event.newSyncStateSet))
        elif isinstance(event, ApplyBrokerIdEvent):
            self._apply_broker_id(event)
        elif isinstance(event, ElectMasterEvent):
            if self.contains(event.brokerName):
                info = self.sync_state[event.brokerName]
                if event.newMasterElected and event.newMasterBrokerId is not None:
                    info.update_master(event.newMasterBrokerId)
                    info.update_sync_state_set(frozenset((event.newMasterBrokerId,)))
                else:  # the old master is gone and no replica could take over: keep the set
                    info.update_master(None)
        elif isinstance(event, UpdateBrokerAddressEvent):
            replica = self.replica_info.get(event.brokerName)
            if replica is not None and event.brokerId in replica.brokers:
                replica.brokers[event.brokerId] = (event.brokerAddress, replica.brokers[event.brokerId][1])
        elif isinstance(event, CleanBrokerDataEvent):
            self._clean(event)
        else:  # pragma: no cover - every kind is above
            raise TypeError(f"unknown event {event!r}")

    def _apply_broker_id(self, event: ApplyBrokerIdEvent) -> None:
        name = event.brokerName
        if self.contains(name):
            replica = self.replica_info[name]
            if event.newBrokerId not in replica.brokers:
                replica.add_broker(event.newBrokerId, event.brokerAddress, event.registerCheckCode)
            return
        replica = BrokerReplicaInfo(event.clusterName, name)
        replica.add_broker(event.newBrokerId, event.brokerAddress, event.registerCheckCode)
        self.replica_info[name] = replica
        self.sync_state[name] = SyncStateInfo(event.clusterName, name)

    def _clean(self, event: CleanBrokerDataEvent) -> None:
        name = event.brokerName
        if not event.brokerIdSetToClean:
            self.replica_info.pop(name, None)
            self.sync_state.pop(name, None)
            return
        if not self.contains(name):
            return
        replica, info = self.replica_info[name], self.sync_state[name]
        for broker_id in event.brokerIdSetToClean:
            replica.brokers.pop(broker_id, None)
            info.syncStateSet = info.syncStateSet - {broker_id}
        if not replica.brokers:
            del self.replica_info[name]
        if not info.syncStateSet:
            del self.sync_state[name]

    # snapshots (the Raft library's log compaction)
    def dump(self) -> dict[str, Any]:
        """A plain picture of the state (str/int/list/dict), what a snapshot keeps."""
        return {
            "replicas": {n: [r.clusterName, r.nextAssignBrokerId, sorted([i, a, c] for i, (a, c) in r.brokers.items())]
                         for n, r in self.replica_info.items()},
            "syncStates": {n: [s.clusterName, s.masterEpoch, s.syncStateSetEpoch, sorted(s.syncStateSet),
                               s.masterBrokerId] for n, s in self.sync_state.items()},
        }

    @classmethod
    def load(cls, data: dict[str, Any]) -> ReplicasState:
        state = cls()
        for name, (cluster, next_id, brokers) in data.get("replicas", {}).items():
            state.replica_info[name] = BrokerReplicaInfo(cluster, name, next_id,
                                                         {i: (a, c) for i, a, c in brokers})
        for name, (cluster, m_epoch, s_epoch, sss, master) in data.get("syncStates", {}).items():
            state.sync_state[name] = SyncStateInfo(cluster, name, m_epoch, s_epoch, frozenset(sss), master)
        return state
