"""Issue 17: metrics with RocketMQ 5's names, and log files as RocketMQ operators know them.

Metrics: a Java 5.3.3 broker and rmqpy's broker, both with ``metricsExporterType=PROM``,
each get the same traffic from the official 5.3.3 client (a push consumer running, 20
messages produced, all 20 consumed); each endpoint is scraped before and while the consumer
runs. rmqpy's counters and histograms must move as the traffic did, and every sample name
of the families rmqpy claims (docs/metrics.md) must carry the label names the Java broker
gives it, with the same request/response code values for the requests both saw.

Logs: a name server and a broker with ``logDir`` write Java's per-component files, one
line per event with time, level and namespace; a small ``logMaxFileSize`` makes them roll,
keeping at most ``logMaxIndex``; after ``kill -9`` and a restart store.log says the store
recovered abnormally.
"""
from __future__ import annotations

import re
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.tools.blocking_client import BlockingClient
from tests.interop import clients, jvm, servers
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

VERSION = "5.3.3"
TOPIC = "TMetrics"
GROUP = "g_metrics"
COUNT = 20
BODY = "m-{i}-" + "x" * 200

#: sample names rmqpy serves as Java does (docs/metrics.md), compared when Java shows them
CLAIMED = (
    "rocketmq_messages_in_total", "rocketmq_messages_out_total", "rocketmq_throughput_in_total",
    "rocketmq_throughput_out_total", "rocketmq_message_size_count", "rocketmq_message_size_sum",
    "rocketmq_message_size_bucket", "rocketmq_rpc_latency_milliseconds_count",
    "rocketmq_rpc_latency_milliseconds_sum", "rocketmq_rpc_latency_milliseconds_bucket",
    "rocketmq_broker_permission", "rocketmq_topic_number", "rocketmq_consumer_group_number",
    "rocketmq_processor_watermark", "rocketmq_producer_connections", "rocketmq_consumer_connections",
    "rocketmq_consumer_lag_messages", "rocketmq_consumer_lag_latency_milliseconds",
    "rocketmq_consumer_inflight_messages", "rocketmq_consumer_queueing_latency_milliseconds",
    "rocketmq_consumer_ready_messages", "rocketmq_storage_size_bytes", "rocketmq_storage_flush_behind_bytes",
    "rocketmq_storage_dispatch_behind_bytes", "rocketmq_storage_message_reserve_time_milliseconds",
    # POP and timer gauges, served by both brokers whatever the traffic (test_metrics_pop_timer.py moves them)
    "rocketmq_pop_revive_lag_milliseconds", "rocketmq_pop_revive_latency_milliseconds",
    "rocketmq_pop_offset_buffer_size", "rocketmq_pop_checkpoint_buffer_size", "rocketmq_timer_enqueue_lag",
    "rocketmq_timer_enqueue_latency_milliseconds", "rocketmq_timer_dequeue_lag",
    "rocketmq_timer_dequeue_latency_milliseconds", "rocketmq_timer_message_snapshot",
)
_SAMPLE = re.compile(r'^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

Samples = list[tuple[str, dict[str, str], float]]


def parse(text: str) -> Samples:
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            out.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def scrape(host: str, port: int) -> Samples:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as r:
        return parse(r.read().decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(v for n, lab, v in samples if n == name and all(lab.get(k) == x for k, x in labels.items()))


def label_names(samples: Samples) -> dict[str, set[frozenset[str]]]:
    out: dict[str, set[frozenset[str]]] = {}
    for name, labels, _ in samples:
        out.setdefault(name, set()).add(frozenset(labels))
    return out


def run_traffic(host, ns_addr: str, metrics: tuple[str, int], workdir: Path) -> tuple[Samples, Samples]:
    """Scrapes before and after: a push consumer runs, 20 messages are sent and consumed."""
    with clients.BackgroundHarness(host, VERSION, ["consume-push", "-n", ns_addr, "-t", TOPIC, "-g", GROUP,
                                                   "--count", "1000", "--timeout-ms", "90000"],
                                   workdir / "consumer.jsonl") as consumer:
        consumer.wait_for("started", 60)
        before = scrape(*metrics)
        clients.harness(host, VERSION, ["produce", "-n", ns_addr, "-t", TOPIC, "-c", str(COUNT), "--body", BODY])
        assert wait_until(lambda: len(consumer.events().of("received")) >= COUNT, 60, 0.2), consumer.events()[-5:]
        after = scrape(*metrics)  # the consumer is still connected
    return before, after


def test_metrics_follow_java_client_traffic_and_match_java_broker(java_built, client_host, tmp_path: Path) -> None:
    ip = client_host.host_ip
    # Java's ports come from below the ephemeral range, rmqpy's from the kernel, as for their servers
    java_port, py_port = jvm.free_port(), servers.free_port()

    def on_java() -> tuple[Samples, Samples]:
        props = {"metricsExporterType": "PROM", "metricsPromExporterPort": java_port}  # host: brokerIP1, as Java
        java = jvm.JavaCluster(VERSION, tmp_path / "java", ip, {"brokerName": "broker-java", **props})
        try:
            return run_traffic(client_host, java.ns_addr, (ip, java_port), tmp_path / "java")
        finally:
            java.close(clean=False)

    def on_rmqpy() -> tuple[Samples, Samples]:
        with servers.Cluster(tmp_path / "py", ip, {"brokerName": "broker-py", "metricsExporterType": "PROM",
                                                   "metricsPromExporterPort": py_port}) as py:
            return run_traffic(client_host, py.ns_addr, (ip, py_port), tmp_path / "py")

    # the two clusters share nothing (own name server, ports, work dirs): they run at the same
    # time, the rmqpy one while the Java broker boots and waits out its first registration
    with ThreadPoolExecutor(2) as pool:
        java_run, py_run = pool.submit(on_java), pool.submit(on_rmqpy)
        (_, java_after), (before, after) = java_run.result(), py_run.result()

    # the counters and histograms move as the traffic did
    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    base = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-py"}
    assert delta("rocketmq_messages_in_total", topic=TOPIC, message_type="normal", is_system="false", **base) == COUNT
    assert delta("rocketmq_message_size_count", topic=TOPIC) == COUNT
    body_bytes = sum(len(BODY.format(i=i)) for i in range(COUNT))
    assert delta("rocketmq_throughput_in_total", topic=TOPIC) > body_bytes
    assert delta("rocketmq_messages_out_total", topic=TOPIC, consumer_group=GROUP) == COUNT
    assert delta("rocketmq_throughput_out_total", topic=TOPIC, consumer_group=GROUP) > body_bytes
    sends = dict(request_code="send_message_v2", response_code="success", result="success", protocol_type="remoting")
    assert delta("rocketmq_rpc_latency_milliseconds_count", **sends) == COUNT
    assert delta("rocketmq_rpc_latency_milliseconds_bucket", le="+Inf", **sends) == COUNT
    assert delta("rocketmq_rpc_latency_milliseconds_count", request_code="pull_message") > 0
    assert value(after, "rocketmq_consumer_connections", consumer_group=GROUP, consume_mode="push",
                 language="java", version="v5_3_3") == 1
    lag = [lab for n, lab, _ in after if n == "rocketmq_consumer_lag_messages" and lab.get("topic") == TOPIC]
    assert lag and lag[0]["consumer_group"] == GROUP, lag
    assert value(after, "rmqpy_put_latency_milliseconds_count") - value(before, "rmqpy_put_latency_milliseconds_count") \
        >= COUNT
    assert value(after, "rmqpy_reactor_lag_milliseconds_count") > 0

    # the sample names and label names of the Java 5.3.3 broker
    java_names, py_names = label_names(java_after), label_names(after)
    compared = []
    for name in CLAIMED:
        if name not in java_names:
            continue  # (e.g. a gauge Java shows only in some states)
        compared.append(name)
        assert name in py_names, f"{name} is served by the Java broker, not by rmqpy"
        assert java_names[name] <= py_names[name], (name, java_names[name], py_names[name])
    assert len(compared) >= 18, compared
    print("compared with the Java 5.3.3 broker:", " ".join(compared))

    def codes(samples: Samples) -> set[tuple[str, str, str]]:
        return {(lab["request_code"], lab["response_code"], lab["result"]) for n, lab, _ in samples
                if n == "rocketmq_rpc_latency_milliseconds_count"}

    both = {"send_message_v2", "pull_message", "heart_beat", "query_consumer_offset", "get_consumer_list_by_group"}
    java_codes = {c for c in codes(java_after) if c[0] in both}
    assert java_codes and java_codes <= codes(after), (java_codes, codes(after))


LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARN|ERROR) \S+ - ")


def _send(client: BlockingClient, i: int) -> RemotingCommand:
    ext = {"a": "PGLogs", "b": "TLogs", "c": "TBW102", "d": "4", "e": str(i % 4), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": f"KEYS\x01k{i}\x02WAIT\x01true\x02",
           "j": "0", "k": "false", "m": "false", "n": "broker-py"}
    return client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, body=b"r" * 256, ext_fields=ext))


