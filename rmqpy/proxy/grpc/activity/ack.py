"""AckMessage (the proxy's ``AckMessageActivity``): each entry's handle as an ACK_MESSAGE of the broker."""
from __future__ import annotations

from typing import Any

from rocketmq.grpc_protocol import service_pb2 as spb
from twisted.internet import defer
from twisted.python.failure import Failure

from rmqpy.broker.pop.receipt import ReceiptError, real_topic
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.pop import AckMessageRequestHeader
from rmqpy.proxy.grpc import validate
from rmqpy.proxy.grpc.context import ActivityContext
from rmqpy.proxy.grpc.convert import Code, remoting_status, status
from rmqpy.proxy.grpc.handle import BAD_HANDLE, check_live, parse_handle
from rmqpy.proxy.grpc.local import LocalChannel
from rmqpy.proxy.grpc.receipts import ReceiptHandles
from rmqpy.proxy.grpc.validate import Refused

MAX_ENTRIES = 1024


def ack_response(entries: list[Any]) -> Any:
    """``setAckResponseStatus``: the one code (or MULTIPLE_RESULTS), its name the message."""
    codes = {e.status.code for e in entries}
    top = status(entries[0].status.code) if len(codes) == 1 else status(Code.MULTIPLE_RESULTS)
    return spb.AckMessageResponse(status=top, entries=entries)


def _one_response(entry: Any) -> Any:
    return ack_response([entry])


def _first_error(failure: Failure) -> Failure:
    """A failed entry as ``gatherResults`` reports it (FirstError), for one entry as for many."""
    return Failure(defer.FirstError(failure, 0))


class AckMessageActivity:
    def __init__(self, ctx: ActivityContext, receipts: ReceiptHandles) -> None:
        self.ctx = ctx
        self.receipts = receipts

    def ack_message(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        """``AckMessageActivity``: the names checked (not looked up), then each entry's handle."""
        topic = validate.check_topic(req.topic.name)
        group = self.ctx.group(req.group)
        if not req.entries:  # setAckResponseStatus of no result
            raise Refused(Code.INTERNAL_SERVER_ERROR, "ack message result is empty")
        if len(req.entries) > MAX_ENTRIES:
            raise Refused(Code.BAD_REQUEST, "ack entries must be 1 to 1024")
        if len(req.entries) == 1:  # what the clients send (one message an ack): no DeferredList for it
            return self.ack_one(ch, group, topic, req.entries[0]).addCallbacks(_one_response, _first_error)
        acks = [self.ack_one(ch, group, topic, e) for e in req.entries]
        return defer.gatherResults(acks, consumeErrors=True).addCallback(ack_response)

    def ack_one(self, ch: LocalChannel, group: str, topic: str, e: Any) -> defer.Deferred[Any]:
        """One entry (``message_id``, ``receipt_handle``): its result entry, never a failure."""
        revive_queues = self.ctx.broker.broker_config.reviveQueueNum
        entry = spb.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle)
        try:
            first = parse_handle(e.receipt_handle, revive_queues)
            real = real_topic(topic, group, first.receipt.retry)
        except (Refused, ReceiptError) as exc:
            code = exc.code if isinstance(exc, Refused) else Code.INVALID_RECEIPT_HANDLE
            entry.status.CopyFrom(status(code, str(exc)))
            return defer.succeed(entry)

        def ack(current: str) -> defer.Deferred[Any]:
            # the client's handle, read above, or a renewed one: the broker's, well formed
            h = first if current == e.receipt_handle else parse_handle(current, revive_queues)
            try:
                check_live(h.receipt, self.ctx.broker)
            except Refused as exc:
                entry.status.CopyFrom(status(exc.code, exc.message))
                return defer.succeed(entry)
            header = AckMessageRequestHeader(consumerGroup=group, topic=real, queueId=h.receipt.queue_id,
                                             extraInfo=h.extra_info, offset=h.queue_offset)
            return self.ctx.invoke(ch, RemotingCommand.request(RequestCode.ACK_MESSAGE, header)).addCallback(answered)

        def answered(resp: RemotingCommand) -> Any:
            if resp.code == ResponseCode.SUCCESS:
                entry.status.CopyFrom(status(Code.OK))
            else:
                entry.status.CopyFrom(status(Code.INVALID_RECEIPT_HANDLE if resp.code in BAD_HANDLE else
                                             remoting_status(resp.code, resp.remark).code, resp.remark or ""))
            return entry
        # the proxy's removeReceiptHandle: the client's original handle stands for the renewed one
        return self.receipts.remove(ch.client_id, group, e.receipt_handle).addCallback(ack)
