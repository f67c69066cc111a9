"""Orderly (FIFO) pop: which popped messages of a queue are still in flight (Java's ``ConsumerOrderInfoManager``).

An orderly pop takes messages of a queue only when no message it handed out earlier is still
invisible and un-acked: the queue is blocked until each is acked or its invisible time passed. The
consumer offset moves on acks (to the first un-acked offset of the batch), not at the pop; a
batch not acked in time is popped again from the offset, each message counting one more
delivery (``orderCountInfo``). No checkpoint is written: receipts name revive queue 999.

rmqpy keeps this in memory (Java persists it in config/consumerOrderInfo.json): after a restart a
batch still in flight may be handed out again before its invisible time ends.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rmqpy.broker.pop.receipt import retry_mark


@dataclass
class OrderInfo:
    attempt_id: str | None
    pop_time: int
    invisible_time: int
    offsets: list[int]
    commit_bits: int = 0
    next_visible: dict[int, int] = field(default_factory=dict)
    consumed: dict[int, int] = field(default_factory=dict)  # delivery count - 1, for offsets delivered before

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


class ConsumerOrderInfoManager:
    MAX_QUEUES = 100000  # (topic, group, queue) entries kept; the oldest are dropped beyond

    def __init__(self) -> None:
        self.table: dict[tuple[str, str, int], OrderInfo] = {}

    def check_block(self, attempt_id: str | None, topic: str, group: str, queue_id: int, now: int) -> bool:
        info = self.table.get((topic, group, queue_id))
        return info is not None and info.need_block(attempt_id, now)

    def update(self, attempt_id: str | None, topic: str, group: str, queue_id: int, pop_time: int,
               invisible_time: int, offsets: list[int], count_info: list[str]) -> None:
        key = (topic, group, queue_id)
        old = self.table.pop(key, None)
        info = OrderInfo(attempt_id, pop_time, invisible_time, list(offsets))
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
            count_info.append(f"{mark} qo{queue_id}%{offset} {count}")
        count_info.append(f"{mark} {queue_id} {least}")

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
