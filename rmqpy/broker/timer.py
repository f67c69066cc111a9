"""TimerMessageService: RocketMQ 5 timer messages (TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS).

:meth:`transform` is called before a (non-prepared) message is stored. As 5.x
``HookUtils.transformTimerMessage``: a message with a delay level keeps its level and loses
its TIMER_* properties; otherwise the deliver time is TIMER_DELAY_SEC*1000 or TIMER_DELAY_MS
after now, or TIMER_DELIVER_MS; a bad number, or a deliver time more than
``timerMaxDelaySec`` ahead, is refused with MESSAGE_ILLEGAL and Java's remark; a future
deliver time is rounded down to ``timerPrecisionMs`` (one precision earlier when exact) and
written to TIMER_OUT_MS with REAL_TOPIC/REAL_QID, and the message is parked in
``rmq_sys_wheel_timer`` queue 0; a past one is delivered at once.

The service keeps the parked messages in a heap by due time (TIMER_OUT_MS + precision: as
Java's wheel, never before the asked time) and re-puts each, when due, into its real
topic/queue. Progress (the first not-delivered queue offset and the delivered ones above it)
is kept in ``config/timerProgress.json``, so a restart re-reads the timer queue and delivers
what is still pending, once.

A recall (rmqpy/broker/processor/recall.py) parks a delete marker: a timer message with
TIMER_DEL_UNIQKEY (``topic+UNIQ_KEY``), due with the message it names. The messages due at one
time are taken together, the markers first: a marker is delivered as nothing and its key kept for
:data:`DELETED_KEPT_MS`, and a message whose key was deleted is not delivered (Java's dequeue with
its delete list).

A master tells its slaves how far delivery has come (:meth:`checkpoint`, GET_TIMER_CHECK_POINT;
rmqpy/broker/timer_checkpoint.py says what each field means here); a slave keeps its master's
answer (:meth:`adopt`, in the same file), and when it is promoted it takes every timer message due
before the master's ``lastReadTimeMs`` as delivered, as a promoted Java slave does.

Time comes from the controller's reactor (``task.Clock`` in tests).
"""
from __future__ import annotations

import heapq
import json
import os
from typing import TYPE_CHECKING, Any

from rmqpy.broker.timer_checkpoint import TimerCheckpoint
from rmqpy.protocol import sysflag as SF
from rmqpy.protocol.bodies.topic import PERM_READ, PERM_WRITE, DataVersion
from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    MessageExtBrokerInner,
    properties_to_string,
    tags_string_to_tags_code,
)
from rmqpy.remoting.ratelimit import RateLimitedLogger
from rmqpy.store.message_store import put_status_name
from rmqpy.store.role import is_slave

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker, TimerMetricsHook

TIMER_TOPIC = "rmq_sys_wheel_timer"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
RETRY_LATER = 1.0
PERSIST_DELAY = 0.5
#: how long a recall's delete key is kept after its marker came due (ms): the message it deletes is due
#: with it, or within a few RETRY_LATER retries of a put that failed
DELETED_KEPT_MS = 60_000


def delete_key(real_topic: str, uniq_key: str) -> str:
    """``TimerMessageStore.buildDeleteKey``: what a recall's marker names the message it deletes by."""
    return f"{real_topic}+{uniq_key}"
#: Java ``TimerMetrics.timerDist``: the bounds (s) of ``rocketmq_timer_message_snapshot``
TIMER_DIST_S = (5, 60, 300, 900, 3600, 14400, 28800, 86400)


