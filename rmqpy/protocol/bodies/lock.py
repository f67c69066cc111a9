"""LOCK_BATCH_MQ / UNLOCK_BATCH_MQ request body (Java ``LockBatchRequestBody`` /
``UnlockBatchRequestBody``): ``{"clientId":..,"consumerGroup":..,"mqSet":[MessageQueue..],
"onlyThisBroker":bool}``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.safe import body_decoder

#: (topic, brokerName, queueId), as rebalance_lock.MQ
MessageQueue = tuple[str, str, int]


@dataclass
class LockBatchRequestBody:
    consumerGroup: str = ""
    clientId: str = ""
    mqSet: list[MessageQueue] = field(default_factory=list)
    onlyThisBroker: bool = False

    @classmethod
    @body_decoder
    def decode(cls, body: bytes | None) -> "LockBatchRequestBody":
        obj = fastjson.loads(body or b"{}") or {}
        if not isinstance(obj, dict):
            raise ValueError("the body is not a JSON object")
        mqs = obj.get("mqSet") or []
        if not isinstance(mqs, list):
            raise ValueError("mqSet is not a list")
        return cls(str(obj.get("consumerGroup") or ""), str(obj.get("clientId") or ""),
                   [_mq(m) for m in mqs], bool(obj.get("onlyThisBroker")))


def _mq(obj: Any) -> MessageQueue:
    if not isinstance(obj, dict):
        raise ValueError("an mqSet entry is not a MessageQueue object")
    queue_id = int(obj.get("queueId") or 0)
    if not -0x80000000 <= queue_id <= 0x7FFFFFFF:
        raise ValueError(f"queueId {queue_id} is not a Java int")
    return (str(obj.get("topic") or ""), str(obj.get("brokerName") or ""), queue_id)
