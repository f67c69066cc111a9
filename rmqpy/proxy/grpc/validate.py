"""The request checks of the proxy (5.4.0, the newest compared; 5.3.3's where unchanged) that answer
with a ``Code`` and a fixed text: ``GrpcValidator`` (with the client's ``Validators.checkTopic``/
``checkGroup``), ``SendMessageActivity``'s message checks and ``ReceiptHandle.isExpired``, with their
texts word for word, since clients and their users see them (tests/interop/grpc_diff.py compares them with the proxy's answers).

Java's notions are kept where Python's differ: a blank string is one of ``Character.isWhitespace``
characters only, a control character is ``CharMatcher.javaIsoControl`` (U+0000-U+001F and
U+007F-U+009F), a length is in UTF-16 units (``String.length``) and a size in UTF-8 bytes.
"""
from __future__ import annotations

import re

from rocketmq.grpc_protocol import definition_pb2 as pb

Code = pb.Code

TOPIC_MAX_LENGTH = 127  # Validators.TOPIC_MAX_LENGTH
GROUP_MAX_LENGTH = 120  # Validators.GROUP_MAX_LENGTH of 5.4.0 (5.3.3: CHARACTER_MAX_LENGTH, 255)
_LEGAL = re.compile(r"^[%|a-zA-Z0-9_-]+$")
_ISO_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Character.isWhitespace: the Unicode space separators but the no-break ones, and \t..\r, \x1c..\x1f
_JAVA_WHITESPACE = frozenset(" \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                             "\u2008\u2009\u200a\u2028\u2029\u205f\u3000")
# TopicValidator.SYSTEM_TOPIC_SET (and its "rmq_sys_" prefix), MixAll.CID_RMQ_SYS_PREFIX
SYSTEM_TOPICS = frozenset(("TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
                           "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
                           "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC"))
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"


class Refused(Exception):
    """A request the activity answers with ``code`` and ``message`` without running it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def blank(s: str) -> bool:
    """``StringUtils.isBlank``: empty or Java whitespace only."""
    return all(c in _JAVA_WHITESPACE for c in s)


def has_control(s: str) -> bool:
    return _ISO_CONTROL.search(s) is not None


def java_length(s: str) -> int:
    """``String.length()``: UTF-16 code units."""
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def utf8_size(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def check_topic(name: str) -> str:
    """``GrpcValidator.validateTopic``."""
    if blank(name):
        raise Refused(Code.ILLEGAL_TOPIC, "The specified topic is blank")
    if java_length(name) > TOPIC_MAX_LENGTH:
        raise Refused(Code.ILLEGAL_TOPIC, f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    if not _LEGAL.match(name):
        raise Refused(Code.ILLEGAL_TOPIC, f"The specified topic[{name}] contains illegal characters, "
                                          "allowing only ^[%|a-zA-Z0-9_-]+$")
    if name in SYSTEM_TOPICS or name.startswith("rmq_sys_"):
        raise Refused(Code.ILLEGAL_TOPIC, "cannot access system topic")
    return name


def check_group(name: str) -> str:
    """``GrpcValidator.validateConsumerGroup``: 5.4.0's bound of 120, which keeps ``%RETRY%group_topic``
    within a retry topic's 255."""
    if blank(name):
        raise Refused(Code.ILLEGAL_CONSUMER_GROUP, "the specified group is blank")
    if java_length(name) > GROUP_MAX_LENGTH:
        raise Refused(Code.ILLEGAL_CONSUMER_GROUP,
                      f"the specified group[{name}] is longer than group max length: {GROUP_MAX_LENGTH}.")
    if not _LEGAL.match(name):
        raise Refused(Code.ILLEGAL_CONSUMER_GROUP, f"the specified group[{name}] contains illegal characters, "
                                                   "allowing only ^[%|a-zA-Z0-9_-]+$")
    if name.startswith(SYSTEM_GROUP_PREFIX):
        raise Refused(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")
    return name


def topic_not_found(name: str) -> Refused:
    """The proxy's answer for a topic the name server has no route of (the client's
    ``MQClientException`` for TOPIC_NOT_EXIST, with its FAQ link)."""
    return Refused(Code.TOPIC_NOT_FOUND, f"CODE: 17  DESC: No topic route info in name server for the topic: {name}\n"
                                         "For more information, please visit the url, "
                                         "https://rocketmq.apache.org/docs/bestPractice/06FAQ")


def proxy_exception(code: int, text: str) -> Refused:
    """A ``ProxyException`` the proxy wraps in a ``GrpcProxyException``: its message is the cause's
    ``toString()``, the class name first."""
    return Refused(code, f"org.apache.rocketmq.proxy.common.ProxyException: {text}")


def invisible_time(ms: int, minimum: int, maximum: int) -> int:
    """``GrpcValidator.validateInvisibleTime``."""
    if ms < minimum:
        raise Refused(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {minimum}")
    if 0 < maximum < ms:
        raise Refused(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {maximum}")
    return ms


def tag(value: str) -> None:
    """``GrpcValidator.validateTag``: an empty tag is no tag."""
    if value:
        if blank(value):
            raise Refused(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in value:
            raise Refused(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if has_control(value):
            raise Refused(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def message_key(value: str) -> None:
    """``SendMessageActivity.validateMessageKey``: an empty key passes."""
    if value:
        if blank(value):
            raise Refused(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if has_control(value):
            raise Refused(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def message_group(value: str, max_size: int) -> None:
    """``SendMessageActivity.validateMessageGroup``: its UTF-8 size must be below ``max_size``."""
    if blank(value):
        raise Refused(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
    if max_size > 0 and utf8_size(value) >= max_size:
        raise Refused(Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {max_size}")
    if has_control(value):
        raise Refused(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")


def topic_message_type(expected: str, actual: str) -> None:
    """``DefaultTopicMessageTypeValidator``: a MIXED topic takes every type."""
    if actual == "UNSPECIFIED" or (actual != expected and expected != "MIXED"):
        raise proxy_exception(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                              f"TopicMessageType validate failed, the expected type is {expected}, "
                              f"but actual type is {actual}")


def expired(next_visible_ms: int, now_ms: int) -> bool:
    """``ReceiptHandle.isExpired``: past its next visible time."""
    return next_visible_ms <= now_ms