def test_log_files_split_roll_and_carry_recovery_after_kill9_and_namesrv_metrics(tmp_path: Path) -> None:
    logs = {"logMaxFileSize": 1200, "logMaxIndex": 3, "logLevel": "INFO"}
    ns_metrics = jvm.free_port()
    ns = servers.start_namesrv(tmp_path / "ns", props={"logDir": tmp_path / "ns-logs", "metricsExporterType": "PROM",
                                                       "metricsPromExporterPort": ns_metrics, **logs})
    broker = None
    try:
        broker = servers.start_broker(tmp_path / "broker", ns.addr, props={"logDir": tmp_path / "logs", **logs})
        logdir = tmp_path / "logs"
        with BlockingClient(broker.addr) as client:
            for i in range(50):
                assert _send(client, i).code == 0
        for name in ("broker.log", "store.log", "remoting.log", "stats.log", "transaction.log"):
            assert (logdir / name).exists(), sorted(p.name for p in logdir.iterdir())
        assert wait_until(lambda: "register broker[broker-py] to name server" in (logdir / "broker.log").read_text(),
                          30, 0.2)
        ns_logs = tmp_path / "ns-logs"
        assert wait_until(lambda: "new broker registered" in "".join(
            p.read_text() for p in ns_logs.glob("namesrv.log*")), 30, 0.2)
        assert (ns_logs / "remoting.log").exists()
        # the name server's metrics: its RPC latency by request code, labelled as a name server
        samples = scrape("127.0.0.1", ns_metrics)
        assert value(samples, "rocketmq_rpc_latency_milliseconds_count", request_code="register_broker",
                     response_code="success", node_type="namesrv") >= 1
        assert value(samples, "rmqpy_namesrv_brokers") == 1

        broker.stop()  # a clean stop logs its final flush
        assert " INFO rmqpy.store.message_store - shutdown: commit log flushed to offset" in "".join(
            p.read_text() for p in logdir.glob("store.log*"))
        broker.start()
        with BlockingClient(broker.addr) as client:
            assert _send(client, 50).code == 0
        broker.kill9()
        broker.start()
        store = "".join(p.read_text() for p in sorted(logdir.glob("store.log*")))
        assert re.search(r" INFO rmqpy\.store\.message_store - message store load: last exit ABNORMAL", store), store
        assert re.search(r" INFO rmqpy\.store\.message_store - recover abnormally .*re-dispatched \d+ records",
                         store), store

        # rolled at 1200 bytes, at most 3 kept; one line per event (not twice: twistd replays the
        # events logged before it began logging), with level and namespace
        for name in ("broker.log", "store.log", "remoting.log"):
            rolled = sorted(p.name for p in logdir.glob(name + ".*"))
            assert rolled and set(rolled) <= {name + ".1", name + ".2", name + ".3"}, rolled
            assert (logdir / name).stat().st_size < 1200 + 1000  # one line past the size at most
        assert len(re.findall("message store load: last exit ABNORMAL", store)) == 1, store
        for path in logdir.iterdir():
            for line in path.read_text().splitlines():
                if line.startswith(("Traceback", " ", "\t")) or not line:
                    continue
                assert LINE.match(line), (path.name, line)
        assert "rmqpy.store" not in (logdir / "broker.log").read_text()
    finally:
        if broker is not None:
            broker.stop()
        ns.stop()
