"""The official Python gRPC client (``rocketmq-python-client`` 5.1.2 from PyPI) through Apache's
``rocketmq-proxy`` 5.3.3 (Maven Central, cluster mode) in front of rmqpy's name server and broker.

The client runs in the client host (tests/interop/grpcpy.py drives it, with the scenarios that
test_grpc_python.py runs against rmqpy's own endpoint); the proxy turns its gRPC calls into
remoting requests to rmqpy: SendMessage into SEND_MESSAGE_V2, ReceiveMessage into POP_MESSAGE,
AckMessage into ACK_MESSAGE. What a Python user sees:

* every message sent is received exactly once when each is acked;
* a message received and not acked comes back after its invisible duration (10 s, the proxy's
  minimum), as its second delivery attempt, and after a broker ``kill -9`` too;
* FIFO (a topic with ``message.type=FIFO``, an orderly group, one message group): a message not acked
  holds back the ones after it until it comes again; they are acked in the order they were sent;
* a message with a delivery timestamp arrives at that time;
* a PushConsumer's failed message comes again after the delays of the group's retry policy.

The reference: the same proxy in front of the Java 5.3.3 broker runs every scenario, and the ones
rmqpy's own endpoint serves that need the broker's side (transaction check-back, DLQ after the
group's attempts, a FIFO PushConsumer forwarding a failing message to the DLQ).

The scenarios through the proxy in front of rmqpy run beside a background load on the same endpoint
(tests/interop/grpc_load.py), which must be served whole too; the reference's without it (JavaEnv).
"""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.interop import grpc_load, grpcpy, jvm, servers
from tests.interop.waiting import wait_until
from tests.reference import to_run

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
        self.load = _start_load(self.cluster.broker_addr, self.cluster.ns_addr, self.endpoint)

    def close(self) -> None:
        self.load.stop()
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


def test_unacked_message_comes_back_after_its_invisible_duration_and_a_broker_kill9(env: Env) -> None:
    store = env.cluster.broker.workdir / "store"

    def kill9(topic: str, group: str) -> None:
        _wait_pop_offsets_written(store, topic, group)
        with env.load.paused():
            env.cluster.broker.kill9()
            env.cluster.broker.start()
    grpcpy.check_unacked_comes_back(env.g, "GrpcUnacked", "grpc_unacked", kill9)


def _start_load(broker_addr: str, ns_addr: str, endpoint: str) -> grpc_load.GrpcLoad:
    """The background load the module's scenarios run beside (tests/interop/grpc_load.py)."""
    grpc_load.create_topic(broker_addr, ns_addr)
    return grpc_load.GrpcLoad(endpoint).start()


def _check_load(load: grpc_load.GrpcLoad) -> None:
    report = load.stop()
    print(f"background load {report}")
    assert report.sent and not report.errors and not report.missing, str(report)


def _wait_pop_offsets_written(store: Path, topic: str, group: str) -> None:
    """Until the broker wrote the two pops' offsets (every 5 s): killed before, it would pop the two
    again besides reviving them, on either broker."""
    assert wait_until(lambda: sum(max(o, 0) for o in grpcpy.offsets_on_disk(store, topic, group).values()) == 2,
                      16, 0.2), grpcpy.offsets_on_disk(store, topic, group)


def _backoff(env: Env) -> None:
    grpcpy.check_retry_backoff_from_group_policy(env.g, "GrpcBackoff", "grpc_backoff")


def test_fifo_group_keeps_order_across_an_unacked_message(env: Env, ahead: grpcpy.Ahead, request) -> None:
    # the last test's retry policy (30 s of waiting) and the reference's start run beside this one: after
    # the broker's kill -9 of the test before
    if grpcpy.wanted_later(request, "env", "test_delay_and_retry_backoff_from_the_groups_policy"):
        ahead.start("backoff", lambda: _backoff(env))
        start_reference_ahead(request)
    grpcpy.check_fifo_order(env.g, "GrpcFifo", "grpc_fifo")


def test_delay_and_retry_backoff_from_the_groups_policy(env: Env, ahead: grpcpy.Ahead, request) -> None:
    start_reference_ahead(request)  # its start overlaps the retry policy's 30 s here
    grpcpy.concurrently(lambda: grpcpy.check_delay(env.g, "GrpcDelay", "grpc_delay"),
                        lambda: ahead.result("backoff", lambda: _backoff(env)))


def test_the_scenarios_ran_beside_a_load_that_was_served_whole(env: Env) -> None:
    """All along the tests above a gRPC producer sent 20 messages a second and a SimpleConsumer kept four
    receives in flight through the proxy (tests/interop/grpc_load.py; halted, drained, across the
    broker's kill -9): every call answered OK, every message sent received and acked."""
    _check_load(env.load)


