"""Names and counts a client may hand the broker: RocketMQ 5.x rules, and bounds Java lacks.

Topic and group names decide directory names under the store (``consumequeue/<topic>``,
``%RETRY%<group>``, ``%DLQ%<group>``), so every request that names one is checked here
before anything is created. The rules and remarks are Java's ``TopicValidator`` and
``Validators.checkGroup`` (5.3.3); the queue-count bound is rmqpy's own (Java has none, so
one ``UPDATE_AND_CREATE_TOPIC`` with 2,000,000,000 queues makes every later stats request
loop for ever).
"""
from __future__ import annotations

import re

from rmqpy.protocol.codes import MQVersion, ResponseCode

#: TopicValidator.TOPIC_MAX_LENGTH / Validators.CHARACTER_MAX_LENGTH (5.3.3)
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
#: Longest client ID accepted where the broker keeps it (lock table): Java has no limit; a
#: Java client's ID is ``ip@instanceName[@unitName]``, far below this.
MAX_CLIENT_ID_LENGTH = 1024
VALID_PATTERN = "^[%|a-zA-Z0-9_-]+$"
_VALID = re.compile(r"[%|a-zA-Z0-9_-]+")
#: default of the broker setting ``maxTopicQueueNums`` (rmqpy; Java accepts any int)
DEFAULT_MAX_TOPIC_QUEUE_NUMS = 1024
#: what ``maxTopicQueueNums`` is clamped to: UPDATE_BROKER_CONFIG may change the setting, and a
#: per-queue stats request (on the reactor: 0.02 s at 1024 queues, 0.15 s at 8192, 2.4 s at 65536)
#: must stay short whatever it says
MAX_TOPIC_QUEUE_NUMS_CEILING = 8192


def queue_nums_limit(setting: object) -> int:
    """The ``maxTopicQueueNums`` setting as used: an int in ``[1, MAX_TOPIC_QUEUE_NUMS_CEILING]``."""
    try:
        value = int(setting)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return DEFAULT_MAX_TOPIC_QUEUE_NUMS
    return max(1, min(value, MAX_TOPIC_QUEUE_NUMS_CEILING))


def is_topic_or_group_illegal(name: str) -> bool:
    """``TopicValidator.isTopicOrGroupIllegal``: a character outside ``[%|a-zA-Z0-9_-]``.

    (Java's loop passes the empty string; blank names are refused by the callers.)"""
    return bool(name) and _VALID.fullmatch(name) is None


def validate_topic(topic: str | None) -> str | None:
    """``TopicValidator.validateTopic``: None when fine, else Java's remark."""
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if is_topic_or_group_illegal(topic):
        return f"The specified topic contains illegal characters, allowing only {VALID_PATTERN}"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def validate_group(group: str | None) -> str | None:
    """``Validators.checkGroup`` (the client-side check of 5.3.3, applied by the broker here):
    None when fine, else Java's message."""
    if group is None or not group.strip():
        return "the specified group is blank"
    if len(group) > GROUP_MAX_LENGTH:
        return f"the specified group is longer than group max length {GROUP_MAX_LENGTH}."
    if is_topic_or_group_illegal(group):
        return f"the specified group[{group}] contains illegal characters, allowing only {VALID_PATTERN}"
    return None


def is_group_auto_creatable(group: str) -> bool:
    """5.3.3 ``SubscriptionGroupManager.findSubscriptionGroupConfig`` creates no group whose name
    is longer than 255 or has an illegal character (the caller then answers code 26)."""
    return bool(group) and len(group) <= GROUP_MAX_LENGTH and not is_topic_or_group_illegal(group)


def validate_queue_nums(read: int, write: int, limit: int) -> str | None:
    """None when both counts lie in ``[0, limit]``, else the remark (rmqpy: Java has no bound)."""
    for name, value in (("readQueueNums", read), ("writeQueueNums", write)):
        if value < 0 or value > limit:
            return (f"{name} {value} is out of range [0, {limit}] (broker setting maxTopicQueueNums)")
    return None


def bounded(count: int, limit: int) -> int:
    """``count`` clamped to ``[0, limit]``: how many queues a loop may visit."""
    return 0 if count <= 0 else min(count, limit)


def bad_parameter_code(version: int) -> int:
    """The code of a request refused for an illegal topic name or queue id: INVALID_PARAMETER from
    a V5_0_0 requester on, as the 5.x broker answers; SYSTEM_ERROR before, as 4.9.x answers (found by
    tests/interop/remoting_diff.py against Java 5.3.3)."""
    return ResponseCode.INVALID_PARAMETER if version >= MQVersion.V5_0_0 else ResponseCode.SYSTEM_ERROR


def group_sys_flag(extra: dict) -> int:
    """5.x's ``groupSysFlag`` of a subscription group, kept among its config's extra keys: a Java int,
    0 when absent or not one (a config a client wrote may hold any JSON value there)."""
    value = extra.get("groupSysFlag", 0)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) <= 11:
        value = int(value)
    return value if type(value) is int and -(1 << 31) <= value < (1 << 31) else 0
