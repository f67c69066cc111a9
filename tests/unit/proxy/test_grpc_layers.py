"""The gRPC layer sits above the broker (tests/unit/test_layers.py): the endpoint tells the broker's
5.x auth hook which channels' requests it checked itself (before, broker/controller.py imported the
gRPC layer's LocalChannel for that)."""
from __future__ import annotations

from twisted.internet.task import Clock

from rmqpy.protocol.command import RemotingCommand
from rmqpy.proxy.grpc.activities import MessagingActivities
from rmqpy.proxy.grpc.local import LocalChannel
from tests.unit.broker.helpers import FakeChannel, make_broker


def test_the_endpoint_exempts_its_own_channels_from_the_brokers_auth_hook(tmp_path) -> None:
    broker, _ = make_broker(tmp_path, authenticationEnabled=True, authorizationEnabled=True,
                            initAuthenticationUser='{"username":"root","password":"rootpw12"}')
    try:
        request = RemotingCommand.request(10, None, ext_fields={"topic": "t"})
        local = LocalChannel("127.0.0.1:1", Clock())
        pipeline = broker.auth_pipeline
        assert pipeline is not None
        assert pipeline.before_request(local, request).remark == "username cannot be null."  # no endpoint yet
        MessagingActivities(broker, broker.dispatcher, 8081)
        assert pipeline.before_request(local, request) is None
        assert pipeline.before_request(FakeChannel(), request).remark == "username cannot be null."
    finally:
        broker.shutdown()
