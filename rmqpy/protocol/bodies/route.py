"""Route bodies: TopicRouteData, QueueData, BrokerData, ClusterInfo, TopicList, KVTable."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.safe import body_decoder

MASTER_ID = 0


@dataclass
class QueueData:
    brokerName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicSysFlag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.brokerName, "perm": self.perm, "readQueueNums": self.readQueueNums,
                "topicSysFlag": self.topicSysFlag, "writeQueueNums": self.writeQueueNums}

    @classmethod
    @body_decoder
    def from_json(cls, obj: dict[str, Any]) -> "QueueData":
        return cls(str(obj["brokerName"]), int(obj.get("readQueueNums", 0)), int(obj.get("writeQueueNums", 0)),
                   int(obj.get("perm", 0)), int(obj.get("topicSysFlag") or 0))


@dataclass
class BrokerData:
    cluster: str
    brokerName: str
    brokerAddrs: dict[int, str] = field(default_factory=dict)
    enableActingMaster: bool = False
    zoneName: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"brokerAddrs": dict(sorted(self.brokerAddrs.items())), "brokerName": self.brokerName,
                               "cluster": self.cluster, "enableActingMaster": self.enableActingMaster}
        if self.zoneName is not None:
            out["zoneName"] = self.zoneName
        return out

    @classmethod
    @body_decoder
    def from_json(cls, obj: dict[str, Any]) -> "BrokerData":
        addrs = {int(k): str(v) for k, v in (obj.get("brokerAddrs") or {}).items()}
        return cls(str(obj.get("cluster")), str(obj.get("brokerName")), addrs,
                   bool(obj.get("enableActingMaster", False)), obj.get("zoneName"))

    def copy(self) -> "BrokerData":
        return BrokerData(self.cluster, self.brokerName, dict(self.brokerAddrs), self.enableActingMaster,
                          self.zoneName)


@dataclass
class TopicRouteData:
    queueDatas: list[QueueData] = field(default_factory=list)
    brokerDatas: list[BrokerData] = field(default_factory=list)
    filterServerTable: dict[str, list[str]] = field(default_factory=dict)
    orderTopicConf: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"brokerDatas": self.brokerDatas, "filterServerTable": self.filterServerTable,
                "orderTopicConf": self.orderTopicConf, "queueDatas": self.queueDatas}

    def encode(self, standard_json: bool) -> bytes:
        """Route body; ``standard_json`` quotes the brokerId keys, as 4.9.4+ clients ask."""
        return fastjson.dumps(self, quote_keys=standard_json, ascii_only=standard_json).encode("utf-8")

    @classmethod
    @body_decoder
    def from_json(cls, obj: dict[str, Any]) -> "TopicRouteData":
        return cls([QueueData.from_json(q) for q in obj.get("queueDatas") or []],
                   [BrokerData.from_json(b) for b in obj.get("brokerDatas") or []],
                   {str(k): list(v) for k, v in (obj.get("filterServerTable") or {}).items()},
                   obj.get("orderTopicConf"))


@dataclass
class ClusterInfo:
    brokerAddrTable: dict[str, BrokerData] = field(default_factory=dict)
    clusterAddrTable: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"brokerAddrTable": self.brokerAddrTable,
                "clusterAddrTable": {k: sorted(v) for k, v in self.clusterAddrTable.items()}}


@dataclass
class TopicList:
    topicList: list[str] = field(default_factory=list)
    brokerAddr: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"brokerAddr": self.brokerAddr, "topicList": sorted(self.topicList)}

    def encode(self) -> bytes:
        return fastjson.dumps(self).encode("utf-8")


def kv_table(table: dict[str, str]) -> bytes:
    """KVTable body ``{"table":{...}}``."""
    return fastjson.dumps({"table": dict(table)}).encode("utf-8")
