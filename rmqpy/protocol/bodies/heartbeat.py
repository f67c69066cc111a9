"""HEART_BEAT body and friends (facts §5.1): HeartbeatData, ConsumerData, SubscriptionData.

Names are the fastjson property names of the Java beans; ``from_json`` accepts what 4.9
and 5.x clients write (5.x adds heartbeatFingerprint/withoutSub).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.safe import body_decoder
from rmqpy.protocol.message import java_string_hash

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"


@dataclass
class SubscriptionData:
    topic: str
    subString: str = SUB_ALL
    tagsSet: list[str] = field(default_factory=list)
    codeSet: list[int] = field(default_factory=list)
    subVersion: int = field(default_factory=lambda: int(time.time() * 1000))
    expressionType: str = EXPRESSION_TAG
    classFilterMode: bool = False

    @property
    def is_tag(self) -> bool:
        return not self.expressionType or self.expressionType.upper() == EXPRESSION_TAG

    def to_json(self) -> dict[str, Any]:
        return {"classFilterMode": self.classFilterMode, "codeSet": list(self.codeSet),
                "expressionType": self.expressionType, "subString": self.subString,
                "subVersion": self.subVersion, "tagsSet": list(self.tagsSet), "topic": self.topic}

    @classmethod
    @body_decoder
    def from_json(cls, obj: dict[str, Any]) -> "SubscriptionData":
        return cls(topic=str(obj.get("topic") or ""), subString=str(obj.get("subString") or SUB_ALL),
                   tagsSet=[str(t) for t in obj.get("tagsSet") or []],
                   codeSet=[int(c) for c in obj.get("codeSet") or []],
                   subVersion=int(obj.get("subVersion") or 0),
                   expressionType=str(obj.get("expressionType") or EXPRESSION_TAG),
                   classFilterMode=bool(obj.get("classFilterMode", False)))

    @classmethod
    def build(cls, topic: str, sub_string: str | None, expression_type: str | None = None,
              sub_version: int | None = None) -> "SubscriptionData":
        """``FilterAPI.build``: split a TAG expression on ``||`` into tags and their hash codes."""
        etype = expression_type or EXPRESSION_TAG
        data = cls(topic=topic, subString=sub_string or SUB_ALL, expressionType=etype)
        if sub_version is not None:
            data.subVersion = sub_version
        if etype.upper() != EXPRESSION_TAG:
            return data
        if not sub_string or sub_string.strip() in ("", SUB_ALL):
            data.subString = SUB_ALL
            return data
        for tag in sub_string.split("||"):
            tag = tag.strip()
            if tag and tag not in data.tagsSet:
                data.tagsSet.append(tag)
                data.codeSet.append(java_string_hash(tag))
        return data


@dataclass
class ConsumerData:
    groupName: str
    consumeType: str = "CONSUME_PASSIVELY"
    messageModel: str = "CLUSTERING"
    consumeFromWhere: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptionDataSet: list[SubscriptionData] = field(default_factory=list)
    unitMode: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"consumeFromWhere": self.consumeFromWhere, "consumeType": self.consumeType,
                "groupName": self.groupName, "messageModel": self.messageModel,
                "subscriptionDataSet": list(self.subscriptionDataSet), "unitMode": self.unitMode}

    @classmethod
    @body_decoder
    def from_json(cls, obj: dict[str, Any]) -> "ConsumerData":
        return cls(groupName=str(obj.get("groupName") or ""),
                   consumeType=str(obj.get("consumeType") or "CONSUME_PASSIVELY"),
                   messageModel=str(obj.get("messageModel") or "CLUSTERING"),
                   consumeFromWhere=str(obj.get("consumeFromWhere") or "CONSUME_FROM_LAST_OFFSET"),
                   subscriptionDataSet=[SubscriptionData.from_json(s) for s in obj.get("subscriptionDataSet") or []],
                   unitMode=bool(obj.get("unitMode", False)))


@dataclass
class ProducerData:
    groupName: str

    def to_json(self) -> dict[str, Any]:
        return {"groupName": self.groupName}


@dataclass
class HeartbeatData:
    clientID: str
    producerDataSet: list[ProducerData] = field(default_factory=list)
    consumerDataSet: list[ConsumerData] = field(default_factory=list)
    heartbeatFingerprint: int | None = None
    withoutSub: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {"clientID": self.clientID, "consumerDataSet": list(self.consumerDataSet),
                "producerDataSet": list(self.producerDataSet),
                "heartbeatFingerprint": self.heartbeatFingerprint, "withoutSub": self.withoutSub}

    def encode(self) -> bytes:
        return fastjson.dumps(self).encode("utf-8")

    @classmethod
    @body_decoder
    def from_json(cls, obj: dict[str, Any]) -> "HeartbeatData":
        fp = obj.get("heartbeatFingerprint")
        return cls(clientID=str(obj.get("clientID") or ""),
                   producerDataSet=[ProducerData(str(p.get("groupName") or "")) for p in obj.get("producerDataSet") or []],
                   consumerDataSet=[ConsumerData.from_json(c) for c in obj.get("consumerDataSet") or []],
                   heartbeatFingerprint=int(fp) if fp is not None else None,
                   withoutSub=obj.get("withoutSub"))

    @classmethod
    @body_decoder
    def decode(cls, body: bytes) -> "HeartbeatData":
        obj = fastjson.loads(body)
        if not isinstance(obj, dict):
            raise ValueError("HeartbeatData body is not a JSON object")
        return cls.from_json(obj)


@dataclass
class CheckClientRequestBody:
    clientId: str = ""
    group: str = ""
    subscriptionData: SubscriptionData | None = None
    namespace: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"clientId": self.clientId, "group": self.group, "namespace": self.namespace,
                "subscriptionData": self.subscriptionData}

    @classmethod
    @body_decoder
    def decode(cls, body: bytes) -> "CheckClientRequestBody":
        obj = fastjson.loads(body)
        sub = obj.get("subscriptionData")
        return cls(clientId=str(obj.get("clientId") or ""), group=str(obj.get("group") or ""),
                   subscriptionData=SubscriptionData.from_json(sub) if isinstance(sub, dict) else None,
                   namespace=obj.get("namespace"))


def consumer_list_body(client_ids: list[str]) -> bytes:
    """GetConsumerListByGroupResponseBody."""
    return fastjson.dumps({"consumerIdList": list(client_ids)}).encode("utf-8")
