"""Topic configuration bodies: TopicConfig, DataVersion, the broker's registration body.

Property names are those fastjson derives from the Java getters. ``from_json`` accepts
what either Java version writes (4.9 has no ``attributes``/``stateVersion``).
"""
from __future__ import annotations

import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.safe import body_decoder, inflate

PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 8, 4, 2, 1


@dataclass
class DataVersion:
    timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    counter: int = 0
    stateVersion: int = 0

    def next_version(self, now_ms: int | None = None) -> None:
        self.timestamp = now_ms if now_ms is not None else int(time.time() * 1000)
        self.counter += 1

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"counter": self.counter, "timestamp": self.timestamp}
        if self.stateVersion:
            out["stateVersion"] = self.stateVersion
        return out

    @classmethod
    @body_decoder
    def from_json(cls, obj: dict[str, Any] | None) -> "DataVersion":
        obj = obj or {}
        return cls(timestamp=int(obj.get("timestamp") or 0), counter=int(obj.get("counter") or 0),
                   stateVersion=int(obj.get("stateVersion") or 0))

    def same_as(self, other: "DataVersion | None") -> bool:
        return (other is not None and self.timestamp == other.timestamp and self.counter == other.counter
                and self.stateVersion == other.stateVersion)


@dataclass
class TopicConfig:
    topicName: str
    readQueueNums: int = 16
    writeQueueNums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topicFilterType: str = "SINGLE_TAG"
    topicSysFlag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "order": self.order, "perm": self.perm, "readQueueNums": self.readQueueNums,
            "topicFilterType": self.topicFilterType, "topicName": self.topicName,
            "topicSysFlag": self.topicSysFlag, "writeQueueNums": self.writeQueueNums,
        }
        if self.attributes:
            out["attributes"] = dict(self.attributes)
        return out

    @classmethod
    @body_decoder
    def from_json(cls, obj: dict[str, Any]) -> "TopicConfig":
        return cls(topicName=str(obj.get("topicName")), readQueueNums=int(obj.get("readQueueNums", 16)),
                   writeQueueNums=int(obj.get("writeQueueNums", 16)), perm=int(obj.get("perm", 6)),
                   topicFilterType=str(obj.get("topicFilterType") or "SINGLE_TAG"),
                   topicSysFlag=int(obj.get("topicSysFlag") or 0), order=bool(obj.get("order", False)),
                   attributes=dict(obj.get("attributes") or {}))

    def encode_text(self) -> str:
        """``TopicConfig.encode()``, the space-separated form of compressed registration, as 4.9
        writes it: name, read and write queue counts, perm, filter type. 5.x appends the attributes
        as a sixth field (``{}`` when empty), which a 4.9 name server cannot read (its ``decode``
        wants exactly five fields; the registration then fails on a null topic name); no name
        server uses them, so rmqpy leaves them out and every version reads the body."""
        return (f"{self.topicName} {self.readQueueNums} {self.writeQueueNums} {self.perm} "
                f"{self.topicFilterType}")

    @classmethod
    @body_decoder
    def decode_text(cls, text: str) -> "TopicConfig":
        """``TopicConfig.decode``: five fields and, from a 5.x broker, the attributes' JSON (its
        absence, or JSON that does not parse, leaves them empty, as in Java)."""
        return cls._from_text(text)

    @classmethod
    def _from_text(cls, text: str) -> "TopicConfig":
        parts = text.split(" ", 5)
        if len(parts) < 5:
            raise ValueError(f"bad encoded TopicConfig {text!r}")
        attrs: Any = {}
        if len(parts) > 5 and parts[5].strip():
            try:
                attrs = fastjson.loads(parts[5])
            except ValueError:
                attrs = {}
            if not isinstance(attrs, dict):
                attrs = {}
        return cls(topicName=parts[0], readQueueNums=int(parts[1]), writeQueueNums=int(parts[2]),
                   perm=int(parts[3]), topicFilterType=parts[4], attributes=dict(attrs))


