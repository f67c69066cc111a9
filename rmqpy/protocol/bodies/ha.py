"""GET_BROKER_HA_STATUS's answer, ``HARuntimeInfo`` (Java ``remoting/protocol/body``), what
``mqadmin haStatus`` prints.

fastjson writes the properties of the getters, sorted, null ones left out: a master's answer has
its slaves' connections and an ``haClientRuntimeInfo`` of zeros (no ``masterAddr``); a slave's
has an empty ``haConnectionInfo`` and its client's side. ``HAClientRuntimeInfo.isActivated`` has
no getter: fastjson does not write it, nor does rmqpy. The same in 5.5.1.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.safe import body_decoder


def _long(obj: dict[str, Any], key: str) -> int:
    value = obj.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} is {value!r}, not an integer")
    return value


@dataclass(frozen=True)
class HAConnectionRuntimeInfo:
    """One slave connected to a master."""
    addr: str
    slaveAckOffset: int
    diff: int
    inSync: bool
    transferredByteInSecond: int
    transferFromWhere: int

    def to_json(self) -> dict[str, Any]:
        return {"addr": self.addr, "diff": self.diff, "inSync": self.inSync, "slaveAckOffset": self.slaveAckOffset,
                "transferFromWhere": self.transferFromWhere, "transferredByteInSecond": self.transferredByteInSecond}

    @classmethod
    @body_decoder
    def from_json(cls, obj: dict[str, Any]) -> HAConnectionRuntimeInfo:
        if not isinstance(obj, dict):
            raise ValueError(f"{cls.__name__} is {type(obj).__name__}, not an object")
        return cls(str(obj.get("addr") or ""), _long(obj, "slaveAckOffset"), _long(obj, "diff"),
                   bool(obj.get("inSync", False)), _long(obj, "transferredByteInSecond"),
                   _long(obj, "transferFromWhere"))


@dataclass(frozen=True)
class HAClientRuntimeInfo:
    """A slave's side: its master's HA address, its commit log's end, its client's timestamps (ms)."""
    masterAddr: str | None = None
    transferredByteInSecond: int = 0
    maxOffset: int = 0
    lastReadTimestamp: int = 0
    lastWriteTimestamp: int = 0
    masterFlushOffset: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"lastReadTimestamp": self.lastReadTimestamp,
                               "lastWriteTimestamp": self.lastWriteTimestamp,
                               "masterFlushOffset": self.masterFlushOffset, "maxOffset": self.maxOffset,
                               "transferredByteInSecond": self.transferredByteInSecond}
        if self.masterAddr is not None:
            out["masterAddr"] = self.masterAddr
        return out

    @classmethod
    @body_decoder
    def from_json(cls, obj: dict[str, Any]) -> HAClientRuntimeInfo:
        if not isinstance(obj, dict):
            raise ValueError(f"{cls.__name__} is {type(obj).__name__}, not an object")
        addr = obj.get("masterAddr")
        return cls(None if addr is None else str(addr), _long(obj, "transferredByteInSecond"),
                   _long(obj, "maxOffset"), _long(obj, "lastReadTimestamp"), _long(obj, "lastWriteTimestamp"),
                   _long(obj, "masterFlushOffset"))


@dataclass(frozen=True)
class HARuntimeInfo:
    master: bool
    masterCommitLogMaxOffset: int = 0
    inSyncSlaveNums: int = 0
    haConnectionInfo: list[HAConnectionRuntimeInfo] = field(default_factory=list)
    haClientRuntimeInfo: HAClientRuntimeInfo = field(default_factory=HAClientRuntimeInfo)

    def to_json(self) -> dict[str, Any]:
        return {"haClientRuntimeInfo": self.haClientRuntimeInfo.to_json(),
                "haConnectionInfo": [c.to_json() for c in self.haConnectionInfo],
                "inSyncSlaveNums": self.inSyncSlaveNums, "master": self.master,
                "masterCommitLogMaxOffset": self.masterCommitLogMaxOffset}

    def encode(self) -> bytes:
        return fastjson.dumps(self.to_json()).encode("utf-8")

    @classmethod
    @body_decoder
    def decode(cls, data: bytes | None) -> HARuntimeInfo:
        obj = fastjson.loads(data) if data else None
        if not isinstance(obj, dict):
            raise ValueError(f"HARuntimeInfo body is {type(obj).__name__}, not an object")
        conns = obj.get("haConnectionInfo") or []
        if not isinstance(conns, list) or not all(isinstance(c, dict) for c in conns):
            raise ValueError("haConnectionInfo is not a list of objects")
        client = obj.get("haClientRuntimeInfo") or {}
        if not isinstance(client, dict):
            raise ValueError("haClientRuntimeInfo is not an object")
        return cls(bool(obj.get("master", False)), _long(obj, "masterCommitLogMaxOffset"),
                   _long(obj, "inSyncSlaveNums"), [HAConnectionRuntimeInfo.from_json(c) for c in conns],
                   HAClientRuntimeInfo.from_json(client))
