"""The official Python gRPC client (``rocketmq-python-client`` 5.1.2 from PyPI) through Apache's
``rocketmq-proxy`` 5.3.3 (Maven Central, cluster mode) in front of rmqpy's name server and broker.

The client runs in the client host (tests/interop/pyclient/grpc_client.py); the proxy turns its
gRPC calls into remoting requests to rmqpy: SendMessage into SEND_MESSAGE_V2, ReceiveMessage into
POP_MESSAGE, AckMessage into ACK_MESSAGE. What a Python user sees:

* every message sent is received exactly once when each is acked;
* a message received and not acked comes back after its invisible duration (10 s, the proxy's
  minimum), as its second delivery attempt;
* FIFO (a topic with ``message.type=FIFO``, an orderly group, one message group): a message not acked
  holds back the ones after it until it comes again; they are acked in the order they were sent.
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
        self.cluster = servers.Cluster(tmp / "rmqpy", host.host_ip, {"brokerName": "broker-grpc-py"})
        try:
            self.proxy = jvm.start_java_proxy(VERSION, tmp / "proxy", self.cluster.ns_addr)
        except BaseException:
            self.cluster.close()
            raise
        self.endpoint = f"{host.host_ip}:{self.proxy.port}"

    def close(self) -> None:
        self.proxy.kill9()
        self.cluster.close()
        print(self.proxy.log_tail(40))
        print(self.cluster.broker.log_tail(3000))

    def create_topic(self, topic: str, *extra: str) -> None:
        out = clients.mqadmin(self.host, VERSION, ["updateTopic", "-c", "DefaultCluster", "-t", topic,
                                                   "-r", "4", "-w", "4", *extra], self.cluster.ns_addr)
        assert "success" in out, out

    def client(self, *args: str, timeout: float = 120, check: bool = True) -> jvm.Events:
        proc = self.host.run([sys.executable, str(CLIENT), self.endpoint, *args], timeout=timeout)
        events = jvm.Events(jvm._parse_lines(proc.stdout))
        if check:
            assert proc.returncode == 0, f"grpc_client {args} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        return events


@pytest.fixture(scope="module")
def env(java_built, client_host, tmp_path_factory):
    pytest.importorskip("rocketmq.v5", reason="rocketmq-python-client (the test extra) is not installed")
    e = Env(client_host, tmp_path_factory.mktemp("grpc-proxy"))
    try:
        yield e
    finally:
        e.close()


def test_python_client_sends_and_receives_each_message_once(env: Env) -> None:
    topic = "GrpcOnce"
    env.create_topic(topic)
    sent = env.client("produce", topic, "8").of("sent")
    assert len(sent) == 8
    got = env.client("receive", topic, "grpc_once", "8", "20", "--linger", "3").of("received")
    counts = Counter(r["msgId"] for r in got)
    assert sorted(counts) == sorted(s["msgId"] for s in sent), got
    assert set(counts.values()) == {1}, counts
    assert {r["body"] for r in got} == {f"grpc-{i}" for i in range(8)}
    assert all(r["attempt"] == 1 and r["topic"] == topic for r in got)


def test_unacked_message_comes_back_after_its_invisible_duration(env: Env) -> None:
    topic = "GrpcUnacked"
    env.create_topic(topic)
    sent = env.client("produce", topic, "2").of("sent")
    first = env.client("receive", topic, "grpc_unacked", "2", "10", "--no-ack").of("received")
    assert sorted(r["msgId"] for r in first) == sorted(s["msgId"] for s in sent)
    again = env.client("receive", topic, "grpc_unacked", "2", "20", "--linger", "2").of("received")
    assert sorted(r["msgId"] for r in again) == sorted(s["msgId"] for s in sent), again
    assert all(r["attempt"] == 2 for r in again), again


def test_fifo_group_keeps_order_across_an_unacked_message(env: Env) -> None:
    topic, group = "GrpcFifo", "grpc_fifo"
    env.create_topic(topic, "-o", "true", "-a", "+message.type=FIFO")
    out = clients.mqadmin(env.host, VERSION, ["updateSubGroup", "-c", "DefaultCluster", "-g", group, "-o", "true"],
                          env.cluster.ns_addr)
    assert "success" in out, out
    sent = env.client("produce", topic, "6", "g1").of("sent")
    assert len(sent) == 6
    got = env.client("receive", topic, group, "6", "10", "--skip", "grpc-2", "--linger", "2").of("received")
    acked = [r["body"] for r in got if r["acked"]]
    assert acked == [f"grpc-{i}" for i in range(6)], got
    again = [r for r in got if r["body"] == "grpc-2"]
    assert [r["attempt"] for r in again] == [1, 2], got
