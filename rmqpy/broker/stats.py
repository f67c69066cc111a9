"""BrokerStatsManager: per-topic and per-group counters sampled as RocketMQ samples them.

RocketMQ keeps, per stats name (TOPIC_PUT_NUMS, GROUP_GET_NUMS, ...) and key (a topic,
``topic@group``, the cluster name), a running value and call count, and snapshots them
every 10 s (kept 7: the last minute), every 10 min (kept 7: the last hour) and every hour
(kept 25: the last day), all starting when the broker starts. VIEW_BROKER_STATS_DATA
(mqadmin ``statsAll``, ``brokerStatus``) reports, per window, the value difference between
the oldest and newest snapshot, that difference per second and per call. An item created
between two ticks gets a zero snapshot 10 s / 10 min / 1 h before its first tick, so a
fresh topic's minute window shows what it received since its first tick.

:class:`BrokerStatsHook` feeds the counters: the send and pull processors call it with
what their successful responses carry (the messages stored, the messages a pull returned),
as Java's processors call their ``SendMessageHook`` and ``ConsumeMessageHook``.
"""
from __future__ import annotations

import struct
from typing import Any, Callable

from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
STATS_NAMES = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS,
               BROKER_PUT_NUMS, BROKER_GET_NUMS)

SECOND_TICK = 10.0
MINUTE_TICK = 600.0
HOUR_TICK = 3600.0


class StatsSnapshot:
    __slots__ = ("sum", "tps", "avgpt", "times")

    def __init__(self, sum: int = 0, tps: float = 0.0, avgpt: float = 0.0, times: int = 0) -> None:
        self.sum, self.tps, self.avgpt, self.times = sum, tps, avgpt, times

    def as_item(self) -> dict[str, Any]:
        """``BrokerStatsItem`` as fastjson writes it."""
        return {"avgpt": float(self.avgpt), "sum": int(self.sum), "tps": float(self.tps)}


def _compute(snapshots: list[tuple[int, int, int]]) -> StatsSnapshot:
    if not snapshots:
        return StatsSnapshot()
    (t0, n0, v0), (t1, n1, v1) = snapshots[0], snapshots[-1]
    total = v1 - v0
    elapsed = t1 - t0
    tps = total * 1000.0 / elapsed if elapsed else (float("nan") if total == 0 else float("inf"))
    times = n1 - n0
    return StatsSnapshot(total, tps, total / times if times > 0 else 0.0, times)


class StatsItem:
    """One counter: ``value`` and ``times`` grow per call; the timer snapshots them."""

    __slots__ = ("name", "key", "value", "times", "minute", "hour", "day")

    def __init__(self, name: str, key: str) -> None:
        self.name, self.key = name, key
        self.value = 0
        self.times = 0
        self.minute: list[tuple[int, int, int]] = []
        self.hour: list[tuple[int, int, int]] = []
        self.day: list[tuple[int, int, int]] = []

    def _sample(self, series: list[tuple[int, int, int]], now_ms: int, back_ms: int, keep: int) -> None:
        if not series:
            series.append((now_ms - back_ms, 0, 0))
        series.append((now_ms, self.times, self.value))
        if len(series) > keep:
            del series[0]

    def sample_seconds(self, now_ms: int) -> None:
        self._sample(self.minute, now_ms, 10 * 1000, 7)

    def sample_minutes(self, now_ms: int) -> None:
        self._sample(self.hour, now_ms, 10 * 60 * 1000, 7)

    def sample_hour(self, now_ms: int) -> None:
        self._sample(self.day, now_ms, 60 * 60 * 1000, 25)

    def in_minute(self) -> StatsSnapshot:
        return _compute(self.minute)

    def in_hour(self) -> StatsSnapshot:
        return _compute(self.hour)

    def in_day(self) -> StatsSnapshot:
        return _compute(self.day)


