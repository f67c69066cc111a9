"""The requests the client sends and how it reads the answers: pure functions shared by the
blocking, Twisted and asyncio forms. Field for field what the Java 4.9 / 5.x client writes
(``MQClientAPIImpl``, ``DefaultMQProducerImpl.sendKernelImpl``, ``PullAPIWrapper``)."""
from __future__ import annotations

import re
import time
import zlib

from rmqpy.client.errors import ClientError
from rmqpy.client.model import Message, MessageQueue, PullResult, PullStatus, SendResult, SendStatus
from rmqpy.client.route import AUTO_CREATE_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS
from rmqpy.protocol import fastjson
from rmqpy.protocol import message as M
from rmqpy.protocol import sysflag as SF
from rmqpy.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from rmqpy.protocol.bodies.route import TopicRouteData
from rmqpy.protocol.bodies.safe import inflate
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.errors import BadRequestError
from rmqpy.protocol.headers.base import CommandHeader
from rmqpy.protocol.headers.broker import (
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmqpy.protocol.headers.namesrv import GetRouteInfoRequestHeader

MAX_MESSAGE_SIZE = 4 * 1024 * 1024          # DefaultMQProducer.maxMessageSize
COMPRESS_OVER = 4 * 1024                    # compressMsgBodyOverHowmuch
COMPRESS_LEVEL = 5                          # compressLevel (ZLIB)
TOPIC_MAX_LENGTH = 127                      # Validators.TOPIC_MAX_LENGTH
_TOPIC_CHARS = re.compile(r"^[%|a-zA-Z0-9_-]+$")
#: properties the client writes itself; a user property of that name would be overwritten
RESERVED_PROPERTIES = frozenset({M.PROPERTY_TAGS, M.PROPERTY_KEYS, M.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                                 M.PROPERTY_WAIT_STORE_MSG_OK})
_SEND_STATUS: dict[int, str] = {ResponseCode.SUCCESS: SendStatus.SEND_OK,
                ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
                ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
                ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE}
_PULL_STATUS: dict[int, PullStatus] = {ResponseCode.SUCCESS: PullStatus.FOUND,
                ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
                ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
                ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL}
#: DefaultMQProducer.retryResponseCodes (5.3): broker answers after which another broker is tried
RETRY_RESPONSE_CODES = frozenset({ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE,
                                  ResponseCode.SYSTEM_ERROR, ResponseCode.SYSTEM_BUSY, ResponseCode.NO_PERMISSION,
                                  ResponseCode.NO_BUYER_ID, ResponseCode.NOT_IN_CURRENT_UNIT,
                                  ResponseCode.GO_AWAY})
PULL_SYS_FLAG_SUSPEND = 0x2
PULL_SYS_FLAG_SUBSCRIPTION = 0x4


def _fail(resp: RemotingCommand, what: str) -> ClientError:
    return ClientError(f"{what}: {resp.remark or 'no remark'}", resp.code)


def _header(resp: RemotingCommand, cls: type[CommandHeader], what: str) -> CommandHeader:
    try:
        return cls.decode(resp.ext_fields or {})
    except BadRequestError as exc:
        raise ClientError(f"{what}: bad response header: {exc}") from None


def _bname(mq: MessageQueue) -> dict[str, str]:
    """The broker name that 5.x clients add to queue requests (RpcRequestHeader ``bname``): 5.x
    brokers use it for static topics (logic queues); older brokers ignore the field."""
    return {"bname": mq.broker_name}


# ------------------------------------------------------------------------------------- checks
def check_topic(topic: object) -> str:
    """``Validators.checkTopic``: 1-127 characters of ``[%|a-zA-Z0-9_-]``."""
    if not isinstance(topic, str) or not topic:
        raise ClientError(f"the topic must be a non-empty string, not {topic!r}")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise ClientError(f"the topic is longer than {TOPIC_MAX_LENGTH} characters: {topic[:40]}...")
    if not _TOPIC_CHARS.match(topic):
        raise ClientError(f"the topic {topic!r} has characters other than letters, digits, %, |, _ and -")
    return topic


def _check_text(what: str, value: str) -> None:
    if M.NAME_VALUE_SEPARATOR in value or M.PROPERTY_SEPARATOR in value:
        raise ClientError(f"{what} {value!r} contains \\u0001 or \\u0002, which separate properties on the wire")


def check_message(msg: Message, max_size: int = MAX_MESSAGE_SIZE) -> None:
    """``Validators.checkMessage`` and the property rules of ``Message.putUserProperty``."""
    if not isinstance(msg, Message):
        raise ClientError(f"expected a rmqpy.client.Message, not {type(msg).__name__}")
    check_topic(msg.topic)
    if not isinstance(msg.body, (bytes, bytearray, memoryview)):
        raise ClientError(f"the message body must be bytes, not {type(msg.body).__name__}")
    if len(msg.body) == 0:
        raise ClientError("the message body length is zero")
    if len(msg.body) > max_size:
        raise ClientError(f"the message body size over max value, MAX: {max_size}")
    if msg.tags is not None:
        if not isinstance(msg.tags, str):
            raise ClientError(f"tags must be a string, not {type(msg.tags).__name__}")
        _check_text("tags", msg.tags)
    keys = msg.keys if isinstance(msg.keys, list) else [msg.keys] if msg.keys is not None else []
    for key in keys:
        if not isinstance(key, str):
            raise ClientError(f"keys must be strings, not {type(key).__name__}")
        _check_text("key", key)
    for name, value in msg.properties.items():
        if not isinstance(name, str) or not isinstance(value, str) or not name.strip() or not value.strip():
            raise ClientError(f"property {name!r}={value!r}: names and values must be non-blank strings")
        if name in RESERVED_PROPERTIES:
            raise ClientError(f"property {name!r} is set by the client (use Message.tags / keys)")
        _check_text("property", name)
        _check_text("property", value)


def message_properties(msg: Message, uniq_id: str) -> dict[str, str]:
    """What Java puts in a message: user properties, TAGS, KEYS, WAIT=true and UNIQ_KEY."""
    props = dict(msg.properties)
    if msg.tags:
        props[M.PROPERTY_TAGS] = msg.tags
    keys = msg.key_string()
    if keys:
        props[M.PROPERTY_KEYS] = keys
    props[M.PROPERTY_WAIT_STORE_MSG_OK] = "true"
    props[M.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq_id
    return props


def compress(body: bytes, over: int = COMPRESS_OVER) -> tuple[bytes, int]:
    """``tryToCompressMessage``: bodies of ``over`` bytes or more go ZLIB-compressed, with the 5.x
    sysflag (COMPRESSED | ZLIB type; 4.9 consumers look at the COMPRESSED bit only)."""
    if len(body) >= over:
        return zlib.compress(bytes(body), COMPRESS_LEVEL), SF.COMPRESSED_FLAG | SF.COMPRESSION_ZLIB
    return bytes(body), 0


# ------------------------------------------------------------------------------------- routes
def route_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic=topic))


