"""The official Python gRPC client (``rocketmq-python-client`` 5.1.2 from PyPI) against rmqpy's own
gRPC endpoint (``grpcServerPort``, rmqpy/proxy/grpc/): no Java proxy in between.

The client runs in the client host (tests/interop/pyclient/grpc_client.py, the driver
test_proxy_grpc_python.py uses through Apache's proxy); the route it fetches from rmqpy names
rmqpy's endpoint again. What a Python user sees:

* every message sent is received exactly once when each is acked;
* a message received and not acked comes back after its invisible duration (10 s, the proxy's
  minimum) as its second delivery attempt;
* bad input is answered with the Codes the 5.3.3 proxy answers (unknown topic, oversized body).
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.interop import clients, jvm, servers

pytestmark = pytest.mark.interop

CLIENT = Path(__file__).parent / "pyclient" / "grpc_client.py"
VERSION = "5.3.3"


class Env:
    def __init__(self, host, tmp: Path) -> None:
        self.host = host
        self.grpc_port = servers.free_port()
        self.cluster = servers.Cluster(tmp / "rmqpy", host.host_ip, {"brokerName": "broker-grpc",
                                                                      "grpcServerPort": self.grpc_port})
        self.endpoint = f"{host.host_ip}:{self.grpc_port}"

    def close(self) -> None:
        self.cluster.close()
        print(self.cluster.broker.log_tail(3000))

    def create_topic(self, topic: str) -> None:
        out = clients.mqadmin(self.host, VERSION, ["updateTopic", "-c", "DefaultCluster", "-t", topic,
                                                   "-r", "4", "-w", "4"], self.cluster.ns_addr)
        assert "success" in out, out

    def client(self, *args: str, timeout: float = 120, check: bool = True) -> tuple[jvm.Events, str]:
        proc = self.host.run([sys.executable, str(CLIENT), self.endpoint, *args], timeout=timeout)
        events = jvm.Events(jvm._parse_lines(proc.stdout))
        if check:
            assert proc.returncode == 0, f"grpc_client {args} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        return events, proc.stderr


@pytest.fixture(scope="module")
def env(java_built, client_host, tmp_path_factory):
    pytest.importorskip("rocketmq.v5", reason="rocketmq-python-client (the test extra) is not installed")
    e = Env(client_host, tmp_path_factory.mktemp("grpc-rmqpy"))
    try:
        yield e
    finally:
        e.close()


def test_python_client_sends_and_receives_each_message_once(env: Env) -> None:
    topic = "GrpcOwnOnce"
    env.create_topic(topic)
    sent = env.client("produce", topic, "8")[0].of("sent")
    assert len(sent) == 8
    got = env.client("receive", topic, "grpc_own_once", "8", "20", "--linger", "3")[0].of("received")
    counts = Counter(r["msgId"] for r in got)
    assert sorted(counts) == sorted(s["msgId"] for s in sent), got
    assert set(counts.values()) == {1}, counts
    assert {r["body"] for r in got} == {f"grpc-{i}" for i in range(8)}
    assert all(r["attempt"] == 1 and r["topic"] == topic for r in got)


def test_unacked_message_comes_back_after_its_invisible_duration(env: Env) -> None:
    topic = "GrpcOwnUnacked"
    env.create_topic(topic)
    sent = env.client("produce", topic, "2")[0].of("sent")
    first = env.client("receive", topic, "grpc_own_unacked", "2", "10", "--no-ack")[0].of("received")
    assert sorted(r["msgId"] for r in first) == sorted(s["msgId"] for s in sent)
    again = env.client("receive", topic, "grpc_own_unacked", "2", "20", "--linger", "2")[0].of("received")
    assert sorted(r["msgId"] for r in again) == sorted(s["msgId"] for s in sent), again
    assert all(r["attempt"] == 2 for r in again), again


BAD_INPUT = """
import sys, grpc
from rocketmq.grpc_protocol import definition_pb2 as d, service_pb2 as s, service_pb2_grpc as g
ch = grpc.insecure_channel(sys.argv[1]); stub = g.MessagingServiceStub(ch)
md = [("x-mq-client-id", "bad-input")]
r = stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="NoSuchTopicHere")), metadata=md, timeout=10)
print("route", d.Code.Name(r.status.code))
m = d.Message(topic=d.Resource(name=sys.argv[2]), body=b"x" * (4 * 1024 * 1024 + 1))
m.system_properties.message_id = "BIGONE"
r = stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=md, timeout=10)
print("big", d.Code.Name(r.status.code))
raw = ch.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage")
try:
    raw(b"\\xff\\xff\\xff", metadata=md, timeout=10)
    print("malformed answered")
except grpc.RpcError as e:
    print("malformed", e.code().name)
"""


def test_bad_input_gets_the_proxys_codes(env: Env) -> None:
    topic = "GrpcOwnBad"
    env.create_topic(topic)
    proc = env.host.run([sys.executable, "-c", BAD_INPUT, env.endpoint, topic], timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split("\n")
    assert "route TOPIC_NOT_FOUND" in lines and "big MESSAGE_BODY_TOO_LARGE" in lines, proc.stdout
    # a request that is no protobuf is refused by grpcio before any activity runs
    assert "malformed INTERNAL" in lines, proc.stdout
