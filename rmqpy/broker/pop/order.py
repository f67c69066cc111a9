"""Orderly (FIFO) pop: which popped messages of a queue are still in flight (Java's ``ConsumerOrderInfoManager``).

An orderly pop takes messages of a queue only when no message it handed out earlier is still
invisible and un-acked: the queue is blocked until each is acked or its invisible time passed. The
consumer offset moves on acks (to the first un-acked offset of the batch), not at the pop; a
batch not acked in time is popped again from the offset, each message counting one more
delivery (``orderCountInfo``). No checkpoint is written: receipts name revive queue 999.

The table is written to config/consumerOrderInfo.json in Java's shape (``{"table": {"topic@group":
{queueId: {"popTime", "i", "o", "ot", "oc", "l", "cm", "a"}}}}``, the offsets after the first as
differences from it) every 10 s and at shutdown, as Java does, so that a batch in flight before a
restart still blocks its queue after it. As in Java, what changed in the last 10 s before a
``kill -9`` is lost (such a batch may be handed out again before its invisible time ends). Entries
of queues nobody popped for 24 h, and of topics, groups or queues that no longer exist, are dropped
when the file is written (Java's ``autoClean``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from rmqpy.broker.configfile import ConfigManager
from rmqpy.broker.pop.receipt import retry_mark
from rmqpy.broker.pop.result import OrderCount

CLEAN_SPAN_FROM_LAST_MS = 24 * 3600 * 1000


@dataclass
class OrderInfo:
    attempt_id: str | None
    pop_time: int
    invisible_time: int
    offsets: list[int]
    commit_bits: int = 0
    next_visible: dict[int, int] = field(default_factory=dict)
    consumed: dict[int, int] = field(default_factory=dict)  # delivery count - 1, for offsets delivered before
    last_consume: int = 0

    def to_json(self) -> dict[str, Any]:
        """Java's OrderInfo as fastjson writes it (``o``: the first offset, then the others' distance to it)."""
        first = self.offsets[0] if self.offsets else 0
        out: dict[str, Any] = {"popTime": self.pop_time, "i": self.invisible_time,
                               "o": self.offsets[:1] + [o - first for o in self.offsets[1:]],
                               "l": self.last_consume, "cm": self.commit_bits}
        if self.next_visible:
            out["ot"] = dict(self.next_visible)
        if self.consumed:
            out["oc"] = dict(self.consumed)
        if self.attempt_id is not None:
            out["a"] = self.attempt_id
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "OrderInfo":
        rel = [int(o) for o in obj.get("o") or []][:64]  # commitOffsetBit is a long: 64 offsets at most
        offsets = rel[:1] + [rel[0] + d for d in rel[1:]]
        return cls(None if obj.get("a") is None else str(obj["a"]), int(obj.get("popTime") or 0),
                   int(obj.get("i") or 0), offsets, int(obj.get("cm") or 0),
                   {int(k): int(v) for k, v in (obj.get("ot") or {}).items()},
                   {int(k): int(v) for k, v in (obj.get("oc") or {}).items()}, int(obj.get("l") or 0))

    def acked(self, i: int) -> bool:
        return bool(self.commit_bits >> i & 1)

    def need_block(self, attempt_id: str | None, now: int) -> bool:
        if not self.offsets or (self.attempt_id is not None and self.attempt_id == attempt_id):
            return False
        for i, offset in enumerate(self.offsets):
            if not self.acked(i) and now < self.next_visible.get(offset, self.pop_time + self.invisible_time):
                return True
        return False

    def next_offset(self) -> int:
        for i, offset in enumerate(self.offsets):
            if not self.acked(i):
                return offset
        return self.offsets[-1] + 1


class ConsumerOrderInfoManager(ConfigManager):
    MAX_QUEUES = 100000  # (topic, group, queue) entries kept; the oldest are dropped beyond
    file_name = "consumerOrderInfo.json"

    def __init__(self, config_dir: str | None = None, now_ms: Callable[[], int] | None = None,
                 queue_exists: Callable[[str, str, int], bool] | None = None) -> None:
        """``queue_exists(topic, group, queue_id)``: the topic and group exist and the queue is readable
        (autoClean keeps only those)."""
        super().__init__(config_dir)
        self.now_ms = now_ms or (lambda: 0)
        self.queue_exists = queue_exists or (lambda topic, group, queue_id: True)
        self.table: dict[tuple[str, str, int], OrderInfo] = {}

    def encode(self) -> dict[str, Any]:
        now = self.now_ms()
        out: dict[str, dict[int, Any]] = {}
        for (topic, group, queue_id), info in list(self.table.items()):
            if now - info.last_consume > CLEAN_SPAN_FROM_LAST_MS or not self.queue_exists(topic, group, queue_id):
                del self.table[(topic, group, queue_id)]
                continue
            out.setdefault(f"{topic}@{group}", {})[queue_id] = info.to_json()
        return {"table": out}

    def decode(self, obj: Any) -> None:
        """Java's file (or rmqpy's); an entry that does not read as one is skipped."""
        table = obj.get("table") if isinstance(obj, dict) else None
        for key, queues in (table or {}).items():
            topic, sep, group = str(key).partition("@")
            if not sep or not isinstance(queues, dict):
                continue
            for qid, raw in queues.items():
                try:
                    self.table[(topic, group, int(qid))] = OrderInfo.from_json(raw)
                except (TypeError, ValueError, AttributeError, IndexError):
                    continue
                if len(self.table) >= self.MAX_QUEUES:
                    return

    def check_block(self, attempt_id: str | None, topic: str, group: str, queue_id: int, now: int) -> bool:
        info = self.table.get((topic, group, queue_id))
        return info is not None and info.need_block(attempt_id, now)

    def update(self, attempt_id: str | None, topic: str, group: str, queue_id: int, pop_time: int,
               invisible_time: int, offsets: list[int], counts: list[OrderCount]) -> None:
        key = (topic, group, queue_id)
        old = self.table.pop(key, None)
        info = OrderInfo(attempt_id, pop_time, invisible_time, list(offsets), last_consume=pop_time)
        if old is not None:
            for offset in offsets:
                if offset in old.offsets:
                    before = old.consumed.get(offset, 0)
                    same_attempt = old.attempt_id is not None and old.attempt_id == attempt_id
                    info.consumed[offset] = before if same_attempt else before + 1
        self.table[key] = info
        if len(self.table) > self.MAX_QUEUES:
            del self.table[next(iter(self.table))]
        mark = retry_mark(topic)
        least = 0 if len(info.consumed) != len(offsets) else min(info.consumed.values(), default=0)
        for offset, count in info.consumed.items():
            counts.append(OrderCount(mark, queue_id, offset, count))
        counts.append(OrderCount(mark, queue_id, None, least))

    def commit_and_next(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int) -> int:
        """The offset to commit after acking ``offset``; -1 when the batch does not hold it, -2 for another pop's
        receipt (Java's codes)."""
        info = self.table.get((topic, group, queue_id))
        if info is None:
            return offset + 1
        if not info.offsets:
            return -1
        if pop_time != info.pop_time:
            return -2
        try:
            i = info.offsets.index(offset)
        except ValueError:
            return -1
        info.commit_bits |= 1 << i
        return info.next_offset()

    def update_next_visible_time(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int,
                                 next_visible: int) -> None:
        info = self.table.get((topic, group, queue_id))
        if info is not None and info.pop_time == pop_time and offset in info.offsets:
            info.next_visible[offset] = next_visible
