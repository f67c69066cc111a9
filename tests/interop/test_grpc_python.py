"""The official Python gRPC client (``rocketmq-python-client`` 5.1.2 from PyPI) against rmqpy's own
gRPC endpoint (``grpcServerPort``, rmqpy/proxy/grpc/): no Java proxy in between.

The client runs in the client host (tests/interop/grpcpy.py drives it; test_proxy_grpc_python.py
runs the same scenarios through Apache's proxy); the route it fetches from rmqpy names rmqpy's
endpoint again. What a Python user sees:

* every message sent is received exactly once when each is acked;
* a message received and not acked comes back after its invisible duration (10 s, the proxy's
  minimum) as its second delivery attempt, and after a broker ``kill -9`` too;
* FIFO: one message group's messages in order, the next only after the one before is acked;
* a message with a delivery timestamp arrives at that time;
* a PushConsumer's failed message comes again after the delays of the group's retry policy;
* transactions: commit, rollback, and a check-back over the Telemetry stream that commits;
* a group's retryMaxTimes is the client's max attempts: past them the message goes to the DLQ;
* mqadmin producerConnection / consumerConnection list the gRPC clients;
* bad input is answered with the Codes the 5.3.3 proxy answers, and the endpoint keeps serving.

The scenarios run beside a background load on the same endpoint (tests/interop/grpc_load.py, halted
across the broker's kill -9), which must be served whole too.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.interop import grpc_load, grpcpy, servers
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

# the broker checks a half message 3 s old every 2 s (Java: 6 s / 30 s), so the check-back comes soon
BROKER_PROPS = {"brokerName": "broker-grpc", "transactionTimeOut": 3000, "transactionCheckInterval": 2000}


class Env:
    def __init__(self, host, tmp: Path) -> None:
        self.host = host
        self.grpc_port = servers.free_port()
        self.cluster = servers.Cluster(tmp / "rmqpy", host.host_ip, {**BROKER_PROPS, "grpcServerPort": self.grpc_port})
        self.endpoint = f"{host.host_ip}:{self.grpc_port}"
        self.g = grpcpy.PyGrpc(host, self.endpoint, self.cluster.ns_addr)
        # the module's scenarios run beside a background load (tests/interop/grpc_load.py)
        grpc_load.create_topic(self.cluster.broker_addr, self.cluster.ns_addr)
        self.load = grpc_load.GrpcLoad(self.endpoint).start()

    def close(self) -> None:
        self.load.stop()
        self.cluster.close()
        print(self.cluster.broker.log_tail(3000))


@pytest.fixture(scope="module")
def env(java_built, client_host, tmp_path_factory):
    pytest.importorskip("rocketmq.v5", reason="rocketmq-python-client (the test extra) is not installed")
    e = Env(client_host, tmp_path_factory.mktemp("grpc-rmqpy"))
    try:
        yield e
    finally:
        e.close()


def test_python_client_sends_and_receives_each_message_once(env: Env) -> None:
    grpcpy.check_each_message_once(env.g, "GrpcOwnOnce", "grpc_own_once")


def test_unacked_message_comes_back_after_its_invisible_duration_and_a_broker_kill9(env: Env) -> None:
    store = env.cluster.broker.workdir / "store"

    def kill9(topic: str, group: str) -> None:
        # once the broker wrote the pop offsets (consumer offsets are persisted every 5 s, first 10 s after
        # the start): killed before, the restarted broker would pop the two again besides reviving them
        assert wait_until(lambda: sum(max(o, 0) for o in grpcpy.offsets_on_disk(store, topic, group).values()) == 2,
                          16, 0.2), \
            grpcpy.offsets_on_disk(store, topic, group)
        with env.load.paused():
            env.cluster.broker.kill9()
            env.cluster.broker.start()
    grpcpy.check_unacked_comes_back(env.g, "GrpcOwnUnacked", "grpc_own_unacked", kill9)


def _backoff(env: Env) -> None:
    grpcpy.check_retry_backoff_from_group_policy(env.g, "GrpcOwnBackoff", "grpc_own_backoff")


def test_fifo_group_keeps_order_across_an_unacked_message(env: Env, ahead: grpcpy.Ahead, request) -> None:
    # the next test's retry policy (30 s of waiting) runs beside this one: after the kill -9 of the test before
    if grpcpy.wanted_later(request, "env", "test_delay_and_retry_backoff_from_the_groups_policy"):
        ahead.start("backoff", lambda: _backoff(env))
    grpcpy.check_fifo_order(env.g, "GrpcOwnFifo", "grpc_own_fifo")


def test_delay_and_retry_backoff_from_the_groups_policy(env: Env, ahead: grpcpy.Ahead) -> None:
    grpcpy.concurrently(lambda: grpcpy.check_delay(env.g, "GrpcOwnDelay", "grpc_own_delay"),
                        lambda: ahead.result("backoff", lambda: _backoff(env)))


def test_transactions_dlq_after_max_attempts_and_fifo_push_consumer(env: Env) -> None:
    """Transaction commit, rollback and check-back; a message past its group's max attempts in the DLQ;
    a FIFO PushConsumer forwarding a failing message to the DLQ (side by side: each mostly waits on
    the broker's timers)."""
    g = env.g
    grpcpy.concurrently(lambda: grpcpy.check_transactions(g, "GrpcOwnTx", "grpc_own_tx"),
                        lambda: grpcpy.check_dead_letter_after_max_attempts(g, "GrpcOwnDlq", "grpc_own_dlq"),
                        lambda: grpcpy.check_fifo_push_consumer_forwards_to_dlq(g, "GrpcOwnPush", "grpc_own_push"))


def test_mqadmin_lists_grpc_producers_and_consumers(env: Env) -> None:
    topic, group = "GrpcOwnConn", "grpc_own_conn"
    env.g.create_topic(topic)
    producer = env.g.start("produce", topic, "1", "--hold", "15")
    consumer = env.g.start("receive", topic, group, "0", "10", "--hold", "15")
    try:
        grpcpy.wait_event(producer, "holding")
        grpcpy.wait_event(consumer, "holding")
        out = env.g.mqadmin("producerConnection", "-g", topic, "-t", topic)
        assert f"{env.host.client_ip}:" in out and "PYTHON" in out and "V5_3_3" in out, out
        out = env.g.mqadmin("consumerConnection", "-g", group)
        assert f"{env.host.client_ip}:" in out and "PYTHON" in out and "V5_3_3" in out, out
        assert "CONSUME_ACTIVELY" in out and "CLUSTERING" in out and topic in out, out
    finally:
        for p in (producer, consumer):
            p.kill()
            p.wait(10)


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
m = d.Message(topic=d.Resource(name=sys.argv[2]), body=b"x")
r = stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=md, timeout=10)
print("no-id", d.Code.Name(r.status.code))
r = stub.SendMessage(s.SendMessageRequest(messages=[m]), timeout=10)
print("no-client", d.Code.Name(r.status.code))
r = stub.SendMessage(s.SendMessageRequest(), metadata=md, timeout=10)
print("empty", d.Code.Name(r.status.code))
r = stub.EndTransaction(s.EndTransactionRequest(topic=d.Resource(name=sys.argv[2])), metadata=md, timeout=10)
print("no-tx", d.Code.Name(r.status.code))
raw = ch.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage")
try:
    raw(b"\\xff\\xff\\xff", metadata=md, timeout=10)
    print("malformed answered")