def parse_route(resp: RemotingCommand, topic: str) -> TopicRouteData | None:
    """The route, or None when the name server does not know the topic."""
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    if resp.code != ResponseCode.SUCCESS or not resp.body:
        raise _fail(resp, f"route of topic {topic}")
    try:
        doc = fastjson.loads(resp.body)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        return TopicRouteData.from_json(doc)
    except (ValueError, BadRequestError) as exc:
        raise ClientError(f"route of topic {topic}: undecodable TopicRouteData: {exc}") from None


# ------------------------------------------------------------------------------------- send
def send_request(group: str, mq: MessageQueue, body: bytes, properties: dict[str, str], sys_flag: int = 0,
                 flag: int = 0, batch: bool = False, oneway: bool = False,
                 born_ms: int | None = None) -> RemotingCommand:
    """SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE): the single-letter header of Java's smart sends."""
    header = SendMessageRequestHeaderV2(
        a=group, b=mq.topic, c=AUTO_CREATE_TOPIC, d=DEFAULT_TOPIC_QUEUE_NUMS, e=mq.queue_id, f=sys_flag,
        g=int(time.time() * 1000) if born_ms is None else born_ms, h=flag,
        i=M.properties_to_string(properties), j=0, k=False, m=batch, n=mq.broker_name)
    code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
    return RemotingCommand.request(code, header, body, oneway=oneway)