class TimerMessageService:
    log = RateLimitedLogger()  # lines a client's messages can cause: rate-limited per call site, values clipped

    def __init__(self, broker: "Broker") -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker
        self.heap: list[tuple[int, int]] = []  # (due ms, timer queue offset)
        self.done: set[int] = set()
        self.progress = 0  # every offset below is delivered
        self._scanned = 0
        self._call: Any = None
        self._persist_call: Any = None
        self._inflight: set[int] = set()
        self.deleted: dict[str, int] = {}  # a recall's delete key -> when its marker came due (ms)
        self._listening = False
        self.started = False
        self.parked: dict[int, tuple[str, int]] = {}  # timer queue offset -> (real topic, TIMER_OUT_MS), not delivered yet
        self.read_time_ms: int | None = None  # a slave's: the master delivered every timer due before it
        self.version = DataVersion(timestamp=0)  # moves when the checkpoint does (Java updateDateVersion)
        self._told: tuple[int, int] | None = None  # (lastReadTimeMs, queue offset) last told
        self._loaded = False
        self.metrics: TimerMetricsHook | None = None  # metricsExporterType=PROM: the broker's metrics hook

    @property
    def store_config(self) -> Any:
        return self.broker.store_config

    @property
    def path(self) -> str:
        return os.path.join(self.broker.config_dir, "timerProgress.json")

    # ------------------------------------------------------------------ put-time hook
    def illegal_remark(self) -> str:
        return (f"timer message illegal, the delay time should not be bigger than the max delay "
                f"{self.store_config.timerMaxDelaySec * 1000}ms; or if set del msg, the delay time should be "
                f"bigger than the current time")

    def transform(self, msg: MessageExtBrokerInner) -> tuple[int, str] | None:
        """Park a timer message (in place); None when it may be stored, else (code, remark)."""
        props = msg.get_properties()
        if (PROPERTY_DELAY_TIME_LEVEL not in props and PROPERTY_TIMER_DELIVER_MS not in props
                and PROPERTY_TIMER_DELAY_SEC not in props and PROPERTY_TIMER_DELAY_MS not in props):
            return None  # most messages: neither a delay level nor a timer property, nothing to do
        tran = SF.transaction_value(msg.sys_flag)
        if tran not in (SF.TRANSACTION_NOT_TYPE, SF.TRANSACTION_COMMIT_TYPE):
            return None
        keys = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)
        try:
            level = int(props.get(PROPERTY_DELAY_TIME_LEVEL) or 0)
        except ValueError:
            level = 0
        if level > 0:
            if any(k in props for k in keys):
                for k in keys:
                    props.pop(k, None)
                self._restring(msg)
            return None
        if msg.topic == TIMER_TOPIC or PROPERTY_TIMER_OUT_MS in props or not any(k in props for k in keys):
            return None
        cfg = self.store_config
        if not cfg.timerWheelEnable:
            return (ResponseCode.SYSTEM_ERROR,
                    f"accurate timer message is not enabled, timerWheelEnable is {str(cfg.timerWheelEnable).lower()}")
        now = self.broker.now_ms()
        try:
            if props.get(PROPERTY_TIMER_DELAY_SEC) is not None:
                deliver = now + int(props[PROPERTY_TIMER_DELAY_SEC]) * 1000
            elif props.get(PROPERTY_TIMER_DELAY_MS) is not None:
                deliver = now + int(props[PROPERTY_TIMER_DELAY_MS])
            else:
                deliver = int(props[PROPERTY_TIMER_DELIVER_MS])
        except (TypeError, ValueError):
            return ResponseCode.MESSAGE_ILLEGAL, self.illegal_remark()
        if deliver > now:
            if deliver - now > cfg.timerMaxDelaySec * 1000:
                return ResponseCode.MESSAGE_ILLEGAL, self.illegal_remark()
            precision = max(1, cfg.timerPrecisionMs)
            deliver = deliver - precision if deliver % precision == 0 else deliver // precision * precision
            props[PROPERTY_TIMER_OUT_MS] = str(deliver)
            props[PROPERTY_REAL_TOPIC] = msg.topic
            props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
            self.broker.topic_config_manager.create_topic_in_send_message_back_method(TIMER_TOPIC, 1,
                                                                                      PERM_READ | PERM_WRITE)
            msg.topic = TIMER_TOPIC
            msg.queue_id = 0
            self._restring(msg)
        elif PROPERTY_TIMER_DEL_UNIQKEY in props:
            return ResponseCode.MESSAGE_ILLEGAL, self.illegal_remark()
        return None

    @staticmethod
    def _restring(msg: MessageExtBrokerInner) -> None:
        props = dict(msg.get_properties())
        props.pop(PROPERTY_WAIT_STORE_MSG_OK, None)  # as send.py: WAIT is not stored
        msg.properties_string = properties_to_string(props)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self.started or is_slave(self.store_config):
            return
        self.started = True
        self._ensure_loaded()
        # what an earlier term as master parked is read again below: kept, it was delivered twice
        self.heap.clear()
        self.parked.clear()
        store = self.broker.message_store
        end = store.get_max_offset_in_queue(TIMER_TOPIC, 0)
        self.progress = max(self.progress, store.get_min_offset_in_queue(TIMER_TOPIC, 0))
        precision = max(1, self.store_config.timerPrecisionMs)
        skipped = 0
        for offset in range(self.progress, end):
            if offset not in self.done:
                msg = self._message(offset)
                due = self._due(msg.properties) if msg is not None else None
                if due is not None and (self.read_time_ms is None or due - precision >= self.read_time_ms):
                    heapq.heappush(self.heap, (due, offset))
                    self.parked[offset] = (msg.properties.get(PROPERTY_REAL_TOPIC) or "", due - precision)
                else:  # unreadable, or delivered by the master this broker was the slave of
                    skipped += due is not None
                    self.done.add(offset)
        if self.read_time_ms is not None:
            self.log.info("timer delivery resumes at {t} ms, the last master's; {n} timer messages due before it "
                          "were delivered there", t=self.read_time_ms, n=skipped)
            self.read_time_ms = None
            self._advance()
            self.persist()
        self._scanned = end
        if not self._listening:
            store.add_arrive_listener(self._arrived, batch=self._arrived_batch)
            self._listening = True
        self._advance()
        self._arm()

    def stop(self) -> None:
        self.started = False
        for call in (self._call, self._persist_call):
            if call is not None and call.active():
                call.cancel()
        self._call = self._persist_call = None
        self.persist()

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self._loaded = True
            self._load()

    def _load(self) -> None:
        try:
            with open(self.path) as fh:
                data = json.load(fh)
            self.progress = int(data.get("offset", 0))
            self.done = {int(x) for x in data.get("done", []) if int(x) >= self.progress}
            read = data.get("readTimeMs")
            self.read_time_ms = int(read) if read is not None else None
        except FileNotFoundError:
            pass
        except (OSError, ValueError, TypeError, AttributeError):
            self.log.failure("cannot read {p}; timer messages are delivered from the start", p=self.path)

    def persist(self) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as fh:
            state: dict[str, Any] = {"offset": self.progress, "done": sorted(self.done)}
            if self.read_time_ms is not None:
                state["readTimeMs"] = self.read_time_ms
            json.dump(state, fh)
        os.replace(tmp, self.path)

    def _persist_soon(self) -> None:
        if self._persist_call is None or not self._persist_call.active():
            self._persist_call = self.broker.reactor.callLater(PERSIST_DELAY, self.persist)

    # ------------------------------------------------------------------ metrics
    def gauges(self) -> dict[str, Any]:
        """Java ``TimerMessageStore``'s gauges as rmqpy's heap has them: messages written to the timer
        queue and not parked yet (enqueue lag) and since when (ms); due and not delivered yet (dequeue
        lag) and since when (ms); parked per real topic; and parked per due bound of ``TIMER_DIST_S``."""
        now = self.broker.now_ms()
        store = self.broker.message_store
        enqueue_lag = max(0, store.get_max_offset_in_queue(TIMER_TOPIC, 0) - self._scanned) if self.started else 0
        enqueue_ms = 0
        if enqueue_lag:
            ts = store.get_message_store_timestamp(TIMER_TOPIC, 0, self._scanned)
            enqueue_ms = max(0, now - ts) if ts > 0 else 0
        due = [d for d, o in self.heap if d <= now and o not in self.done]
        timing = self._parked_per_topic()
        snapshot = [0] * len(TIMER_DIST_S)
        for d, o in self.heap:
            ahead = d - now
            if ahead >= 0 and o not in self.done:
                for i, bound in enumerate(TIMER_DIST_S):
                    if ahead < bound * 1000:
                        snapshot[i] += 1
                        break
        return {"enqueue_lag": enqueue_lag, "enqueue_latency_ms": enqueue_ms,
                "dequeue_lag": len(due) + len(self._inflight), "dequeue_latency_ms": now - min(due) if due else 0,
                "timing": timing, "snapshot": dict(zip(TIMER_DIST_S, snapshot))}

    # ------------------------------------------------------------------ what a slave is told
    def checkpoint(self) -> TimerCheckpoint:
        """GET_TIMER_CHECK_POINT's answer (rmqpy/broker/timer_checkpoint.py). A master: the earliest
        TIMER_OUT_MS still parked (in flight included), or now rounded down to the precision when
        nothing is; both queue offsets are what it has read of the timer queue. A slave tells what it
        last heard from its own master, as a Java slave does."""
        if not self.started:
            read = self.read_time_ms or 0
            return TimerCheckpoint(read, 0, 0, 0, self.version)
        precision = max(1, self.store_config.timerPrecisionMs)
        while self.heap and self.heap[0][1] in self.done:  # delivered meanwhile: not a pending time
            heapq.heappop(self.heap)
        pending = [self.parked[o][1] for o in self._inflight if o in self.parked]
        if self.heap:
            pending.append(self.heap[0][0] - precision)
        read = min(pending) if pending else self.broker.now_ms() // precision * precision
        if self._told != (read, self._scanned):
            self._told = (read, self._scanned)
            self.version.next_version(self.broker.now_ms())
        return TimerCheckpoint(read, 0, self._scanned, self._scanned, self.version)

    def adopt(self, master: TimerCheckpoint) -> None:
        """A slave keeps its master's checkpoint (Java ``syncTimerCheckPoint``): its
        ``lastReadTimeMs`` decides, on promotion, which timer messages were delivered already."""
        if self.started or self.read_time_ms == master.last_read_time_ms:
            return
        self._ensure_loaded()
        self.read_time_ms = master.last_read_time_ms
        self.version = master.data_version
        self._persist_soon()

    def timing_counts(self) -> dict[str, tuple[int, int]]:
        """GET_TIMER_METRICS's counts: messages parked per real topic, with the time they were counted."""
        now = self.broker.now_ms()
        return {topic: (n, now) for topic, n in self._parked_per_topic().items()}

    def _parked_per_topic(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for topic, _out in self.parked.values():
            counts[topic] = counts.get(topic, 0) + 1
        return counts

    # ------------------------------------------------------------------ queue
    def _due(self, props: Any) -> int | None:
        try:
            return int(props.get(PROPERTY_TIMER_OUT_MS)) + max(1, self.store_config.timerPrecisionMs)
        except (TypeError, ValueError):
            return None

    def _message(self, offset: int) -> Any:
        store = self.broker.message_store
        cq = store.find_consume_queue(TIMER_TOPIC, 0, create=False)
        unit = cq.get_unit(offset) if cq is not None else None
        return store.look_message_by_offset(unit[0], unit[1]) if unit is not None else None

    def _arrived_batch(self, topic: str, queue_id: int, store_ts: int, records: Any) -> None:
        """:meth:`_arrived` of each record of a batch put (none unless it is of the timer topic)."""
        if topic != TIMER_TOPIC or not self.started:
            return
        for _phy, _size, tags_code, queue_offset, props in records:
            self._arrived(topic, queue_id, queue_offset + 1, tags_code, store_ts, props)

    def _arrived(self, topic: str, queue_id: int, logic_offset: int, tags_code: Any = None, store_ts: int = 0,
                 properties: Any = None, *rest: Any) -> None:
        if topic != TIMER_TOPIC or not self.started:
            return
        offset = logic_offset - 1
        if offset < self._scanned:
            return
        self._scanned = offset + 1
        props = properties or {}
        due = self._due(props)
        if due is None:
            self.done.add(offset)
            return
        heapq.heappush(self.heap, (due, offset))
        topic = props.get(PROPERTY_REAL_TOPIC) or ""
        out_ms = due - max(1, self.store_config.timerPrecisionMs)
        self.parked[offset] = (topic, out_ms)
        if self.metrics is not None:  # Java: TIMER_OUT_MS - born time, in s; here the store time (the listener's)
            self.metrics.timer_enqueue(topic, max(0, (out_ms - store_ts) // 1000))
        self._arm()

    def _arm(self) -> None:
        if not self.started or not self.heap:
            return
        delay = max(0.0, (self.heap[0][0] - self.broker.now_ms()) / 1000.0)
        if self._call is not None and self._call.active():
            if self._call.getTime() <= self.broker.reactor.seconds() + delay:
                return
            self._call.cancel()
        self._call = self.broker.reactor.callLater(delay, self._run)

    def _run(self) -> None:
        self._call = None
        now = self.broker.now_ms()
        due: list[tuple[int, Any]] = []
        while self.started and self.heap and self.heap[0][0] <= now:
            _, offset = heapq.heappop(self.heap)
            if offset not in self.done and offset not in self._inflight:
                due.append((offset, self._message(offset)))
        # a recall's delete marker (TIMER_DEL_UNIQKEY) is due with the message it deletes (the same
        # TIMER_OUT_MS): the markers first, each delivered as nothing, then the rest but the deleted
        for offset, msg in due:
            key = (msg.properties or {}).get(PROPERTY_TIMER_DEL_UNIQKEY) if msg is not None else None
            if key is not None:
                self.deleted[key] = now
                self._mark_done(offset)
        for offset, msg in due:
            if offset in self.done:
                continue
            props = (msg.properties or {}) if msg is not None else {}
            if self.deleted and delete_key(props.get(PROPERTY_REAL_TOPIC) or "",
                                           props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or "") in self.deleted:
                self.log.info("timer message at offset {o} recalled; not delivered", o=offset)
                self._mark_done(offset)
                continue
            self._deliver(offset, msg)
        for key in [k for k, at in self.deleted.items() if now - at > DELETED_KEPT_MS]:
            del self.deleted[key]
        self._arm()

    def _deliver(self, offset: int, msg: Any = None) -> None:
        if offset in self.done or offset in self._inflight:
            return
        msg = msg if msg is not None else self._message(offset)
        if msg is None:
            self.log.error("timer message at offset {o} cannot be read; dropped", o=offset)
            self._mark_done(offset)
            return
        props = dict(msg.properties)
        stored = properties_to_string(props)
        topic = props.pop(PROPERTY_REAL_TOPIC, None)
        try:
            queue_id = int(props.pop(PROPERTY_REAL_QUEUE_ID, None))
        except (TypeError, ValueError):
            topic = None
            queue_id = 0
        if not topic:
            self.log.error("timer message at offset {o} has no real topic; dropped", o=offset)
            self._mark_done(offset)
            return
        props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        inner = MessageExtBrokerInner(
            topic=topic, queue_id=queue_id, body=msg.body or b"", flag=msg.flag, properties=props,
            properties_string=stored, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp,
            born_host=msg.born_host, store_host=msg.store_host, reconsume_times=msg.reconsume_times,
            tags_code=tags_string_to_tags_code(props.get("TAGS")))
        self._inflight.add(offset)
        d = self.broker.message_store.put_message(inner)
        d.addBoth(self._put_done, offset, topic)

    def _put_done(self, result: Any, offset: int, topic: str) -> None:
        self._inflight.discard(offset)
        if put_status_name(result) == "PUT_OK":
            self._mark_done(offset)
            if self.metrics is not None:
                self.metrics.timer_dequeue(topic)
            return
        self.log.error("timer message time up, but reput it to {t} failed: {r}", t=topic, r=result)
        if self.started:
            heapq.heappush(self.heap, (self.broker.now_ms() + int(RETRY_LATER * 1000), offset))
            self._arm()

    def _mark_done(self, offset: int) -> None:
        self.parked.pop(offset, None)
        self.done.add(offset)
        self._advance()
        self._persist_soon()

    def _advance(self) -> None:
        while self.progress in self.done:
            self.done.discard(self.progress)
            self.progress += 1
