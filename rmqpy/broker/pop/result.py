"""What a pop found, as typed values: the one result the remoting processor and the gRPC layer read.

:class:`~rmqpy.broker.pop.service.PopService` builds a :class:`PopResult`. The remoting processor
(``rmqpy/broker/processor/pop.py``) formats it into ``PopMessageResponseHeader`` at the edge, the
texts 4.x/5.x remoting clients read (Java's ``ExtraInfoUtil``: ``startOffsetInfo``, ``msgOffsetInfo``,
``orderCountInfo``); the gRPC receive activity (``proxy/grpc/activity/receive.py``) reads the
same object as it is, on the answer its local channel gets (``RemotingCommand.typed_result``).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PoppedQueue:
    """A queue the pop took messages from: one item of ``startOffsetInfo`` and of ``msgOffsetInfo``."""

    retry: str  # the topic's retry mark (receipt.retry_mark): "0" the topic itself, "1"/"2" its pop retry topic
    queue_id: int
    start_offset: int  # where the pop read from: the checkpoint's start offset
    offsets: tuple[int, ...]  # the queue offsets of the messages taken


@dataclass(frozen=True)
class OrderCount:
    """An orderly pop's deliveries so far: one item of ``orderCountInfo``, of one message (``offset``)
    or, with ``offset`` None, the least of the queue's batch."""

    retry: str
    queue_id: int
    offset: int | None
    count: int


@dataclass
class PopResult:
    """What a pop (or a peek) found: ``records`` are stored records, ready for a response body."""

    records: list[bytes] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    revive_qid: int = 0
    rest_num: int = 0
    queues: list[PoppedQueue] = field(default_factory=list)
    order_counts: list[OrderCount] | None = None  # orderly pops only
    polling_full: bool = False

    @property
    def found(self) -> bool:
        return bool(self.records)

    def start_offsets(self) -> dict[tuple[str, int], int]:
        """(retry mark, queue id) -> the start offset its checkpoint has (the last one of a queue
        taken twice)."""
        return {(q.retry, q.queue_id): q.start_offset for q in self.queues}

    def delivery_counts(self) -> dict[tuple[str, int, int | None], int]:
        """(retry mark, queue id, offset or None) -> deliveries so far, for an orderly pop."""
        return {(c.retry, c.queue_id, c.offset): c.count for c in self.order_counts or ()}
