"""ScheduleMessageService: delivers delay-level messages when they are due.

The store parks a message carrying ``DELAY=<level>`` in ``SCHEDULE_TOPIC_XXXX`` queue
``level - 1`` with ``REAL_TOPIC``/``REAL_QID`` and writes its deliver time into the
consume-queue tags code. This service walks every level's queue from the offset kept in
``delayOffset.json`` (through the controller's ``DelayOffsetManager``): a due message is
re-put to its real topic and queue, a not yet due one re-arms the level's timer for the
remaining time. As RocketMQ 4.9's ``ScheduleMessageService``: first run 1 s after start,
re-check 100 ms after a pass, a deliver time further away than the level's delay counts as
due now, and the levels come from the store's ``messageDelayLevel``.

Time comes from the controller's reactor, so ``task.Clock`` drives it in tests.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqpy.broker.topic import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC
from rmqpy.protocol.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
    MessageExt,
    MessageExtBrokerInner,
    properties_to_string,
    tags_string_to_tags_code,
)
from rmqpy.remoting.ratelimit import RateLimitedLogger
from rmqpy.store.message_store import put_status_name
from rmqpy.store.role import is_slave

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

FIRST_DELAY_TIME = 1.0
DELAY_FOR_A_WHILE = 0.1
DELAY_FOR_A_PERIOD = 10.0


def delay_level_to_queue_id(level: int) -> int:
    return level - 1


def queue_id_to_delay_level(queue_id: int) -> int:
    return queue_id + 1


def message_timeup(msg: MessageExt) -> MessageExtBrokerInner | None:
    """The message to put back into its real topic/queue (Java ``messageTimeup``).

    As Java does, the stored properties string is the one read from the schedule record
    (so it still shows DELAY), while the property map handed to the store has DELAY removed
    and WAIT=false, so the store does not park the message again.
    """
    props = dict(msg.properties)
    stored = properties_to_string(props)
    real_topic = props.get(PROPERTY_REAL_TOPIC)
    try:
        real_qid = int(props.get(PROPERTY_REAL_QUEUE_ID) or "")
    except ValueError:
        return None
    if not real_topic:
        return None
    props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
    props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    return MessageExtBrokerInner(
        topic=real_topic, queue_id=real_qid, body=msg.body or b"", flag=msg.flag, properties=props,
        properties_string=stored, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp,
        born_host=msg.born_host, store_host=msg.store_host, reconsume_times=msg.reconsume_times,
        tags_code=tags_string_to_tags_code(props.get("TAGS")))


class ScheduleMessageService:
    log = RateLimitedLogger()  # lines a client's messages can cause: rate-limited per call site, values clipped

    def __init__(self, broker: "Broker") -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker
        self.delay_levels: dict[int, int] = broker.store_config.delay_levels
        self.max_delay_level = max(self.delay_levels) if self.delay_levels else 0
        self._timers: dict[int, Any] = {}
        self._busy: set[int] = set()
        self.started = False

    # ------------------------------------------------------------------ offsets
    @property
    def offset_table(self) -> dict[int, int]:
        return self.broker.delay_offset_manager.table

    def update_offset(self, level: int, offset: int) -> None:
        self.offset_table[level] = offset

    def max_offset(self, level: int) -> int:
        """How many messages were ever parked for ``level``."""
        store = self.broker.message_store
        return store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, delay_level_to_queue_id(level))

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self.started:
            return
        if is_slave(self.broker.store_config):
            return
        self.started = True
        for level in sorted(self.delay_levels):
            self.offset_table.setdefault(level, 0)
            self._schedule(level, FIRST_DELAY_TIME)

    def stop(self) -> None:
        self.started = False
        for call in self._timers.values():
            if call is not None and call.active():
                call.cancel()
        self._timers.clear()

    def _schedule(self, level: int, delay: float) -> None:
        if not self.started:
            return
        old = self._timers.get(level)
        if old is not None and old.active():
            old.cancel()
        self._timers[level] = self.broker.reactor.callLater(max(0.0, delay), self._run, level)

    # ------------------------------------------------------------------ delivery
    def _correct_deliver_timestamp(self, now: int, deliver: int, level: int) -> int:
        if deliver > now + self.delay_levels.get(level, 0):
            return now
        return deliver

    def _run(self, level: int) -> None:
        self._timers.pop(level, None)
        if not self.started or level in self._busy:
            return
        try:
            self._execute(level)
        except Exception:
            # not level=: Logger.failure's own keyword (the log level) would take it
            self.log.failure("ScheduleMessageService: delivering level {delay_level} failed", delay_level=level)
            self._schedule(level, DELAY_FOR_A_PERIOD)

    def _execute(self, level: int) -> None:
        store = self.broker.message_store
        cq = store.find_consume_queue(RMQ_SYS_SCHEDULE_TOPIC, delay_level_to_queue_id(level), create=False)
        if cq is None:
            self._schedule(level, DELAY_FOR_A_WHILE)
            return
        offset = self.offset_table.get(level, 0)
        min_offset = cq.get_min_offset_in_queue()
        if offset < min_offset:
            self.log.warn("schedule level {level} offset {o} below min {m}, corrected", level=level, o=offset,
                          m=min_offset)
            offset = min_offset
            self.update_offset(level, offset)
        max_offset = cq.get_max_offset_in_queue()
        if offset > max_offset:
            offset = max_offset
            self.update_offset(level, offset)
        self._deliver_from(level, cq, offset, max_offset)

    def _deliver_from(self, level: int, cq: Any, offset: int, max_offset: int) -> None:
        store = self.broker.message_store
        while self.started and offset < max_offset:
            unit = cq.get_unit(offset)
            if unit is None:
                nxt = cq.roll_next_file(offset)
                offset = min(nxt, max_offset)
                self.update_offset(level, offset)
                continue
            phy, size, tags_code = unit
            now = self.broker.now_ms()
            deliver = self._correct_deliver_timestamp(now, tags_code, level)
            countdown = deliver - now
            if countdown > 0:
                self.update_offset(level, offset)
                self._schedule(level, countdown / 1000.0)
                return
            msg = store.look_message_by_offset(phy, size)
            inner = message_timeup(msg) if msg is not None else None
            if inner is None or inner.topic == RMQ_SYS_TRANS_HALF_TOPIC:
                if inner is not None:
                    self.log.error("[BUG] the real topic of schedule msg is {t}, discard the msg", t=inner.topic)
                offset += 1
                self.update_offset(level, offset)
                continue
            d = store.put_message(inner)
            if not d.called:
                # wait for the store, then carry on from the next message
                self._busy.add(level)
                d.addBoth(self._async_put_done, level, offset)
                return
            ok: list[bool] = []
            d.addBoth(lambda r: ok.append(self._put_ok(r, inner)))  # noqa: B023 (d has fired: runs now)
            if not ok or not ok[0]:
                self.update_offset(level, offset)
                self._schedule(level, DELAY_FOR_A_WHILE)
                return
            offset += 1
            self.update_offset(level, offset)
        self._schedule(level, DELAY_FOR_A_WHILE)

    def _put_ok(self, result: Any, inner: MessageExtBrokerInner) -> bool:
        status = put_status_name(result)
        if status == "PUT_OK":
            return True
        self.log.error("ScheduleMessageService, a message time up, but reput it failed, topic: {t} status: {s}",
                       t=inner.topic, s=status or result)
        return False

    def _async_put_done(self, result: Any, level: int, offset: int) -> None:
        self._busy.discard(level)
        if not self.started:
            return
        if put_status_name(result) == "PUT_OK":
            self.update_offset(level, offset + 1)
            self._schedule(level, 0)
        else:
            self._schedule(level, DELAY_FOR_A_WHILE)

    # ------------------------------------------------------------------ admin
    def delay_offset_json(self) -> str:
        """The delayOffset.json content (GET_ALL_DELAY_OFFSET)."""
        from rmqpy.protocol import fastjson
        return fastjson.dumps(self.broker.delay_offset_manager.encode(), pretty=True)
