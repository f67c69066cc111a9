"""What a put or a get answers (Java's ``PutMessageStatus``, ``AppendMessageResult``,
``PutMessageResult``, ``GetMessageStatus``, ``GetMessageResult``, ``QueryMessageResult``).

Their own module so that the commit log, the dispatcher and the broker can name them without
importing the store that produces them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class PutMessageStatus(enum.Enum):
    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPEDFILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9
    #: controller mode: the in-sync set is smaller than minInSyncReplicas (nothing was written)
    IN_SYNC_REPLICAS_NOT_ENOUGH = 10


class AppendMessageStatus(enum.Enum):
    PUT_OK = 0
    END_OF_FILE = 1
    MESSAGE_SIZE_EXCEEDED = 2
    PROPERTIES_SIZE_EXCEEDED = 3
    UNKNOWN_ERROR = 4


class GetMessageStatus(enum.Enum):
    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8


@dataclass(slots=True)
class AppendMessageResult:
    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    msg_id: str = ""
    store_timestamp: int = 0
    logics_offset: int = 0
    page_cache_rt: int = 0
    msg_num: int = 1


@dataclass(slots=True)
class PutMessageResult:
    put_message_status: PutMessageStatus
    append_message_result: AppendMessageResult | None = None

    def is_ok(self) -> bool:
        return (self.append_message_result is not None
                and self.append_message_result.status == AppendMessageStatus.PUT_OK
                and self.put_message_status == PutMessageStatus.PUT_OK)


def put_status_name(result: object) -> str | None:
    """The name of a put's status; None when ``result`` is not a :class:`PutMessageResult`
    (a put's Deferred can also fire with a Failure)."""
    return result.put_message_status.name if isinstance(result, PutMessageResult) else None


@dataclass
class GetMessageResult:
    status: GetMessageStatus = GetMessageStatus.NO_MESSAGE_IN_QUEUE
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    message_list: list[bytes] = field(default_factory=list)  # raw records as stored
    message_queue_offsets: list[int] = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.message_list)

    @property
    def body(self) -> bytes:
        return b"".join(self.message_list)


@dataclass
class QueryMessageResult:
    message_list: list[bytes] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0
    buffer_total_size: int = 0

    @property
    def body(self) -> bytes:
        return b"".join(self.message_list)
