"""TopicConfigManager: the broker's topics (config/topics.json), as Java's manager keeps them."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime

from rmqpy.broker.configfile import ConfigManager
from rmqpy.broker.validation import (  # noqa: F401
    DEFAULT_MAX_TOPIC_QUEUE_NUMS,
    bounded,
    queue_nums_limit,
    validate_topic,  # (validate_topic re-exported)
)
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.topic import PERM_INHERIT, PERM_READ, PERM_WRITE, DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rmqpy.remoting.ratelimit import RateLimitedLogger

if TYPE_CHECKING:
    from rmqpy.broker.config import BrokerConfig

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
SCHEDULE_TOPIC_QUEUE_NUM = 18
TOPIC_MAX_LENGTH = 127

NOT_ALLOWED_SEND_TOPICS = frozenset({
    RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT,
})


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def perm_to_string(perm: int) -> str:
    return ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-") + \
        ("X" if perm & PERM_INHERIT else "-")


def topic_config_string(tc: TopicConfig, attributes: bool = False) -> str:
    """Java ``TopicConfig.toString()`` (appears in remarks): 4.9.x's, or with ``attributes`` 5.x's, which
    ends with the attributes map as Java prints it (``{k=v, ...}``; more than one in the dict's order,
    where Java prints its HashMap's)."""
    tail = ", attributes={" + ", ".join(f"{k}={v}" for k, v in tc.attributes.items()) + "}" if attributes else ""
    return (f"TopicConfig [topicName={tc.topicName}, readQueueNums={tc.readQueueNums}, "
            f"writeQueueNums={tc.writeQueueNums}, perm={perm_to_string(tc.perm)}, "
            f"topicFilterType={tc.topicFilterType}, topicSysFlag={tc.topicSysFlag}, "
            f"order={'true' if tc.order else 'false'}{tail}]")


class TopicConfigManager(ConfigManager):
    file_name = "topics.json"
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped

    def __init__(self, broker_config: BrokerConfig, config_dir: str | None,
                 on_new_topic: Callable[[TopicConfig], None] | None = None,
                 clock: IReactorTime | None = None) -> None:
        self.log = self.log.on(clock)
        super().__init__(config_dir)
        self.broker_config = broker_config
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.system_topics: set[str] = set()
        # called with the topic whenever one is created on demand: registers it
        self.on_new_topic = on_new_topic
        #: each topic's line in topics.json, with the TopicConfig and update count it was written from
        self._text_cache: dict[str, tuple[TopicConfig, int, str]] = {}
        self._updates: dict[str, int] = {}  # topics handed to update_topic_config, and how often
        self._create_system_topics()

    def _sys(self, name: str, queues: int | None = None, perm: int | None = None) -> None:
        tc = TopicConfig(name)
        if queues is not None:
            tc.readQueueNums = tc.writeQueueNums = queues
        if perm is not None:
            tc.perm = perm
        self.system_topics.add(name)
        self.table[name] = tc

    def _create_system_topics(self) -> None:
        bc = self.broker_config
        self._sys(RMQ_SYS_SELF_TEST_TOPIC, 1)
        if bc.autoCreateTopicEnable:
            self._sys(AUTO_CREATE_TOPIC_KEY_TOPIC, bc.defaultTopicQueueNums, PERM_INHERIT | PERM_READ | PERM_WRITE)
        self._sys(RMQ_SYS_BENCHMARK_TOPIC, 1024)
        self._sys(bc.brokerClusterName, None,
                  PERM_INHERIT | ((PERM_READ | PERM_WRITE) if bc.clusterTopicEnable else 0))
        self._sys(bc.brokerName, 1, PERM_INHERIT | ((PERM_READ | PERM_WRITE) if bc.brokerTopicEnable else 0))
        self._sys(RMQ_SYS_OFFSET_MOVED_EVENT, 1)
        self._sys(RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM)
        if bc.traceTopicEnable:
            self._sys(bc.msgTraceTopicName, 1)
        self._sys(f"{bc.brokerClusterName}_{REPLY_TOPIC_POSTFIX}", 1)
        # Java creates these lazily (transaction service); listed so routes know them
        for name in (RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC):
            self.system_topics.add(name)

    # ------------------------------------------------------------------ persistence
    def encode(self) -> Any:
        return TopicConfigSerializeWrapper(dict(self.table), self.data_version)

    def snapshot(self) -> Any:
        """The data version's JSON and a copy of the table (name to topic). A TopicConfig in the table
        is replaced when a topic changes, never changed in place, so the writer's thread may read
        the objects themselves (100,000 topics: a copy of references, where new dicts of every
        topic took 150 ms of the reactor). How many times each topic was handed to
        :meth:`update_topic_config` goes with it: a text made for another count is made anew even if
        the object is the one written before (a caller that changed the topic in place and handed it
        back); a count, not a flag cleared by the snapshot, as a newer save may replace this one
        before it is written."""
        return self.data_version.to_json(), dict(self.table), dict(self._updates)

    def encode_snapshot(self, snap: Any) -> Any:
        version, table, _ = snap
        return {"dataVersion": version, "topicConfigTable": {name: tc.to_json() for name, tc in table.items()}}

    def persist_text(self) -> str:
        return self.snapshot_text(self.snapshot())

    def snapshot_text(self, snap: Any) -> str:
        """What ``fastjson.dumps(..., pretty=True)`` writes for the snapshot, from each topic's
        cached text: only the topics changed since the last write are written anew, so a file of
        100,000 topics takes a join and a write (2.5 s of pure-Python JSON before, per change)."""
        version, table, updates = snap
        cache = self._text_cache
        fresh: dict[str, tuple[TopicConfig, int, str]] = {}
        parts = []
        for name in sorted(table):
            tc = table[name]
            cached = cache.get(name)
            count = updates.get(name, 0)
            if cached is None or cached[0] is not tc or cached[1] != count:
                cached = (tc, count, f"\n\t\t{fastjson.dumps(name)}:{fastjson.dumps_nested(tc, 2, pretty=True)}")
            fresh[name] = cached
            parts.append(cached[2])
        self._text_cache = fresh  # deleted topics leave it
        table = "{" + ",".join(parts) + "\n\t}" if parts else "{}"
        return "{\n\t\"dataVersion\":" + fastjson.dumps_nested(version, 1, pretty=True) + \
            ",\n\t\"topicConfigTable\":" + table + "\n}"

    @property
    def max_queue_nums(self) -> int:
        """The broker setting ``maxTopicQueueNums``: no topic has more read or write queues."""
        return queue_nums_limit(self.broker_config.maxTopicQueueNums)

    def _bound(self, tc: TopicConfig) -> TopicConfig:
        """Clamp the queue counts of a topic read from disk or made on demand (warned once):
        per-queue loops and routes stay proportional to the limit, never to a stored number."""
        limit = self.max_queue_nums
        read, write = bounded(tc.readQueueNums, limit), bounded(tc.writeQueueNums, limit)
        if (read, write) != (tc.readQueueNums, tc.writeQueueNums):
            self.log.warn("topic {t}: queue counts read={r} write={w} clamped to [0, {m}] (maxTopicQueueNums)",
                          t=tc.topicName, r=tc.readQueueNums, w=tc.writeQueueNums, m=limit)
            tc.readQueueNums, tc.writeQueueNums = read, write
        return tc

    def decode(self, obj: Any) -> None:
        wrapper = TopicConfigSerializeWrapper.from_json(obj)
        for tc in wrapper.topicConfigTable.values():
            self._bound(tc)
        self.table.update(wrapper.topicConfigTable)
        self.data_version = wrapper.dataVersion

    def wrapper(self) -> TopicConfigSerializeWrapper:
        return TopicConfigSerializeWrapper(dict(self.table), self.data_version)

    # ------------------------------------------------------------------ queries
    def select(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def is_order_topic(self, topic: str) -> bool:
        tc = self.table.get(topic)
        return bool(tc and tc.order)

    def is_system_topic(self, topic: str) -> bool:
        return topic in self.system_topics or topic.startswith(SYSTEM_TOPIC_PREFIX)

    # ------------------------------------------------------------------ changes
    def _added(self, tc: TopicConfig) -> TopicConfig:
        self.table[tc.topicName] = tc
        self.data_version.next_version()
        self.save()
        if self.on_new_topic is not None:
            self.on_new_topic(tc)
        return tc

    def create_topic_in_send_message_method(self, topic: str, default_topic: str, remote_address: str,
                                            client_default_queue_nums: int, topic_sys_flag: int) -> TopicConfig | None:
        tc = self.table.get(topic)
        if tc is not None:
            return tc
        default = self.table.get(default_topic)
        if default is None:
            self.log.warn("Create new topic failed, because the default topic[{d}] not exist. producer:[{p}]",
                          d=default_topic, p=remote_address)
            return None
        perm = default.perm
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.broker_config.autoCreateTopicEnable:
            # Java overwrites TBW102's perm in memory here; it is only computed, so that a TBW102
            # kept in topics.json stays inheritable when the flag is switched back on
            perm = PERM_READ | PERM_WRITE
        if not perm & PERM_INHERIT:
            self.log.warn("Create new topic failed, because the default topic[{d}] has no perm [{perm}] "
                          "producer:[{p}]", d=default_topic, perm=perm, p=remote_address)
            return None
        nums = max(0, min(client_default_queue_nums, default.writeQueueNums))
        tc = TopicConfig(topic, readQueueNums=nums, writeQueueNums=nums, perm=perm & ~PERM_INHERIT,
                         topicFilterType=default.topicFilterType, topicSysFlag=topic_sys_flag)
        self.log.info("Create new topic by default topic:[{d}] config:[{tc}] producer:[{p}]", d=default_topic,
                      tc=topic_config_string(tc), p=remote_address)
        return self._added(tc)

    def create_topic_in_send_message_back_method(self, topic: str, queue_nums: int, perm: int,
                                                 topic_sys_flag: int = 0) -> TopicConfig:
        tc = self.table.get(topic)
        if tc is not None:
            return tc
        tc = self._bound(TopicConfig(topic, readQueueNums=queue_nums, writeQueueNums=queue_nums, perm=perm,
                                     topicSysFlag=topic_sys_flag))
        self.log.info("create new topic {tc}", tc=topic_config_string(tc))
        return self._added(tc)

    def create_topic_of_tran_check_max_time(self, queue_nums: int, perm: int) -> TopicConfig:
        return self.create_topic_in_send_message_back_method(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, queue_nums, perm)

    def update_topic_config(self, tc: TopicConfig) -> defer.Deferred:
        """UPDATE_AND_CREATE_TOPIC (admin): replace or add, bump the version, persist; the Deferred
        fires once the file has it."""
        self.table[tc.topicName] = self._bound(tc)
        self._updates[tc.topicName] = self._updates.get(tc.topicName, 0) + 1
        self.data_version.next_version()
        return self.save()

    def delete_topic_config(self, topic: str) -> defer.Deferred | None:
        """None if there was no such topic, else :meth:`save`'s Deferred."""
        if self.table.pop(topic, None) is None:
            return None
        self.data_version.next_version()
        return self.save()
