"""Custom headers of RocketMQ 5's POP family (``PopMessageRequestHeader`` and kin)."""
from __future__ import annotations

from rmqpy.protocol.headers.base import CommandHeader, Long, header, optional, required


@header
class PopMessageRequestHeader(CommandHeader):
    """POP_MESSAGE (200050). ``queueId`` -1 pops from every readable queue of the topic."""
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required()
    maxMsgNums: int = required()
    invisibleTime: Long = required()
    pollTime: Long = required()
    bornTime: Long = required()
    initMode: int = required()
    expType: str | None = optional()
    exp: str | None = optional()
    order: bool | None = optional()
    attemptId: str | None = optional()


@header
class PopMessageResponseHeader(CommandHeader):
    popTime: Long = required()
    invisibleTime: Long = required()
    reviveQid: int = required()
    restNum: Long = required()
    startOffsetInfo: str | None = optional()
    msgOffsetInfo: str | None = optional()
    orderCountInfo: str | None = optional()


@header
class PeekMessageRequestHeader(CommandHeader):
    """PEEK_MESSAGE (200052): read without checkpoint or offset change."""
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required()
    maxMsgNums: int = required()


@header
class AckMessageRequestHeader(CommandHeader):
    """ACK_MESSAGE (200051): ``extraInfo`` is the message's POP_CK receipt."""
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required()
    extraInfo: str = required()
    offset: Long = required()


@header
class ChangeInvisibleTimeRequestHeader(CommandHeader):
    """CHANGE_MESSAGE_INVISIBLETIME (200053)."""
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required()
    extraInfo: str = required()
    offset: Long = required()
    invisibleTime: Long = required()


@header
class ChangeInvisibleTimeResponseHeader(CommandHeader):
    popTime: Long = required()
    invisibleTime: Long = required()
    reviveQid: int = required()


@header
class NotificationRequestHeader(CommandHeader):
    """NOTIFICATION (200054): is there something to pop? Held up to ``pollTime`` when not."""
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required()
    pollTime: Long = required()
    bornTime: Long = required()
    order: bool | None = optional()
    attemptId: str | None = optional()


@header
class NotificationResponseHeader(CommandHeader):
    hasMsg: bool = required(False)
    pollingFull: bool | None = optional()


@header
class PollingInfoRequestHeader(CommandHeader):
    """POLLING_INFO (200055): how many pops of a group wait on a queue (-1: on the whole topic)."""
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required()


@header
class PollingInfoResponseHeader(CommandHeader):
    pollingNum: int = required(0)
