"""RecallMessageProcessor: RECALL_MESSAGE (370), a producer taking back a delay message before its time
with the recall handle its send was answered with (rmqpy/protocol/recall.py).

As 5.3.3's ``RecallMessageProcessor``: with ``recallMessageEnable`` at its default, false, every recall is
refused (NO_PERMISSION "recall failed, operation is forbidden"). Enabled, the request is checked as Java
checks it (a slave, a broker not accepting sends yet or not writable, an unknown topic, a malformed
handle, another topic's or another broker's handle, a time already past or beyond ``timerMaxDelaySec``:
each with Java's code and remark), and a delete marker is stored: a timer message of the handle's topic
with ``TIMER_DEL_UNIQKEY`` = topic + "+" + the message's UNIQ_KEY, due when the message is (the handle's
time), which the timer wheel (rmqpy/broker/timer.py) delivers as nothing, and the message with it. Every
answer carries the broker's region; a stored marker's, the recalled message's id.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from rmqpy.broker.processor.send import PROPERTY_MSG_REGION
from rmqpy.broker.timer import PROPERTY_TIMER_DEL_UNIQKEY, PROPERTY_TIMER_DELIVER_MS, delete_key
from rmqpy.protocol import recall
from rmqpy.protocol.bodies.topic import PERM_WRITE
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import RecallMessageRequestHeader
from rmqpy.protocol.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExtBrokerInner,
    properties_to_string,
    tags_string_to_tags_code,
)
from rmqpy.protocol.priority import java_int
from rmqpy.remoting.channel import Channel
from rmqpy.store.message_store import put_status_name
from rmqpy.store.role import is_slave

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

FORBIDDEN = "recall failed, operation is forbidden"
NOT_AVAILABLE = "recall failed, broker service not available"
RECALL_TAG = "_RECALL_TAG_"
#: what Java answers SUCCESS for: the marker stored, or stored and not yet flushed or replicated
_STORED = {"PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"}


class RecallMessageProcessor:
    codes = (RequestCode.RECALL_MESSAGE,)

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def _answer(self, request: RemotingCommand, code: int, remark: str | None, **fields: str) -> RemotingCommand:
        return request.response(code, remark, ext_fields={PROPERTY_MSG_REGION: self.broker.broker_config.regionId,
                                                          **fields})

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        header = request.decode_header(RecallMessageRequestHeader)
        b = self.broker
        bc = b.broker_config
        if not bc.recallMessageEnable:
            return self._answer(request, ResponseCode.NO_PERMISSION, FORBIDDEN)
        if is_slave(b.store_config):
            return self._answer(request, ResponseCode.SLAVE_NOT_AVAILABLE, NOT_AVAILABLE)
        if b.now_ms() < bc.startAcceptSendRequestTimeStamp or (
                not bc.brokerPermission & PERM_WRITE and not bc.allowRecallWhenBrokerNotWriteable):
            return self._answer(request, ResponseCode.SERVICE_NOT_AVAILABLE, NOT_AVAILABLE)
        if b.topic_config_manager.select(header.topic) is None:
            return self._answer(request, ResponseCode.TOPIC_NOT_EXIST,
                                f"recall failed, the topic[{header.topic}] not exist")
        try:
            handle = recall.decode(header.recallHandle)
        except ValueError as exc:
            return self._answer(request, ResponseCode.ILLEGAL_OPERATION, str(exc))
        if any(c in field for field in (handle.message_id, handle.timestamp) for c in "\x01\x02"):
            # rmqpy's refusal: the marker's properties take these fields, and \x01 / \x02 would split them
            return self._answer(request, ResponseCode.ILLEGAL_OPERATION, recall.INVALID)
        if header.topic != handle.topic:
            return self._answer(request, ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
        if handle.broker_name != bc.brokerName:
            return self._answer(request, ResponseCode.ILLEGAL_OPERATION, NOT_AVAILABLE)
        due = java_int(handle.timestamp, -1, 64)  # NumberUtils.toLong(timestamp, -1)
        left = due - b.now_ms() if due >= 0 else -1
        if left <= 0 or left >= b.store_config.timerMaxDelaySec * 1000:
            return self._answer(request, ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        marker = self._marker(channel, header, handle)
        refused = b.timer_message_service.transform(marker)
        if refused is not None:  # its time passed meanwhile
            return self._answer(request, *refused)
        put = b.message_store.put_message_now(marker)
        d = put if isinstance(put, defer.Deferred) else defer.succeed(put)
        return d.addCallback(self._stored, request, handle)

    def _marker(self, channel: Channel, header: RecallMessageRequestHeader, handle: recall.RecallHandle
                ) -> MessageExtBrokerInner:
        """``RecallMessageProcessor.buildMessage``: the delete marker, a timer message due with the one it
        deletes."""
        now = self.broker.now_ms()
        props = {"TAGS": RECALL_TAG, PROPERTY_TIMER_DEL_UNIQKEY: delete_key(handle.topic, handle.message_id),
                 PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: handle.message_id,
                 PROPERTY_TIMER_DELIVER_MS: handle.timestamp, "BORN_TIMESTAMP": str(now), "TRACE_CONTEXT": ""}
        if header.producerGroup is not None:
            props[PROPERTY_PRODUCER_GROUP] = header.producerGroup
        return MessageExtBrokerInner(handle.topic, 0, b"0", 0, props, properties_to_string(props), 0, now,
                                     (channel.remote_host or "127.0.0.1", channel.remote_port), self.broker.store_host,
                                     tags_code=tags_string_to_tags_code(RECALL_TAG))

    def _stored(self, result: Any, request: RemotingCommand, handle: recall.RecallHandle) -> RemotingCommand:
        if put_status_name(result) in _STORED:  # Java sets the code only: the remark stays createResponseCommand's
            return self._answer(request, ResponseCode.SUCCESS, "not set any response code", msgId=handle.message_id)
        return self._answer(request, ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
