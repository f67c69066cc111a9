"""Each RPC of ``apache.rocketmq.v2.MessagingService`` reaches its activity: the servicer
(rmqpy/proxy/grpc/servicer.py) calls the facade (rmqpy/proxy/grpc/activities.py), which hands the call
to the activity ``ROUTES`` names (rmqpy/proxy/grpc/activity/). Each activity's method is replaced by
a recorder here, and each RPC is called as grpcio calls it."""
from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from rmqpy.proxy.grpc.activities import ROUTES, MessagingActivities
from rmqpy.proxy.grpc.activity.ack import AckMessageActivity
from rmqpy.proxy.grpc.activity.client import ClientActivity
from rmqpy.proxy.grpc.activity.dlq import ForwardMessageToDLQActivity
from rmqpy.proxy.grpc.activity.invisible import ChangeInvisibleDurationActivity
from rmqpy.proxy.grpc.activity.recall import RecallMessageActivity
from rmqpy.proxy.grpc.activity.receive import ReceiveMessageActivity
from rmqpy.proxy.grpc.activity.route import RouteActivity
from rmqpy.proxy.grpc.activity.send import SendMessageActivity
from rmqpy.proxy.grpc.activity.transaction import EndTransactionActivity
from rmqpy.proxy.grpc.servicer import MessagingServicer
from tests.unit.broker.helpers import make_broker

SERVICE = spb.DESCRIPTOR.services_by_name["MessagingService"]
#: RPC -> (its request message, the activity class, what the servicer answers when the activity does)
CALLS: dict[str, tuple[Any, type, Any]] = {
    "QueryRoute": (spb.QueryRouteRequest, RouteActivity, spb.QueryRouteResponse),
    "QueryAssignment": (spb.QueryAssignmentRequest, RouteActivity, spb.QueryAssignmentResponse),
    "Heartbeat": (spb.HeartbeatRequest, ClientActivity, spb.HeartbeatResponse),
    "Telemetry": (spb.TelemetryCommand, ClientActivity, spb.TelemetryCommand),
    "NotifyClientTermination": (spb.NotifyClientTerminationRequest, ClientActivity,
                                spb.NotifyClientTerminationResponse),
    "SendMessage": (spb.SendMessageRequest, SendMessageActivity, spb.SendMessageResponse),
    "ReceiveMessage": (spb.ReceiveMessageRequest, ReceiveMessageActivity, spb.ReceiveMessageResponse),
    "AckMessage": (spb.AckMessageRequest, AckMessageActivity, spb.AckMessageResponse),
    "ChangeInvisibleDuration": (spb.ChangeInvisibleDurationRequest, ChangeInvisibleDurationActivity,
                                spb.ChangeInvisibleDurationResponse),
    "EndTransaction": (spb.EndTransactionRequest, EndTransactionActivity, spb.EndTransactionResponse),
    "RecallMessage": (spb.RecallMessageRequest, RecallMessageActivity, spb.RecallMessageResponse),
    "ForwardMessageToDeadLetterQueue": (spb.ForwardMessageToDeadLetterQueueRequest, ForwardMessageToDLQActivity,
                                        spb.ForwardMessageToDeadLetterQueueResponse),
}


class _Reactor:
    """Runs what the servicer hands the reactor at once, on the calling thread."""

    def callFromThread(self, f: Any, *args: Any, **kw: Any) -> None:  # noqa: N802 (Twisted's name)
        f(*args, **kw)


class _Context:
    def invocation_metadata(self) -> list[tuple[str, str]]:
        return [("x-mq-client-id", "client-1"), ("x-mq-client-version", "5.1.2")]

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5000"

    def time_remaining(self) -> float:
        return 10.0

    def is_active(self) -> bool:
        return True

    async def abort(self, code: Any, details: str) -> None:
        raise AssertionError(f"aborted: {code} {details}")


@pytest.fixture
def acts(tmp_path):
    broker, _ = make_broker(tmp_path)
    yield MessagingActivities(broker, broker.dispatcher, 8081)
    broker.shutdown()


def test_every_served_rpc_has_a_route_and_the_rest_are_left_unimplemented() -> None:
    served = {m.name for m in SERVICE.methods if m.name in vars(MessagingServicer)}
    assert set(ROUTES) == served == set(CALLS)
    # answered UNIMPLEMENTED (rmqpy.proxy.grpc.handlers), as the proxy 5.3.3 / 5.4.0 does not serve them either
    assert {m.name for m in SERVICE.methods} - served == {"PullMessage", "UpdateOffset", "GetOffset", "QueryOffset",
                                                          "SyncLiteSubscription"}


@pytest.mark.parametrize("rpc", sorted(CALLS))
def test_each_rpc_reaches_its_activity(acts, rpc) -> None:
    request_type, activity_type, response_type = CALLS[rpc]
    holder, method = ROUTES[rpc]
    activity = getattr(acts, holder)
    assert type(activity) is activity_type
    got: list[tuple[Any, ...]] = []
    answer = response_type(status=pb.Status(code=pb.Code.OK, message="recorded"))

    def recorder(*args: Any) -> Any:
        got.append(args)
        return [answer] if rpc == "ReceiveMessage" else answer
    recorder.__name__ = method
    setattr(activity, method, recorder)
    for other_holder, other_method in ROUTES.values():  # any other activity's call would fail the test
        if (other_holder, other_method) != (holder, method):
            setattr(getattr(acts, other_holder), other_method, _never(other_method))
    servicer = MessagingServicer(acts, _Reactor())
    request = request_type()
    if rpc == "Telemetry":
        request.settings.CopyFrom(pb.Settings(client_type=pb.ClientType.PRODUCER))
        out = asyncio.run(_collect(servicer.Telemetry(_one(request), _Context())))
    elif rpc == "ReceiveMessage":
        out = asyncio.run(_collect(servicer.ReceiveMessage(request, _Context())))[:-1]  # the last: the delivery time
    else:
        out = [asyncio.run(getattr(servicer, rpc)(request, _Context()))]
    assert out == [answer]
    assert len(got) == 1 and got[0][0] == request
    if rpc not in ("QueryRoute", "QueryAssignment"):  # the others run as the client named in the metadata
        assert got[0][1].client_id == "client-1"


async def _one(request: Any) -> AsyncIterator[Any]:
    yield request


async def _collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in stream]


def _never(name: str) -> Any:
    def called(*args: Any) -> Any:
        raise AssertionError(f"{name} called")
    return called
