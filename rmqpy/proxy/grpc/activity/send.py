"""SendMessage (the proxy's ``SendMessageActivity`` and ``ProducerProcessor``): each message checked
and turned into a SEND_MESSAGE_V2 of the broker, the answers into the send result entries."""
from __future__ import annotations

import itertools
import time
from types import SimpleNamespace
from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from twisted.internet import defer

from rmqpy.broker.topic_attributes import topic_message_type
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import SendMessageRequestHeaderV2
from rmqpy.protocol.message import java_string_hash, properties_to_string
from rmqpy.protocol.priority import PROPERTY_PRIORITY
from rmqpy.proxy.grpc import validate
from rmqpy.proxy.grpc.context import MAX_BATCH, ActivityContext, duration_ms
from rmqpy.proxy.grpc.convert import SYSTEM_PROPERTIES, Code, remoting_status, status
from rmqpy.proxy.grpc.local import LocalChannel
from rmqpy.proxy.grpc.validate import Refused

# ProxyConfig defaults of 5.3.3 (the same in 5.4.0)
MAX_MESSAGE_GROUP = 64  # maxMessageGroupSize
MAX_USER_PROPERTIES = 128  # userPropertyMaxNum
MAX_USER_PROPERTY_SIZE = 16 * 1024  # maxUserPropertySize
MAX_DELAY_MS = 24 * 3600 * 1000  # maxDelayTimeMills
_OK_PUT = (ResponseCode.SUCCESS,)
_HEX = frozenset("0123456789ABCDEFabcdef")


