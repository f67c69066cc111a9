"""The POP family's remoting processors: thin front ends of :class:`rmqpy.broker.pop.service.PopService`.

``PopMessageProcessor`` (POP_MESSAGE, 200050), ``PeekMessageProcessor`` (PEEK_MESSAGE, 200052),
``AckMessageProcessor`` (ACK_MESSAGE 200051, BATCH_ACK_MESSAGE 200151) and
``ChangeInvisibleTimeProcessor`` (CHANGE_MESSAGE_INVISIBLETIME, 200053), ``NotificationProcessor``
(NOTIFICATION, 200054) and ``PollingInfoProcessor`` (POLLING_INFO, 200055) check each request as
5.3.3 does, with its codes and remarks, and more: ``maxMsgNums`` must be 1..32 (Java refuses
only > 32), ``invisibleTime`` 1 ms..``timerMaxDelaySec`` (Java takes any; its timer then refuses
the checkpoint), ``pollTime`` 0..``MAX_POLL_MS``, and a receipt (``extraInfo``) is parsed field
by field (``rmqpy/broker/pop/receipt.py``): a forged one is answered with an error.
"""
from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from rmqpy.broker.filter.message_filter import ConsumerFilterManager, ExpressionMessageFilter
from rmqpy.broker.pop.receipt import POP_ORDER_REVIVE_QUEUE, ReceiptError, parse_receipt, real_topic
from rmqpy.broker.pop.result import PopResult
from rmqpy.broker.pop.service import PopError, PopRequest, PopService
from rmqpy.common.faq import suggest_todo
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.heartbeat import SubscriptionData
from rmqpy.protocol.bodies.topic import PERM_READ
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.errors import BodyError
from rmqpy.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rmqpy.remoting.channel import Channel
from rmqpy.remoting.ratelimit import RateLimitedLogger

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

MAX_POP_NUMS = 32
MAX_POLL_MS = 5 * 60 * 1000  # rmqpy: Java takes any pollTime; clients use 15-20 s
BORN_TIME = "bornTime"


def _slash(addr: str) -> str:
    return addr if addr.startswith("/") else "/" + addr


class _Base:
    log = RateLimitedLogger()

    def __init__(self, broker: "Broker", service: PopService) -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker
        self.service = service

    def _topic_queue(self, request: RemotingCommand, channel: Channel, topic: str, queue_id: int,
                     bad_queue_code: int, allow_all: bool = False) -> RemotingCommand | None:
        tc = self.broker.topic_config_manager.select(topic)
        if tc is None:
            self.log.error("The topic {t} not exist, consumer: {c}", t=topic, c=channel.remote_address)
            return request.response(ResponseCode.TOPIC_NOT_EXIST,
                                    f"topic[{topic}] not exist, apply first please! {suggest_todo()}")
        if queue_id >= tc.readQueueNums or (queue_id < 0 and not (allow_all and queue_id == -1)):
            info = (f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                    f"[{tc.readQueueNums}] consumer:[{_slash(channel.remote_address)}]")
            self.log.warn("{text}", text=info)
            return request.response(bad_queue_code, info)
        return None

    def _group(self, request: RemotingCommand, group: str) -> RemotingCommand | None:
        sgc = self.broker.subscription_group_manager.find(group)
        if sgc is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    f"subscription group [{group}] does not exist, {suggest_todo()}")
        if not sgc.consumeEnable:
            return request.response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        return None

    def _pop_response(self, request: RemotingCommand, result: PopResult) -> RemotingCommand:
        if result.found:
            code, remark = ResponseCode.SUCCESS, "FOUND"
        else:
            code = ResponseCode.POLLING_FULL if result.polling_full else ResponseCode.POLLING_TIMEOUT
            remark = "NO_MESSAGE_IN_QUEUE"
        response = request.response(code, remark, header=pop_response_header(result))
        response.typed_result = result  # for a caller in the process (the gRPC layer): no texts to parse again
        if result.found:
            response.body = b"".join(result.records)
        return response


def pop_response_header(result: PopResult) -> PopMessageResponseHeader:
    """The typed result as the header remoting clients read (Java's ``ExtraInfoUtil`` texts):
    ``startOffsetInfo`` and ``msgOffsetInfo`` one ``mark queueId value`` item per queue, ``;``-separated;
    ``orderCountInfo`` (orderly pops that found something) ``mark qo<queueId>%<offset> count`` per
    message and ``mark queueId count`` per queue."""
    counts = result.order_counts
    return PopMessageResponseHeader(
        popTime=result.pop_time, invisibleTime=result.invisible_time, reviveQid=result.revive_qid,
        restNum=result.rest_num,
        startOffsetInfo=";".join(f"{q.retry} {q.queue_id} {q.start_offset}" for q in result.queues),
        msgOffsetInfo=";".join(f"{q.retry} {q.queue_id} {','.join(str(o) for o in q.offsets)}" for q in result.queues),
        orderCountInfo=";".join(f"{c.retry} {c.queue_id} {c.count}" if c.offset is None else
                                f"{c.retry} qo{c.queue_id}%{c.offset} {c.count}" for c in counts) if counts else None)