class BrokerStatsManager:
    """The counters of one broker; ``reactor`` drives the sampling (a ``task.Clock`` in tests)."""

    def __init__(self, reactor: Any, cluster_name: str, print_line: Callable[[str], None] | None = None) -> None:
        self.reactor = reactor
        self.cluster_name = cluster_name
        self.tables: dict[str, dict[str, StatsItem]] = {name: {} for name in STATS_NAMES}
        self._calls: list[Any] = []
        self.running = False
        # stats.log (rmqpy/common/logfiles.py): Java's "Stats In One Minute" lines, at each minute
        self.print_line = print_line

    def now_ms(self) -> int:
        return int(self.reactor.seconds() * 1000)

    # ------------------------------------------------------------------ sampling
    def start(self) -> None:
        """Sample now and then every 10 s, 10 min and hour, as StatsItemSet's executors do."""
        if self.running:
            return
        self.running = True
        for interval, method in ((SECOND_TICK, StatsItem.sample_seconds), (MINUTE_TICK, StatsItem.sample_minutes),
                                 (HOUR_TICK, StatsItem.sample_hour)):
            self._tick(interval, method)
        if self.print_line is not None:  # Java: at the next whole minute, then every minute
            now = self.reactor.seconds()
            self._calls.append(self.reactor.callLater(60.0 - now % 60.0, self._print_minute))

    def _print_minute(self) -> None:
        """Java ``StatsItemSet.printAtMinutes``: one line per counter, its last minute."""
        if not self.running or self.print_line is None:
            return
        for name, table in self.tables.items():
            for key, item in list(table.items()):
                ss = item.in_minute()
                self.print_line(f"[{name}] [{key}] Stats In One Minute, SUM: {ss.sum} TPS: {_java_2f(ss.tps)} "
                                f"AVGPT: {_java_2f(ss.avgpt)}")
        self._calls = [c for c in self._calls if c.active()]
        now = self.reactor.seconds()
        self._calls.append(self.reactor.callLater(60.0 - now % 60.0, self._print_minute))

    def _tick(self, interval: float, method: Callable[[StatsItem, int], None]) -> None:
        if not self.running:
            return
        now = self.now_ms()
        for table in self.tables.values():
            for item in list(table.values()):
                method(item, now)
        self._calls = [c for c in self._calls if c.active()]
        self._calls.append(self.reactor.callLater(interval, self._tick, interval, method))

    def stop(self) -> None:
        self.running = False
        for call in self._calls:
            if call.active():
                call.cancel()
        self._calls.clear()

    # ------------------------------------------------------------------ counting
    def add(self, name: str, key: str, value: int, times: int = 1) -> None:
        table = self.tables[name]
        item = table.get(key)
        if item is None:
            item = table[key] = StatsItem(name, key)
        item.value += int(value)
        item.times += int(times)

    def get(self, name: str, key: str) -> StatsItem | None:
        table = self.tables.get(name)
        return table.get(key) if table is not None else None

    # the per-message calls: plain attribute increments, no clock (the timer snapshots)
    def inc_topic_put(self, topic: str, nums: int, size: int) -> None:
        tables = self.tables
        table = tables[TOPIC_PUT_NUMS]
        item = table.get(topic)
        if item is None:
            item = table[topic] = StatsItem(TOPIC_PUT_NUMS, topic)
        item.value += nums
        item.times += 1
        table = tables[TOPIC_PUT_SIZE]
        item = table.get(topic)
        if item is None:
            item = table[topic] = StatsItem(TOPIC_PUT_SIZE, topic)
        item.value += size
        item.times += 1
        key = self.cluster_name
        table = tables[BROKER_PUT_NUMS]
        item = table.get(key)
        if item is None:
            item = table[key] = StatsItem(BROKER_PUT_NUMS, key)
        item.value += nums
        item.times += 1

    def inc_group_get(self, group: str, topic: str, nums: int, size: int) -> None:
        key = f"{topic}@{group}"
        self.add(GROUP_GET_NUMS, key, nums, 1)
        self.add(GROUP_GET_SIZE, key, size, 1)
        self.add(BROKER_GET_NUMS, self.cluster_name, nums, 1)

    def on_topic_deleted(self, topic: str) -> None:
        for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
            self.tables[name].pop(topic, None)
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            for key in [k for k in self.tables[name] if k.startswith(topic + "@")]:
                del self.tables[name][key]

    def on_group_deleted(self, group: str) -> None:
        for name in (GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS):
            for key in [k for k in self.tables[name] if k.endswith("@" + group)]:
                del self.tables[name][key]


def _java_2f(v: float) -> str:
    """Java ``String.format("%.2f")``: NaN and Infinity spelled as Java spells them."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    return f"{v:.2f}"


_SIZE = struct.Struct(">i")


def count_messages(body: bytes | None) -> int:
    """How many stored message records a pull response body holds (each starts with its size)."""
    if not body:
        return 0
    n, pos, end = 0, 0, len(body)
    unpack_from = _SIZE.unpack_from
    while pos + 4 <= end:
        (size,) = unpack_from(body, pos)
        if size <= 0:
            break
        pos += size
        n += 1
    return n


_SEND_OK = frozenset(int(c) for c in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT,
                                     ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE))
_SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)
_SUCCESS = int(ResponseCode.SUCCESS)


class BrokerStatsHook:
    """The stats' ``SendMessageHook`` and ``ConsumeMessageHook``: the send and pull processors
    call it with their decoded header and their answer, and it counts what a successful answer
    carries (the messages stored, the messages a pull returned)."""

    def __init__(self, stats: BrokerStatsManager) -> None:
        self.stats = stats

    def send_message_after(self, response: Any, request: RemotingCommand, topic: str) -> Any:
        """Count a stored send (Java ``sendMessageAfter``); returns ``response`` (a Deferred callback)."""
        if isinstance(response, RemotingCommand) and response.code in _SEND_OK and topic:
            nums = 1
            if request.code == _SEND_BATCH_MESSAGE:
                msg_id = (response.ext_fields or {}).get("msgId") or ""
                if msg_id:
                    nums = msg_id.count(",") + 1
            body = request.body
            self.stats.inc_topic_put(topic, nums, len(body) if body else 0)
        return response

    def consume_message_after(self, group: str, topic: str, queue_id: int, response: RemotingCommand) -> None:
        """Count the messages a found pull returns (Java ``consumeMessageAfter``)."""
        if response.code != _SUCCESS:
            return
        parts = response.body_parts
        if parts is not None:  # a pull's records, one per part
            nums, size = len(parts), sum(map(len, parts))
        elif response.body:
            nums, size = count_messages(response.body), len(response.body)
        else:
            return
        if group and topic and nums:
            self.stats.inc_group_get(group, topic, nums, size)
