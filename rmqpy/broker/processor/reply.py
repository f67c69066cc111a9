"""ReplyMessageProcessor: SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325).

As RocketMQ 4.9's ``ReplyMessageProcessor``: the send checks of SEND_MESSAGE, then the reply
is pushed with a synchronous PUSH_REPLY_MESSAGE_TO_CLIENT (326, 10 s timeout) to the producer
channel registered by heartbeat under clientId = REPLY_TO_CLIENT (PUSH_REPLY_TIME added).
Pushed: SUCCESS with msgId "0", the queue id and queueOffset 0; not pushed: SYSTEM_ERROR with
Java's remark. With ``storeReplyMessageEnable`` (default true) the reply is also stored, and a
successful put fills msgId/queueId/queueOffset from the store (the code stays as the push
decided).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from twisted.internet import defer

from rmqpy.broker.processor.send import SendMessageProcessor, decode_send_header
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import ReplyMessageRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader
from rmqpy.protocol.message import MessageExtBrokerInner, properties_to_string, string_to_properties
from rmqpy.remoting.channel import Channel
from rmqpy.remoting.ratelimit import RateLimitedLogger
from rmqpy.store.message_store import PutMessageResult, put_status_name

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

PROPERTY_MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
PUSH_REPLY_TIMEOUT = 10.0




class ReplyMessageProcessor:
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped
    codes = (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)

    def __init__(self, broker: "Broker") -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker

    @property
    def send_processor(self) -> SendMessageProcessor:
        """The broker's send path, whose header decode, checks and answers a reply shares (Java's
        ReplyMessageProcessor extends AbstractSendMessageProcessor)."""
        return cast(SendMessageProcessor, self.broker.processors["SendMessageProcessor"])

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        return self._process(channel, request, decode_send_header(request))  # 324 long keys, 325 short

    def _process(self, channel: Channel, request: RemotingCommand, h: SendMessageRequestHeader) -> Any:
        sp = self.send_processor
        error = sp.pre_send(channel, request, h)
        if error is not None:
            return error
        b = self.broker
        queue_id = sp.select_queue_id(h)
        props = string_to_properties(h.properties)
        msg = MessageExtBrokerInner(topic=h.topic, queue_id=queue_id, body=request.body or b"", flag=h.flag,
                                    properties=props, properties_string=h.properties or "",
                                    sys_flag=h.sysFlag, born_timestamp=h.bornTimestamp,
                                    born_host=sp.born_host(channel), store_host=b.store_host,
                                    reconsume_times=h.reconsumeTimes or 0)
        d = self._push(channel, h, msg)
        d.addCallback(self._pushed, request, msg, queue_id)
        return d

    def _push(self, channel: Channel, h: SendMessageRequestHeader, msg: MessageExtBrokerInner) -> defer.Deferred:
        """Fires with (ok, remark)."""
        b = self.broker
        born = msg.born_host
        rh = ReplyMessageRequestHeader(
            producerGroup=h.producerGroup, topic=h.topic, defaultTopic=h.defaultTopic,
            defaultTopicQueueNums=h.defaultTopicQueueNums, queueId=h.queueId, sysFlag=h.sysFlag,
            bornTimestamp=h.bornTimestamp, flag=h.flag, properties=h.properties, reconsumeTimes=h.reconsumeTimes,
            unitMode=bool(h.unitMode), bornHost=f"{born[0]}:{born[1]}",
            storeHost=f"{b.store_host[0]}:{b.store_host[1]}", storeTimestamp=b.now_ms())
        sender = msg.get_properties().get(PROPERTY_MESSAGE_REPLY_TO_CLIENT)
        if sender is None:
            self.log.warn("REPLY_TO_CLIENT is null, can not reply message")
            return defer.succeed((False, f"reply message properties[{PROPERTY_MESSAGE_REPLY_TO_CLIENT}] is null"))
        target = b.producer_manager.find_channel(sender)
        if target is None:
            remark = f"push reply message fail, channel of <{sender}> not found."
            self.log.warn("{text}", text=remark)
            return defer.succeed((False, remark))
        push_props = dict(msg.get_properties())
        push_props[PROPERTY_PUSH_REPLY_TIME] = str(b.now_ms())
        rh.properties = properties_to_string(push_props)
        push = RemotingCommand.request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, rh, msg.body)
        fail = f"push reply message to {sender}fail."  # sic, as Java

        def answered(response: RemotingCommand) -> tuple[bool, str | None]:
            if response.code == ResponseCode.SUCCESS:
                return True, None
            self.log.warn("push reply message to <{s}> return fail, response remark: {r}", s=sender,
                          r=response.remark)
            return False, fail

        def failed(f: Any) -> tuple[bool, str]:
            self.log.warn("push reply message to <{s}> fail. {e}", s=sender, e=f.getErrorMessage())
            return False, fail

        try:
            d = target.invoke(push, PUSH_REPLY_TIMEOUT)
        except Exception as exc:  # closed channel
            self.log.warn("push reply message to <{s}> fail. {e}", s=sender, e=exc)
            return defer.succeed((False, fail))
        return d.addCallbacks(answered, failed)

    def _pushed(self, pushed: tuple[bool, str | None], request: RemotingCommand, msg: MessageExtBrokerInner,
                queue_id: int) -> Any:
        ok, remark = pushed
        sp = self.send_processor
        if ok:
            response = sp.response(request, ResponseCode.SUCCESS, None)
            _add_fields(response, SendMessageResponseHeader(msgId="0", queueId=queue_id, queueOffset=0))
        else:
            response = sp.response(request, ResponseCode.SYSTEM_ERROR, remark)
        if not self.broker.broker_config.storeReplyMessageEnable:
            return response

        def stored(result: Any) -> RemotingCommand:
            status = put_status_name(result)
            ar = result.append_message_result if isinstance(result, PutMessageResult) else None
            if status in ("PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE") and ar:
                _add_fields(response, SendMessageResponseHeader(
                    msgId=ar.msg_id, queueId=queue_id, queueOffset=ar.logics_offset))
            else:
                self.log.warn("process reply message, store putMessage failed: {s}", s=status)
            return response

        return self.broker.message_store.put_message(msg).addCallback(stored)


def _add_fields(response: RemotingCommand, header: SendMessageResponseHeader) -> None:
    """``response.ext_fields.update(header.encode())``: the fields already there keep their place."""
    response.ext_fields = {**(response.ext_fields or {}), **header.encode()}
