"""ReceiveMessage (the proxy's ``ReceiveMessageActivity``): a POP_MESSAGE of the broker, its typed
result (:class:`rmqpy.broker.pop.result.PopResult`) turned into the stream of messages, each with its
receipt handle, and a message past its group's attempts forwarded to the DLQ instead."""
from __future__ import annotations

from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from twisted.internet import defer

from rmqpy.broker.pop.receipt import NORMAL_TOPIC, build_receipt, retry_mark
from rmqpy.broker.pop.result import PopResult
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.pop import PopMessageRequestHeader
from rmqpy.protocol.message import decode_records
from rmqpy.proxy.grpc import validate
from rmqpy.proxy.grpc.activity.client import ClientActivity
from rmqpy.proxy.grpc.activity.dlq import ForwardMessageToDLQActivity
from rmqpy.proxy.grpc.context import MAX_BATCH, MAX_INVISIBLE_MS, MIN_INVISIBLE_MS, ActivityContext, duration_ms
from rmqpy.proxy.grpc.convert import Code, remoting_status, status, to_grpc_message
from rmqpy.proxy.grpc.local import LocalChannel
from rmqpy.proxy.grpc.polling import PollingRefused, polling_ms
from rmqpy.proxy.grpc.receipts import ReceiptHandles
from rmqpy.proxy.grpc.validate import Refused
from rmqpy.remoting.ratelimit import RateLimitedLogger

MAX_FILTER_EXPRESSION = 4096


