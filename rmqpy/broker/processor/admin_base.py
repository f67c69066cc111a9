"""What the families of AdminBrokerProcessor share: constants, helpers and the answers' shapes."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from twisted.internet import defer

from rmqpy.broker.topic import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    RMQ_SYS_BENCHMARK_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_TRACE_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    validate_topic,
)
from rmqpy.broker.validation import bad_parameter_code, bounded
from rmqpy.common import config_guard
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import LanguageCode, MQVersion, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.channel import Channel
from rmqpy.remoting.ratelimit import RateLimitedLogger
from rmqpy.store.role import is_slave

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."
CONFIG_BLACK_LIST = config_guard.BROKER_BLACK_LIST
# TopicValidator.SYSTEM_TOPIC_SET (the broker adds its cluster and broker name topics)
SYSTEM_TOPICS = (AUTO_CREATE_TOPIC_KEY_TOPIC, RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_BENCHMARK_TOPIC,
                 RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRACE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
                 RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT)
V3_0_7_SNAPSHOT = 72
V3_1_8_SNAPSHOT = 132
JAVA_LONG_MAX = 2 ** 63 - 1
#: how long the broker waits for a consumer's answer to a request it forwards (Broker2Client.callClient)
CALL_CLIENT_TIMEOUT_S = 10.0
GROUP_GET_NUMS = "GROUP_GET_NUMS"


def human_readable_bytes(n: int) -> str:
    """``MixAll.humanReadableByteCount(bytes, false)``."""
    if n < 1024:
        return f"{n} B"
    exp = 0
    v = float(n)
    while v >= 1024 and exp < 6:
        v /= 1024
        exp += 1
    return f"{n / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def language_name(code: Any) -> str:
    try:
        return LanguageCode(int(code)).name
    except (ValueError, TypeError):
        return str(code)


def version_desc(version: int) -> str:
    return MQVersion.name_of(version) or str(version)


_Handler = TypeVar("_Handler", bound=Callable[..., Any])


def master_only(handler: _Handler) -> _Handler:
    """A request Java's AdminBrokerProcessor refuses on a slave: answered SYSTEM_ERROR with
    :data:`SLAVE_REMARK` before ``handler`` runs."""
    @functools.wraps(handler)
    def refuse_on_slave(self: AdminBase, channel: Channel, request: RemotingCommand) -> Any:
        if self._is_slave():
            return request.response(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        return handler(self, channel, request)
    return refuse_on_slave  # type: ignore[return-value]


class AdminBase:
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped
    broker: "Broker"

    def _ok(self, request: RemotingCommand, body: bytes | None = None, **kw: Any) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, None, body=body, **kw)

    def _is_slave(self) -> bool:
        return is_slave(self.broker.store_config)

    @property
    def broker_name(self) -> str:
        return self.broker.broker_config.brokerName

    def _mq(self, topic: str, queue_id: int) -> fastjson.ObjectKey:
        return fastjson.ObjectKey(brokerName=self.broker_name, queueId=queue_id, topic=topic)

    def _system_topics(self) -> set[str]:
        return set(SYSTEM_TOPICS) | set(self.broker.topic_config_manager.system_topics)

    def _is_system_topic(self, topic: str) -> bool:
        return topic in self._system_topics() or topic.startswith("rmq_sys_")

    def _max_queues(self) -> int:
        return self.broker.topic_config_manager.max_queue_nums

    def _queues(self, count: int) -> range:
        """Queue ids 0..count-1, never more than ``maxTopicQueueNums``: these loops run on the reactor."""
        return range(bounded(count, self._max_queues()))

    def _topic_checks(self, request: RemotingCommand, topic: str) -> RemotingCommand | None:
        bad = validate_topic(topic)
        if bad is not None:
            return request.response(bad_parameter_code(request.version), bad)
        if self._is_system_topic(topic):
            return request.response(bad_parameter_code(request.version),
                                    f"The topic[{topic}] is conflict with system topic.")
        return None

    def _stats(self) -> Any:
        return self.broker.broker_stats_manager

    def call_consumer(self, code: int, request: RemotingCommand, group: str, client_id: str) -> Any:
        info = self.broker.consumer_manager.get(group)
        client = None
        if info is not None:
            client = next((c for c in info.channels.values() if c.client_id == client_id), None)
        if client is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if client.version < V3_1_8_SNAPSHOT:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"The Consumer <{client_id}> Version <{version_desc(client.version)}> too low to "
                                    f"finish, please upgrade it to V3_1_8_SNAPSHOT")
        forward = RemotingCommand.request(code, None, request.body)
        forward.ext_fields = dict(request.ext_fields or {})
        d = defer.maybeDeferred(client.channel.invoke, forward, CALL_CLIENT_TIMEOUT_S)

        def answered(resp: RemotingCommand) -> RemotingCommand:
            out = request.response(resp.code, resp.remark, body=resp.body, ext_fields=resp.ext_fields)
            return out

        def failed(f: Any) -> RemotingCommand:
            from twisted.internet.error import TimeoutError as TwistedTimeout
            if f.check(TwistedTimeout, defer.TimeoutError):
                return request.response(ResponseCode.CONSUME_MSG_TIMEOUT,
                                        f"consumer <{group}> <{client_id}> Timeout: {f.getErrorMessage()}")
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"invoke consumer <{group}> <{client_id}> Exception: {f.getErrorMessage()}")

        return d.addCallbacks(answered, failed)
