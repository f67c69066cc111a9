"""The message store as the broker uses it (Java's ``MessageStore`` interface).

The broker depends on this protocol, not on a class: :class:`rmqpy.store.message_store.MessageStore`
(Java's ``DefaultMessageStore``) implements it, and a test or a later store (HA, tiered) may
hand ``BrokerController`` another implementation. Every method here is one the broker calls;
there is no optional capability to probe for.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol, Sequence, overload

from twisted.internet import defer

from rmqpy.store.time_search import Boundary

if TYPE_CHECKING:
    from rmqpy.protocol.message import MessageExt, MessageExtBatch, MessageExtBrokerInner
    from rmqpy.store.config import MessageStoreConfig
    from rmqpy.store.consume_queue import ConsumeQueue
    from rmqpy.store.results import GetMessageResult, PutMessageResult, QueryMessageResult
    from rmqpy.store.stats import StoreStats

#: Called for each message dispatched to a consume queue: (topic, queue_id, logic_offset,
#: tags_code, store_timestamp, properties, ...) (Java ``MessageArrivingListener``).
ArriveListener = Callable[..., None]

#: The records of a batch put as its listeners get them: ``(phy, size, tags_code, queue_offset,
#: properties)`` each.
BatchRecords = Sequence[tuple[int, int, int, int, dict[str, str]]]

#: What an arrive listener may be registered with beside it (``add_arrive_listener(cb, batch=...)``):
#: called once for the records of a batch put, ``(topic, queue_id, store_timestamp, records)``, once
#: they are all in their consume queue; it does what ``cb`` would do for each record (``cb``'s logic
#: offset is ``queue_offset + 1``), e.g. nothing when nobody waits on the queue.
BatchArriveListener = Callable[[str, int, int, BatchRecords], None]


class MessageFilter(Protocol):
    """What a pull's filter answers the store (Java ``MessageFilter``)."""

    def takes_all(self) -> tuple[bool, bool]:
        """Whether it takes every message by (tags code, record): the store skips those calls."""
        ...

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext: Any = None) -> bool: ...

    def is_matched_by_commit_log(self, data: bytes | None, properties: Any) -> bool: ...


class MessageStore(Protocol):
    config: MessageStoreConfig
    stats: StoreStats
    #: SYNC_MASTER: what a put that waits for a slave waits on (rmqpy.store.ha); None otherwise
    replica_wait: Callable[[int], Any] | None
    #: controller mode: puts refused until the controller names this broker's role (Java
    #: ``RunningFlags.makeFenced``); False otherwise
    fenced: bool

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> bool: ...

    def start(self) -> None: ...

    def shutdown(self) -> None: ...

    def add_arrive_listener(self, callback: ArriveListener, batch: BatchArriveListener | None = None) -> None: ...

    def remove_arrive_listener(self, callback: ArriveListener) -> None: ...

    # ------------------------------------------------------------------ put
    def put_message(self, msg: MessageExtBrokerInner) -> defer.Deferred[Any]: ...

    def put_message_now(self, msg: MessageExtBrokerInner) -> PutMessageResult | defer.Deferred[Any]:
        """The result at once, or a Deferred when it must wait (SYNC_FLUSH)."""
        ...

    def put_messages(self, batch: MessageExtBatch) -> defer.Deferred[Any]: ...

    def put_messages_now(self, batch: MessageExtBatch) -> PutMessageResult | defer.Deferred[Any]:
        """:meth:`put_messages`' result at once, or a Deferred when it must wait (SYNC_FLUSH)."""
        ...

    # ------------------------------------------------------------------ get
    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    max_total_bytes: int | None = None, message_filter: MessageFilter | None = None
                    ) -> GetMessageResult | None: ...

    def look_message_by_offset(self, phy_offset: int, size: int | None = None) -> MessageExt | None: ...

    def select_one_message_by_offset(self, phy_offset: int, size: int | None = None) -> bytes | None: ...

    def get_commit_log_message(self, phy_offset: int, size: int) -> bytes | None:
        """The ``size`` bytes at ``phy_offset`` of the commit log, None where no file holds them
        (Java ``CommitLog.getMessage``)."""
        ...

    def get_commit_log_data(self, offset: int, max_size: int | None = None) -> bytes | None:
        """Commit log bytes from ``offset`` to the end of written data in its file, at most
        ``max_size`` (what an HA master sends)."""
        ...

    def append_to_commit_log(self, start: int, data: bytes) -> bool:
        """A slave: append the master's bytes at ``start`` and dispatch what they complete."""
        ...

    # ------------------------------------------------------------------ offsets
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int: ...

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int: ...

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int: ...

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int: ...

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int | None = None) -> int: ...

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int,
                                    boundary: Boundary = Boundary.LOWER) -> int:
        """Java 5.3.3's boundary search (rmqpy/store/time_search.py); LOWER is Java's default."""
        ...

    def get_max_phy_offset(self) -> int: ...

    def get_min_phy_offset(self) -> int: ...

    def get_master_flushed_offset(self) -> int:
        """Java ``getMasterFlushedOffset``: the master's flushed offset the checkpoint holds (0: none)."""
        ...

    def dispatch_behind_bytes(self) -> int: ...

    def flush_behind_bytes(self) -> int:
        """Java ``flushBehindBytes``: commit log bytes written and not yet flushed."""
        ...

    # ------------------------------------------------------------------ query and admin
    @overload
    def find_consume_queue(self, topic: str, queue_id: int, create: Literal[True] = ...) -> ConsumeQueue: ...

    @overload
    def find_consume_queue(self, topic: str, queue_id: int, create: bool) -> ConsumeQueue | None: ...

    def query_message(self, topic: str, key: str, max_num: int, begin_ts: int,
                      end_ts: int) -> QueryMessageResult: ...

    def runtime_info(self) -> dict[str, str]: ...

    def clean_unused_topic(self, topics: set[str]) -> int:
        """Drop the consume queues of topics not in ``topics`` (system queues stay)."""
        ...

    def clean_expired_consumer_queue(self) -> None: ...