def batch_body(msgs: list[Message], uniq_ids: list[str]) -> bytes:
    """``MessageBatch.encode``: each message with its own properties, flag and body."""
    return M.encode_batch_body((m.flag, bytes(m.body), message_properties(m, u)) for m, u in zip(msgs, uniq_ids))


def parse_send_response(resp: RemotingCommand, mq: MessageQueue, msg_id: str) -> SendResult:
    """``processSendResponse``: a SendResult for the store answers, ClientError for the rest."""
    status = _SEND_STATUS.get(resp.code)
    if status is None:
        raise _fail(resp, f"send to {mq.broker_name}")
    h = _header(resp, SendMessageResponseHeader, "send")
    assert isinstance(h, SendMessageResponseHeader)
    return SendResult(status, msg_id, h.msgId, MessageQueue(mq.topic, mq.broker_name, h.queueId), h.queueOffset)


# ------------------------------------------------------------------------------------- pull
def subscription(topic: str, sub_expression: str | None) -> SubscriptionData:
    """``FilterAPI.buildSubscriptionData`` for a TAG expression (``a || b``, ``*``)."""
    if sub_expression is not None and not isinstance(sub_expression, str):
        raise ClientError(f"sub_expression must be a string, not {type(sub_expression).__name__}")
    return SubscriptionData.build(topic, sub_expression or "*", "TAG", sub_version=0)


def pull_request(group: str, mq: MessageQueue, offset: int, max_nums: int, sub: SubscriptionData,
                 suspend_ms: int = 0) -> RemotingCommand:
    """PULL_MESSAGE as ``DefaultMQPullConsumerImpl.pullSyncImpl`` builds it (no commit offset)."""
    sys_flag = PULL_SYS_FLAG_SUBSCRIPTION | (PULL_SYS_FLAG_SUSPEND if suspend_ms > 0 else 0)
    header = PullMessageRequestHeader(
        consumerGroup=group, topic=mq.topic, queueId=mq.queue_id, queueOffset=offset, maxMsgNums=max_nums,
        sysFlag=sys_flag, commitOffset=0, suspendTimeoutMillis=suspend_ms, subscription=sub.subString,
        subVersion=0, expressionType=sub.expressionType)
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header, ext_fields=_bname(mq))


def parse_pull_response(resp: RemotingCommand, mq: MessageQueue, sub: SubscriptionData,
                        max_inflated: int = 64 * 1024 * 1024, decode: bool = True) -> tuple[PullResult, int]:
    """(PullResult, suggested broker id) as ``processPullResponse`` + ``processPullResult``: records
    decoded and decompressed, client-side exact tag filter, MIN_OFFSET/MAX_OFFSET properties set.
    ``decode=False`` leaves the records undecoded: the result's ``body`` (what :func:`decode_pull_body`
    turns into the messages) and ``offset_delta``, its ``messages`` empty."""
    status = _PULL_STATUS.get(resp.code)
    if status is None:
        raise _fail(resp, f"pull {mq.topic}/{mq.broker_name}/{mq.queue_id}")
    h = _header(resp, PullMessageResponseHeader, "pull")
    assert isinstance(h, PullMessageResponseHeader)
    if not decode:
        body = resp.body if status is PullStatus.FOUND and resp.body else None
        return PullResult(status, h.nextBeginOffset, h.minOffset, h.maxOffset, body=body,
                          offset_delta=h.offsetDelta), h.suggestWhichBrokerId
    messages: list[M.MessageExt] = []
    if status is PullStatus.FOUND and resp.body:
        messages = decode_pull_body(resp.body, mq, sub, h.minOffset, h.maxOffset, h.offsetDelta, max_inflated)
    return PullResult(status, h.nextBeginOffset, h.minOffset, h.maxOffset, messages), h.suggestWhichBrokerId


