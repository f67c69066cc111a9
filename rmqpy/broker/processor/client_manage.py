"""ClientManageProcessor: HEART_BEAT (34), UNREGISTER_CLIENT (35), CHECK_CLIENT_CONFIG (46)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rmqpy.broker.clients import ClientChannelInfo
from rmqpy.broker.filter import sql92
from rmqpy.broker.topic import retry_topic
from rmqpy.protocol.bodies.heartbeat import CheckClientRequestBody, HeartbeatData
from rmqpy.protocol.bodies.topic import PERM_READ, PERM_WRITE
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import UnregisterClientRequestHeader
from rmqpy.remoting.channel import Channel
from rmqpy.remoting.ratelimit import RateLimitedLogger

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

TOPIC_SYS_FLAG_UNIT_SUB = 2


class ClientManageProcessor:
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped
    codes = (RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT, RequestCode.CHECK_CLIENT_CONFIG)

    def __init__(self, broker: "Broker") -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker

    def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.HEART_BEAT:
            return self.heartbeat(channel, request)
        if request.code == RequestCode.UNREGISTER_CLIENT:
            return self.unregister_client(channel, request)
        return self.check_client_config(channel, request)

    def heartbeat(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        data = request.typed_body if isinstance(request.typed_body, HeartbeatData) else \
            HeartbeatData.decode(request.body or b"{}")
        info = ClientChannelInfo(channel, data.clientID, request.language, request.version)
        sub_changed = False
        for consumer in data.consumerDataSet:
            sgc = b.subscription_group_manager.find(consumer.groupName)
            if sgc is None and request.version >= MQVersion.V5_0_0:
                continue  # 5.3.3's heartBeat skips a consumer of a group it has no config of; 4.9.x registers it
            notify = True
            if sgc is not None:
                notify = sgc.notifyConsumerIdsChangedEnable
                b.topic_config_manager.create_topic_in_send_message_back_method(
                    retry_topic(consumer.groupName), sgc.retryQueueNums, PERM_WRITE | PERM_READ,
                    TOPIC_SYS_FLAG_UNIT_SUB if consumer.unitMode else 0)
            group = b.consumer_manager.get(consumer.groupName)
            without_sub = bool(data.withoutSub) and group is not None and \
                group.heartbeat_fingerprint == data.heartbeatFingerprint
            if data.withoutSub and not without_sub:
                sub_changed = True  # 5.x heartbeat v2: ask for the full data next time
            changed = b.consumer_manager.register_consumer(
                consumer.groupName, info, consumer.consumeType, consumer.messageModel, consumer.consumeFromWhere,
                consumer.subscriptionDataSet, notify, update_subscription=not data.withoutSub)
            group = b.consumer_manager.get(consumer.groupName)
            if group is not None and not data.withoutSub:
                group.heartbeat_fingerprint = data.heartbeatFingerprint
            if changed:
                self.log.info("registerConsumer info changed {g} {c}", g=consumer.groupName, c=channel.remote_address)
        for producer in data.producerDataSet:
            b.producer_manager.register_producer(producer.groupName, info)
        if not data.heartbeatFingerprint:  # 5.3.3's heartBeat (v1, no fingerprint) always answers true
            sub_changed = True
        return request.response(ResponseCode.SUCCESS, None, ext_fields={
            "IS_SUPPORT_HEART_BEAT_V2": "true", "IS_SUB_CHANGE": "true" if sub_changed else "false"})

    def unregister_client(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        h = request.decode_header(UnregisterClientRequestHeader)
        info = ClientChannelInfo(channel, h.clientID, request.language, request.version)
        if h.producerGroup:
            b.producer_manager.unregister_producer(h.producerGroup, info)
        if h.consumerGroup:
            sgc = b.subscription_group_manager.find(h.consumerGroup)
            notify = sgc.notifyConsumerIdsChangedEnable if sgc is not None else True
            # its queue locks go first, so that the members notified below can lock them at once
            # (Java keeps them until they expire, 60 s, when a rebalance of the leaving client took
            # one after its UNLOCK_BATCH_MQ)
            b.rebalance_lock_manager.unlock_all(h.consumerGroup, h.clientID)
            b.consumer_manager.unregister_consumer(h.consumerGroup, info, notify)
        return request.response(ResponseCode.SUCCESS, None)

    def check_client_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        body = CheckClientRequestBody.decode(request.body) if request.body else None
        if body is not None and body.subscriptionData is not None:
            sub = body.subscriptionData
            if sub.is_tag:
                return request.response(ResponseCode.SUCCESS, None)
            if not self.broker.broker_config.enablePropertyFilter:
                return request.response(ResponseCode.SYSTEM_ERROR,
                                        f"The broker does not support consumer to filter message by "
                                        f"{sub.expressionType}")
            try:
                if sub.expressionType.upper() != "SQL92":
                    raise sql92.SQLParseError(f"Filter spi type({sub.expressionType}) not exist!")
                sql92.compile(sub.subString)
            except sql92.SQLParseError as exc:
                self.log.warn("Client {c}@{g} filter message, but failed to compile expression! sub={s}, error={e}",
                              c=body.clientId, g=body.group, s=sub.subString, e=exc)
                return request.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
        return request.response(ResponseCode.SUCCESS, None)
