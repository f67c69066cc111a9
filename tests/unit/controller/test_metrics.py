"""The controller's metrics (Java ``ControllerMetricsManager``'s names and labels) on a one-node log
and twisted's Clock: requests by type and status with their latency, elections by result, the log's
appends, live brokers per set, the role, the store's size."""
from __future__ import annotations

import re
from pathlib import Path

from prometheus_client.exposition import generate_latest
from twisted.internet import defer
from twisted.internet.task import Clock

from rmqpy.controller.config import ControllerConfig
from rmqpy.controller.manager import ControllerManager
from rmqpy.controller.metrics import LATENCY_BUCKETS_US, ControllerMetrics, base_labels
from rmqpy.controller.processor import ControllerRequestProcessor
from rmqpy.controller.raft import LocalLog
from rmqpy.protocol.bodies.controller import SyncStateSet
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.headers.controller import (
    AlterSyncStateSetRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
)
from tests.unit.controller.test_manager import ADDR, C, FakeChannel, N, call, heartbeat, join

ADDRESS = "127.0.0.1:9878"
BASE = {"otel_scope_name": "controller", "address": ADDRESS, "group": "ctl", "peer_id": "n0", "k1": "v1"}
_SAMPLE = re.compile(r'^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class SlowLog(LocalLog):
    """Commits ``delay`` seconds after an append, on the clock; never with ``delay`` None."""

    def __init__(self, clock: Clock, delay: float | None) -> None:
        super().__init__()
        self.clock, self.delay = clock, delay

    def append(self, events):
        d: defer.Deferred[None] = defer.Deferred()
        if self.delay is not None:
            def commit() -> None:
                super(SlowLog, self).append(events)
                d.callback(None)
            self.clock.callLater(self.delay, commit)
        return d


def setup(tmp_path: Path, log: LocalLog | None = None, clock: Clock | None = None):
    clock = clock or Clock()
    clock.advance(1_700_000_000)
    log = log or LocalLog()
    config = ControllerConfig(scanNotActiveBrokerInterval=1000, scanInactiveMasterInterval=1000,
                              controllerDLegerGroup="ctl", controllerDLegerSelfId="n0",
                              metricsExporterType="PROM", metricsLabel="k1:v1,bad,k2:v2:x,k3:")
    manager = ControllerManager(config, log, clock, send_oneway=lambda a, r: None)
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "raft.journal").write_bytes(b"x" * 1234)
    metrics = ControllerMetrics(config, ADDRESS, str(tmp_path / "store"), clock, manager.heartbeats.active_counts)
    manager.metrics = metrics
    manager.startService()
    return clock, manager, ControllerRequestProcessor(manager, metrics=metrics), metrics


def scrape(metrics: ControllerMetrics) -> list[tuple[str, dict[str, str], float]]:
    out = []
    for line in generate_latest(metrics.registry).decode().splitlines():
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            out.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def value(samples, name: str, **labels: str) -> float | None:
    found = [v for n, lab, v in samples if n == name and lab == {**BASE, **labels}]
    assert len(found) <= 1, found
    return found[0] if found else None


def test_labels_as_java_parses_metrics_label() -> None:
    assert base_labels("a:1", "g", "n0", "k1:v1,bad,k2:v2:x,k3:,k4:v4:,:v5", True) == {
        "otel_scope_name": "controller", "address": "a:1", "group": "g", "peer_id": "n0", "k1": "v1",
        "k4": "v4", "aggregation": "delta"}