def decode_pull_body(body: bytes, mq: MessageQueue, sub: SubscriptionData, min_offset: int, max_offset: int,
                     offset_delta: int | None, max_inflated: int = 64 * 1024 * 1024) -> list[M.MessageExt]:
    """The messages of a FOUND pull's body, as ``processPullResult`` makes them (see
    :func:`parse_pull_response`)."""
    try:
        messages = list(M.decode_records(body))
        for m in messages:
            if m.sys_flag & SF.COMPRESSED_FLAG and m.body is not None:
                kind = SF.compression_type(m.sys_flag)
                if kind != "ZLIB":
                    raise ClientError(f"message at offset {m.queue_offset} is {kind}-compressed; "
                                      "only ZLIB is supported")
                m.body = inflate(m.body, max_inflated)
                m.sys_flag = SF.clear_compressed(m.sys_flag) & ~SF.COMPRESSION_TYPE_MASK
    except (M.RecordError, BadRequestError, zlib.error) as exc:
        raise ClientError(f"pull {mq.topic}/{mq.broker_name}/{mq.queue_id}: undecodable messages: {exc}") \
            from None
    if sub.tagsSet:
        wanted = set(sub.tagsSet)
        messages = [m for m in messages if m.tags is not None and m.tags in wanted]
    for m in messages:
        m.properties[M.PROPERTY_MIN_OFFSET] = str(min_offset)
        m.properties[M.PROPERTY_MAX_OFFSET] = str(max_offset)
        if offset_delta is not None:
            m.queue_offset += offset_delta
    return messages


# ------------------------------------------------------------------------------------- offsets
def min_offset_request(mq: MessageQueue) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(mq.topic, mq.queue_id),
                                   ext_fields=_bname(mq))


def max_offset_request(mq: MessageQueue) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(mq.topic, mq.queue_id),
                                   ext_fields=_bname(mq))


def parse_offset(resp: RemotingCommand, what: str) -> int:
    if resp.code != ResponseCode.SUCCESS:
        raise _fail(resp, what)
    h = _header(resp, OffsetResponseHeader, what)
    assert isinstance(h, OffsetResponseHeader)
    return h.offset


def query_offset_request(group: str, mq: MessageQueue) -> RemotingCommand:
    """QUERY_CONSUMER_OFFSET; setZeroIfNotFound=false so that a 5.x broker says QUERY_NOT_FOUND."""
    return RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, QueryConsumerOffsetRequestHeader(
        consumerGroup=group, topic=mq.topic, queueId=mq.queue_id, setZeroIfNotFound=False), ext_fields=_bname(mq))


def parse_query_offset(resp: RemotingCommand, what: str) -> int:
    """The group's offset, or -1 when the broker has none (QUERY_NOT_FOUND)."""
    if resp.code == ResponseCode.QUERY_NOT_FOUND:
        return -1
    if resp.code != ResponseCode.SUCCESS:
        raise _fail(resp, what)
    h = _header(resp, QueryConsumerOffsetResponseHeader, what)
    assert isinstance(h, QueryConsumerOffsetResponseHeader)
    return h.offset


def update_offset_request(group: str, mq: MessageQueue, offset: int) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, UpdateConsumerOffsetRequestHeader(
        consumerGroup=group, topic=mq.topic, queueId=mq.queue_id, commitOffset=offset), ext_fields=_bname(mq))


def check_success(resp: RemotingCommand, what: str) -> None:
    if resp.code != ResponseCode.SUCCESS:
        raise _fail(resp, what)


# ------------------------------------------------------------------------------------- clients
def heartbeat_request(client_id: str, producer_group: str | None, consumer_group: str | None) -> RemotingCommand:
    """HEART_BEAT: a producer group, or a pull consumer (CONSUME_ACTIVELY, no subscriptions, so that
    the broker counts every topic the group has offsets of in consumerProgress)."""
    producers = [ProducerData(producer_group)] if producer_group else []
    consumers = [ConsumerData(consumer_group, consumeType="CONSUME_ACTIVELY", messageModel="CLUSTERING",
                              consumeFromWhere="CONSUME_FROM_LAST_OFFSET")] if consumer_group else []
    body = HeartbeatData(client_id, producers, consumers).encode()
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=body)


def unregister_request(client_id: str, producer_group: str | None, consumer_group: str | None) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, UnregisterClientRequestHeader(
        clientID=client_id, producerGroup=producer_group, consumerGroup=consumer_group))
