"""AdminBrokerProcessor: the requests mqadmin (and the clients' admin paths) send to a broker.

Topics, subscription groups, broker config and runtime info, consume/topic statistics,
connection lists, offsets tables, reset offset (forwarded to the consumers as
RESET_CONSUMER_CLIENT_OFFSET) and consumer running info (forwarded to the client). Codes,
remarks and body shapes follow RocketMQ 4.9's ``AdminBrokerProcessor`` and
``Broker2Client`` (facts §4.6, §5.3).

The handlers live by family, one module each: ``admin_topic``, ``admin_group``,
``admin_offset``, ``admin_stats``, ``admin_config`` and ``admin_query``, over the helpers of
``admin_base``; this class holds the codes and routes each to its handler.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from rmqpy.broker.processor.admin_config import ConfigAdmin
from rmqpy.broker.processor.admin_group import GroupAdmin
from rmqpy.broker.processor.admin_offset import OffsetAdmin
from rmqpy.broker.processor.admin_query import MessageQueryAdmin
from rmqpy.broker.processor.admin_stats import StatsAdmin
from rmqpy.broker.processor.admin_topic import TopicAdmin
from rmqpy.protocol.bodies.topic import DataVersion
from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.channel import Channel

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker


class AdminBrokerProcessor(TopicAdmin, GroupAdmin, OffsetAdmin, StatsAdmin, ConfigAdmin, MessageQueryAdmin):
    codes = (RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER,
             RequestCode.GET_ALL_TOPIC_CONFIG, RequestCode.GET_TOPIC_STATS_INFO,
             RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
             RequestCode.DELETE_SUBSCRIPTIONGROUP, RequestCode.GET_BROKER_RUNTIME_INFO,
             RequestCode.GET_BROKER_CONFIG, RequestCode.UPDATE_BROKER_CONFIG, RequestCode.GET_CONSUME_STATS,
             RequestCode.GET_CONSUMER_CONNECTION_LIST, RequestCode.GET_PRODUCER_CONNECTION_LIST,
             RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, RequestCode.GET_ALL_CONSUMER_OFFSET,
             RequestCode.GET_ALL_DELAY_OFFSET, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
             RequestCode.GET_CONSUMER_RUNNING_INFO, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
             RequestCode.GET_TOPIC_NAME_LIST, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
             RequestCode.CLEAN_UNUSED_TOPIC, RequestCode.GET_TOPIC_CONFIG,
             RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, RequestCode.GET_BROKER_CONSUME_STATS,
             RequestCode.QUERY_CONSUME_TIME_SPAN, RequestCode.QUERY_CONSUME_QUEUE, RequestCode.CLONE_GROUP_OFFSET,
             RequestCode.VIEW_BROKER_STATS_DATA, RequestCode.QUERY_CORRECTION_OFFSET,
             RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, RequestCode.CONSUME_MESSAGE_DIRECTLY,
             RequestCode.GET_BROKER_HA_STATUS)

    def __init__(self, broker: "Broker") -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker
        self.config_version = DataVersion()
        self.handlers: dict[int, Callable[[Any, RemotingCommand], Any]] = {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_subscription_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topic_list,
            RequestCode.GET_TOPIC_NAME_LIST: self.get_topic_name_list,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
            RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
            RequestCode.GET_TOPIC_CONFIG: self.get_topic_config,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.get_subscription_group_config,
            RequestCode.GET_BROKER_CONSUME_STATS: self.fetch_all_consume_stats_in_broker,
            RequestCode.QUERY_CONSUME_TIME_SPAN: self.query_consume_time_span,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
            RequestCode.CLONE_GROUP_OFFSET: self.clone_group_offset,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            RequestCode.QUERY_CORRECTION_OFFSET: self.query_correction_offset,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.get_consumer_status,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
            RequestCode.GET_BROKER_HA_STATUS: self.get_broker_ha_status,
        }

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        return self.handlers[request.code](channel, request)
