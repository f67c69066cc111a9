"""Message priority, new in RocketMQ 5.4.0: the property ``_SYS_MSG_PRIORITY_``
(``MessageConst.PROPERTY_PRIORITY``), which a gRPC send's ``system_properties.priority`` becomes, and
the message type the properties make (``TopicMessageType.parseFromMessageProperty``), in which a
priority counts only when the message is none of the older types."""
from __future__ import annotations

from typing import Mapping

PROPERTY_PRIORITY = "_SYS_MSG_PRIORITY_"
_DELAY_KEYS = ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")


#: SubscriptionGroupAttributes.PRIORITY_FACTOR_ATTRIBUTE: the share (of 100) of a group's pops of a
#: PRIORITY topic made in priority order; its default
PRIORITY_FACTOR = "priority.factor"
DEFAULT_PRIORITY_FACTOR = 100


def java_int(text: str | None, default: int, bits: int = 32) -> int:
    """``NumberUtils.toInt(text, default)`` (``toLong`` with ``bits=64``): ``Integer.parseInt`` (an
    optional sign, ASCII digits, in the range) or ``default``."""
    if not text:
        return default
    digits = text[1:] if text[0] in "+-" else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return default
    value = int(text)
    return value if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1) else default


def priority_of(props: Mapping[str, str]) -> int:
    """``Message.getPriority``: the property as an int, -1 when absent or not a number."""
    return java_int(props.get(PROPERTY_PRIORITY), -1)


def priority_factor(group_attributes: Mapping[str, object] | None) -> int:
    """``SubscriptionGroupConfig.getPriorityFactor``."""
    value = (group_attributes or {}).get(PRIORITY_FACTOR)
    return java_int(value if isinstance(value, str) else None, DEFAULT_PRIORITY_FACTOR, 64)


def message_type(props: Mapping[str, str]) -> str:
    """``TopicMessageType.parseFromMessageProperty`` of 5.4.0: TRANSACTION, DELAY, FIFO, PRIORITY
    or NORMAL, in that order."""
    if (props.get("TRAN_MSG") or "").lower() == "true":  # Boolean.parseBoolean
        return "TRANSACTION"
    if any(props.get(k) is not None for k in _DELAY_KEYS):
        return "DELAY"
    if props.get("__SHARDINGKEY") is not None:
        return "FIFO"
    if props.get(PROPERTY_PRIORITY) is not None:
        return "PRIORITY"
    return "NORMAL"