def test_requests_counted_by_type_and_status_with_latency(tmp_path: Path) -> None:
    clock = Clock()
    clock, manager, p, metrics = setup(tmp_path, SlowLog(clock, 0.002), clock)
    heartbeat(p, 1, FakeChannel())
    call(p, RequestCode.CONTROLLER_GET_METADATA_INFO)
    call(p, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(C, N))
    d = p.process_request(None, p_request(RequestCode.CONTROLLER_APPLY_BROKER_ID))
    clock.advance(0.002)  # the log commits 2 ms later
    answers: list = []
    d.addCallback(answers.append)
    assert answers and answers[0].code == ResponseCode.SUCCESS
    s = scrape(metrics)
    for request_type in ("CONTROLLER_BROKER_HEARTBEAT", "CONTROLLER_GET_METADATA_INFO",
                         "CONTROLLER_GET_NEXT_BROKER_ID", "CONTROLLER_APPLY_BROKER_ID"):
        assert value(s, "request_total", request_type=request_type, request_handle_status="success") == 1
        assert value(s, "request_latency_microseconds_count", request_type=request_type) == 1
    assert value(s, "request_latency_microseconds_sum", request_type="CONTROLLER_APPLY_BROKER_ID") == 2000
    assert value(s, "request_latency_microseconds_sum", request_type="CONTROLLER_GET_METADATA_INFO") == 0
    # Java's buckets, in microseconds: 2000 us is in le=3000, not le=1000
    assert value(s, "request_latency_microseconds_bucket", request_type="CONTROLLER_APPLY_BROKER_ID",
                 le="1000.0") == 0
    assert value(s, "request_latency_microseconds_bucket", request_type="CONTROLLER_APPLY_BROKER_ID",
                 le="3000.0") == 1
    les = [lab["le"] for n, lab, _ in s if n == "request_latency_microseconds_bucket"
           and lab["request_type"] == "CONTROLLER_APPLY_BROKER_ID"]
    assert les == [repr(float(b)) for b in LATENCY_BUCKETS_US[:-1]] + ["1.0E7", "+Inf"]  # as Java writes them
    # the log's append: dledger_op_* (PySyncObj's appends here)
    assert value(s, "dledger_op_total", dledger_operation="append", dLedger_operation_status="success") == 1
    assert value(s, "dledger_op_latency_microseconds_sum", dledger_operation="append",
                 dLedger_operation_status="success") == 2000
    assert ("target_info", {}, 1.0) in s and ("otel_scope_info", {"otel_scope_name": "controller"}, 1.0) in s
    assert value(s, "dledger_disk_usage_bytes") == 1234


def p_request(code):
    from rmqpy.protocol.command import RemotingCommand
    from rmqpy.protocol.headers.controller import ApplyBrokerIdRequestHeader
    return RemotingCommand.request(code, ApplyBrokerIdRequestHeader(C, N, 1, f"{ADDR[1]};1"))


def test_a_commit_timeout_and_a_bad_request_are_counted_as_java_counts_them(tmp_path: Path) -> None:
    clock = Clock()
    clock, manager, p, metrics = setup(tmp_path, SlowLog(clock, None), clock)
    d = p.process_request(None, p_request(RequestCode.CONTROLLER_APPLY_BROKER_ID))
    clock.advance(5)  # Java's future.get(5 s)
    answers: list = []
    d.addCallback(answers.append)
    assert answers[0].code == ResponseCode.SYSTEM_ERROR
    try:  # no header: the handler raises (the dispatcher answers SYSTEM_ERROR)
        from rmqpy.protocol.command import RemotingCommand
        p.process_request(None, RemotingCommand.request(RequestCode.CONTROLLER_ELECT_MASTER))
    except Exception:
        pass
    s = scrape(metrics)
    assert value(s, "request_total", request_type="CONTROLLER_APPLY_BROKER_ID", request_handle_status="timeout") == 1
    assert value(s, "request_total", request_type="CONTROLLER_ELECT_MASTER", request_handle_status="failed") == 1
    # only the answered requests have a latency; the append timed out
    assert value(s, "request_latency_microseconds_count", request_type="CONTROLLER_APPLY_BROKER_ID") is None
    assert value(s, "dledger_op_total", dledger_operation="append", dLedger_operation_status="timeout") == 1
    assert not [n for n, _, _ in s if n.startswith("dledger_op_latency")]


def test_a_follower_answers_not_leader_counted_as_success(tmp_path: Path) -> None:
    log = LocalLog()
    log.leader_ready = False
    clock, manager, p, metrics = setup(tmp_path, log)
    manager._on_role(False)
    r = call(p, RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, GetNextBrokerIdRequestHeader(C, N))
    assert r.code == ResponseCode.CONTROLLER_NOT_LEADER
    s = scrape(metrics)
    assert value(s, "request_total", request_type="CONTROLLER_GET_NEXT_BROKER_ID", request_handle_status="success") == 1
    assert value(s, "role") == 0  # a follower: Java's counter starts at FOLLOWER


