"""Message filters handed to ``MessageStore.get_message`` (Java's ExpressionMessageFilter)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from rmqpy.broker.filter import sql92
from rmqpy.protocol.bodies.heartbeat import SUB_ALL, SubscriptionData
from rmqpy.protocol.message import RecordError, decode_record
from rmqpy.remoting.ratelimit import RateLimitedLogger


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v & 0x80000000 else v


@dataclass
class ConsumerFilterData:
    """A compiled non-TAG subscription of one group on one topic (ConsumerFilterData)."""
    group: str
    topic: str
    expression: str
    expression_type: str
    client_version: int
    compiled: sql92.Expression


class ExpressionMessageFilter:
    #: a failing evaluation is logged on every message it meets (pulls, arrivals): rate-limited
    log = RateLimitedLogger()

    def __init__(self, subscription: SubscriptionData | None, filter_data: ConsumerFilterData | None = None) -> None:
        self.subscription = subscription
        self.filter_data = filter_data
        self._codes = {_int32(c) for c in (subscription.codeSet if subscription else [])}

    def takes_all(self) -> tuple[bool, bool]:
        """Whether :meth:`is_matched_by_consume_queue` and :meth:`is_matched_by_commit_log`
        answer True for any message, as they stand now (the store then skips the calls)."""
        sub = self.subscription
        if sub is None:
            return True, True
        is_tag = sub.is_tag
        return (sub.classFilterMode or not is_tag or sub.subString == SUB_ALL,
                is_tag or self.filter_data is None)

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext: Any = None) -> bool:
        sub = self.subscription
        if sub is None or sub.classFilterMode:
            return True
        if sub.is_tag:
            if tags_code is None or sub.subString == SUB_ALL:
                return True
            return _int32(tags_code) in self._codes
        return True  # SQL92: no bloom filter bitmaps here; decided on the properties

    def is_matched_by_commit_log(self, data: bytes | None, properties: Mapping[str, str] | None) -> bool:
        sub = self.subscription
        if sub is None or sub.is_tag or self.filter_data is None:
            return True
        if properties is None and data is not None:
            try:
                properties = decode_record(data, 0, check_crc=False, read_body=False).properties
            except (RecordError, ValueError):
                return False
        try:
            return self.filter_data.compiled.matches(properties or {})
        except Exception:  # noqa: BLE001 - as Java's catch (Throwable): logged, and no match
            self.log.failure("message filter error, group {group} topic {topic} expression {expression}",
                             group=self.filter_data.group, topic=self.filter_data.topic,
                             expression=self.filter_data.expression)
            return False


class ConsumerFilterManager:
    """Compiled SQL92 subscriptions by (topic, group), registered from heartbeats."""

    def __init__(self) -> None:
        self.table: dict[tuple[str, str], ConsumerFilterData] = {}

    def register(self, group: str, sub: SubscriptionData) -> bool:
        if sub.is_tag:
            return False
        key = (sub.topic, group)
        old = self.table.get(key)
        if old is not None and old.expression == sub.subString and old.client_version >= sub.subVersion:
            return False
        data = self.build(group, sub.topic, sub.subString, sub.expressionType, sub.subVersion)
        if data is None:
            self.table.pop(key, None)
            return False
        self.table[key] = data
        return True

    @staticmethod
    def build(group: str, topic: str, expression: str | None, expression_type: str,
              version: int) -> ConsumerFilterData | None:
        if (expression_type or "").upper() != "SQL92":
            return None
        try:
            compiled = sql92.compile(expression)
        except sql92.SQLParseError:
            return None
        return ConsumerFilterData(group, topic, expression or "", expression_type, version, compiled)

    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        return self.table.get((topic, group))

    def unregister(self, group: str) -> None:
        for key in [k for k in self.table if k[1] == group]:
            del self.table[key]