def consistent_hash(key: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)`` (its linear congruential generator)."""
    state = key & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        top = state >> 33  # (int) (state >>> 33): 31 bits, never negative
        nxt = int((candidate + 1) / ((top + 1) / 2.0 ** 31))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def message_type(m: Any) -> str:
    """``TopicMessageType.parseFromMessageProperty`` of the properties the message will have: a user
    property __SHARDINGKEY (not a system key to the proxy) makes it FIFO as a message group does; a
    priority makes it PRIORITY when it is none of the others (5.4.0)."""
    sp = m.system_properties
    return "TRANSACTION" if sp.message_type == pb.MessageType.TRANSACTION else \
        "DELAY" if sp.HasField("delivery_timestamp") else \
        "FIFO" if sp.message_group or "__SHARDINGKEY" in m.user_properties else \
        "PRIORITY" if sp.HasField("priority") else "NORMAL"


def check_message_type(tc: Any, m: Any) -> None:
    """``ProducerProcessor``: the first message's type against its topic's ``message.type`` (not
    for retry and DLQ topics). A topic without the attribute is MIXED here (the proxy: NORMAL)."""
    if tc.topicName.startswith(("%RETRY%", "%DLQ%")):
        return
    expected = topic_message_type(tc.attributes, "MIXED")
    validate.topic_message_type(expected, message_type(m))


def _user_properties(m: Any) -> dict[str, str]:
    """``SendMessageActivity.buildMessageProperty``'s user part, in its order; sizes are UTF-8 bytes
    and count the tag and the keys with the user properties."""
    sp = m.system_properties
    props: dict[str, str] = {}
    if len(m.user_properties) > MAX_USER_PROPERTIES:
        raise Refused(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {MAX_USER_PROPERTIES}")
    size = 0
    for k, v in m.user_properties.items():
        if k in SYSTEM_PROPERTIES:
            raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {k}")
        if validate.has_control(k):
            raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character")
        if validate.has_control(v):
            raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the value of property cannot contain control character")
        size += validate.utf8_size(k) + validate.utf8_size(v)
        props[k] = v
    validate.tag(sp.tag)
    if sp.tag:
        props["TAGS"] = sp.tag
    size += validate.utf8_size(sp.tag)
    for key in sp.keys:
        validate.message_key(key)
        size += validate.utf8_size(key)
    if size > MAX_USER_PROPERTY_SIZE:
        raise Refused(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                      f"the total size of user property is too large, max is {MAX_USER_PROPERTY_SIZE}")
    if sp.keys:
        props["KEYS"] = " ".join(sp.keys)
    return props


class SendMessageActivity:
    def __init__(self, ctx: ActivityContext) -> None:
        self.ctx = ctx
        self._round_robin = itertools.count()

    def send_message(self, req: Any, ch: LocalChannel,
                     bodies: dict[int, int | bytes] | None = None) -> defer.Deferred[Any]:
        """``bodies``: the bodies left out of ``req``'s decode (index of the message -> the body, or
        its size when over the limit: rmqpy.proxy.grpc.large)."""
        msgs = list(req.messages)
        if not msgs:
            raise Refused(Code.MESSAGE_CORRUPTED, "no message to send")
        if len(msgs) > MAX_BATCH * 32:
            raise Refused(Code.BAD_REQUEST, "too many messages in one request")
        name = validate.check_topic(msgs[0].topic.name)
        # SendMessageActivity.buildMessage: each message in turn, its topic and then its fields; then
        # ProducerProcessor: the type, then the route (an unknown topic's type is UNSPECIFIED)
        tc = self.ctx.broker.topic_config_manager.select(name)
        queue_id = self.queue_of(msgs, tc) if tc is not None else 0
        requests = []
        for i, m in enumerate(msgs):
            if m.topic != msgs[0].topic:
                raise Refused(Code.MESSAGE_CORRUPTED, "topic in message is not same")
            requests.append(self.request_of(m, tc if tc is not None else SimpleNamespace(topicName=name), queue_id,
                                            bodies.get(i) if bodies else None))
        if tc is None and not name.startswith(("%RETRY%", "%DLQ%")):
            validate.topic_message_type("UNSPECIFIED", message_type(msgs[0]))
        tc = self.ctx.topic(msgs[0].topic, write=True)
        check_message_type(tc, msgs[0])
        sends = [self.ctx.invoke(ch, r) for r in requests]
        return defer.gatherResults(sends, consumeErrors=True).addCallback(self.answer, msgs, tc.topicName)

    def queue_of(self, msgs: list[Any], tc: Any) -> int:
        """``SendMessageQueueSelector``: a lone message's group picks its queue by Guava's consistent
        hash of the group's Java hash; anything else takes the next write queue in turn."""
        n = max(tc.writeQueueNums, 1)
        group = msgs[0].system_properties.message_group if len(msgs) == 1 else ""
        if group:
            return consistent_hash(java_string_hash(group), n)
        return next(self._round_robin) % n

    def request_of(self, m: Any, tc: Any, queue_id: int, left_out: int | bytes | None = None) -> RemotingCommand:
        """The SEND_MESSAGE_V2 of one message, its checks in ``SendMessageActivity``'s order;
        ``left_out``: its body when the body was left out of ``m``, or the body's size when over the limit."""
        sp = m.system_properties
        body = bytes(m.body) if left_out is None else b"" if isinstance(left_out, int) else left_out
        size = left_out if isinstance(left_out, int) else len(body)
        if not size:
            raise Refused(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
        limit = self.ctx.broker.store_config.maxMessageSize
        if size > limit or isinstance(left_out, int):  # (one left out under a lower limit, since raised, is lost)
            raise Refused(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {limit}")
        props = _user_properties(m)
        if validate.blank(sp.message_id):
            raise Refused(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
        props["UNIQ_KEY"] = sp.message_id
        if sp.HasField("delivery_timestamp"):
            deliver = duration_ms(sp.delivery_timestamp)
            now = int(time.time() * 1000)
            if deliver - now > MAX_DELAY_MS:
                raise Refused(Code.ILLEGAL_DELIVERY_TIME,
                              f"the max delay time of message is too large, max is {MAX_DELAY_MS}")
            if deliver > now:
                props["TIMER_DELIVER_MS"] = str(deliver)
        if sp.message_type == pb.MessageType.TRANSACTION:
            props["TRAN_MSG"] = "true"
        if sp.HasField("priority"):  # 5.4.0: Message.setPriority, after the delivery time
            if sp.priority < 0:  # the proxy: INTERNAL_SERVER_ERROR with Java's IllegalArgumentException
                raise Refused(Code.BAD_REQUEST, "The priority must be greater than or equal to 0")
            props[PROPERTY_PRIORITY] = str(sp.priority)
        props["PGROUP"] = tc.topicName  # SendMessageActivity: the topic is the producer group (transaction checks)
        if sp.message_group:  # an empty one is none
            validate.message_group(sp.message_group, MAX_MESSAGE_GROUP)
            props["__SHARDINGKEY"] = sp.message_group
        if sp.HasField("trace_context"):
            props["TRACE_CONTEXT"] = sp.trace_context[:1024]
        if sp.born_host:
            props["__BORNHOST"] = sp.born_host[:128]  # MessageConst.PROPERTY_BORN_HOST
        born = duration_ms(sp.born_timestamp) if sp.HasField("born_timestamp") else int(time.time() * 1000)
        props["BORN_TIMESTAMP"] = str(born)
        header = SendMessageRequestHeaderV2(
            a=tc.topicName, b=tc.topicName, c="TBW102", d=4, e=queue_id,
            f=0x4 if props.get("TRAN_MSG") == "true" else 0,  # TRANSACTION_PREPARED_TYPE
            g=born, h=0, i=properties_to_string(props), j=0, k=False, m=False,
            n=self.ctx.broker.broker_config.brokerName)
        return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, body)

    def answer(self, responses: list[RemotingCommand], msgs: list[Any], topic: str) -> Any:
        entries = []
        for resp, m in zip(responses, msgs):
            ext = resp.ext_fields or {}
            # SendMessageActivity.convertToSendMessageResponse: a stored message is OK, "OK"
            entry = spb.SendResultEntry(status=status(Code.OK) if resp.code in _OK_PUT else
                                        remoting_status(resp.code, resp.remark),
                                        message_id=m.system_properties.message_id)
            if resp.code in _OK_PUT:
                entry.offset = int(ext.get("queueOffset", "0") or 0)
                if len(msgs) == 1:  # the broker's handle of a delay message; the proxy sends several as one
                    entry.recall_handle = ext.get("recallHandle") or ""  # batch, which gets none
                if m.system_properties.message_type == pb.MessageType.TRANSACTION:
                    # ProducerProcessor.fillTransactionData: the half message's offsets, for EndTransaction
                    entry.transaction_id = ext.get("transactionId") or m.system_properties.message_id
                    offset_id = ext.get("msgId") or ""
                    if len(offset_id) >= 16 and all(c in _HEX for c in offset_id[-16:]):
                        self.ctx.clients.add_transaction(topic, entry.transaction_id, entry.offset,
                                                         int(offset_id[-16:], 16))
            entries.append(entry)
        codes = {e.status.code for e in entries}
        if len(codes) == 1:
            top = status(entries[0].status.code, entries[0].status.message)
        else:
            top = status(Code.MULTIPLE_RESULTS)
        return spb.SendMessageResponse(status=top, entries=entries)
