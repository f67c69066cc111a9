"""PopService: POP, ACK and CHANGE_INVISIBLETIME of RocketMQ 5 as broker operations returning Deferreds.

The remoting processors (``rmqpy/broker/processor/pop.py``) decode and check the request and
call these (the gRPC endpoint's requests reach them through those processors too); a pop answers
with a typed ``result.PopResult``. As 5.3.3 does without its
buffer-merge optimisation (``enablePopBufferMerge=false``, Java's default):

* a pop reads from the consumer offset of each queue it visits (the pop retry topic
  ``%RETRY%<group>_<topic>`` first with probability ``popFromRetryProbability``, else after the
  topic if the pop is not full; the queues from a random one up (5.4.0 goes down from a random one,
  ``priorityOrderAsc``: the same spread); a PRIORITY topic's from its last, the highest priority,
  down, and its retry topic after it: 5.4.0's priority mode, with ``popFromRetryProbabilityForPriority``
  0 and the group's ``priority.factor`` attribute, 100 unless set), writes one checkpoint (``ck``) per queue that gave messages
  to the revive topic ``rmq_sys_REVIVE_LOG_<cluster>`` and then moves the consumer offset past
  them: the offset table is the one push and pull consumers of the group use, as in Java;
* an ack writes an ``ack`` record to the checkpoint's revive queue;
* changing the invisible time writes a new one-message checkpoint and acks the old one.

``revive.PopReviveService`` reads the revive queues and puts every message of a checkpoint
not acked by its revive time into the pop retry topic, from where the next pop takes it.

rmqpy differs from Java in one place: Java writes checkpoints and acks as timer messages
that reach the revive queue at their revive time; rmqpy writes them straight to the revive
queue (with the same ``TIMER_DELIVER_MS`` property) and its revive service waits for the
revive time itself, so revive works without the timer wheel.
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from rmqpy.broker.pop.order import ConsumerOrderInfoManager
from rmqpy.broker.pop.polling import HeldPop, PopLongPollingService
from rmqpy.broker.pop.receipt import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    POP_ORDER_REVIVE_QUEUE,
    PROPERTY_POP_CK,
    RETRY_GROUP_TOPIC_PREFIX,
    Receipt,
    build_receipt,
    pop_retry_topic,
    retry_mark,
    revive_topic,
)
from rmqpy.broker.pop.records import AckMsg, PopCheckPoint
from rmqpy.broker.pop.result import PoppedQueue, PopResult
from rmqpy.broker.topic_attributes import topic_message_type
from rmqpy.protocol.bodies.topic import PERM_READ, PERM_WRITE, TopicConfig
from rmqpy.protocol.message import MessageExtBrokerInner, decode_record, encode_record, properties_to_string, tags_string_to_tags_code
from rmqpy.protocol.priority import priority_factor
from rmqpy.remoting.ratelimit import RateLimitedLogger
from rmqpy.store.results import put_status_name

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker, PopMetricsHook

ACK_TIME_INTERVAL_MS = 1000  # PopAckConstants.ackTimeInterval
INIT_MODE_MIN = 0  # ConsumeInitMode.MIN; MAX = 1
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
_OK_PUTS = ("PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE")
# a pop re-reads a queue whose stored offset the store calls wrong at most this often
_RE_READS = 1


@dataclass
class PopRequest:
    """A pop as the service takes it (already checked by the front end)."""
    group: str
    topic: str
    queue_id: int  # -1: every readable queue
    max_nums: int
    invisible_time: int
    poll_ms: int = 0
    init_mode: int = INIT_MODE_MIN
    message_filter: Any = None
    channel: Any = None
    client: str = ""
    order: bool = False
    attempt_id: str | None = None


class PopError(Exception):
    """A refused ack or change of invisible time: ``code`` and ``remark`` for the answer."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class PopService:
    log = RateLimitedLogger()

    def __init__(self, broker: "Broker", polling: PopLongPollingService | None = None) -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker
        bc = broker.broker_config
        self.revive_topic = revive_topic(bc.brokerClusterName)
        self.revive_queue_num = bc.reviveQueueNum  # fixed at start: the revive service reads these queues
        self.polling = polling or PopLongPollingService(broker.reactor, bc.maxPopPollingSize, bc.popPollingSize)
        self.random = random.Random()
        self._ck_counter = itertools.count()
        self.order_info = ConsumerOrderInfoManager(broker.config_dir, broker.now_ms, self._order_queue_exists)
        self.metrics: PopMetricsHook | None = None  # metricsExporterType=PROM: the broker's metrics hook

    def _order_queue_exists(self, topic: str, group: str, queue_id: int) -> bool:
        tc = self.broker.topic_config_manager.select(topic)
        return (tc is not None and queue_id < tc.readQueueNums
                and group in self.broker.subscription_group_manager.table)

    # ------------------------------------------------------------------ topics
    def ensure_revive_topic(self) -> None:
        """Java's TopicConfigManager creates the revive topic at start, ``reviveQueueNum`` queues."""
        tcm = self.broker.topic_config_manager
        n = self.revive_queue_num
        tc = tcm.select(self.revive_topic)
        if tc is None or tc.readQueueNums != n:
            tc = TopicConfig(self.revive_topic)
            tc.readQueueNums = tc.writeQueueNums = n
            tcm.update_topic_config(tc)
        tcm.system_topics.add(self.revive_topic)

    def retry_topic_of(self, topic: str, group: str) -> str:
        return pop_retry_topic(topic, group, self.broker.broker_config.enableRetryTopicV2)

    def add_retry_topic_if_not_exist(self, topic: str, group: str) -> None:
        """Java ``PopReviveService.addRetryTopicIfNotExist``: one queue, read-write, offset 0."""
        tcm = self.broker.topic_config_manager
        if tcm.select(topic) is not None:
            return
        tc = TopicConfig(topic)
        tc.readQueueNums = tc.writeQueueNums = 1
        tc.perm = PERM_READ | PERM_WRITE
        tcm.update_topic_config(tc)
        com = self.broker.consumer_offset_manager
        if com.query_offset(group, topic, 0) < 0:
            com.commit_offset("initPopRetryOffset", group, topic, 0, 0)

    # ------------------------------------------------------------------ pop
    def pop(self, req: PopRequest) -> defer.Deferred[PopResult]:
        """Pop now, or hold the pop up to ``poll_ms`` until a message arrives."""
        result, pending = self._pop_now(req)
        if result.found or req.poll_ms <= 0:
            return self._when_stored(result, pending)
        held = HeldPop(topics=(req.topic, self.retry_topic_of(req.topic, req.group)), channel=req.channel,
                       run=lambda last: self._rerun(req, last), key=(req.topic, req.group, req.queue_id))
        d = self.polling.hold(held, req.poll_ms)
        if d is None:
            result.polling_full = True
            return defer.succeed(result)
        return d

    def _rerun(self, req: PopRequest, last: bool) -> Any:
        result, pending = self._pop_now(req)
        if not result.found and not last:
            return None
        return self._when_stored(result, pending)

    @staticmethod
    def _when_stored(result: PopResult, pending: list[defer.Deferred]) -> defer.Deferred[PopResult]:
        if not pending:
            return defer.succeed(result)
        return defer.gatherResults(pending, consumeErrors=True).addBoth(lambda _: result)

    def _pop_now(self, req: PopRequest) -> tuple[PopResult, list[defer.Deferred]]:
        b = self.broker
        bc = b.broker_config
        pop_time = b.now_ms()
        revive_qid = POP_ORDER_REVIVE_QUEUE if req.order else next(self._ck_counter) % self.revive_queue_num
        result = PopResult(pop_time=pop_time, invisible_time=req.invisible_time, revive_qid=revive_qid)
        if req.order:
            result.order_counts = []
        pending: list[defer.Deferred] = []
        rand_q = self.random.randrange(100)
        tc = b.topic_config_manager.select(req.topic)
        priority_mode = False
        if tc is not None and not req.order and topic_message_type(tc.attributes) == "PRIORITY":
            sgc = b.subscription_group_manager.find(req.group)
            attrs = sgc.extra.get("attributes") if sgc is not None else None
            priority_mode = rand_q < priority_factor(attrs if isinstance(attrs, dict) else None)
        # 5.4.0: popFromRetryProbabilityForPriority (default 0, no setting here) in priority mode
        retry_first = rand_q < (0 if priority_mode else bc.popFromRetryProbability) and not req.order
        if priority_mode:
            rand_q = -1  # _pop_topic: the queues from the last down, the highest priority first
        retry = self.retry_topic_of(req.topic, req.group)
        if retry_first:
            self._pop_topic(req, retry, rand_q, result, pending)
        if tc is not None:
            if req.queue_id < 0:
                self._pop_topic(req, req.topic, rand_q, result, pending)
            else:
                self._pop_queue(req, req.topic, req.queue_id, result, pending)
        if not retry_first and not req.order and len(result.records) < req.max_nums:
            self._pop_topic(req, retry, rand_q, result, pending)
        return result, pending

    def _pop_topic(self, req: PopRequest, topic: str, rand_q: int, result: PopResult,
                   pending: list[defer.Deferred]) -> None:
        tc = self.broker.topic_config_manager.select(topic)
        if tc is None:
            return
        n = tc.readQueueNums
        for i in range(n):  # rand_q -1: priority order, from the last queue down
            self._pop_queue(req, topic, n - 1 - i if rand_q < 0 else (rand_q + i) % n, result, pending)

    def pop_offset(self, group: str, topic: str, queue_id: int, init_mode: int, commit_init: bool) -> int:
        """The consumer offset, or where a new group starts (Java ``getPopOffset``/``getInitOffset``)."""
        b = self.broker
        offset = b.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset >= 0:
            return offset
        store = b.message_store
        if init_mode == INIT_MODE_MIN or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif (b.broker_config.initPopOffsetByCheckMsgInMem and store.get_min_offset_in_queue(topic, queue_id) <= 0
              and store.get_max_offset_in_queue(topic, queue_id) > 0
              and not b.check_in_disk_by_consume_offset(topic, queue_id, 0)):
            offset = 0
        else:
            offset = max(store.get_max_offset_in_queue(topic, queue_id) - 1, 0)
        if commit_init:
            b.consumer_offset_manager.commit_offset("getPopOffset", group, topic, queue_id, offset)
        return offset

    def _pop_queue(self, req: PopRequest, topic: str, queue_id: int, result: PopResult,
                   pending: list[defer.Deferred]) -> None:
        b = self.broker
        store = b.message_store
        want = req.max_nums - len(result.records)
        if req.order and self.order_info.check_block(req.attempt_id, topic, req.group, queue_id, result.pop_time):
            return  # messages of this queue are in flight: FIFO waits for them
        offset = self.pop_offset(req.group, topic, queue_id, req.init_mode, True)
        if want <= 0:
            result.rest_num += max(store.get_max_offset_in_queue(topic, queue_id) - offset, 0)
            return
        got = store.get_message(req.group, topic, queue_id, offset, want, message_filter=req.message_filter)
        for _ in range(_RE_READS):
            if got is None or got.status.name not in ("OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY",
                                                      "OFFSET_FOUND_NULL"):
                break
            # the stored offset is wrong: start again where the store says (Java does the same)
            b.consumer_offset_manager.commit_offset(req.client, req.group, topic, queue_id, got.next_begin_offset)
            offset = got.next_begin_offset
            got = store.get_message(req.group, topic, queue_id, offset, want, message_filter=req.message_filter)
        if got is None:
            result.rest_num += max(store.get_max_offset_in_queue(topic, queue_id) - offset, 0)
            return
        status = got.status.name
        if status == "FOUND" and got.message_list and result.order_counts is not None:
            self.order_info.update(req.attempt_id, topic, req.group, queue_id, result.pop_time, req.invisible_time,
                                   list(got.message_queue_offsets), result.order_counts)
            result.queues.append(PoppedQueue(retry_mark(topic), queue_id, offset, tuple(got.message_queue_offsets)))
            result.records.extend(bytes(r) for r in got.message_list)
        elif status == "FOUND" and got.message_list:
            ck = PopCheckPoint(start_offset=offset, pop_time=result.pop_time, invisible_time=req.invisible_time,
                               bit_map=0, num=len(got.message_list), queue_id=queue_id, topic=topic, cid=req.group,
                               diffs=[qo - offset for qo in got.message_queue_offsets],
                               broker_name=b.broker_config.brokerName)
            put = self.put_counted(self.build_ck_msg(ck, result.revive_qid), "CK", req.group, topic)
            if not isinstance(put, defer.Deferred) and put.put_message_status.name not in _OK_PUTS:
                # no checkpoint, no delivery: Java hands out nothing of a queue whose checkpoint failed
                self.log.error("putting a checkpoint failed: {s}", s=put.put_message_status.name)
                result.rest_num += max(got.max_offset - offset, 0)
                return
            next_offset = got.next_begin_offset
            pending_put = self._after_put(put, lambda r: self._commit_pop_offset(req, topic, queue_id, next_offset))
            if pending_put is not None:
                pending.append(pending_put)
            result.queues.append(PoppedQueue(retry_mark(topic), queue_id, offset, tuple(got.message_queue_offsets)))
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and not b.broker_config.popResponseReturnActualRetryTopic:
                for record, qo in zip(got.message_list, got.message_queue_offsets):
                    result.records.append(self._as_origin_topic(bytes(record), req, offset, result, topic, qo))
            else:
                result.records.extend(bytes(r) for r in got.message_list)
        elif status in ("NO_MATCHED_MESSAGE", "OFFSET_FOUND_NULL", "MESSAGE_WAS_REMOVING",
                        "NO_MATCHED_LOGIC_QUEUE") and got.next_begin_offset > -1:
            self._commit_pop_offset(req, topic, queue_id, got.next_begin_offset)
        result.rest_num += max(got.max_offset - got.next_begin_offset, 0)

    def _commit_pop_offset(self, req: PopRequest, topic: str, queue_id: int, offset: int) -> None:
        com = self.broker.consumer_offset_manager
        if offset > com.query_offset(req.group, topic, queue_id):
            com.commit_offset(req.client or "PopMessage", req.group, topic, queue_id, offset)

    def _as_origin_topic(self, record: bytes, req: PopRequest, ck_offset: int, result: PopResult, topic: str,
                         queue_offset: int) -> bytes:
        """A pop retry message as 5.3.3 answers it: the topic the client asked for, its receipt inside."""
        msg = decode_record(record, check_crc=False)
        msg.properties.setdefault(PROPERTY_POP_CK, build_receipt(
            ck_offset, result.pop_time, req.invisible_time, result.revive_qid, topic,
            self.broker.broker_config.brokerName, msg.queue_id, queue_offset))
        msg.topic = req.topic
        return encode_record(msg)

    # ------------------------------------------------------------------ revive records
    def build_ck_msg(self, ck: PopCheckPoint, revive_qid: int) -> MessageExtBrokerInner:
        uniq = "@".join(str(v) for v in (ck.topic, ck.queue_id, ck.start_offset, ck.cid, ck.pop_time,
                                         ck.broker_name, CK_TAG))
        return self._revive_msg(ck.encode(), revive_qid, CK_TAG, ck.revive_time - ACK_TIME_INTERVAL_MS, uniq)

    def build_ack_msg(self, ack: AckMsg, revive_qid: int, deliver_ms: int) -> MessageExtBrokerInner:
        tag = BATCH_ACK_TAG if ack.batch else ACK_TAG
        offsets = str(ack.ack_offsets) if ack.batch else str(ack.ack_offsets[0])
        uniq = "@".join(str(v) for v in (ack.topic, ack.queue_id, offsets, ack.consumer_group, ack.pop_time,
                                         ack.broker_name, tag))
        return self._revive_msg(ack.encode(), revive_qid, tag, deliver_ms, uniq)

    def _revive_msg(self, body: bytes, revive_qid: int, tag: str, deliver_ms: int,
                    uniq: str) -> MessageExtBrokerInner:
        b = self.broker
        props = {"TAGS": tag, PROPERTY_TIMER_DELIVER_MS: str(deliver_ms), PROPERTY_UNIQ_KEY: uniq}
        return MessageExtBrokerInner(topic=self.revive_topic, queue_id=revive_qid, body=body, properties=props,
                                     properties_string=properties_to_string(props), born_timestamp=b.now_ms(),
                                     born_host=b.store_host, store_host=b.store_host,
                                     tags_code=tags_string_to_tags_code(tag))

    def put_revive(self, msg: MessageExtBrokerInner) -> Any:
        return self.broker.message_store.put_message_now(msg)

    def put_counted(self, msg: MessageExtBrokerInner, kind: str, group: str, topic: str) -> Any:
        """:meth:`put_revive`, counted by ``metrics`` (``rocketmq_pop_revive_in_message_total``) with
        its put status once known: ``kind`` is Java's ``PopReviveMessageType`` (CK or ACK)."""
        put = self.put_revive(msg)
        metrics = self.metrics
        if metrics is None:
            return put
        if isinstance(put, defer.Deferred):
            def count(r: Any) -> Any:
                metrics.revive_put(group, topic, kind, put_status_name(r) or "UNKNOWN_ERROR")
                return r
            return put.addBoth(count)
        metrics.revive_put(group, topic, kind, put_status_name(put) or "UNKNOWN_ERROR")
        return put

    def _after_put(self, put: Any, on_ok: Any) -> defer.Deferred | None:
        """Run ``on_ok`` once ``put`` stored its record; a Deferred while it waits, else None."""
        def done(r: Any) -> bool:
            name = put_status_name(r)
            if name in _OK_PUTS:
                on_ok(r)
                return True
            self.log.error("putting a revive record failed: {r}", r=name)
            return False
        if isinstance(put, defer.Deferred):
            return put.addCallback(done)
        done(put)
        return None

    # ------------------------------------------------------------------ ack
    def check_queue_offset(self, topic: str, queue_id: int, offset: int, inclusive_max: bool) -> str | None:
        store = self.broker.message_store
        low = store.get_min_offset_in_queue(topic, queue_id)
        high = store.get_max_offset_in_queue(topic, queue_id)
        if offset < low or offset > high or (offset == high and not inclusive_max):
            return f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{low}~{high}"
        return None

    def ack(self, group: str, topic: str, queue_id: int, offset: int, receipt: Receipt) -> defer.Deferred[bool]:
        """Write the ack of one popped message (its receipt names its checkpoint)."""
        ack = AckMsg(ack_offsets=[offset], start_offset=receipt.ck_offset, consumer_group=group, topic=topic,
                     queue_id=queue_id, pop_time=receipt.pop_time, broker_name=receipt.broker_name)
        return self._put_ack(ack, receipt.revive_qid, receipt.pop_time + receipt.invisible_time)

    def batch_ack(self, group: str, topic: str, queue_id: int, offsets: list[int], start_offset: int,
                  pop_time: int, invisible_time: int, revive_qid: int, broker_name: str) -> defer.Deferred[bool]:
        ack = AckMsg(ack_offsets=offsets, start_offset=start_offset, consumer_group=group, topic=topic,
                     queue_id=queue_id, pop_time=pop_time, broker_name=broker_name, batch=True)
        return self._put_ack(ack, revive_qid, pop_time + invisible_time)

    def _put_ack(self, ack: AckMsg, revive_qid: int, deliver_ms: int) -> defer.Deferred[bool]:
        put = self.put_counted(self.build_ack_msg(ack, revive_qid, deliver_ms), "ACK", ack.consumer_group, ack.topic)
        waiting = self._after_put(put, lambda r: None)
        if waiting is None:
            return defer.succeed(True)
        return waiting

    def ack_orderly(self, group: str, topic: str, queue_id: int, offset: int, receipt: Receipt,
                    client: str = "") -> str | None:
        """Ack a message of an orderly pop: the consumer offset moves to the batch's first un-acked message.
        None when done, else the remark of a MESSAGE_ILLEGAL answer."""
        com = self.broker.consumer_offset_manager
        old = com.query_offset(group, topic, queue_id)
        if offset < old:
            return None
        next_offset = self.order_info.commit_and_next(topic, group, queue_id, offset, receipt.pop_time)
        if next_offset > -1:
            com.commit_offset(client or "PopAck", group, topic, queue_id, next_offset)
            if not self.order_info.check_block(None, topic, group, queue_id, self.broker.now_ms()):
                self.polling.notify(topic)
            return None
        if next_offset == -1:
            return f"offset is illegal, key:{topic}@{group}@{queue_id}, old:{old}, commit:{offset}, next:{next_offset}"
        return None

    def change_invisible_time_orderly(self, group: str, topic: str, queue_id: int, offset: int, receipt: Receipt,
                                      invisible_time: int) -> tuple[int, int, int]:
        """(popTime, invisibleTime, reviveQid) of the receipt after moving the message's visibility."""
        if offset < self.broker.consumer_offset_manager.query_offset(group, topic, queue_id):
            return (0, 0, 0)
        next_visible = self.broker.now_ms() + invisible_time
        self.order_info.update_next_visible_time(topic, group, queue_id, offset, receipt.pop_time, next_visible)
        return (receipt.pop_time, next_visible - receipt.pop_time, receipt.revive_qid)

    # ------------------------------------------------------------------ change invisible time
    def change_invisible_time(self, group: str, topic: str, queue_id: int, offset: int, receipt: Receipt,
                              invisible_time: int) -> defer.Deferred[tuple[int, int, int]]:
        """A new checkpoint for the message, then the ack of the old one; fires (popTime, invisibleTime,
        reviveQid) for the new receipt, or fails with :class:`PopError`."""
        now = self.broker.now_ms()
        ck = PopCheckPoint(start_offset=offset, pop_time=now, invisible_time=invisible_time, bit_map=0, num=1,
                           queue_id=queue_id, topic=topic, cid=group, diffs=[0], broker_name=receipt.broker_name)
        stored: list[bool] = []
        put = self.put_counted(self.build_ck_msg(ck, receipt.revive_qid), "CK", group, topic)
        waiting = self._after_put(put, lambda r: stored.append(True))
        first = waiting if waiting is not None else defer.succeed(bool(stored))

        def then_ack(ok: bool) -> Any:
            if not ok:
                raise PopError(1, "append checkpoint failed")
            return self.ack(group, topic, queue_id, offset, receipt).addCallback(
                lambda _: (now, invisible_time, receipt.revive_qid))
        return first.addCallback(then_ack)

    # ------------------------------------------------------------------ peek
    def peek(self, group: str, topic: str, queue_id: int, max_nums: int) -> PopResult:
        """Messages from the consumer offset on, without checkpoint or offset change."""
        result = PopResult(pop_time=self.broker.now_ms())
        tc = self.broker.topic_config_manager.select(topic)
        if tc is None:
            return result
        queues = range(tc.readQueueNums) if queue_id < 0 else [queue_id]
        for q in queues:
            want = max_nums - len(result.records)
            if want <= 0:
                break
            offset = self.pop_offset(group, topic, q, INIT_MODE_MIN, False)
            got = self.broker.message_store.get_message(group, topic, q, offset, want)
            if got is None:
                continue
            result.records.extend(bytes(r) for r in got.message_list)
            result.rest_num += max(got.max_offset - got.next_begin_offset, 0)
        return result

    # ------------------------------------------------------------------ notification
    def has_message(self, group: str, topic: str, queue_id: int) -> bool:
        """Whether a pop would find something (Java ``NotificationProcessor.hasMsgFromQueue``), retry topic too."""
        store = self.broker.message_store
        tcm = self.broker.topic_config_manager

        def queue_has(t: str, q: int) -> bool:
            offset = self.broker.consumer_offset_manager.query_offset(group, t, q)
            if offset < 0:
                offset = store.get_min_offset_in_queue(t, q)
            return store.get_max_offset_in_queue(t, q) - offset > 0

        def topic_has(t: str) -> bool:
            tc = tcm.select(t)
            return tc is not None and any(queue_has(t, q) for q in range(tc.readQueueNums))

        if topic_has(self.retry_topic_of(topic, group)):
            return True
        return topic_has(topic) if queue_id < 0 else queue_has(topic, queue_id)

    def notification(self, group: str, topic: str, queue_id: int, poll_ms: int,
                     channel: Any = None) -> defer.Deferred[tuple[bool, bool]]:
        """Fires (hasMsg, pollingFull): at once when there is a message, else when one arrives or at ``poll_ms``."""
        found = self.has_message(group, topic, queue_id)
        if found or poll_ms <= 0:
            return defer.succeed((found, False))

        def run(last: bool) -> Any:
            found = self.has_message(group, topic, queue_id)
            return (found, False) if found or last else None
        held = HeldPop(topics=(topic, self.retry_topic_of(topic, group)), channel=channel, run=run,
                       key=(topic, group, queue_id), takes=False)
        d = self.polling.hold(held, poll_ms)
        return d if d is not None else defer.succeed((False, True))

    def polling_num(self, group: str, topic: str, queue_id: int) -> int:
        return self.polling.polling_num(topic, group, queue_id)

    def notify_arrival(self, topic: str) -> None:
        self.polling.notify(topic)

    def is_holding(self, topic: str) -> bool:
        """Whether a pop waits on the topic (else :meth:`notify_arrival` does nothing)."""
        return self.polling.is_holding(topic)
