"""What the processors and the broker's services see of the broker.

:class:`~rmqpy.broker.controller.BrokerController` builds the managers, the store, the
services and the processors (it is the composition root); everything it builds gets the
controller typed as :class:`Broker`, the part of it they use. This module imports the
managers and the store's API but no processor, service or controller, so the controller
imports the processors and no processor imports the controller back.
"""
from __future__ import annotations

from typing import Any, Protocol

from twisted.internet import defer

from rmqpy.auth.pipeline import AuthPipeline
from rmqpy.broker.clients import ConsumerManager, ProducerManager
from rmqpy.broker.config import BrokerConfig, BrokerSettings
from rmqpy.broker.fast_failure import BrokerFastFailure
from rmqpy.broker.filter.message_filter import ConsumerFilterManager
from rmqpy.broker.handover import QueueHandover
from rmqpy.broker.longpolling import PullRequestHoldService
from rmqpy.broker.offsets import ConsumerOffsetManager, DelayOffsetManager
from rmqpy.broker.rebalance_lock import RebalanceLockManager
from rmqpy.broker.stats import BrokerStatsManager
from rmqpy.broker.subscription import SubscriptionGroupManager
from rmqpy.broker.topic import TopicConfigManager
from rmqpy.protocol.bodies.ha import HARuntimeInfo
from rmqpy.protocol.bodies.topic import TopicConfig
from rmqpy.protocol.command import RemotingCommand
from rmqpy.store.api import MessageStore
from rmqpy.store.config import MessageStoreConfig
from rmqpy.store.role import BrokerRole, RoleState


class ReplicationSide(Protocol):
    """The store's replication as the broker drives it: classic HA (``rmqpy.store.ha.replication
    .Replication``) or, in controller mode, the HA side the replicas manager talks to
    (``rmqpy.broker.replicas.ha``)."""

    #: the HA port's factory; None: the broker opens no HA port
    service: Any

    def apply_role(self, role: BrokerRole) -> None: ...

    def start(self) -> None: ...

    def shutdown(self) -> None: ...

    def registered(self, ha_server_addr: str | None) -> None: ...

    def slave_fall_behind_much(self) -> int: ...

    def runtime_info(self) -> dict[str, str]: ...

    def ha_runtime_info(self) -> HARuntimeInfo | None:
        """GET_BROKER_HA_STATUS's body; None: no HA service to ask."""
        ...


class SendMessageHook(Protocol):
    """Java ``SendMessageHook``: told of each send's answer, with the topic of its decoded header."""

    def send_message_after(self, response: Any, request: RemotingCommand, topic: str) -> Any:
        """Returns ``response``: it is also a Deferred's callback."""
        ...


class ConsumeMessageHook(Protocol):
    """Java ``ConsumeMessageHook``: told of each found pull's answer, with its group, topic and queue."""

    def consume_message_after(self, group: str, topic: str, queue_id: int, response: RemotingCommand) -> None: ...


class EndTransactionHook(Protocol):
    """Told of each half message committed or rolled back (Java counts these in its
    ``EndTransactionProcessor``): the real topic, which, and the half message's born time (ms)."""

    def end_transaction_after(self, topic: str, committed: bool, born_timestamp: int) -> None: ...


class SendBackHook(Protocol):
    """Told of each message a CONSUMER_SEND_MSG_BACK moves to the group's DLQ (Java counts
    ``rocketmq_send_to_dlq_messages_total`` there)."""

    def send_to_dlq(self, group: str, origin_topic: str) -> None: ...


class PopMetricsHook(Protocol):
    """Java ``PopMetricsManager``'s counters: revive records written (CK/ACK, put status), read back by
    the revive service (per revive queue), and messages revived to the retry topic."""

    def revive_put(self, group: str, topic: str, kind: str, status: str) -> None: ...

    def revive_get(self, group: str, topic: str, queue_id: int, kind: str) -> None: ...

    def revive_retry(self, group: str, topic: str, status: str) -> None: ...


class TimerMetricsHook(Protocol):
    """Java ``DefaultStoreMetricsManager``'s timer counters: a timer message parked (its real topic and
    the delay asked, in s: ``rocketmq_delay_message_latency``) and one delivered."""

    def timer_enqueue(self, topic: str, delay_s: int) -> None: ...

    def timer_dequeue(self, topic: str) -> None: ...


class HalfMessageHook(Protocol):
    """Told of a half message checked ``transactionCheckMax`` times and discarded: it is no longer
    half (Java's ``TransactionMetrics`` count, ``rocketmq_half_messages``)."""

    def half_discarded(self, topic: str) -> None: ...


class Broker(Protocol):
    """The broker as its processors and services use it (Java hands them ``BrokerController``)."""

    settings: BrokerSettings
    broker_config: BrokerConfig
    store_config: MessageStoreConfig
    reactor: Any
    store_host: tuple[str, int]
    broker_addr: str
    config_dir: str
    started: bool

    topic_config_manager: TopicConfigManager
    subscription_group_manager: SubscriptionGroupManager
    consumer_offset_manager: ConsumerOffsetManager
    delay_offset_manager: DelayOffsetManager
    consumer_filter_manager: ConsumerFilterManager
    producer_manager: ProducerManager
    consumer_manager: ConsumerManager
    rebalance_lock_manager: RebalanceLockManager
    queue_handover: QueueHandover
    broker_stats_manager: BrokerStatsManager
    fast_failure: BrokerFastFailure
    pull_hold_service: PullRequestHoldService
    message_store: MessageStore
    replication: ReplicationSide
    transactional_message_service: Any
    schedule_message_service: Any
    timer_message_service: Any
    pop_revive_service: Any
    processors: dict[str, Any]
    #: 5.x authentication and authorization of requests (None when both are off); the gRPC endpoint
    #: tells it which channels' requests were checked before (proxy/grpc/auth.py)
    auth_pipeline: AuthPipeline | None

    def now_ms(self) -> int: ...

    def register_broker_all(self) -> defer.Deferred[Any]: ...

    def register_topics(self, topics: list[TopicConfig]) -> defer.Deferred[Any]: ...

    @property
    def role(self) -> RoleState: ...

    def hold_role(self, state: RoleState) -> None: ...

    def switch_role(self, role: BrokerRole, broker_id: int | None = None, register: bool = True) -> None: ...

    def prepare_transaction_message(self, msg: Any) -> defer.Deferred[Any]: ...

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, offset: int) -> bool: ...
