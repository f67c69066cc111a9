"""Topic attributes of RocketMQ 5 (``TopicAttributes``, ``AttributeParser``): ``message.type`` and kin.

UPDATE_AND_CREATE_TOPIC carries a modification such as ``+message.type=FIFO,-cleanup.policy``; the
topic keeps ``{"message.type": "FIFO"}``. Apache's proxy reads ``message.type`` to tell a FIFO topic
from a normal one. Only Java's keys and values are taken; anything else is refused, as Java refuses it.
"""
from __future__ import annotations

ENUM_ATTRIBUTES = {
    # PRIORITY since 5.4.0 (TopicMessageType)
    "message.type": {"UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "PRIORITY", "MIXED"},
    "queue.type": {"BatchCQ", "SimpleCQ"},
    "cleanup.policy": {"DELETE", "COMPACTION"},
}
RESERVE_TIME = "reserve.time"  # LongRangeAttribute, -1 .. 7 * 24 (hours)


def topic_message_type(attributes: dict[str, str] | None, default: str = "NORMAL") -> str:
    """``TopicConfig.getTopicMessageType``: the ``message.type`` attribute, ``default`` without one (Java's
    NORMAL; the gRPC endpoint takes MIXED, so that one topic takes every type as the 4.x broker did)."""
    attrs = attributes or {}
    return (attrs.get("message.type") or attrs.get("+message.type") or default).upper()


class AttributeError_(ValueError):
    """A modification Java would refuse (its RuntimeException text)."""


def alter(current: dict[str, str], modification: str | None) -> dict[str, str]:
    """``current`` after ``modification`` (``+key=value`` adds or changes, ``-key`` deletes)."""
    out = dict(current)
    if not modification:
        return out
    if len(modification) > 4096:
        raise AttributeError_("attributes are too long")
    seen: set[str] = set()
    for kv in modification.split(","):
        if "=" in kv:
            key, _, value = kv.partition("=")
            if not key.startswith("+"):
                raise AttributeError_(f"add/alter attribute format is wrong: {key[:64]}")
        else:
            key, value = kv, ""
            if not key.startswith("-"):
                raise AttributeError_(f"delete attribute format is wrong: {key[:64]}")
        if key in seen:
            raise AttributeError_(f"key duplication: {key[:64]}")
        seen.add(key)
        name = key[1:]
        if name not in ENUM_ATTRIBUTES and name != RESERVE_TIME:
            raise AttributeError_(f"unsupported key: {name[:64]}")
        if key.startswith("-"):
            out.pop(name, None)
            continue
        if name == RESERVE_TIME:
            if not value.lstrip("-").isdigit() or not -1 <= int(value) <= 7 * 24:
                raise AttributeError_(f"value is not in range(-1, 168): {value[:32]}")
        elif value not in ENUM_ATTRIBUTES[name]:
            raise AttributeError_(f"value is not in set: {value[:64]}")
        out[name] = value
    return out
