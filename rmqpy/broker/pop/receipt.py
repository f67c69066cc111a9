"""The POP receipt (Java's ``ExtraInfoUtil``) and the names 5.x builds around it (``KeyBuilder``).

A popped message carries its receipt in the ``POP_CK`` property: space-separated
``ckQueueOffset popTime invisibleTime reviveQid retryMark brokerName queueId [queueOffset]``; the
proxy's receipt handle (``ReceiptHandle.encode``) adds ``commitLogOffset``.
The client sends it back with ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME. It is the
client's text: :func:`parse_receipt` checks every field and raises :class:`ReceiptError`
(a bad request) for anything Java's parser would not accept or that names no revive queue.
"""
from __future__ import annotations

from dataclasses import dataclass

from rmqpy.protocol.errors import BadRequestError

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
POP_ORDER_REVIVE_QUEUE = 999
NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2 = "0", "1", "2"
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG, ACK_TAG, BATCH_ACK_TAG = "ck", "ack", "bAck"
PROPERTY_POP_CK = "POP_CK"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
_LONG = (-(1 << 63), (1 << 63) - 1)
_INT = (-(1 << 31), (1 << 31) - 1)


class ReceiptError(BadRequestError):
    """A receipt (extraInfo) the broker cannot read."""


def revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


def pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """``%RETRY%<group>_<topic>`` (``+`` with enableRetryTopicV2)."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def is_pop_retry_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and "+" in topic


def retry_mark(topic: str) -> str:
    if is_pop_retry_v2(topic):
        return RETRY_TOPIC_V2
    return RETRY_TOPIC if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else NORMAL_TOPIC


def normal_topic(topic: str, group: str) -> str:
    """Java ``KeyBuilder.parseNormalTopic(topic, cid)``."""
    for sep in ("+", "_"):
        prefix = f"{RETRY_GROUP_TOPIC_PREFIX}{group}{sep}"
        if topic.startswith(prefix):
            return topic[len(prefix):]
    return topic


def real_topic(topic: str, group: str, mark: str) -> str:
    if mark == NORMAL_TOPIC:
        return topic
    if mark == RETRY_TOPIC:
        return pop_retry_topic(topic, group)
    if mark == RETRY_TOPIC_V2:
        return pop_retry_topic(topic, group, True)
    raise ReceiptError(f"retry mark {mark[:8]!r} is not 0, 1 or 2")


@dataclass(frozen=True)
class Receipt:
    ck_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int | None = None

    @property
    def is_order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE


def _num(text: str, what: str, bounds: tuple[int, int]) -> int:
    if not text or len(text) > 20 or not text.lstrip("-").isdigit():
        raise ReceiptError(f"extraInfo {what} {text[:24]!r} is not a number")
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise ReceiptError(f"extraInfo {what} {value} is out of range")
    return value


def parse_receipt(extra_info: str | None, revive_queue_num: int) -> Receipt:
    """The receipt in ``extra_info``; :class:`ReceiptError` if it is not one this broker wrote."""
    if not extra_info or len(extra_info) > 1024:
        raise ReceiptError("extraInfo is empty or too long")
    parts = extra_info.split(" ")
    if not 7 <= len(parts) <= 9:  # the proxy's ReceiptHandle adds the commit log offset as a 9th
        raise ReceiptError(f"extraInfo has {len(parts)} fields, not 7 to 9")
    ck_offset = _num(parts[0], "ckQueueOffset", (0, _LONG[1]))
    pop_time = _num(parts[1], "popTime", (0, _LONG[1]))
    invisible = _num(parts[2], "invisibleTime", (0, _LONG[1]))
    qid = _num(parts[3], "reviveQid", _INT)
    if qid != POP_ORDER_REVIVE_QUEUE and not 0 <= qid < revive_queue_num:
        raise ReceiptError(f"extraInfo reviveQid {qid} names no revive queue")
    if parts[4] not in (NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2):
        raise ReceiptError(f"extraInfo retry mark {parts[4][:8]!r} is not 0, 1 or 2")
    queue_id = _num(parts[6], "queueId", (0, _INT[1]))
    offset = _num(parts[7], "queueOffset", (0, _LONG[1])) if len(parts) >= 8 else None
    if len(parts) == 9:
        _num(parts[8], "commitLogOffset", (-1, _LONG[1]))
    return Receipt(ck_offset, pop_time, invisible, qid, parts[4], parts[5], queue_id, offset)


def build_receipt(ck_offset: int, pop_time: int, invisible_time: int, revive_qid: int, topic: str,
                  broker_name: str, queue_id: int, queue_offset: int) -> str:
    return " ".join(str(v) for v in (ck_offset, pop_time, invisible_time, revive_qid, retry_mark(topic),
                                      broker_name, queue_id, queue_offset))

