"""PopReviveService: un-acked popped messages come back, through the revive topic (Java's ``PopReviveService``).

Each revive queue is read in order from the offset committed for ``CID_RMQ_SYS_REVIVE_GROUP``
(in consumerOffset.json, as in Java). Checkpoints are kept until their revive time; acks
mark their messages done. Once a checkpoint's revive time is ``ackTimeInterval + 1 s`` behind,
every message of it not acked is put to the pop retry topic with ``reconsumeTimes + 1`` (and
``1ST_POP_TIME``), and the committed revive offset moves up to the oldest checkpoint still
open. After a crash (``kill -9``) the queue is read again from that offset: open checkpoints
and their acks come back from the store, so no popped message is lost; a message revived just
before the crash may be revived twice (at-least-once, as in Java).

Bounded: at most ``popCkMaxBufferSize / reviveQueueNum`` checkpoints are held per revive queue;
reading stops there until some are done, and each tick reads at most ``MAX_READ_PER_TICK``
records per queue.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from twisted.internet.task import LoopingCall

from rmqpy.broker.pop.receipt import PROPERTY_FIRST_POP_TIME, RETRY_GROUP_TOPIC_PREFIX, REVIVE_GROUP, normal_topic
from rmqpy.broker.pop.records import AckMsg, PopCheckPoint, decode_record_body
from rmqpy.protocol.message import MessageExtBrokerInner, decode_record, properties_to_string, tags_string_to_tags_code
from rmqpy.remoting.ratelimit import RateLimitedLogger
from rmqpy.store.results import PutMessageResult

if TYPE_CHECKING:
    from rmqpy.broker.api import PopMetricsHook
    from rmqpy.broker.offsets import ConsumerOffsetManager
    from rmqpy.broker.pop.service import PopService
    from rmqpy.broker.subscription import SubscriptionGroupManager
    from rmqpy.broker.topic import TopicConfigManager
    from rmqpy.store.api import MessageStore

ACK_TIME_INTERVAL_MS = 1000
SECOND_MS = 1000
MAX_READ_PER_TICK = 2048
LOCAL_HOST = "127.0.0.1"


@dataclass
class _Open:
    ck: PopCheckPoint
    revive_offset: int


class ReviveQueue:
    """One revive queue's reader: its open checkpoints by merge key, in revive-offset order."""

    def __init__(self, queue_id: int) -> None:
        self.queue_id = queue_id
        self.next_offset = -1  # -1: not started (read from the committed offset + 1)
        self.open: dict[str, _Open] = {}  # insertion order = revive offset order


