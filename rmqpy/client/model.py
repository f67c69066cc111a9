"""The values the client takes and returns (Java's Message, MessageQueue, SendResult, PullResult)."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rmqpy.protocol.message import MessageExt


@dataclass(frozen=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker group (broker name), as Java's ``MessageQueue``."""
    topic: str
    broker_name: str
    queue_id: int


@dataclass
class Message:
    """A message to send. ``keys`` is one key or a list (joined with spaces, as Java's ``setKeys``);
    ``properties`` are user properties (Java's ``putUserProperty``)."""
    topic: str
    body: bytes
    tags: str | None = None
    keys: str | list[str] | None = None
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0

    def key_string(self) -> str | None:
        if self.keys is None:
            return None
        if isinstance(self.keys, str):
            return self.keys or None
        return " ".join(self.keys) or None


class SendStatus:
    """``SendStatus`` names; a send that got an answer other than these raised ClientError."""
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass
class SendResult:
    """``msg_id`` is the client's UNIQ_KEY (comma-joined for a batch), ``offset_msg_id`` the broker's
    store-host + commit-log-offset id, ``queue_offset`` the first queue offset written."""
    status: str
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    #: a raw pull's (``PullConsumer.pull_raw``) undecoded records and the header's offsetDelta
    body: bytes | None = None
    offset_delta: int | None = None
