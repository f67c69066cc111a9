"""Bodies of 5.x controller mode: ``SyncStateSet``, ``ElectMasterResponseBody`` and
``EpochEntryCache`` with its ``EpochEntry`` list (Java ``protocol/body``, fastjson property names).

The controller writes a set of broker ids as a JSON array (``Set<Long>``); the election's answer
also carries a ``brokerMemberGroup`` (``{"brokerAddrs":{1:"host:port"},...}``, integer keys as
fastjson writes them), which a broker does not need and :meth:`ElectMasterResponseBody.decode`
skips. The same in 5.5.1.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.safe import body_decoder

_LONG = (-(1 << 63), (1 << 63) - 1)
_INT = (-(1 << 31), (1 << 31) - 1)
#: Java ``EpochEntry.LAST_EPOCH_END_OFFSET`` (Long.MAX_VALUE): the end of an epoch still open
LAST_EPOCH_END_OFFSET = _LONG[1]


def _number(value: Any, what: str, bounds: tuple[int, int]) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} is {value!r}, not an integer")
    if not bounds[0] <= value <= bounds[1]:
        raise ValueError(f"{what} {value} is out of range")
    return value


def _ids(value: Any) -> frozenset[int]:
    if value is None:
        return frozenset()
    if not isinstance(value, list):
        raise ValueError(f"syncStateSet is {type(value).__name__}, not a list")
    return frozenset(_number(v, "a broker id", _LONG) for v in value)


def _object(data: bytes | None, what: str) -> dict[str, Any]:
    obj = fastjson.loads(data) if data else None
    if not isinstance(obj, dict):
        raise ValueError(f"{what} body is {type(obj).__name__}, not an object")
    return obj


@dataclass(frozen=True)
class SyncStateSet:
    """The replicas in sync with the master, by broker id, and the epoch of that set."""
    syncStateSet: frozenset[int] = frozenset()
    syncStateSetEpoch: int = 0

    def encode(self) -> bytes:
        return fastjson.dumps({"syncStateSet": sorted(self.syncStateSet),
                               "syncStateSetEpoch": self.syncStateSetEpoch}).encode("utf-8")

    @classmethod
    @body_decoder
    def decode(cls, data: bytes | None) -> SyncStateSet:
        obj = _object(data, "SyncStateSet")
        return cls(_ids(obj.get("syncStateSet")),
                   _number(obj.get("syncStateSetEpoch", 0), "syncStateSetEpoch", _INT))


@dataclass(frozen=True)
class BrokerMemberGroup:
    """A set's replicas by id (Java ``BrokerMemberGroup``), in the election's answer."""
    cluster: str
    brokerName: str
    brokerAddrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"brokerAddrs": dict(self.brokerAddrs), "brokerName": self.brokerName, "cluster": self.cluster}


@dataclass(frozen=True)
class ElectMasterResponseBody:
    syncStateSet: frozenset[int] = frozenset()
    brokerMemberGroup: BrokerMemberGroup | None = None

    def encode(self) -> bytes:
        obj: dict[str, Any] = {"syncStateSet": sorted(self.syncStateSet)}
        if self.brokerMemberGroup is not None:
            obj["brokerMemberGroup"] = self.brokerMemberGroup.to_json()
        return fastjson.dumps(obj).encode("utf-8")

    @classmethod
    @body_decoder
    def decode(cls, data: bytes | None) -> ElectMasterResponseBody:
        return cls(_ids(_object(data, "ElectMasterResponseBody").get("syncStateSet")))


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    startOffset: int
    endOffset: int = LAST_EPOCH_END_OFFSET

    def to_json(self) -> dict[str, Any]:
        return {"endOffset": self.endOffset, "epoch": self.epoch, "startOffset": self.startOffset}


@dataclass
class EpochEntryCache:
    """GET_BROKER_EPOCH_CACHE's answer (what ``mqadmin getBrokerEpoch`` prints)."""
    clusterName: str
    brokerName: str
    brokerId: int
    epochList: list[EpochEntry] = field(default_factory=list)
    maxOffset: int = 0

    def encode(self) -> bytes:
        return fastjson.dumps({"brokerId": self.brokerId, "brokerName": self.brokerName,
                               "clusterName": self.clusterName,
                               "epochList": [e.to_json() for e in self.epochList],
                               "maxOffset": self.maxOffset}).encode("utf-8")

    @classmethod
    @body_decoder
    def decode(cls, data: bytes | None) -> EpochEntryCache:
        obj = _object(data, "EpochEntryCache")
        entries = [EpochEntry(_number(e["epoch"], "epoch", _INT), _number(e["startOffset"], "startOffset", _LONG),
                              _number(e.get("endOffset", LAST_EPOCH_END_OFFSET), "endOffset", _LONG))
                   for e in obj.get("epochList") or []]
        return cls(str(obj.get("clusterName") or ""), str(obj.get("brokerName") or ""),
                   _number(obj.get("brokerId", 0), "brokerId", _LONG), entries,
                   _number(obj.get("maxOffset", 0), "maxOffset", _LONG))


@dataclass(frozen=True)
class ReplicaIdentity:
    brokerName: str
    brokerId: int
    brokerAddress: str | None
    alive: bool

    def to_json(self) -> dict[str, Any]:
        return {"alive": self.alive, "brokerAddress": self.brokerAddress, "brokerId": self.brokerId,
                "brokerName": self.brokerName}


@dataclass(frozen=True)
class ReplicasInfo:
    masterBrokerId: int | None
    masterAddress: str | None
    masterEpoch: int
    syncStateSetEpoch: int
    # Java's inSyncReplicas / notInSyncReplicas (named otherwise here: docs/configuration.md's
    # generator counts an attribute of that name as a use of the MessageStoreConfig key)
    in_sync: list[ReplicaIdentity]
    not_in_sync: list[ReplicaIdentity]

    def to_json(self) -> dict[str, Any]:
        return {"inSyncReplicas": [r.to_json() for r in self.in_sync], "masterAddress": self.masterAddress,
                "masterBrokerId": self.masterBrokerId, "masterEpoch": self.masterEpoch,
                "notInSyncReplicas": [r.to_json() for r in self.not_in_sync],
                "syncStateSetEpoch": self.syncStateSetEpoch}


@dataclass
class BrokerReplicasInfo:
    """CONTROLLER_GET_SYNC_STATE_DATA's answer (``mqadmin getSyncStateSet``), by broker name."""
    replicasInfoTable: dict[str, ReplicasInfo] = field(default_factory=dict)

    def encode(self) -> bytes:
        return fastjson.dumps({"replicasInfoTable": {n: r.to_json() for n, r in self.replicasInfoTable.items()}}
                              ).encode("utf-8")
