"""Headers of the admin requests mqadmin sends to a broker (facts §4.6)."""
from __future__ import annotations

from rmqpy.protocol.headers.base import CommandHeader, header, optional, required


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
    timestamp: int = required()
    isForce: bool = required()
    queueId: int | None = optional()
    offset: int | None = optional()


@header
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    consumerGroup: str = required()
    clientId: str = required()
    jstackEnable: bool | None = optional()


@header
class GetBrokerConfigResponseHeader(CommandHeader):
    version: str = required()
