"""The gRPC layer sits above the broker: nothing under rmqpy/broker/ imports rmqpy/proxy/ but the
tap, which builds the endpoint; the endpoint tells the broker's 5.x auth hook which channels' requests
it checked itself (before, broker/controller.py imported the gRPC layer's LocalChannel for that)."""
from __future__ import annotations

import ast
from pathlib import Path

from twisted.internet.task import Clock

from rmqpy.protocol.command import RemotingCommand
from rmqpy.proxy.grpc.activities import MessagingActivities
from rmqpy.proxy.grpc.local import LocalChannel
from tests.unit.broker.helpers import FakeChannel, make_broker

BROKER = Path(__file__).resolve().parents[3] / "rmqpy" / "broker"


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_nothing_under_broker_imports_the_proxy_but_the_tap() -> None:
    importers = sorted(str(p.relative_to(BROKER)) for p in BROKER.rglob("*.py")
                       if any(n == "rmqpy.proxy" or n.startswith("rmqpy.proxy.") for n in _imports(p)))
    assert importers == ["tap.py"]


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