class PopReviveService:
    """Takes what it reads and writes as collaborators (as broker/longpolling.py does), not the broker.

    ``store`` is a callable: the broker builds its message store after this service.
    ``interval_ms`` (``reviveInterval``) and ``is_master`` (Java ``shouldRunPopRevive``) are read at
    every tick, so an UPDATE_BROKER_CONFIG of ``reviveInterval`` applies from the next tick as in Java.
    """

    log = RateLimitedLogger()

    def __init__(self, pop: "PopService", *, clock: Any, now_ms: Callable[[], int],
                 store: Callable[[], "MessageStore"], offsets: "ConsumerOffsetManager",
                 topics: "TopicConfigManager", groups: "SubscriptionGroupManager", store_host: tuple[str, int],
                 interval_ms: Callable[[], int], is_master: Callable[[], bool], ck_buffer_size: int) -> None:
        self.log = self.log.on(clock)
        self.pop = pop
        self.clock = clock
        self.now_ms = now_ms
        self.store = store
        self.offsets = offsets
        self.topics = topics
        self.groups = groups
        self.store_host = store_host
        self.interval_ms = interval_ms
        self.is_master = is_master
        self.topic = pop.revive_topic
        self.queues = [ReviveQueue(i) for i in range(pop.revive_queue_num)]
        self.max_open = max(1, ck_buffer_size // pop.revive_queue_num)
        self._loop: LoopingCall | None = None
        self.revived = 0
        self.metrics: PopMetricsHook | None = None  # metricsExporterType=PROM: the broker's metrics hook

    # ------------------------------------------------------------------ service
    def start(self) -> None:
        self._loop = LoopingCall(self._tick)
        self._loop.clock = self.clock
        self._loop.start(self.interval_ms() / 1000.0, now=False)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def _tick(self) -> None:
        try:
            if self.is_master():  # only a master revives (shouldRunPopRevive)
                self.run_once()
        except Exception:
            self.log.failure("pop revive failed")
        if self._loop is not None:
            self._loop.interval = self.interval_ms() / 1000.0

    def run_once(self) -> None:
        for q in self.queues:
            self._read(q)
            self._revive(q)

    def behind(self, q: ReviveQueue) -> tuple[int, int]:
        """(records, ms) queue ``q`` is behind, for ``rocketmq_pop_revive_lag`` / ``_latency`` (Java
        ``getReviveBehindMessages`` / ``getReviveBehindMillis``): records written after the committed
        revive offset, and how long ago the oldest open checkpoint was due; (0, 0) before it has read."""
        if q.next_offset < 0:
            return 0, 0
        top = self.store().get_max_offset_in_queue(self.topic, q.queue_id)
        done = self.offsets.query_offset(REVIVE_GROUP, self.topic, q.queue_id)
        records = max(0, top - (done + 1))
        if not q.open:
            return records, 0
        due = next(iter(q.open.values())).ck.revive_time
        return records, max(0, self.now_ms() - due)

    # ------------------------------------------------------------------ reading
    def _read(self, q: ReviveQueue) -> None:
        store = self.store()
        if q.next_offset < 0:
            committed = self.offsets.query_offset(REVIVE_GROUP, self.topic, q.queue_id)
            q.next_offset = max(committed + 1, store.get_min_offset_in_queue(self.topic, q.queue_id))
        read = 0
        while read < MAX_READ_PER_TICK and len(q.open) < self.max_open:
            got = store.get_message(REVIVE_GROUP, self.topic, q.queue_id, q.next_offset, 32)
            if got is None:
                return
            if not got.message_list:
                if got.status.name in ("OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY") and \
                        got.next_begin_offset > q.next_offset:
                    q.next_offset = got.next_begin_offset
                    continue
                return
            for record, qo in zip(got.message_list, got.message_queue_offsets):
                self._apply(q, bytes(record), qo)
            read += len(got.message_list)
            q.next_offset = got.next_begin_offset

    def _apply(self, q: ReviveQueue, record: bytes, queue_offset: int) -> None:
        try:
            msg = decode_record(record, check_crc=False)
        except Exception:
            self.log.warn("revive queue {q}: unreadable record at {o}", q=q.queue_id, o=queue_offset)
            return
        item = decode_record_body(msg.properties.get("TAGS"), msg.body)
        if self.metrics is not None and isinstance(item, (PopCheckPoint, AckMsg)):
            if isinstance(item, PopCheckPoint):
                self.metrics.revive_get(item.cid, item.topic, q.queue_id, "CK")
            else:
                self.metrics.revive_get(item.consumer_group, item.topic, q.queue_id, "ACK")
        if isinstance(item, PopCheckPoint):
            item.revive_offset = queue_offset
            key = item.merge_key()
            if key not in q.open:
                q.open[key] = _Open(item, queue_offset)
        elif isinstance(item, AckMsg):
            opened = q.open.get(item.merge_key())
            if opened is not None:
                self._mark(opened.ck, item)
            # an ack whose checkpoint is gone (revived, or never written) changes nothing

    @staticmethod
    def _mark(ck: PopCheckPoint, ack: AckMsg) -> None:
        for offset in ack.ack_offsets:
            i = ck.index_of_ack(offset)
            if 0 <= i < 32:
                ck.bit_map |= 1 << i

    # ------------------------------------------------------------------ reviving
    def _revive(self, q: ReviveQueue) -> None:
        now = self.now_ms()
        done: list[str] = []
        for key, opened in q.open.items():
            ck = opened.ck
            if ck.bit_map == (1 << ck.num) - 1:
                done.append(key)
                continue
            if now - ck.revive_time <= ACK_TIME_INTERVAL_MS + SECOND_MS:
                continue
            if self._revive_ck(ck):
                done.append(key)
        for key in done:
            del q.open[key]
        self._commit(q)

    def _commit(self, q: ReviveQueue) -> None:
        if q.open:
            oldest = next(iter(q.open.values())).revive_offset
            offset = oldest - 1
        else:
            offset = q.next_offset - 1
        com = self.offsets
        if offset >= 0 and offset > com.query_offset(REVIVE_GROUP, self.topic, q.queue_id):
            com.commit_offset(LOCAL_HOST, REVIVE_GROUP, self.topic, q.queue_id, offset)

    def _revive_ck(self, ck: PopCheckPoint) -> bool:
        """Put every un-acked message of ``ck`` to the pop retry topic; False to try again later."""
        tcm = self.topics
        if tcm.select(normal_topic(ck.topic, ck.cid)) is None or self.groups.find(ck.cid) is None:
            return True  # Java skips checkpoints of deleted topics and groups
        tc = tcm.select(ck.topic)
        if tc is None or not 0 <= ck.queue_id < tc.readQueueNums:
            return True
        for i in range(ck.num):
            if ck.bit_map & (1 << i):
                continue
            offset = ck.ack_offset_by_index(i)
            got = self.store().get_message(ck.cid, ck.topic, ck.queue_id, offset, 1)
            if got is None or not got.message_list:
                self.log.info("revive: no message {t}:{q}:{o}, skipped", t=ck.topic, q=ck.queue_id, o=offset)
                ck.bit_map |= 1 << i
                continue
            msg = decode_record(bytes(got.message_list[0]), check_crc=False)
            if not self._put_retry(ck, msg):
                return False
            ck.bit_map |= 1 << i
            self.revived += 1
        return True

    def _put_retry(self, ck: PopCheckPoint, msg: Any) -> bool:
        retry = ck.topic if ck.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else self.pop.retry_topic_of(ck.topic, ck.cid)
        props = dict(msg.properties)
        if msg.reconsume_times == 0 or PROPERTY_FIRST_POP_TIME not in props:
            props[PROPERTY_FIRST_POP_TIME] = str(ck.pop_time)
        self.pop.add_retry_topic_if_not_exist(retry, ck.cid)
        inner = MessageExtBrokerInner(
            topic=retry, queue_id=0, body=msg.body or b"", flag=msg.flag, properties=props,
            properties_string=properties_to_string(props), sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp, born_host=self.store_host, store_host=self.store_host,
            reconsume_times=msg.reconsume_times + 1, tags_code=tags_string_to_tags_code(props.get("TAGS")))
        result = self.store().put_message_now(inner)
        if not isinstance(result, PutMessageResult):
            # SYNC_FLUSH: the record is written; the flush finishes on its own
            if self.metrics is not None:
                self.metrics.revive_retry(ck.cid, ck.topic, "PUT_OK")
            return True
        if self.metrics is not None:
            self.metrics.revive_retry(ck.cid, ck.topic, result.put_message_status.name)
        ok = result.put_message_status.name == "PUT_OK"
        if not ok:
            self.log.error("revive to {t} failed: {s}", t=retry, s=result.put_message_status.name)
        return ok
