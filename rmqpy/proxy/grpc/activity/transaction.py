"""EndTransaction (the proxy's ``EndTransactionActivity``): the half message's offsets from the
transaction data the send or the check-back left, then END_TRANSACTION of the broker."""
from __future__ import annotations

from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from twisted.internet import defer

from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import EndTransactionRequestHeader
from rmqpy.protocol.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE
from rmqpy.proxy.grpc import validate
from rmqpy.proxy.grpc.context import ActivityContext
from rmqpy.proxy.grpc.convert import Code, status
from rmqpy.proxy.grpc.local import LocalChannel
from rmqpy.proxy.grpc.validate import Refused

_RESOLUTIONS = {pb.TransactionResolution.COMMIT: TRANSACTION_COMMIT_TYPE,
                pb.TransactionResolution.ROLLBACK: TRANSACTION_ROLLBACK_TYPE}


class EndTransactionActivity:
    def __init__(self, ctx: ActivityContext) -> None:
        self.ctx = ctx

    def end_transaction(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        """The half message's offsets from the transaction data of (topic as producer group,
        transaction id), then END_TRANSACTION as the proxy sends it."""
        topic = validate.check_topic(req.topic.name)
        if validate.blank(req.transaction_id):
            raise Refused(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        resolution = _RESOLUTIONS.get(req.resolution, 0)
        data = self.ctx.clients.poll_transaction(topic, req.transaction_id)
        if data is None:  # ProxyExceptionCode.TRANSACTION_DATA_NOT_FOUND: no Code of its own
            raise validate.proxy_exception(Code.INTERNAL_SERVER_ERROR, "cannot found transaction data")
        ok = spb.EndTransactionResponse(status=status(Code.OK))
        if resolution == 0:  # UNKNOWN: the broker would log it and not answer; the check-back asks again
            return defer.succeed(ok)
        queue_offset, commit_log_offset = data
        header = EndTransactionRequestHeader(
            topic=topic, producerGroup=topic, tranStateTableOffset=queue_offset,
            commitLogOffset=commit_log_offset, commitOrRollback=resolution,
            fromTransactionCheck=req.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
            msgId=req.message_id, transactionId=req.transaction_id)
        # endTransactionOneway: the answer is OK whatever the broker says (it logs a refusal)
        return self.ctx.invoke(ch, RemotingCommand.request(RequestCode.END_TRANSACTION, header)).addCallback(
            lambda _: ok)
