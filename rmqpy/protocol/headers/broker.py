"""Custom headers of the client <-> broker request codes (``protocol/header``), facts §4.2-§4.4."""
from __future__ import annotations

from rmqpy.protocol.headers.base import CommandHeader, HeaderSchema, Long, header, optional, required


# ------------------------------------------------------------------------------- send
@header
class SendMessageRequestHeader(CommandHeader):
    """SEND_MESSAGE (10) / SEND_REPLY_MESSAGE (324): the long key names."""
    producerGroup: str = required()
    topic: str = required()
    defaultTopic: str = required()
    defaultTopicQueueNums: int = required()
    queueId: int = required()
    sysFlag: int = required()
    bornTimestamp: Long = required()
    flag: int = required()
    properties: str | None = optional()
    reconsumeTimes: int | None = optional()
    unitMode: bool | None = optional()
    batch: bool | None = optional()
    maxReconsumeTimes: int | None = optional()
    brokerName: str | None = optional()  # 4.9.5+/5.x base field "bname" is separate


@header
class SendMessageRequestHeaderV2(CommandHeader):
    """SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320) / 325: single-letter keys."""
    a: str = required()   # producerGroup
    b: str = required()   # topic
    c: str = required()   # defaultTopic
    d: int = required()   # defaultTopicQueueNums
    e: int = required()   # queueId
    f: int = required()   # sysFlag
    g: Long = required()   # bornTimestamp
    h: int = required()   # flag
    i: str | None = optional()   # properties
    j: int | None = optional()   # reconsumeTimes
    k: bool | None = optional()  # unitMode
    l: int | None = optional()   # maxReconsumeTimes  # noqa: E741
    m: bool | None = optional()  # batch
    n: str | None = optional()   # brokerName

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(**{v1: getattr(self, v2) for v2, v1 in SEND_V2_FIELDS.items()})

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> "SendMessageRequestHeaderV2":
        return cls(**{v2: getattr(v1, name) for v2, name in SEND_V2_FIELDS.items()})


#: the SendMessageRequestHeader field each single-letter key of SendMessageRequestHeaderV2 carries
#: (Java's ``createSendMessageRequestHeaderV1``/``V2``)
SEND_V2_FIELDS = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
    "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
    "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName",
}

#: the send headers as the send path decodes them, once per message: long keys (SEND_MESSAGE,
#: SEND_REPLY_MESSAGE) and short keys (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, SEND_REPLY_MESSAGE_V2),
#: both into SendMessageRequestHeader, refusing what ``decode`` refuses with its HeaderError
SEND_HEADER: HeaderSchema[SendMessageRequestHeader, SendMessageRequestHeader] = HeaderSchema(
    SendMessageRequestHeader, SendMessageRequestHeader)
SEND_HEADER_V2: HeaderSchema[SendMessageRequestHeaderV2, SendMessageRequestHeader] = HeaderSchema(
    SendMessageRequestHeaderV2, SendMessageRequestHeader, SEND_V2_FIELDS)


@header
class SendMessageResponseHeader(CommandHeader):
    msgId: str = required()
    queueId: int = required()
    queueOffset: Long = required()
    transactionId: str | None = optional()
    batchUniqId: str | None = optional()


# ------------------------------------------------------------------------------- pull
@header
class PullMessageRequestHeader(CommandHeader):
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required()
    queueOffset: Long = required()
    maxMsgNums: int = required()
    sysFlag: int = required()
    commitOffset: Long = required()
    suspendTimeoutMillis: Long = required()
    subscription: str | None = optional()
    subVersion: Long = required()
    expressionType: str | None = optional()
    maxMsgBytes: int | None = optional()
    requestSource: int | None = optional()
    proxyFrowardClientId: str | None = optional()


@header
class PullMessageResponseHeader(CommandHeader):
    suggestWhichBrokerId: Long = required()
    nextBeginOffset: Long = required()
    minOffset: Long = required()
    maxOffset: Long = required()
    offsetDelta: Long | None = optional()
    topicSysFlag: int | None = optional()
    groupSysFlag: int | None = optional()
    forbiddenType: int | None = optional()


# ------------------------------------------------------------------------------- offsets
@header
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required()
    setZeroIfNotFound: bool | None = optional()


@header
class QueryConsumerOffsetResponseHeader(CommandHeader):
    offset: Long = required()


@header
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required()
    commitOffset: Long = required()


@header
class GetMaxOffsetRequestHeader(CommandHeader):
    topic: str = required()
    queueId: int = required()
    committed: bool | None = optional()


@header
class GetMinOffsetRequestHeader(CommandHeader):
    topic: str = required()
    queueId: int = required()


@header
class OffsetResponseHeader(CommandHeader):
    """GET_MAX_OFFSET / GET_MIN_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP responses."""
    offset: Long = required()


@header
class SearchOffsetRequestHeader(CommandHeader):
    topic: str = required()
    queueId: int = required()
    timestamp: Long = required()
    boundaryType: str | None = optional()


@header
class GetEarliestMsgStoretimeRequestHeader(CommandHeader):
    topic: str = required()
    queueId: int = required()


@header
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: Long = required()


# ------------------------------------------------------------------------------- clients
@header
class UnregisterClientRequestHeader(CommandHeader):
    clientID: str = required()
    producerGroup: str | None = optional()
    consumerGroup: str | None = optional()


@header
class GetConsumerListByGroupRequestHeader(CommandHeader):
    consumerGroup: str = required()


@header
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    consumerGroup: str = required()


# ------------------------------------------------------------------------------- for later processors
@header
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    offset: Long = required()
    group: str = required()
    delayLevel: int = required()
    originMsgId: str | None = optional()
    originTopic: str | None = optional()
    unitMode: bool | None = optional()
    maxReconsumeTimes: int | None = optional()


@header
class QueryMessageRequestHeader(CommandHeader):
    topic: str = required()
    key: str = required()
    maxNum: int = required()
    beginTimestamp: Long = required()
    endTimestamp: Long = required()


@header
class QueryMessageResponseHeader(CommandHeader):
    indexLastUpdateTimestamp: Long = required()
    indexLastUpdatePhyoffset: Long = required()


@header
class ViewMessageRequestHeader(CommandHeader):
    offset: Long = required()
    topic: str | None = optional()


@header
class RecallMessageRequestHeader(CommandHeader):
    producerGroup: str | None = optional()
    topic: str = required()
    recallHandle: str = required()


@header
class EndTransactionRequestHeader(CommandHeader):
    topic: str | None = optional()
    producerGroup: str = required()
    tranStateTableOffset: Long = required()
    commitLogOffset: Long = required()
    commitOrRollback: int = required()
    fromTransactionCheck: bool | None = optional()
    msgId: str = required()
    transactionId: str | None = optional()


@header
class CheckTransactionStateRequestHeader(CommandHeader):
    topic: str | None = optional()
    tranStateTableOffset: Long = required()
    commitLogOffset: Long = required()
    msgId: str | None = optional()
    transactionId: str | None = optional()
    offsetMsgId: str | None = optional()


# ------------------------------------------------------------------------------- reply
@header
class ReplyMessageRequestHeader(CommandHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326, broker -> requester)."""
    producerGroup: str = required()
    topic: str = required()
    defaultTopic: str = required()
    defaultTopicQueueNums: int = required()
    queueId: int = required()
    sysFlag: int = required()
    bornTimestamp: Long = required()
    flag: int = required()
    properties: str | None = optional()
    reconsumeTimes: int | None = optional()
    unitMode: bool | None = optional()
    bornHost: str = required()
    storeHost: str = required()
    storeTimestamp: Long = required()
