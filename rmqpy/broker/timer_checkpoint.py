"""How far a master's timer delivery has come, as RocketMQ 5 brokers tell it to their slaves.

A Java 5 slave asks its master every 3 s for GET_TIMER_CHECK_POINT (60) and, in ``syncAll``, for
GET_TIMER_METRICS (61) (``SlaveSynchronize.syncTimerCheckPoint``/``syncTimerMetrics``). The
checkpoint is Java ``TimerCheckpoint.encode``'s 56 bytes, big-endian: ``lastReadTimeMs``,
``lastTimerLogFlushPos``, ``lastTimerQueueOffset``, ``masterTimerQueueOffset`` and the data
version's ``stateVersion``, ``timestamp`` and ``counter``. A slave keeps the master's
``lastReadTimeMs`` (where its own delivery starts once it is promoted: every timer due before it
was delivered by the master) and ``masterTimerQueueOffset`` (a Java slave reads the timer queue
into its wheel only up to it).

rmqpy's timer service has no wheel and no timer log; what it tells is the same promise in its own
terms (:meth:`TimerMessageService.checkpoint`): ``lastReadTimeMs`` is the earliest TIMER_OUT_MS
still parked (or now, rounded down to ``timerPrecisionMs``, when none is), both queue offsets
are what it has read of the timer queue, and the flush position is 0. rmqpy's slaves ask their
master the same question (rmqpy or Java) and, once promoted, skip what the master delivered,
where before this they delivered again every timer message the queue still held.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from rmqpy.protocol.bodies.topic import DataVersion

_LAYOUT = struct.Struct(">7q")
SIZE = _LAYOUT.size  # 56


@dataclass
class TimerCheckpoint:
    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    data_version: DataVersion = field(default_factory=lambda: DataVersion(timestamp=0))

    def encode(self) -> bytes:
        v = self.data_version
        return _LAYOUT.pack(self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
                            self.master_timer_queue_offset, v.stateVersion, v.timestamp, v.counter)

    @classmethod
    def decode(cls, body: bytes | None) -> "TimerCheckpoint":
        """Java's 56 bytes; an older master's 32 (no data version) are read as Java reads them."""
        if body is None or len(body) not in (32, SIZE):
            raise ValueError(f"a timer checkpoint is {SIZE} bytes, not {len(body or b'')}")
        values = struct.unpack(f">{len(body) // 8}q", body) + (0, 0, 0)
        read, flush, queue, master, state, stamp, counter = values[:7]
        return cls(read, flush, queue, master, DataVersion(timestamp=stamp, counter=counter, stateVersion=state))


def timer_metrics_body(timing: dict[str, tuple[int, int]], version: DataVersion) -> dict[str, Any]:
    """GET_TIMER_METRICS's JSON (Java ``TimerMetricsSerializeWrapper``): parked messages per real
    topic, each ``{"count": n, "timeStamp": ms}``, and the metrics' data version."""
    return {"dataVersion": {**version.to_json(), "stateVersion": version.stateVersion},
            "timingCount": {topic: {"count": count, "timeStamp": stamp} for topic, (count, stamp) in timing.items()}}
