"""ForwardMessageToDeadLetterQueue (the proxy's ``ForwardMessageToDLQActivity``), also what a receive
does with a message past its group's attempts (``PopMessageResultFilterImpl``'s TO_DLQ)."""
from __future__ import annotations

from typing import Any

from rocketmq.grpc_protocol import service_pb2 as spb
from twisted.internet import defer

from rmqpy.broker.pop.receipt import ReceiptError, real_topic
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import ConsumerSendMsgBackRequestHeader
from rmqpy.proxy.grpc import validate
from rmqpy.proxy.grpc.activity.ack import AckMessageActivity
from rmqpy.proxy.grpc.context import ActivityContext
from rmqpy.proxy.grpc.convert import Code, remoting_status
from rmqpy.proxy.grpc.handle import check_live, parse_handle
from rmqpy.proxy.grpc.local import LocalChannel
from rmqpy.proxy.grpc.validate import Refused


class ForwardMessageToDLQActivity:
    def __init__(self, ctx: ActivityContext, ack: AckMessageActivity) -> None:
        self.ctx = ctx
        self.ack = ack

    def forward_message_to_dead_letter_queue(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        """CONSUMER_SEND_MSG_BACK with delay level -1 (straight to %DLQ%group), then the ack of the
        receipt; the send-back's code is the answer."""
        topic = validate.check_topic(req.topic.name)
        group = self.ctx.group(req.group)
        return self.forward(ch, group, topic, req.receipt_handle, req.message_id).addCallback(
            lambda resp: spb.ForwardMessageToDeadLetterQueueResponse(
                status=remoting_status(resp.code, resp.remark)))

    def forward(self, ch: LocalChannel, group: str, topic: str, handle: str,
                message_id: str) -> defer.Deferred[RemotingCommand]:
        """The message of ``handle`` to the group's DLQ, then acked: the send-back's answer."""
        receipt = parse_handle(handle, self.ctx.broker.broker_config.reviveQueueNum).receipt
        parts = handle.split(" ")
        if len(parts) != 9 or not parts[8].lstrip("-").isdigit() or int(parts[8]) < 0:
            raise Refused(Code.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
        check_live(receipt, self.ctx.broker, expiry=False)
        try:
            real = real_topic(topic, group, receipt.retry)
        except ReceiptError as exc:
            raise Refused(Code.INVALID_RECEIPT_HANDLE, str(exc)) from None
        header = ConsumerSendMsgBackRequestHeader(offset=int(parts[8]), group=group, delayLevel=-1,
                                                  originMsgId=message_id[:128], originTopic=real,
                                                  maxReconsumeTimes=0)
        back = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header)

        def sent(resp: RemotingCommand) -> Any:
            if resp.code == ResponseCode.SUCCESS:
                entry = spb.AckMessageEntry(message_id=message_id, receipt_handle=handle)
                self.ack.ack_one(ch, group, topic, entry)
            return resp
        return self.ctx.invoke(ch, back).addCallback(sent)