class ReceiveMessageActivity:
    log = RateLimitedLogger()

    def __init__(self, ctx: ActivityContext, receipts: ReceiptHandles, client: ClientActivity,
                 dlq: ForwardMessageToDLQActivity) -> None:
        self.ctx = ctx
        self.receipts = receipts
        self.client = client  # the merged settings of the client
        self.dlq = dlq

    def receive_message(self, req: Any, ch: LocalChannel, remaining_ms: int,
                        client_version: str = "") -> defer.Deferred[list[Any]]:
        # ReceiveMessageActivity's order: the polling time, then topic and group, invisible time, filter
        asked = duration_ms(req.long_polling_timeout) if req.HasField("long_polling_timeout") else None
        request_timeout = duration_ms(ch.settings.request_timeout) if ch.settings is not None else 0
        try:
            polling = polling_ms(asked, remaining_ms, request_timeout, client_version)
        except PollingRefused as exc:
            raise Refused(exc.code, exc.message) from None
        validate.check_topic(req.message_queue.topic.name)  # validateTopicAndConsumerGroup: topic, then group
        group = self.ctx.group(req.group)
        # ConsumerProcessor.popMessage: a larger batch is cut to MAX_MSG_NUMS_FOR_POP_REQUEST, not refused
        batch = min(req.batch_size, MAX_BATCH)  # below 1: the broker's refusal, after its own checks
        bc = self.ctx.broker.broker_config
        renew = bool(req.auto_renew and bc.enableProxyAutoRenew)
        if renew:  # a PushConsumer: the proxy's invisible time, its handles renewed (receipts.py)
            invisible = bc.defaultInvisibleTimeMills
        else:
            invisible = validate.invisible_time(duration_ms(req.invisible_duration), MIN_INVISIBLE_MS,
                                                MAX_INVISIBLE_MS)
        fe = req.filter_expression
        exp_type = "SQL92" if fe.type == pb.FilterType.SQL else "TAG"
        if exp_type == "SQL92" and not fe.expression:  # FilterAPI.build: only a tag expression may be empty
            raise Refused(Code.ILLEGAL_FILTER_EXPRESSION, "Expression can't be null! SQL92")
        exp = fe.expression or "*"
        if len(exp) > MAX_FILTER_EXPRESSION:
            raise Refused(Code.ILLEGAL_FILTER_EXPRESSION, "filter expression is too long")
        tc = self.ctx.topic(req.message_queue.topic, read=True)  # the route: after the request's own checks
        # the merged settings: FIFO from the group's consumeMessageOrderly, attempts from its retryMaxTimes
        settings = self.client.merged_settings(ch) if ch.settings is not None and \
            ch.settings.HasField("subscription") else None
        fifo = bool(settings.subscription.fifo) if settings is not None else self._orderly(group)
        max_attempts = settings.backoff_policy.max_attempts if settings is not None else self._max_attempts(group)
        qid = -1  # as the proxy's ReceiveMessageQueueSelector: the broker's acting queue, every queue of it
        header = PopMessageRequestHeader(consumerGroup=group, topic=tc.topicName, queueId=qid,
                                         maxMsgNums=batch, invisibleTime=invisible, pollTime=polling,
                                         bornTime=self.ctx.broker.now_ms(), initMode=0, expType=exp_type, exp=exp,
                                         order=fifo)
        pop = RemotingCommand.request(RequestCode.POP_MESSAGE, header)
        return self.ctx.invoke(ch, pop).addCallback(self._received, tc.topicName, group, ch, max_attempts, renew)

    def _orderly(self, group: str) -> bool:
        sgc = self.ctx.broker.subscription_group_manager.find(group)
        return bool(sgc.extra.get("consumeMessageOrderly")) if sgc is not None else False

    def _max_attempts(self, group: str) -> int:
        sgc = self.ctx.broker.subscription_group_manager.find(group)
        return (sgc.retryMaxTimes if sgc is not None else 16) + 1

    def _received(self, resp: RemotingCommand, topic: str, group: str, ch: LocalChannel,
                  max_attempts: int, renew: bool = False) -> list[Any]:
        if resp.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
            return [spb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))]
        if resp.code == ResponseCode.POLLING_FULL:
            return [spb.ReceiveMessageResponse(status=status(Code.TOO_MANY_REQUESTS, "polling full"))]
        if resp.code != ResponseCode.SUCCESS:
            return [spb.ReceiveMessageResponse(status=remoting_status(resp.code, resp.remark))]
        result = resp.typed_result
        if not isinstance(result, PopResult):  # the pop processor answers every found pop with its result
            raise RuntimeError("POP_MESSAGE answered SUCCESS without its pop result")
        starts = result.start_offsets()
        counts = result.delivery_counts()  # an orderly pop's deliveries so far
        broker_name = self.ctx.broker.broker_config.brokerName
        out = [spb.ReceiveMessageResponse(status=status(Code.OK))]
        for msg in (m for record in result.records for m in decode_records(record)):
            if counts:  # MQClientAPIImpl.processPopResponse: the count is the message's reconsume times
                mark = retry_mark(msg.topic)
                times = counts.get((mark, msg.queue_id, msg.queue_offset), counts.get((mark, msg.queue_id, None)))
                if times:
                    msg.reconsume_times = times
            ck = msg.properties.get("POP_CK")
            if ck is None:  # a message of the topic itself; pop retry ones carry their receipt
                start = starts.get((NORMAL_TOPIC, msg.queue_id), msg.queue_offset)
                ck = build_receipt(start, result.pop_time, result.invisible_time, result.revive_qid, topic,
                                   broker_name, msg.queue_id, msg.queue_offset)
            handle = f"{ck} {msg.commit_log_offset}"
            msg.properties.pop("POP_CK", None)
            if msg.reconsume_times >= max_attempts:
                # PopMessageResultFilterImpl: TO_DLQ, forwarded (and acked) instead of delivered
                message_id = msg.properties.get("UNIQ_KEY") or msg.msg_id
                defer.maybeDeferred(self.dlq.forward, ch, group, topic, handle, message_id).addErrback(
                    lambda f: self.log.warn("forward to DLQ failed: {e}", e=f.getErrorMessage()))
                continue
            if renew:
                self.receipts.add(ch.client_id, group, topic, msg.properties.get("UNIQ_KEY") or msg.msg_id, handle,
                                  msg.reconsume_times)
            out.append(spb.ReceiveMessageResponse(message=to_grpc_message(msg, handle)))
        if len(out) == 1:
            return [spb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no match message"))]
        return out