@dataclass
class TopicConfigSerializeWrapper:
    topicConfigTable: dict[str, TopicConfig] = field(default_factory=dict)
    dataVersion: DataVersion = field(default_factory=DataVersion)

    #: 5.x TopicConfigAndMappingSerializeWrapper's version of the static-topic mappings; when set
    #: the JSON form carries it with the (always empty: rmqpy has no static topics) mapping maps, as
    #: a 5.3.3 broker's registration does. 4.9 name servers ignore the extra keys.
    mappingDataVersion: DataVersion | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dataVersion": self.dataVersion,
                               "topicConfigTable": {name: tc for name, tc in self.topicConfigTable.items()}}
        if self.mappingDataVersion is not None:
            out.update(mappingDataVersion=self.mappingDataVersion, topicQueueMappingDetailMap={},
                       topicQueueMappingInfoMap={})
        return out

    @classmethod
    @body_decoder
    def from_json(cls, obj: dict[str, Any] | None) -> "TopicConfigSerializeWrapper":
        obj = obj or {}
        table = obj.get("topicConfigTable") or {}
        return cls(topicConfigTable={str(k): TopicConfig.from_json(v) for k, v in table.items()},
                   dataVersion=DataVersion.from_json(obj.get("dataVersion")))


_I32 = struct.Struct(">i")


@dataclass
class RegisterBrokerBody:
    topicConfigSerializeWrapper: TopicConfigSerializeWrapper = field(default_factory=TopicConfigSerializeWrapper)
    filterServerList: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"filterServerList": self.filterServerList,
                "topicConfigSerializeWrapper": self.topicConfigSerializeWrapper}

    def encode(self, compressed: bool = False) -> bytes:
        """The JSON body, or ``RegisterBrokerBody.encode(true)``: a zlib stream
        (``DeflaterOutputStream`` with ``Deflater.BEST_COMPRESSION``) of big-endian int32-prefixed
        chunks: the DataVersion's JSON, the number of topics, each topic's
        :meth:`TopicConfig.encode_text`, the filter server list's JSON, and the number of
        static-topic mappings (0: rmqpy has none; 5.x name servers read it from a >= 5.0 broker,
        4.9 ones stop before it)."""
        if not compressed:
            return fastjson.dumps(self).encode("utf-8")
        out = bytearray()
        version = self.topicConfigSerializeWrapper.dataVersion
        # 5.x's DataVersion, stateVersion included (4.9's fastjson skips it)
        _put(out, fastjson.dumps({"counter": version.counter, "stateVersion": version.stateVersion,
                                  "timestamp": version.timestamp}).encode())
        table = self.topicConfigSerializeWrapper.topicConfigTable
        out += _I32.pack(len(table))
        pack = _I32.pack
        for tc in table.values():
            line = f"{tc.topicName} {tc.readQueueNums} {tc.writeQueueNums} {tc.perm} {tc.topicFilterType}".encode()
            out += pack(len(line))  # what encode_text gives, inlined: 100,000 topics a registration
            out += line
        _put(out, fastjson.dumps(self.filterServerList).encode())
        out += _I32.pack(0)
        return zlib.compress(bytes(out), 9)

    @classmethod
    @body_decoder
    def decode(cls, body: bytes, compressed: bool, broker_version: int = 0) -> "RegisterBrokerBody":
        """Either form; the compressed one is a zlib stream (Java's DeflaterOutputStream)."""
        if not compressed:
            obj = fastjson.loads(body)
            if "topicConfigSerializeWrapper" not in obj and "topicConfigTable" in obj:
                # brokers older than 3.0.11 sent the bare wrapper
                return cls(TopicConfigSerializeWrapper.from_json(obj))
            return cls(TopicConfigSerializeWrapper.from_json(obj.get("topicConfigSerializeWrapper")),
                       list(obj.get("filterServerList") or []))
        data = memoryview(inflate(body))
        pos = 0

        def take() -> bytes:
            nonlocal pos
            (n,) = _I32.unpack_from(data, pos)
            if n < 0 or pos + 4 + n > len(data):
                raise ValueError("compressed RegisterBrokerBody is truncated")
            chunk = bytes(data[pos + 4:pos + 4 + n])
            pos += 4 + n
            return chunk

        version = DataVersion.from_json(fastjson.loads(take()))
        (count,) = _I32.unpack_from(data, pos)
        pos += 4
        table = {}
        for _ in range(count):
            tc = TopicConfig._from_text(take().decode("utf-8"))  # errors: this decode's BodyError
            table[tc.topicName] = tc
        filters = list(fastjson.loads(take()) or [])
        return cls(TopicConfigSerializeWrapper(table, version), filters)


def _put(out: bytearray, chunk: bytes) -> None:
    out += _I32.pack(len(chunk))
    out += chunk