def _fill_born_time(broker: "Broker", request: RemotingCommand) -> None:
    """Java adds ``bornTime`` (now) when the client sent none or 0."""
    ext = request.ext_fields if request.ext_fields is not None else {}
    if ext.get(BORN_TIME) in (None, "0"):
        ext[BORN_TIME] = str(broker.now_ms())
        request.ext_fields = ext


class PopMessageProcessor(_Base):
    codes = (RequestCode.POP_MESSAGE,)

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        b = self.broker
        bc = b.broker_config
        _fill_born_time(b, request)
        h = request.decode_header(PopMessageRequestHeader)
        ip = bc.brokerIP1
        if b.now_ms() - h.bornTime - h.pollTime > 500:
            return request.response(ResponseCode.POLLING_TIMEOUT, f"the broker[{ip}] pop message is timeout too much")
        if not bc.brokerPermission & PERM_READ:
            return request.response(ResponseCode.NO_PERMISSION, f"the broker[{ip}] pop message is forbidden")
        if h.maxMsgNums > MAX_POP_NUMS:
            return request.response(ResponseCode.INVALID_PARAMETER,
                                    f"the broker[{ip}] pop message's num is greater than 32")
        if h.maxMsgNums <= 0:
            return request.response(ResponseCode.INVALID_PARAMETER,
                                    f"the broker[{ip}] pop message's num is less than 1")
        max_invisible = b.store_config.timerMaxDelaySec * 1000
        if not 0 < h.invisibleTime <= max_invisible:
            return request.response(ResponseCode.INVALID_PARAMETER,
                                    f"the broker[{ip}] pop message's invisibleTime must be in (0, {max_invisible}]")
        if not 0 <= h.pollTime <= MAX_POLL_MS:
            return request.response(ResponseCode.INVALID_PARAMETER,
                                    f"the broker[{ip}] pop message's pollTime must be in [0, {MAX_POLL_MS}]")
        if h.attemptId is not None and len(h.attemptId) > 255:
            return request.response(ResponseCode.INVALID_PARAMETER, f"the broker[{ip}] pop message's attemptId is too long")
        refused = self._topic_queue(request, channel, h.topic, h.queueId, ResponseCode.INVALID_PARAMETER,
                                    allow_all=True)
        if refused is not None:
            return refused
        tc = b.topic_config_manager.select(h.topic)
        if tc is not None and not tc.perm & PERM_READ:
            return request.response(ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] peeking message is forbidden")
        refused = self._group(request, h.consumerGroup)
        if refused is not None:
            return refused

        message_filter = None
        if h.exp:
            sub = SubscriptionData.build(h.topic, h.exp, h.expType)
            filter_data = None
            if not sub.is_tag:
                filter_data = ConsumerFilterManager.build(h.consumerGroup, h.topic, h.exp, h.expType or "",
                                                          b.now_ms())
                if filter_data is None or not bc.enablePropertyFilter:
                    self.log.warn("Parse the consumer's subscription[{s}] failed, group: {g}", s=h.exp,
                                  g=h.consumerGroup)
                    return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                            "parse the consumer's subscription failed")
            message_filter = ExpressionMessageFilter(sub, filter_data)
        req = PopRequest(group=h.consumerGroup, topic=h.topic, queue_id=h.queueId, max_nums=h.maxMsgNums,
                         invisible_time=h.invisibleTime, poll_ms=h.pollTime, init_mode=h.initMode,
                         message_filter=message_filter, channel=channel, client=channel.remote_address,
                         order=bool(h.order), attempt_id=h.attemptId)
        return self.service.pop(req).addCallback(lambda result: self._pop_response(request, result))


class PeekMessageProcessor(_Base):
    codes = (RequestCode.PEEK_MESSAGE,)

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        h = request.decode_header(PeekMessageRequestHeader)
        ip = self.broker.broker_config.brokerIP1
        if not self.broker.broker_config.brokerPermission & PERM_READ:
            return request.response(ResponseCode.NO_PERMISSION, f"the broker[{ip}] peeking message is forbidden")
        if not 0 < h.maxMsgNums <= MAX_POP_NUMS:
            return request.response(ResponseCode.INVALID_PARAMETER,
                                    f"the broker[{ip}] peek message's num must be in [1, 32]")
        # an illegal queue id: PeekMessageProcessor's INVALID_PARAMETER (PEEK_MESSAGE is 5.x's only)
        refused = self._topic_queue(request, channel, h.topic, h.queueId, ResponseCode.INVALID_PARAMETER,
                                    allow_all=True)
        if refused is None:
            refused = self._group(request, h.consumerGroup)
        if refused is not None:
            return refused
        response = self._pop_response(request, self.service.peek(h.consumerGroup, h.topic, h.queueId, h.maxMsgNums))
        if response.code != ResponseCode.SUCCESS:  # Java's peek: PULL_NOT_FOUND, not a pop's POLLING_TIMEOUT
            response.code = ResponseCode.PULL_NOT_FOUND
        return response


