"""Headers of the admin requests mqadmin sends to a broker (facts §4.6)."""
from __future__ import annotations

from rmqpy.protocol.headers.base import CommandHeader, Long, header, optional, required


@header
class CreateTopicRequestHeader(CommandHeader):
    topic: str = required()
    defaultTopic: str | None = optional()
    readQueueNums: int = required()
    writeQueueNums: int = required()
    perm: int = required()
    topicFilterType: str | None = optional()
    topicSysFlag: int | None = optional()
    order: bool | None = optional()
    attributes: str | None = optional()
    force: bool | None = optional()


@header
class TopicRequestHeader(CommandHeader):
    """DeleteTopic (215), GetTopicStatsInfo (202), QueryTopicConsumeByWho (300)."""
    topic: str = required()


@header
class GetConsumeStatsRequestHeader(CommandHeader):
    consumerGroup: str = required()
    topic: str | None = optional()


@header
class ConsumerGroupRequestHeader(CommandHeader):
    """GetConsumerConnectionList (203)."""
    consumerGroup: str = required()


@header
class GetProducerConnectionListRequestHeader(CommandHeader):
    producerGroup: str = required()


@header
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    groupName: str = required()
    removeOffset: bool | None = optional()


@header
class ResetOffsetRequestHeader(CommandHeader):
    topic: str = required()
    group: str = required()
    timestamp: Long = required()
    isForce: bool = required()
    queueId: int | None = optional()
    offset: Long | None = optional()


@header
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    consumerGroup: str = required()
    clientId: str = required()
    jstackEnable: bool | None = optional()


@header
class GetBrokerConfigResponseHeader(CommandHeader):
    version: str = required()


@header
class GetConsumeStatsInBrokerHeader(CommandHeader):
    """GET_BROKER_CONSUME_STATS (317): mqadmin brokerConsumeStats -o."""
    isOrder: bool = required(False)


@header
class QueryConsumeTimeSpanRequestHeader(CommandHeader):
    topic: str = required()
    group: str = required()


@header
class QueryConsumeQueueRequestHeader(CommandHeader):
    """QUERY_CONSUME_QUEUE (321): mqadmin queryCq; primitives Java decodes only when present."""
    topic: str | None = optional()
    queueId: int = optional(0)
    index: Long = optional(0)
    count: int = optional(0)
    consumerGroup: str | None = optional()


@header
class CloneGroupOffsetRequestHeader(CommandHeader):
    srcGroup: str = required()
    destGroup: str = required()
    topic: str | None = optional()
    offline: bool = optional(False)


@header
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    statsName: str = required()
    statsKey: str = required()


@header
class QueryCorrectionOffsetHeader(CommandHeader):
    filterGroups: str | None = optional()
    compareGroup: str = required()
    topic: str = required()


@header
class GetConsumerStatusRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) and, to the clients, GET_CONSUMER_STATUS_FROM_CLIENT (221)."""
    topic: str = required()
    group: str = required()
    clientAddr: str | None = optional()


@header
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    consumerGroup: str = required()
    clientId: str | None = optional()
    msgId: str | None = optional()
    brokerName: str | None = optional()
    topic: str | None = optional()
    topicSysFlag: int | None = optional()
    groupSysFlag: int | None = optional()
