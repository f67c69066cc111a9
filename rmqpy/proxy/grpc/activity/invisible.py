"""ChangeInvisibleDuration (the proxy's ``ChangeInvisibleDurationActivity``) and the renewals of
auto-renewed handles (``ReceiptHandleProcessor``'s listener): CHANGE_MESSAGE_INVISIBLETIME of the
broker, whose answer makes the new handle."""
from __future__ import annotations

from typing import Any

from rocketmq.grpc_protocol import service_pb2 as spb
from twisted.internet import defer

from rmqpy.broker.pop.receipt import ReceiptError, build_receipt, real_topic
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.pop import ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader
from rmqpy.proxy.grpc import validate
from rmqpy.proxy.grpc.context import MAX_INVISIBLE_MS, ActivityContext, duration_ms
from rmqpy.proxy.grpc.convert import Code, remoting_status, status
from rmqpy.proxy.grpc.handle import BAD_HANDLE, check_live, commit_log_offset, parse_handle
from rmqpy.proxy.grpc.local import LocalChannel
from rmqpy.proxy.grpc.receipts import InvalidHandle, ReceiptHandles, Tracked
from rmqpy.proxy.grpc.validate import Refused

#: the broker's answer, and the new handle when the change succeeded
Changed = tuple[RemotingCommand, str | None]


def response(st: Any, req: Any) -> Any:
    """A ChangeInvisibleDuration answer of Status ``st`` that is not a success: since 5.4.0
    (``GrpcMessagingApplication.changeInvisibleDuration``), TOO_MANY_REQUESTS gives the request's handle
    back, so that a client can retry with it."""
    handle = req.receipt_handle if st.code == Code.TOO_MANY_REQUESTS else ""
    return spb.ChangeInvisibleDurationResponse(status=st, receipt_handle=handle)


class ChangeInvisibleDurationActivity:
    def __init__(self, ctx: ActivityContext, receipts: ReceiptHandles) -> None:
        self.ctx = ctx
        self.receipts = receipts

    def change_invisible_duration(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        """``ChangeInvisibleDurationActivity``: names checked (not looked up), the time in [0, max]."""
        topic = validate.check_topic(req.topic.name)
        group = self.ctx.group(req.group)
        invisible = validate.invisible_time(duration_ms(req.invisible_duration), 0, MAX_INVISIBLE_MS)
        self._header(req.receipt_handle, group, topic, invisible)  # refused before anything

        def answered(result: Changed) -> Any:
            resp, handle = result
            if handle is None:
                code = Code.INVALID_RECEIPT_HANDLE if resp.code in BAD_HANDLE else \
                    remoting_status(resp.code, resp.remark).code
                return response(status(code, resp.remark or ""), req)
            return spb.ChangeInvisibleDurationResponse(status=status(Code.OK), receipt_handle=handle)
        # the proxy's removeReceiptHandle: no more renewals, and the renewed handle is the one changed
        return self.receipts.remove(ch.client_id, group, req.receipt_handle).addCallback(
            lambda current: self.change(ch, group, topic, current, invisible)).addCallback(answered)

    def _header(self, handle: str, group: str, topic: str, invisible: int) -> ChangeInvisibleTimeRequestHeader:
        h = parse_handle(handle, self.ctx.broker.broker_config.reviveQueueNum)
        try:
            real = real_topic(topic, group, h.receipt.retry)
        except ReceiptError as exc:
            raise Refused(Code.INVALID_RECEIPT_HANDLE, str(exc)) from None
        return ChangeInvisibleTimeRequestHeader(consumerGroup=group, topic=real, queueId=h.receipt.queue_id,
                                                extraInfo=h.extra_info, offset=h.queue_offset, invisibleTime=invisible)

    def change(self, ch: LocalChannel, group: str, topic: str, handle: str,
               invisible: int) -> defer.Deferred[Changed]:
        """CHANGE_MESSAGE_INVISIBLETIME of ``handle``: the answer, and the new handle if it succeeded."""
        header = self._header(handle, group, topic, invisible)
        receipt, _, queue_offset = parse_handle(handle, self.ctx.broker.broker_config.reviveQueueNum)
        check_live(receipt, self.ctx.broker)
        offset = commit_log_offset(handle)

        def answered(resp: RemotingCommand) -> Changed:
            if resp.code != ResponseCode.SUCCESS:
                return resp, None
            h = resp.decode_header(ChangeInvisibleTimeResponseHeader)
            new = build_receipt(queue_offset, h.popTime, h.invisibleTime, h.reviveQid, header.topic,
                                receipt.broker_name, receipt.queue_id, queue_offset)
            return resp, f"{new} {offset}"
        return self.ctx.invoke(ch, RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header)
                               ).addCallback(answered)

    def renew(self, t: Tracked, invisible: int) -> defer.Deferred[str]:
        """The renewal's CHANGE_MESSAGE_INVISIBLETIME (``ReceiptHandleProcessor``'s listener), on the
        client's channel while it has one: the new handle, or :class:`InvalidHandle` when the broker
        no longer takes the old one."""
        ch = self.ctx.clients.channels.get(t.client_id) or LocalChannel("renew:0", self.ctx.broker.reactor, t.client_id)

        def answered(result: Changed) -> str:
            resp, handle = result
            if handle is not None:
                return handle
            if resp.code in BAD_HANDLE:
                raise InvalidHandle(resp.remark or "")
            raise RuntimeError(f"CHANGE_MESSAGE_INVISIBLETIME answered {resp.code} {resp.remark or ''}"[:200])
        try:
            d = self.change(ch, t.group, t.topic, t.handle, invisible)
        except Refused as exc:
            raise InvalidHandle(exc.message) from None
        return d.addCallback(answered)
