"""Permissions of plain ACL, as Java's ``Permission`` and ``AclConstants``.

A permission is a bit set: DENY wins over everything, PUB allows sending, SUB pulling and
consuming. Topics and groups are both resources; a group is kept under its retry topic
(``%RETRY%group``), so a send to a retry topic is checked as SUB on the group.
"""
from __future__ import annotations

from rmqpy.protocol.codes import RequestCode

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"

ACCESS_KEY_MIN_LENGTH = 6
SECRET_KEY_MIN_LENGTH = 6

_NAMES = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}

# Java's Permission.ADMIN_CODE: only admin accounts may send these
JAVA_ADMIN_CODES = frozenset(int(c) for c in (
    RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG, RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.DELETE_SUBSCRIPTIONGROUP,
))


class AclError(Exception):
    """A request or a configuration the ACL refuses; the message is Java's ``AclException`` text."""

    def __init__(self, message: str, where: str = "validate") -> None:
        super().__init__(message)
        self.where = where  # the Java method that throws it (for Java's remark)


def parse(perm: str | None) -> int:
    """``Permission.parsePermFromString``: anything unknown is DENY."""
    if perm is None:
        return DENY
    return _NAMES.get(str(perm).strip(), DENY)


def check(needed: int, owned: int) -> bool:
    """``Permission.checkPermission``."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str | None) -> bool:
    return topic is not None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def describe(resource: str) -> str:
    """``PlainAccessResource.printStr``: ``group:G`` for a retry topic, else ``topic:T``."""
    if is_retry_topic(resource):
        return "group:" + resource[len(RETRY_GROUP_TOPIC_PREFIX):]
    return "topic:" + resource


def check_resource_perms(resources: list[str] | None) -> None:
    """``Permission.checkResourcePerms``: each item is ``name=PERM`` with a known PERM."""
    for item in resources or []:
        parts = [p for p in str(item).split("=") if p]
        if len(parts) != 2:
            raise AclError(f"Parse Resource format error for {item}.\nThe expected resource format is "
                           "'Res=Perm'. For example: topicA=SUB", "checkResourcePerms")
        if parts[1].strip() != "DENY" and parse(parts[1]) == DENY:
            raise AclError(f"Parse resource permission error for {item}.\nThe expected permissions are "
                           "'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.", "checkResourcePerms")