except grpc.RpcError as e:
    print("malformed", e.code().name)
r = stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=sys.argv[2])), metadata=md, timeout=10)
print("after", d.Code.Name(r.status.code))
"""


def test_bad_input_gets_the_proxys_codes(env: Env) -> None:
    topic = "GrpcOwnBad"
    env.g.create_topic(topic)
    log = env.cluster.broker.log
    start = log.stat().st_size
    proc = env.host.run([sys.executable, "-c", BAD_INPUT, env.endpoint, topic], timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split("\n")
    assert "route TOPIC_NOT_FOUND" in lines and "big MESSAGE_BODY_TOO_LARGE" in lines, proc.stdout
    assert "no-id ILLEGAL_MESSAGE_ID" in lines and "no-client CLIENT_ID_REQUIRED" in lines, proc.stdout
    assert "empty MESSAGE_CORRUPTED" in lines and "no-tx INVALID_TRANSACTION_ID" in lines, proc.stdout
    # a request that is no protobuf is refused by grpcio before any activity runs
    assert "malformed INTERNAL" in lines, proc.stdout
    assert "after OK" in lines, proc.stdout  # and the endpoint goes on serving
    with open(log, "rb") as f:
        f.seek(start)
        written = f.read().decode(errors="replace")
    # one line each, no traceback (both are rate-limited per kind)
    assert "Traceback" not in written, written
    assert "gRPC SendMessage: malformed request: DecodeError" in written, written
    assert "gRPC send_message refused: ILLEGAL_MESSAGE_ID" in written, written


def test_the_scenarios_ran_beside_a_load_that_was_served_whole(env: Env) -> None:
    """All along the tests above a gRPC producer sent 20 messages a second and a SimpleConsumer kept four
    receives in flight on the same endpoint (tests/interop/grpc_load.py; halted, drained, across the
    broker's kill -9): every call answered OK, every message sent received and acked."""
    report = env.load.stop()
    print(f"background load {report}")
    assert report.sent and not report.errors and not report.missing, str(report)


@pytest.fixture(scope="module")
def tls_env(java_built, client_host, tmp_path_factory):
    pytest.importorskip("rocketmq.v5", reason="rocketmq-python-client (the test extra) is not installed")
    from rmqpy.remoting.tls_testcerts import issue, make_ca
    d = tmp_path_factory.mktemp("grpc-tls")
    cas = [make_ca("grpc CA one"), make_ca("grpc CA two")]
    for i, ca in enumerate(cas):
        (d / f"ca{i}.pem").write_bytes(ca.cert_pem)
    cert, key = issue(cas[0], "rmqpy grpc", hosts=(client_host.host_ip,)).write(d, "server", "secret")
    for p in d.iterdir():
        p.chmod(0o644)
    d.chmod(0o755)
    grpc_port = servers.free_port()
    cluster = servers.Cluster(d / "rmqpy", client_host.host_ip, {
        "brokerName": "broker-grpc-tls", "grpcServerPort": grpc_port, "tls.server.certPath": cert,
        "tls.server.keyPath": key, "tls.server.keyPassword": "secret", "tls.config.file": d / "none.properties"})
    try:
        yield cluster, d, cas, f"{client_host.host_ip}:{grpc_port}", client_host
    finally:
        cluster.close()
        print(cluster.broker.log_tail(2000))


def test_tls_on_the_grpc_port_with_certificate_reload(tls_env) -> None:
    """The broker's tls.* keys put TLS on the gRPC port: the Python client with TLS on (trusting the
    server certificate's CA) sends; after the certificate files are replaced by ones of another CA,
    a client trusting only that CA sends too (the new certificate is served without a restart)."""
    from rmqpy.remoting.tls_testcerts import issue
    cluster, d, cas, endpoint, host = tls_env
    topic = "GrpcOwnTls"
    roots = lambda i: {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(d / f"ca{i}.pem")}  # noqa: E731
    g = grpcpy.PyGrpc(host, endpoint, cluster.ns_addr, env=roots(0))
    g.create_topic(topic)
    assert len(g.client("produce", topic, "1", "--tls").of("sent")) == 1
    new_cert, new_key = issue(cas[1], "rmqpy grpc renewed", hosts=(host.host_ip,)).write(d, "renewed", "secret")
    os.replace(new_key, d / "server.key")
    os.replace(new_cert, d / "server.pem")
    g2 = grpcpy.PyGrpc(host, endpoint, cluster.ns_addr, env=roots(1))
    assert len(g2.client("produce", topic, "1", "--tls").of("sent")) == 1
    assert "TLS grpc: reloaded" in cluster.broker.log_tail(20000)
    stale = g.client("produce", topic, "1", "--tls", check=False)  # trusts only the replaced certificate's CA
    assert stale.returncode != 0 and not stale.of("sent"), stale