def test_elections_counted_by_result_active_brokers_per_set_and_role(tmp_path: Path) -> None:
    clock, manager, p, metrics = setup(tmp_path)
    ch1, ch2 = FakeChannel(), FakeChannel()
    heartbeat(p, 1, ch1)
    heartbeat(p, 2, ch2)
    join(p, 1)
    join(p, 2)
    assert call(p, RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(C, N, 1, False)).code == 0
    assert call(p, RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(C, N, 2, False)).code == \
        ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    assert call(p, RequestCode.CONTROLLER_ELECT_MASTER, ElectMasterRequestHeader(C, N, 9, True)).code == \
        ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    call(p, RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, AlterSyncStateSetRequestHeader(N, 1, 1),
         SyncStateSet(frozenset({1, 2}), 1).encode())
    s = scrape(metrics)
    for result in ("new_master_elected", "keep_current_master", "no_master_elected"):
        assert value(s, "election_total", cluster=C, broker_set=N, election_result=result) == 1
    assert value(s, "request_total", request_type="CONTROLLER_ELECT_MASTER", request_handle_status="success") == 3
    assert value(s, "active_broker_num", cluster=C, broker_set=N) == 2
    assert value(s, "role") == 1  # the leader: LEADER (3) less FOLLOWER (2), as Java shows it
    # the master dies: the controller's own election, without a cluster (Java's ofControllerTrigger)
    manager.heartbeats.on_channel_closed(ch1)
    s = scrape(metrics)
    assert value(s, "election_total", cluster="", broker_set=N, election_result="new_master_elected") == 1
    assert value(s, "active_broker_num", cluster=C, broker_set=N) == 1
    for _ in range(12):  # broker 2 goes silent too: no live broker, no sample
        clock.advance(1)
    assert not [n for n, _, _ in scrape(metrics) if n == "active_broker_num"]
    manager._on_role(False)
    assert value(scrape(metrics), "role") == 0


def _keys(tmp_path: Path, port: int) -> list[str]:
    import socket

    def free() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    keys = {"controllerDLegerGroup": "ctl", "controllerDLegerPeers": f"n0-127.0.0.1:{free()}",
            "controllerRaftPeers": f"n0-127.0.0.1:{free()}",  # not the peer's port + 10000 (> 65535 at times)
            "controllerDLegerSelfId": "n0", "controllerStorePath": tmp_path / "store",
            "metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1", "metricsPromExporterPort": port}
    return [a for k, v in keys.items() for a in ("-D", f"{k}={v}")]


def test_one_endpoint_in_the_name_server_and_its_own_for_a_standalone_controller(tmp_path: Path) -> None:
    """rmqpy's name server with the controller: the name server's endpoint serves the controller's
    samples too (the metrics* keys are the same in both configs); ``rmq-controller``: its own."""
    from rmqpy.controller import tap as controller_tap
    from rmqpy.namesrv import tap as namesrv_tap

    def endpoints(parent) -> list:  # rmqpy.common.metrics.metrics_service's
        return [s for s in parent if type(s).__name__ == "MetricsServer"]

    o = namesrv_tap.Options()
    o.parseOptions(["-D", "listenPort=0", "-D", f"kvConfigPath={tmp_path}/kv.json", "-D", "enableControllerInNamesrv=true",
                    *_keys(tmp_path, 0)])
    top = namesrv_tap.makeService(o)
    assert len(endpoints(top.controller)) == 1 and not endpoints(top.embedded_controller)
    text = generate_latest(top.controller.metrics.registry).decode()
    assert 'otel_scope_info{otel_scope_name="controller"}' in text and 'role{address="127.0.0.1:' in text
    assert 'otel_scope_name="namesrv-meter"' in text
    o = controller_tap.Options()
    o.parseOptions(_keys(tmp_path, 0))
    top = controller_tap.makeService(o)
    assert len(endpoints(top.controller)) == 1

