"""The official Python gRPC client (``rocketmq-python-client`` 5.1.2 from PyPI) through Apache's
``rocketmq-proxy`` 5.3.3 (Maven Central, cluster mode) in front of rmqpy's name server and broker.

The client runs in the client host (tests/interop/grpcpy.py drives it, with the scenarios that
test_grpc_python.py runs against rmqpy's own endpoint); the proxy turns its gRPC calls into
remoting requests to rmqpy: SendMessage into SEND_MESSAGE_V2, ReceiveMessage into POP_MESSAGE,
AckMessage into ACK_MESSAGE. What a Python user sees:

* every message sent is received exactly once when each is acked;
* a message received and not acked comes back after its invisible duration (10 s, the proxy's
  minimum), as its second delivery attempt;
* FIFO (a topic with ``message.type=FIFO``, an orderly group, one message group): a message not acked
  holds back the ones after it until it comes again; they are acked in the order they were sent.

The reference: the same proxy in front of the Java 5.3.3 broker, for the scenarios rmqpy's own
endpoint serves that need the broker's side (transaction check-back, DLQ after the group's attempts,
a FIFO PushConsumer forwarding a failing message to the DLQ).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop import grpcpy, jvm, servers

pytestmark = pytest.mark.interop


# the broker checks a half message 3 s old every 2 s (Java: 6 s / 30 s), as test_grpc_python.py's
TX_PROPS = {"transactionTimeOut": 3000, "transactionCheckInterval": 2000}


class Env:
    def __init__(self, host, tmp: Path) -> None:
        self.host = host
        self.cluster = servers.Cluster(tmp / "rmqpy", host.host_ip, {"brokerName": "broker-grpc-py"})
        try:
            self.proxy = jvm.start_java_proxy(grpcpy.VERSION, tmp / "proxy", self.cluster.ns_addr)
        except BaseException:
            self.cluster.close()
            raise
        self.endpoint = f"{host.host_ip}:{self.proxy.port}"
        self.g = grpcpy.PyGrpc(host, self.endpoint, self.cluster.ns_addr)

    def close(self) -> None:
        self.proxy.kill9()
        self.cluster.close()
        print(self.proxy.log_tail(40))
        print(self.cluster.broker.log_tail(3000))


@pytest.fixture(scope="module")
def env(java_built, client_host, tmp_path_factory):
    pytest.importorskip("rocketmq.v5", reason="rocketmq-python-client (the test extra) is not installed")
    e = Env(client_host, tmp_path_factory.mktemp("grpc-proxy"))
    try:
        yield e
    finally:
        e.close()


def test_python_client_sends_and_receives_each_message_once(env: Env) -> None:
    grpcpy.check_each_message_once(env.g, "GrpcOnce", "grpc_once")


def test_unacked_message_comes_back_after_its_invisible_duration(env: Env) -> None:
    grpcpy.check_unacked_comes_back(env.g, "GrpcUnacked", "grpc_unacked")


def test_fifo_group_keeps_order_across_an_unacked_message(env: Env) -> None:
    grpcpy.check_fifo_order(env.g, "GrpcFifo", "grpc_fifo")


class JavaEnv:
    """Apache's proxy in front of the Java 5.3.3 name server and broker: the reference."""

    def __init__(self, host, tmp: Path) -> None:
        # 5.3.3 batches the op records of ended transactions for transactionOpBatchInterval (3 s): with a check
        # every 2 s it checks (and the checker commits again) a half message already committed
        self.cluster = jvm.JavaCluster(grpcpy.VERSION, tmp, host.host_ip, {"brokerName": "broker-grpc-j", **TX_PROPS,
                                                                           "transactionOpBatchInterval": 200})
        try:
            self.proxy = jvm.start_java_proxy(grpcpy.VERSION, tmp / "proxy", self.cluster.ns_addr)
        except BaseException:
            self.cluster.close(clean=False)
            raise
        self.g = grpcpy.PyGrpc(host, f"{host.host_ip}:{self.proxy.port}", self.cluster.ns_addr)

    def close(self) -> None:
        self.proxy.kill9()
        self.cluster.close(clean=False)
        print(self.proxy.log_tail(40))


@pytest.fixture(scope="module")
def java_env(java_built, client_host, tmp_path_factory):
    pytest.importorskip("rocketmq.v5", reason="rocketmq-python-client (the test extra) is not installed")
    e = JavaEnv(client_host, tmp_path_factory.mktemp("grpc-proxy-java"))
    try:
        yield e
    finally:
        e.close()


def test_reference_transactions_dlq_after_max_attempts_and_fifo_push_consumer(java_env: JavaEnv) -> None:
    g = java_env.g
    grpcpy.concurrently(lambda: grpcpy.check_transactions(g, "GrpcRefTx", "grpc_ref_tx"),
                        lambda: grpcpy.check_dead_letter_after_max_attempts(g, "GrpcRefDlq", "grpc_ref_dlq"),
                        lambda: grpcpy.check_fifo_push_consumer_forwards_to_dlq(g, "GrpcRefPush", "grpc_ref_push"))
