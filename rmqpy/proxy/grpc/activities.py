"""The calls of ``apache.rocketmq.v2.MessagingService``, each routed to its activity, as 5.3.3's
proxy (``DefaultGrpcMessingActivity``) routes them.

One activity per call family, in :mod:`rmqpy.proxy.grpc.activity` (see :data:`ROUTES`). Each checks
the request as the proxy's ``GrpcValidator`` and activities do (with their ``Code`` answers), turns
it into the broker's own remoting request (SEND_MESSAGE_V2, POP_MESSAGE, ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME, CONSUMER_SEND_MSG_BACK, END_TRANSACTION) and runs it through the
broker's dispatcher on the client's :class:`LocalChannel`, as the proxy's local mode hands it to its
broker's processors; the remoting answer becomes the gRPC one. What they share (the broker, the
clients, the lookups) is :class:`rmqpy.proxy.grpc.context.ActivityContext`.

Every method returns a Deferred of the response message (``receive_message`` of the list of stream
responses) or raises :class:`Refused`; :mod:`rmqpy.proxy.grpc.servicer` calls them from grpcio's loop
through the reactor.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from rmqpy.proxy.grpc.activity.ack import AckMessageActivity
from rmqpy.proxy.grpc.activity.client import ClientActivity
from rmqpy.proxy.grpc.activity.dlq import ForwardMessageToDLQActivity
from rmqpy.proxy.grpc.activity.invisible import ChangeInvisibleDurationActivity
from rmqpy.proxy.grpc.activity.recall import RecallMessageActivity
from rmqpy.proxy.grpc.activity.receive import ReceiveMessageActivity
from rmqpy.proxy.grpc.activity.route import RouteActivity
from rmqpy.proxy.grpc.activity.send import SendMessageActivity, consistent_hash
from rmqpy.proxy.grpc.activity.transaction import EndTransactionActivity
from rmqpy.proxy.grpc.auth import exempt_local_channels
from rmqpy.proxy.grpc.clients import GrpcClients
from rmqpy.proxy.grpc.context import ActivityContext
from rmqpy.proxy.grpc.local import LocalChannel
from rmqpy.proxy.grpc.receipts import ReceiptHandles, RenewConfig
from rmqpy.proxy.grpc.validate import Refused

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

__all__ = ["ROUTES", "MessagingActivities", "Refused", "consistent_hash"]

#: each RPC of the service -> (the attribute of :class:`MessagingActivities` holding its activity, the
#: activity's method); Telemetry's settings commands go to ``client.settings``
ROUTES: dict[str, tuple[str, str]] = {
    "QueryRoute": ("route", "query_route"),
    "QueryAssignment": ("route", "query_assignment"),
    "Heartbeat": ("client", "heartbeat"),
    "Telemetry": ("client", "settings"),
    "NotifyClientTermination": ("client", "notify_client_termination"),
    "SendMessage": ("send", "send_message"),
    "ReceiveMessage": ("receive", "receive_message"),
    "AckMessage": ("ack", "ack_message"),
    "ChangeInvisibleDuration": ("invisible", "change_invisible_duration"),
    "EndTransaction": ("transaction", "end_transaction"),
    "RecallMessage": ("recall", "recall_message"),
    "ForwardMessageToDeadLetterQueue": ("dlq", "forward_message_to_dead_letter_queue"),
}


class MessagingActivities:
    """One per broker; ``channel_of`` gives the :class:`LocalChannel` of a client id (one per
    client, so that a client's requests share a channel as its gRPC connection shares them)."""

    def __init__(self, broker: "Broker", dispatcher: Any, grpc_port: int) -> None:
        self.ctx = ActivityContext(broker, dispatcher, grpc_port)
        bc = broker.broker_config
        self.receipts = ReceiptHandles(
            broker.reactor, lambda t, invisible: self.invisible.renew(t, invisible),
            lambda client_id, group: broker.consumer_manager.find_channel(group, client_id) is not None,
            lambda group, times: self.ctx.retry_policy(group).next_delay_ms(times),
            RenewConfig(bc.renewSchedulePeriodMillis, bc.renewAheadTimeMillis, bc.renewMaxTimeMillis,
                        bc.maxRenewRetryTimes, bc.invisibleTimeMillisWhenClear))
        self.route = RouteActivity(self.ctx)
        self.client = ClientActivity(self.ctx, self.receipts)
        self.send = SendMessageActivity(self.ctx)
        self.ack = AckMessageActivity(self.ctx, self.receipts)
        self.invisible = ChangeInvisibleDurationActivity(self.ctx, self.receipts)
        self.transaction = EndTransactionActivity(self.ctx)
        self.recall = RecallMessageActivity(self.ctx)
        self.dlq = ForwardMessageToDLQActivity(self.ctx, self.ack)
        self.receive = ReceiveMessageActivity(self.ctx, self.receipts, self.client, self.dlq)
        # the remoting requests of a call were checked once, for the call (rmqpy.proxy.grpc.auth)
        exempt_local_channels(broker.auth_pipeline)

    @property
    def broker(self) -> "Broker":
        return self.ctx.broker

    @property
    def clients(self) -> GrpcClients:
        return self.ctx.clients

    @property
    def grpc_port(self) -> int:
        return self.ctx.grpc_port

    @grpc_port.setter
    def grpc_port(self, port: int) -> None:  # the server's bound port, when grpcServerPort is 0
        self.ctx.grpc_port = port

    def channel_of(self, client_id: str, peer: str, language: str = "") -> LocalChannel:
        return self.ctx.clients.channel_of(client_id, peer, language)

    # ------------------------------------------------------------------ the calls, by ROUTES
    def query_route(self, req: Any) -> Any:
        return self.route.query_route(req)

    def query_assignment(self, req: Any) -> Any:
        return self.route.query_assignment(req)

    def heartbeat(self, req: Any, ch: LocalChannel) -> Any:
        return self.client.heartbeat(req, ch)

    def settings(self, cmd: Any, ch: LocalChannel, write: Any) -> Any:
        return self.client.settings(cmd, ch, write)

    def notify_client_termination(self, req: Any, ch: LocalChannel) -> Any:
        return self.client.notify_client_termination(req, ch)

    def send_message(self, req: Any, ch: LocalChannel,
                     bodies: dict[int, int | bytes] | None = None) -> defer.Deferred[Any]:
        return self.send.send_message(req, ch, bodies)

    def receive_message(self, req: Any, ch: LocalChannel, remaining_ms: int,
                        client_version: str = "") -> defer.Deferred[list[Any]]:
        return self.receive.receive_message(req, ch, remaining_ms, client_version)

    def ack_message(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        return self.ack.ack_message(req, ch)

    def change_invisible_duration(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        return self.invisible.change_invisible_duration(req, ch)

    def end_transaction(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        return self.transaction.end_transaction(req, ch)

    def recall_message(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        return self.recall.recall_message(req, ch)

    def forward_message_to_dead_letter_queue(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        return self.dlq.forward_message_to_dead_letter_queue(req, ch)