class AckMessageProcessor(_Base):
    codes = (RequestCode.ACK_MESSAGE, RequestCode.BATCH_ACK_MESSAGE)

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        if request.code == RequestCode.BATCH_ACK_MESSAGE:
            return self._batch(channel, request)
        h = request.decode_header(AckMessageRequestHeader)
        refused = self._topic_queue(request, channel, h.topic, h.queueId, ResponseCode.MESSAGE_ILLEGAL)
        if refused is not None:
            return refused
        bad = self.service.check_queue_offset(h.topic, h.queueId, h.offset, inclusive_max=True)
        if bad is not None:
            self.log.warn("{text}", text=bad)
            return request.response(ResponseCode.NO_MESSAGE, bad)
        receipt = parse_receipt(h.extraInfo, self.service.revive_queue_num)
        if receipt.is_order:
            illegal = self.service.ack_orderly(h.consumerGroup, h.topic, h.queueId, h.offset, receipt,
                                               channel.remote_address)
            if illegal is not None:
                self.log.warn("{text}", text=illegal)
                return request.response(ResponseCode.MESSAGE_ILLEGAL, illegal)
            return request.response(ResponseCode.SUCCESS, None)
        return self.service.ack(h.consumerGroup, h.topic, h.queueId, h.offset, receipt).addCallback(
            lambda _: request.response(ResponseCode.SUCCESS, None))

    def _batch(self, channel: Channel, request: RemotingCommand) -> Any:
        try:
            body = fastjson.loads(request.body or b"") if request.body else None
        except ValueError as exc:
            raise BodyError(f"batch ack body: {exc}") from None
        if not isinstance(body, dict) or not isinstance(body.get("acks"), list) or not body["acks"]:
            return request.response(ResponseCode.NO_MESSAGE, None)
        acks = body["acks"]
        if len(acks) > 1024:
            raise BodyError("batch ack body holds more than 1024 acks")
        broker_name = body["brokerName"] if isinstance(body.get("brokerName"), str) else ""
        waits = [self._one_batch(a, broker_name) for a in acks]
        return defer.gatherResults([w for w in waits if w is not None], consumeErrors=True).addCallback(
            lambda _: request.response(ResponseCode.SUCCESS, None))

    def _one_batch(self, a: Any, broker_name: str) -> defer.Deferred | None:
        """One ``BatchAck``: group c, topic t, retry r, startOffset so, queueId q, reviveQueueId rq, popTime pt,
        invisibleTime it, bitSet b (base64 of ``BitSet.toByteArray``)."""
        if not isinstance(a, dict):
            raise BodyError("a batch ack is not an object")

        def num(short: str, long: str, low: int, high: int) -> int:
            v = a.get(short, a.get(long))
            if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
                raise BodyError(f"batch ack field {short} is missing or out of range")
            return v

        group, topic, retry = a.get("c", a.get("consumerGroup")), a.get("t", a.get("topic")), a.get("r", a.get("retry"))
        if not isinstance(group, str) or not isinstance(topic, str) or not isinstance(retry, str):
            raise BodyError("batch ack fields c, t and r must be strings")
        queue_id = num("q", "queueId", 0, (1 << 31) - 1)
        rq = num("rq", "reviveQueueId", 0, (1 << 31) - 1)
        start = num("so", "startOffset", 0, (1 << 63) - 1)
        pop_time = num("pt", "popTime", 0, (1 << 63) - 1)
        invisible = num("it", "invisibleTime", 0, (1 << 63) - 1)
        if rq == POP_ORDER_REVIVE_QUEUE or rq >= self.service.revive_queue_num:
            raise BodyError(f"batch ack names revive queue {rq}")
        bits_b64 = a.get("b", a.get("bitSet"))
        try:
            bits = base64.b64decode(bits_b64, validate=True) if isinstance(bits_b64, str) else b""
        except ValueError:
            raise BodyError("batch ack bit set is not base64") from None
        if len(bits) > 64:
            raise BodyError("batch ack bit set is longer than 512 bits")
        try:
            real = real_topic(topic, group, retry)
        except ReceiptError as exc:
            raise BodyError(str(exc)) from None
        tc = self.broker.topic_config_manager.select(real)
        if tc is None or queue_id >= tc.readQueueNums:
            return None
        store = self.broker.message_store
        low, high = store.get_min_offset_in_queue(real, queue_id), store.get_max_offset_in_queue(real, queue_id)
        value = int.from_bytes(bits, "little")
        offsets = [start + i for i in range(len(bits) * 8) if value >> i & 1 and low <= start + i <= high]
        if not offsets:
            return None
        return self.service.batch_ack(group, real, queue_id, offsets, start, pop_time, invisible, rq, broker_name)


