"""EndTransactionProcessor: END_TRANSACTION (37), normally sent oneway by the producer.

As RocketMQ 4.9's ``EndTransactionProcessor``: a commitOrRollback other than 0, 8 or 12 is
refused as the Java header's ``checkFields`` does when it is decoded (SYSTEM_ERROR, "commitOrRollback
field wrong"); a slave answers SLAVE_NOT_AVAILABLE; a pending state (TRANSACTION_NOT_TYPE) is
logged and gets no answer;
COMMIT and ROLLBACK look the half message up by its commit log offset and check producer
group, queue offset and commit log offset ("Find prepared transaction message failed",
"The producer group wrong", ...: SYSTEM_ERROR); commit puts the real message back into its
topic/queue and, when stored, writes the op record; rollback writes only the op record. As 5.3.3
(not 4.9.7), for every client: a producer's own end of a half message past its
CHECK_IMMUNITY_TIME_IN_SECONDS is refused with ILLEGAL_OPERATION (604), the check settles it. The
responses are only ever seen by a caller that did not send oneway.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from twisted.internet import defer

from rmqpy.broker.transaction import PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS, check_immunity_ms
from rmqpy.protocol import sysflag as SF
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import HeaderError, RemotingCommand
from rmqpy.protocol.headers.broker import EndTransactionRequestHeader
from rmqpy.protocol.message import PROPERTY_PRODUCER_GROUP, PROPERTY_REAL_TOPIC
from rmqpy.remoting.channel import Channel
from rmqpy.remoting.ratelimit import RateLimitedLogger
from rmqpy.store.message_store import put_status_name
from rmqpy.store.role import is_slave

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker, EndTransactionHook


class EndTransactionProcessor:
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped
    codes = (RequestCode.END_TRANSACTION,)

    def __init__(self, broker: "Broker") -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker
        self.end_transaction_hooks: Sequence["EndTransactionHook"] = ()

    def register_end_transaction_hook(self, hooks: Sequence["EndTransactionHook"]) -> None:
        self.end_transaction_hooks = hooks

    def _ended(self, half: Any, topic: str, committed: bool) -> None:
        for hook in self.end_transaction_hooks:
            hook.end_transaction_after(topic, committed, half.born_timestamp)

    @property
    def service(self) -> Any:
        return self.broker.transactional_message_service

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        header = request.decode_header(EndTransactionRequestHeader)
        if header.commitOrRollback not in (SF.TRANSACTION_NOT_TYPE, SF.TRANSACTION_COMMIT_TYPE,
                                           SF.TRANSACTION_ROLLBACK_TYPE):
            # EndTransactionRequestHeader.checkFields, run by Java while decoding: an error answer
            raise HeaderError("commitOrRollback field wrong")
        if is_slave(self.broker.store_config):
            self.log.warn("Message store is slave mode, so end transaction is forbidden. ")
            return request.response(ResponseCode.SLAVE_NOT_AVAILABLE, None)
        state = header.commitOrRollback
        peer = channel.remote_address
        if header.fromTransactionCheck:
            if state == SF.TRANSACTION_NOT_TYPE:
                self.log.warn("Check producer[{p}] transaction state, but it's pending status. RequestHeader: {h} "
                              "Remark: {r}", p=peer, h=header, r=request.remark)
                return None
            if state == SF.TRANSACTION_COMMIT_TYPE:
                self.log.warn("Check producer[{p}] transaction state, the producer commit the message. "
                              "RequestHeader: {h} Remark: {r}", p=peer, h=header, r=request.remark)
            elif state == SF.TRANSACTION_ROLLBACK_TYPE:
                self.log.warn("Check producer[{p}] transaction state, the producer rollback the message. "
                              "RequestHeader: {h} Remark: {r}", p=peer, h=header, r=request.remark)
            else:
                return None
        else:
            if state == SF.TRANSACTION_NOT_TYPE:
                self.log.warn("The producer[{p}] end transaction in sending message,  and it's pending status. "
                              "RequestHeader: {h} Remark: {r}", p=peer, h=header, r=request.remark)
                return None
            if state == SF.TRANSACTION_ROLLBACK_TYPE:
                self.log.warn("The producer[{p}] end transaction in sending message, rollback the message. "
                              "RequestHeader: {h} Remark: {r}", p=peer, h=header, r=request.remark)
            elif state != SF.TRANSACTION_COMMIT_TYPE:
                return None
        svc = self.service
        half = svc.get_half_message(header.commitLogOffset)
        if half is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        if not header.fromTransactionCheck and self._too_late(half):
            self.log.warn("Message {s} fail [producer end]. currentTimeMillis - bornTime > checkImmunityTime, "
                          "msgId={m},commitLogOffset={o}, wait check",
                          s="commit" if state == SF.TRANSACTION_COMMIT_TYPE else "rollback", m=header.msgId,
                          o=header.commitLogOffset)
            # Java sets only the code on a response made without one: its remark stays the default
            return request.response(ResponseCode.ILLEGAL_OPERATION, "not set any response code")
        error = self._check_prepare_message(half, header)
        if error is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, error)
        if state == SF.TRANSACTION_ROLLBACK_TYPE:
            d = svc.delete_prepare_message(half)
            self._ended(half, half.properties.get(PROPERTY_REAL_TOPIC) or half.topic, False)
            return d.addCallback(lambda _: request.response(ResponseCode.SUCCESS, None))
        inner = svc.end_message_transaction(half)
        d = self._send_final_message(inner)
        return d.addCallback(self._after_commit, request, half, inner.topic)

    def _after_commit(self, result: tuple[int, str | None], request: RemotingCommand, half: Any, topic: str) -> Any:
        code, remark = result
        response = request.response(code, remark)
        if code != ResponseCode.SUCCESS:
            return response
        self._ended(half, topic, True)
        return self.service.delete_prepare_message(half).addCallback(lambda _: response)

    def _too_late(self, half: Any) -> bool:
        """5.3.3's ``rejectCommitOrRollback``, for every client generation: a half message that asked for its
        first check after CHECK_IMMUNITY_TIME_IN_SECONDS is no longer ended by its producer once its check
        may have been sent, only through the check (whose answer may be on its way: two commits would store
        the message twice). 5.3.3 counts that time as at least transactionTimeOut here while its check
        service does not, so between the two it takes both ends; rmqpy uses the check's time for both.
        The producer sends END_TRANSACTION oneway and never sees the refusal; the check settles it."""
        if half.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS) is None:
            return False
        immunity = check_immunity_ms(half.properties, self.broker.broker_config.transactionTimeOut)
        return self.broker.now_ms() - half.born_timestamp > immunity

    @staticmethod
    def _check_prepare_message(half: Any, header: EndTransactionRequestHeader) -> str | None:
        if half.properties.get(PROPERTY_PRODUCER_GROUP) != header.producerGroup:
            return "The producer group wrong"
        if half.queue_offset != header.tranStateTableOffset:
            return "The transaction state table offset wrong"
        if half.commit_log_offset != header.commitLogOffset:
            return "The commit log offset wrong"
        return None

    def _send_final_message(self, inner: Any) -> defer.Deferred:
        max_size = self.broker.store_config.maxMessageSize
        failures: dict[str | None, tuple[int, str]] = {
            "CREATE_MAPEDFILE_FAILED": (ResponseCode.SYSTEM_ERROR, "Create mapped file failed."),
            "MESSAGE_ILLEGAL": (ResponseCode.MESSAGE_ILLEGAL,
                                f"The message is illegal, maybe msg body or properties length not matched. "
                                f"msg body length limit {max_size}B, msg properties length limit 32KB."),
            "SERVICE_NOT_AVAILABLE": (ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."),
            "OS_PAGECACHE_BUSY": (ResponseCode.SYSTEM_ERROR, "OS page cache busy, please try another machine"),
            "UNKNOWN_ERROR": (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
        }
        failures["PROPERTIES_SIZE_EXCEEDED"] = failures["MESSAGE_ILLEGAL"]

        def done(result: Any) -> tuple[int, str | None]:
            status = put_status_name(result)
            if status in ("PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"):
                return ResponseCode.SUCCESS, None
            return failures.get(status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))

        refused = self.broker.timer_message_service.transform(inner)
        if refused is not None:
            return defer.succeed(refused)
        return self.broker.message_store.put_message(inner).addCallback(done)
