"""AdminBrokerProcessor, one family of its requests: subscription groups and client connections."""
from __future__ import annotations

from typing import Any

from rmqpy.broker.processor.admin_base import AdminBase, language_name, master_only
from rmqpy.broker.validation import validate_group
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies import retry_policy
from rmqpy.protocol.bodies.broker import SubscriptionGroupConfig
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import (
    ConsumerGroupRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetProducerConnectionListRequestHeader,
    TopicRequestHeader,
)
from rmqpy.remoting.channel import Channel


class GroupAdmin(AdminBase):
    def get_subscription_group_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = request.ext("group")
        if not group:
            return request.response(ResponseCode.SYSTEM_ERROR, "the custom field <group> is null")
        config = self.broker.subscription_group_manager.table.get(group)
        if config is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        # 5.x's request (mqadmin getSubscriptionGroup, the dashboard): 5.3.3's bean writes its attributes and
        # retry policy when never set too (an empty map, the default CUSTOMIZED policy)
        body = config.to_json()
        body.setdefault("attributes", {})
        body.setdefault("groupRetryPolicy", {"type": "CUSTOMIZED"})
        return self._ok(request, fastjson.dumps(body).encode())

    @master_only
    def update_and_create_subscription_group(self, channel: Channel, request: RemotingCommand) -> Any:
        self.log.info("updateAndCreateSubscriptionGroup called by {a}", a=channel.remote_address)
        obj = fastjson.loads(request.body or b"null")
        if obj is not None:  # Java: a body that decodes to a config ({} too) is checked; null is nothing to do
            config = SubscriptionGroupConfig.from_json(obj)
            # rmqpy: Java 5.3.3 stores any name and count; the group names %RETRY%/%DLQ% topics
            bad = validate_group(config.groupName)
            if bad is None and not 0 <= config.retryQueueNums <= self._max_queues():
                bad = (f"retryQueueNums {config.retryQueueNums} is out of range [0, {self._max_queues()}] "
                       "(broker setting maxTopicQueueNums)")
            if bad is None:
                try:  # rmqpy: Java stores any numbers here and fails when a consumer's settings are built
                    retry_policy.parse(config.extra.get("groupRetryPolicy"))
                except ValueError as exc:
                    bad = str(exc)
            if bad is not None:
                return request.response(ResponseCode.SYSTEM_ERROR, bad)
            return self.broker.subscription_group_manager.update(config).addBoth(lambda _: self._ok(request))
        return self._ok(request)

    def get_all_subscription_group(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        content = fastjson.dumps(self.broker.subscription_group_manager.encode())
        if not content:
            return request.response(ResponseCode.SYSTEM_ERROR, "No subscription group in this broker")
        return self._ok(request, content.encode())

    @master_only
    def delete_subscription_group(self, channel: Channel, request: RemotingCommand) -> Any:
        h = request.decode_header(DeleteSubscriptionGroupRequestHeader)
        saved = self.broker.subscription_group_manager.delete(h.groupName)
        if h.removeOffset:
            self.broker.consumer_offset_manager.remove_group(h.groupName)
        self._stats().on_group_deleted(h.groupName)
        return saved.addBoth(lambda _: self._ok(request)) if saved is not None else self._ok(request)

    def _connection(self, info: Any) -> dict[str, Any]:
        return {"clientAddr": info.address, "clientId": info.client_id, "language": language_name(info.language),
                "version": info.version}

    def get_consumer_connection_list(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(ConsumerGroupRequestHeader)
        info = self.broker.consumer_manager.get(h.consumerGroup)
        if info is None:
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE,
                                    f"the consumer group[{h.consumerGroup}] not online")
        body = {"connectionSet": [self._connection(c) for c in info.channels.values()],
                "consumeFromWhere": info.consume_from_where, "consumeType": info.consume_type,
                "messageModel": info.message_model, "subscriptionTable": dict(info.subscriptions)}
        return self._ok(request, fastjson.dumps(body).encode())

    def get_producer_connection_list(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(GetProducerConnectionListRequestHeader)
        table = self.broker.producer_manager.groups.get(h.producerGroup)
        if table is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{h.producerGroup}] not exist")
        body = {"connectionSet": [self._connection(c) for c in table.values()]}
        return self._ok(request, fastjson.dumps(body).encode())

    def query_topic_consume_by_who(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(TopicRequestHeader)
        groups = set(self.broker.consumer_manager.query_topic_consume_by_who(h.topic))
        groups |= self.broker.consumer_offset_manager.which_groups_by_topic(h.topic)
        return self._ok(request, fastjson.dumps({"groupList": sorted(groups)}).encode())

    def get_consumer_running_info(self, channel: Channel, request: RemotingCommand) -> Any:
        h = request.decode_header(GetConsumerRunningInfoRequestHeader)
        return self.call_consumer(RequestCode.GET_CONSUMER_RUNNING_INFO, request, h.consumerGroup, h.clientId)