class ChangeInvisibleTimeProcessor(_Base):
    codes = (RequestCode.CHANGE_MESSAGE_INVISIBLETIME,)

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        h = request.decode_header(ChangeInvisibleTimeRequestHeader)
        refused = self._topic_queue(request, channel, h.topic, h.queueId, ResponseCode.MESSAGE_ILLEGAL)
        if refused is not None:
            return refused
        if self.service.check_queue_offset(h.topic, h.queueId, h.offset, inclusive_max=False) is not None:
            return request.response(ResponseCode.NO_MESSAGE, None)
        max_invisible = self.broker.store_config.timerMaxDelaySec * 1000
        if not 0 <= h.invisibleTime <= max_invisible:
            return request.response(ResponseCode.INVALID_PARAMETER,
                                    f"invisibleTime must be in [0, {max_invisible}]")
        receipt = parse_receipt(h.extraInfo, self.service.revive_queue_num)
        def answered(new: tuple[int, int, int]) -> RemotingCommand:
            pop_time, invisible, rqid = new
            return request.response(ResponseCode.SUCCESS, None, header=ChangeInvisibleTimeResponseHeader(
                popTime=pop_time, invisibleTime=invisible, reviveQid=rqid))

        def failed(f: Any) -> RemotingCommand:
            f.trap(PopError)
            return request.response(ResponseCode.SYSTEM_ERROR, f.value.remark)

        if receipt.is_order:
            return answered(self.service.change_invisible_time_orderly(h.consumerGroup, h.topic, h.queueId, h.offset,
                                                                       receipt, h.invisibleTime))
        d = self.service.change_invisible_time(h.consumerGroup, h.topic, h.queueId, h.offset, receipt,
                                               h.invisibleTime)
        return d.addCallbacks(answered, failed)


class NotificationProcessor(_Base):
    codes = (RequestCode.NOTIFICATION,)

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        b = self.broker
        _fill_born_time(b, request)
        h = request.decode_header(NotificationRequestHeader)
        ip = b.broker_config.brokerIP1
        if not b.broker_config.brokerPermission & PERM_READ:
            return request.response(ResponseCode.NO_PERMISSION, f"the broker[{ip}] peeking message is forbidden")
        if not 0 <= h.pollTime <= MAX_POLL_MS:
            return request.response(ResponseCode.INVALID_PARAMETER,
                                    f"the broker[{ip}] notification's pollTime must be in [0, {MAX_POLL_MS}]")
        refused = self._readable(request, channel, h.topic, h.queueId) or self._group(request, h.consumerGroup)
        if refused is not None:
            return refused
        if h.order:
            return request.response(ResponseCode.SYSTEM_ERROR, f"the broker[{ip}] does not support orderly pop yet")
        poll_ms = h.pollTime if b.now_ms() - h.bornTime - h.pollTime <= 500 else 0

        def answer(found: tuple[bool, bool]) -> RemotingCommand:
            has_msg, full = found
            return request.response(ResponseCode.SUCCESS, None,
                                    header=NotificationResponseHeader(hasMsg=has_msg, pollingFull=full or None))
        return self.service.notification(h.consumerGroup, h.topic, h.queueId, poll_ms, channel).addCallback(answer)

    def _readable(self, request: RemotingCommand, channel: Channel, topic: str, queue_id: int) -> RemotingCommand | None:
        refused = self._topic_queue(request, channel, topic, queue_id, ResponseCode.INVALID_PARAMETER,
                                    allow_all=True)
        if refused is None:
            tc = self.broker.topic_config_manager.select(topic)
            if tc is not None and not tc.perm & PERM_READ:
                return request.response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        return refused


class PollingInfoProcessor(NotificationProcessor):
    codes = (RequestCode.POLLING_INFO,)

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        b = self.broker
        h = request.decode_header(PollingInfoRequestHeader)
        if not b.broker_config.brokerPermission & PERM_READ:
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"the broker[{b.broker_config.brokerIP1}] peeking message is forbidden")
        refused = self._readable(request, channel, h.topic, h.queueId) or self._group(request, h.consumerGroup)
        if refused is not None:
            return refused
        return request.response(ResponseCode.SUCCESS, None, header=PollingInfoResponseHeader(
            pollingNum=self.service.polling_num(h.consumerGroup, h.topic, h.queueId)))
