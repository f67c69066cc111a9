"""Between the broker's messages and ``apache.rocketmq.v2`` messages, as 5.4.0's ``GrpcConverter``
and ``SendMessageActivity`` convert them (5.3.3's but for the priority), and remoting response codes to gRPC ``Code``\\ s.

The protobuf classes come from the official Python client's PyPI package
(``rocketmq-python-client``), which ships the generated ``apache.rocketmq.v2`` modules.
"""
from __future__ import annotations

import hashlib
from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb

from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.message import MessageExt
from rmqpy.protocol.priority import PROPERTY_PRIORITY, priority_of
from rmqpy.protocol.sysflag import COMPRESSED_FLAG

Code = pb.Code

# MessageConst.STRING_HASH_SET of 5.4.0 (5.3.3's and PROPERTY_PRIORITY, ORIGIN_GROUP), exactly: the proxy
# refuses them as user properties of a send and leaves them out of a received message's user properties
# (GrpcConverter.buildUserAttributes). Not in it, so a client sees them as user properties from the proxy:
# __SHARDINGKEY (a FIFO message's group, also its message_group: seen with the Go client 5.1.2,
# tests/interop/test_grpc_go5.py), __STARTDELIVERTIME, TRACE_CONTEXT, CHECK_IMMUNITY_TIME_IN_SECONDS,
# __transactionId__, INNER_NUM, INNER_BASE, INNER_MULTI_DISPATCH. The born host is PROPERTY_BORN_HOST, "__BORNHOST"
SYSTEM_PROPERTIES = frozenset((
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID",
    "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
    "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME",
    "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO",
    "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER",
    "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
    "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS", "TIMER_DEL_UNIQKEY",
    "TIMER_DELAY_LEVEL", "__BORNHOST", "BORN_TIMESTAMP", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
    "ORIGIN_GROUP", PROPERTY_PRIORITY,
))


# ResponseBuilder.RESPONSE_CODE_MAPPING of 5.3.3, and the codes its activities answer for the rest
_REMOTING_TO_GRPC: dict[int, int] = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
}


def status(code: int, message: str | None = None) -> Any:
    return pb.Status(code=code, message=message if message is not None else Code.Name(code))


def remoting_status(code: int, remark: str | None) -> Any:
    """``ResponseBuilder.buildStatus(int, String)``: unmapped codes are INTERNAL_SERVER_ERROR."""
    return status(_REMOTING_TO_GRPC.get(code, Code.INTERNAL_SERVER_ERROR), remark or str(code))


def resource(name: str) -> Any:
    return pb.Resource(name=name)


def _ts(target: Any, ms: int) -> None:
    target.seconds, target.nanos = ms // 1000, (ms % 1000) * 1_000_000


def _host(h: tuple[str, int]) -> str:
    return f"{h[0]}:{h[1]}"


def to_grpc_message(msg: MessageExt, receipt_handle: str | None) -> Any:
    """``GrpcConverter.buildMessage`` of a stored message; ``receipt_handle`` for a popped one."""
    props = msg.properties
    body = bytes(msg.body or b"")
    sp = pb.SystemProperties()
    if props.get("TAGS") is not None:
        sp.tag = props["TAGS"]
    if props.get("KEYS"):
        sp.keys.extend(props["KEYS"].split(" "))
    sp.message_id = props.get("UNIQ_KEY") or ""
    sp.body_digest.type = pb.DigestType.MD5
    sp.body_digest.checksum = hashlib.md5(body).hexdigest().upper()  # noqa: S324 (the digest clients check)
    sp.body_encoding = pb.Encoding.GZIP if msg.sys_flag & COMPRESSED_FLAG else pb.Encoding.IDENTITY
    if props.get("TRAN_MSG") == "true":
        sp.message_type = pb.MessageType.TRANSACTION
    elif any(k in props for k in ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC")):
        sp.message_type = pb.MessageType.DELAY
    elif "__SHARDINGKEY" in props:
        sp.message_type = pb.MessageType.FIFO
    else:
        sp.message_type = pb.MessageType.NORMAL
    _ts(sp.born_timestamp, msg.born_timestamp)
    sp.born_host = props.get("__BORNHOST") or _host(msg.born_host)
    _ts(sp.store_timestamp, msg.store_timestamp)
    sp.store_host = _host(msg.store_host)
    deliver = props.get("TIMER_DELIVER_MS", "")
    if deliver.isdigit():
        _ts(sp.delivery_timestamp, int(deliver))
    priority = priority_of(props)
    if priority >= 0:
        sp.priority = priority
    if "__SHARDINGKEY" in props:
        sp.message_group = props["__SHARDINGKEY"]
    if receipt_handle:
        sp.receipt_handle = receipt_handle
    sp.queue_id = msg.queue_id
    sp.queue_offset = msg.queue_offset
    sp.delivery_attempt = msg.reconsume_times + 1
    if "TRACE_CONTEXT" in props:
        sp.trace_context = props["TRACE_CONTEXT"]
    if "DLQ_ORIGIN_TOPIC" in props and "DLQ_ORIGIN_MESSAGE_ID" in props:
        sp.dead_letter_queue.topic = props["DLQ_ORIGIN_TOPIC"]
        sp.dead_letter_queue.message_id = props["DLQ_ORIGIN_MESSAGE_ID"]
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTIES}
    return pb.Message(topic=resource(msg.topic), user_properties=user, system_properties=sp, body=body)
