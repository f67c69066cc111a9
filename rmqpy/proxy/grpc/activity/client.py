"""Heartbeat, the Telemetry stream's settings and NotifyClientTermination (the proxy's
``ClientActivity``), and the settings answered to a client (``GrpcClientSettingsManager``)."""
from __future__ import annotations

from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from rmqpy.protocol.bodies import retry_policy
from rmqpy.proxy.grpc import validate
from rmqpy.proxy.grpc.context import MAX_BATCH, ActivityContext
from rmqpy.proxy.grpc.convert import Code, status
from rmqpy.proxy.grpc.local import LocalChannel
from rmqpy.proxy.grpc.polling import MAX_POLLING_MS
from rmqpy.proxy.grpc.receipts import ReceiptHandles
from rmqpy.proxy.grpc.validate import Refused

PRODUCER_MAX_ATTEMPTS = 3  # grpcClientProducerMaxAttempts
_NO_SETTINGS = "cannot find client settings for this client"


class ClientActivity:
    def __init__(self, ctx: ActivityContext, receipts: ReceiptHandles) -> None:
        self.ctx = ctx
        self.receipts = receipts

    def heartbeat(self, req: Any, ch: LocalChannel) -> Any:
        """``ClientActivity.heartbeat``: register the client as its settings describe it."""
        s = ch.settings
        if s is None:
            raise Refused(Code.UNRECOGNIZED_CLIENT_TYPE, _NO_SETTINGS)
        group = None
        if s.client_type in (pb.ClientType.PUSH_CONSUMER, pb.ClientType.SIMPLE_CONSUMER):
            group = self.ctx.group(req.group)
        elif s.client_type != pb.ClientType.PRODUCER:
            raise Refused(Code.UNRECOGNIZED_CLIENT_TYPE, pb.ClientType.Name(s.client_type))
        return self.ctx.clients.register(ch, group).addCallback(
            lambda _: spb.HeartbeatResponse(status=status(Code.OK)))

    def notify_client_termination(self, req: Any, ch: LocalChannel) -> Any:
        s = ch.settings
        if s is None:
            raise Refused(Code.UNRECOGNIZED_CLIENT_TYPE, _NO_SETTINGS)
        group = self.ctx.group(req.group) if s.HasField("subscription") else None
        self.receipts.clear_client(ch.client_id)  # the proxy's CLIENT_UNREGISTER listener
        self.ctx.clients.forget(ch.client_id)
        return self.ctx.clients.unregister(ch, group).addCallback(
            lambda _: spb.NotifyClientTerminationResponse(status=status(Code.OK)))

    def settings(self, cmd: Any, ch: LocalChannel, write: Any) -> Any:
        """A client's settings on its Telemetry stream (``processAndWriteClientSettings``): kept,
        the client registered, the stream attached, and the settings merged with the broker's
        answered."""
        raw = cmd.settings
        if raw.HasField("publishing"):
            for t in raw.publishing.topics:
                validate.check_topic(t.name)
        elif raw.HasField("subscription"):
            self.ctx.group(raw.subscription.group)
        else:
            raise Refused(Code.BAD_REQUEST, "there is no publishing or subscription data in settings")
        kept = pb.Settings()
        kept.CopyFrom(raw)
        ch.settings = kept
        self.ctx.clients.attach(ch, write)
        return self.ctx.clients.register(ch).addCallback(
            lambda _: spb.TelemetryCommand(status=status(Code.OK), settings=self.merged_settings(ch)))

    def merged_settings(self, ch: LocalChannel) -> Any:
        """``GrpcClientSettingsManager.getClientSettings``: the raw settings with the proxy's producer
        policy, or the consumer group's (its config, else SubscriptionGroupConfig's defaults)."""
        s = pb.Settings()
        s.CopyFrom(ch.settings)
        if s.HasField("publishing"):
            s.backoff_policy.Clear()
            s.backoff_policy.max_attempts = PRODUCER_MAX_ATTEMPTS
            s.backoff_policy.exponential_backoff.initial.nanos = 10_000_000
            s.backoff_policy.exponential_backoff.max.seconds = 1
            s.backoff_policy.exponential_backoff.multiplier = 2.0
            s.publishing.max_body_size = self.ctx.broker.store_config.maxMessageSize
            s.publishing.validate_message_type = True
        elif s.HasField("subscription"):
            sgc = self.ctx.group_config(s.subscription.group.name)
            s.subscription.receive_batch_size = MAX_BATCH
            s.subscription.long_polling_timeout.seconds = MAX_POLLING_MS // 1000
            s.subscription.fifo = bool(sgc.extra.get("consumeMessageOrderly")) if sgc is not None else False
            s.backoff_policy.Clear()
            s.backoff_policy.max_attempts = (sgc.retryMaxTimes if sgc is not None else 16) + 1
            policy = retry_policy.of_group(sgc.extra) if sgc is not None else retry_policy.DEFAULT
            if policy.type == retry_policy.EXPONENTIAL:
                exp = s.backoff_policy.exponential_backoff
                exp.initial.FromMilliseconds(policy.initial_ms)
                exp.max.FromMilliseconds(policy.max_ms)
                exp.multiplier = float(policy.multiplier)
            else:
                for ms in policy.next_ms:
                    s.backoff_policy.customized_backoff.next.add().FromMilliseconds(ms)
        s.metric.Clear()
        s.metric.on = False
        return s