class JavaEnv:
    """Apache's proxy in front of the Java 5.3.3 name server and broker: the reference. Without the
    background load of :class:`Env`: beside it, the Java broker's revive delayed the retry policy's third
    attempt past the push consumer's 130 s (2 of 2 runs; served whole through rmqpy's broker); the
    reference runs under that load in test_grpc_java and test_grpc_go5 (java-proxy)."""

    def __init__(self, host, tmp: Path) -> None:
        # 5.3.3 batches the op records of ended transactions for transactionOpBatchInterval (3 s): with a check
        # every 2 s it checks (and the checker commits again) a half message already committed
        self.broker_props = {"brokerName": "broker-grpc-j", **TX_PROPS, "transactionOpBatchInterval": 200}
        self.tmp, self.host_ip = tmp, host.host_ip
        self.cluster = jvm.JavaCluster(grpcpy.VERSION, tmp, host.host_ip, self.broker_props)
        try:
            self.proxy = jvm.start_java_proxy(grpcpy.VERSION, tmp / "proxy", self.cluster.ns_addr)
        except BaseException:
            self.cluster.close(clean=False)
            raise
        self.g = grpcpy.PyGrpc(host, f"{host.host_ip}:{self.proxy.port}", self.cluster.ns_addr)

    def restart_broker_after_kill9(self) -> None:
        port = self.cluster.broker.port
        self.cluster.broker.kill9()
        self.cluster.broker = jvm.start_java_broker(grpcpy.VERSION, self.tmp / "java-broker", self.cluster.ns_addr,
                                                    {"bindAddress": "0.0.0.0", **self.broker_props},
                                                    listen_port=port, broker_ip=self.host_ip)

    def close(self) -> None:
        self.proxy.kill9()
        self.cluster.close(clean=False)
        print(self.proxy.log_tail(40))


class Reference:
    """The reference's servers (:class:`JavaEnv`), started in a thread ahead of their tests: their start
    (a Java name server, broker and proxy: 20-40 s, mostly CPU) then overlaps the last two rmqpy tests
    (the retry policy's 30 s among them) instead of running alone after them."""

    def __init__(self, host, tmp_path_factory) -> None:
        self.host, self.tmp_path_factory = host, tmp_path_factory
        self.thread: threading.Thread | None = None
        self.env: JavaEnv | None = None
        self.error: BaseException | None = None

    def start(self) -> None:
        if self.thread is not None:
            return
        tmp = self.tmp_path_factory.mktemp("grpc-proxy-java")

        def run() -> None:
            try:
                self.env = JavaEnv(self.host, tmp)
            except BaseException as exc:  # raised by get()
                self.error = exc

        self.thread = threading.Thread(target=run, name="proxy-reference-start", daemon=True)
        self.thread.start()

    def get(self) -> JavaEnv:
        self.start()
        assert self.thread is not None
        self.thread.join(300)
        if self.error is not None:
            raise self.error
        assert self.env is not None, "the reference servers did not start within 300 s"
        return self.env

    def close(self) -> None:
        if self.thread is not None:
            self.thread.join(300)
        if self.env is not None:
            self.env.close()


@pytest.fixture(scope="module")
def reference(java_built, client_host, tmp_path_factory):
    r = Reference(client_host, tmp_path_factory)
    try:
        yield r
    finally:
        r.close()


def start_reference_ahead(request) -> None:
    """Starts the reference's servers now when a test of this module that needs them is to run."""
    if any("java_env" in item.fixturenames for item in to_run(request)):
        pytest.importorskip("rocketmq.v5", reason="rocketmq-python-client (the test extra) is not installed")
        request.getfixturevalue("reference").start()


@pytest.fixture(scope="module")
def java_env(reference):
    pytest.importorskip("rocketmq.v5", reason="rocketmq-python-client (the test extra) is not installed")
    return reference.get()


@pytest.fixture(scope="module")
def ref_ahead(java_env):
    """As ``ahead``, on the reference's servers."""
    with grpcpy.Ahead() as a:
        yield a


def _ref_backoff(java_env: JavaEnv) -> None:
    grpcpy.check_retry_backoff_from_group_policy(java_env.g, "GrpcRefBackoff", "grpc_ref_backoff")


@pytest.mark.reference
def test_reference_transactions_dlq_after_max_attempts_and_fifo_push_consumer(java_env: JavaEnv,
                                                                               ref_ahead: grpcpy.Ahead,
                                                                               request) -> None:
    g = java_env.g
    # the next test's retry policy scenario (60-80 s on the Java broker, which wakes no pop polling for
    # a revived message: each delay ends at a 20 s long polling) runs beside this test's scenarios
    if grpcpy.wanted_later(request, "java_env", "test_reference_once_fifo_delay_and_retry_backoff"):
        ref_ahead.start("ref-backoff", lambda: _ref_backoff(java_env))
    grpcpy.concurrently(lambda: grpcpy.check_transactions(g, "GrpcRefTx", "grpc_ref_tx"),
                        lambda: grpcpy.check_dead_letter_after_max_attempts(g, "GrpcRefDlq", "grpc_ref_dlq"),
                        lambda: grpcpy.check_fifo_push_consumer_forwards_to_dlq(g, "GrpcRefPush", "grpc_ref_push"))


@pytest.mark.reference
def test_reference_once_fifo_delay_and_retry_backoff(java_env: JavaEnv, ref_ahead: grpcpy.Ahead) -> None:
    g = java_env.g
    grpcpy.concurrently(lambda: grpcpy.check_each_message_once(g, "GrpcRefOnce", "grpc_ref_once"),
                        lambda: grpcpy.check_fifo_order(g, "GrpcRefFifo", "grpc_ref_fifo"),
                        lambda: grpcpy.check_delay(g, "GrpcRefDelay", "grpc_ref_delay"),
                        lambda: ref_ahead.result("ref-backoff", lambda: _ref_backoff(java_env)))


@pytest.mark.reference
def test_reference_unacked_message_comes_back_after_a_broker_kill9(java_env: JavaEnv) -> None:
    store = java_env.tmp / "java-broker" / "store"

    def kill9(topic: str, group: str) -> None:
        _wait_pop_offsets_written(store, topic, group)
        java_env.restart_broker_after_kill9()
    grpcpy.check_unacked_comes_back(java_env.g, "GrpcRefUnacked", "grpc_ref_unacked", kill9)
