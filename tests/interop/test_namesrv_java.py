"""`twistd rmq-namesrv` beside the real Java name server, driven by the real Java broker,
mqadmin and the official Java client (4.9.x and 5.x), each client in its own namespace.

The Java broker registers with both name servers at once, so every mqadmin answer from
ours is compared with the Java name server's answer to the same question.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rmqpy.common.properties import load_properties
from rmqpy.protocol import fastjson
from tests.interop import clients, jvm, servers
from tests.interop.conftest import VERSIONS
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

TOPIC = "NsInteropTopic"


class Cluster:
    def __init__(self, version: str, host, tmp: Path) -> None:
        self.version, self.host = version, host
        ip = host.host_ip
        self.ours = servers.start_namesrv(tmp / "ours", host=ip)
        java_port = servers.free_port()
        self.java = jvm.start_java_namesrv(version, java_port, tmp / "java-ns", {"bindAddress": "0.0.0.0"})
        self.ours_addr, self.java_addr = self.ours.addr, f"{ip}:{java_port}"
        self.broker = jvm.start_java_broker(
            version, tmp / "java-broker", f"{self.ours_addr};{self.java_addr}",
            {"brokerName": "broker-j", "bindAddress": "0.0.0.0",
             # no transaction check, hence no late RMQ_SYS_TRANS_HALF_TOPIC and data version bump
             "transactionCheckInterval": 3_600_000}, broker_ip=ip)
        self.broker_addr = f"{ip}:{self.broker.port}"

    def admin(self, ns: str, *args: str) -> str:
        return clients.mqadmin(self.host, self.version, args, ns)

    def both(self, *args: str) -> tuple[str, str]:
        return self.admin(self.ours_addr, *args), self.admin(self.java_addr, *args)

    def close(self) -> None:
        self.broker.kill9()
        self.java.kill9()  # nothing reads its files afterwards
        self.ours.stop()


@pytest.fixture(scope="module", params=VERSIONS)
def cluster(request, java_built, client_host, tmp_path_factory):
    c = Cluster(request.param, client_host, tmp_path_factory.mktemp(f"ns-{request.param}"))
    try:
        out = c.admin(c.ours_addr, "updateTopic", "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4")
        assert "success" in out.lower(), out
        wait_until(lambda: TOPIC in c.admin(c.java_addr, "topicList") and TOPIC in c.admin(c.ours_addr, "topicList"),
                   40, 1.0, what="condition")
        yield c
    finally:
        c.close()
        print(c.ours.log_tail(2000))


def _cluster_rows(text: str) -> set[tuple[str, ...]]:
    rows = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] == "DefaultCluster":
            rows.add(tuple(parts[:4]))  # cluster, broker name, broker id, address
    return rows


def _route(text: str) -> dict:
    start = text.index("{")
    return fastjson.loads(text[start:text.rindex("}") + 1])


def _perms(cluster: Cluster, ns: str) -> set[int]:
    return {q["perm"] for q in _route(cluster.admin(ns, "topicRoute", "-t", TOPIC))["queueDatas"]}


def test_java_broker_registers_and_cluster_list_matches(cluster: Cluster) -> None:
    ours, java = cluster.both("clusterList")
    assert _cluster_rows(ours) == _cluster_rows(java)
    (row,) = _cluster_rows(ours)
    assert row[1] == "broker-j" and row[2] == "0" and row[3].startswith(cluster.host.host_ip + ":")


def test_topic_route_matches(cluster: Cluster) -> None:
    ours, java = cluster.both("topicRoute", "-t", TOPIC)
    assert _route(ours) == _route(java)
    route = _route(ours)
    assert route["queueDatas"][0]["writeQueueNums"] == 4


def test_topic_list_matches(cluster: Cluster) -> None:
    ours, java = cluster.both("topicList")
    assert set(ours.split()) == set(java.split())
    assert TOPIC in ours.split()


def test_kv_config_update_and_delete_write_the_same_file(cluster: Cluster, tmp_path_factory) -> None:
    for ns in (cluster.ours_addr, cluster.java_addr):
        out = cluster.admin(ns, "updateKvConfig", "-s", "INTEROP", "-k", "color", "-v", "blue")
        assert "success" in out.lower(), out
    ours_file = cluster.ours.workdir / "namesrv" / "kvConfig.json"
    java_file = Path(cluster.java.home) / "namesrv" / "kvConfig.json"
    assert fastjson.loads(ours_file.read_text()) == {"configTable": {"INTEROP": {"color": "blue"}}}
    if java_file.exists():
        assert fastjson.loads(java_file.read_text()) == fastjson.loads(ours_file.read_text())
    for ns in (cluster.ours_addr, cluster.java_addr):
        out = cluster.admin(ns, "deleteKvConfig", "-s", "INTEROP", "-k", "color")
        assert "success" in out.lower(), out
    assert fastjson.loads(ours_file.read_text()) == {"configTable": {"INTEROP": {}}}


def test_update_namesrv_config_is_written_to_config_store_path(cluster: Cluster) -> None:
    """mqadmin updateNamesrvConfig: each name server takes the value and writes every config to its
    configStorePath, which NamesrvStartup sets to the -c file (Java's Configuration.persist)."""
    files = {cluster.ours_addr: cluster.ours.workdir / "namesrv.conf", cluster.java_addr: Path(cluster.java.config)}
    for ns in files:
        out = cluster.admin(ns, "updateNamesrvConfig", "-k", "productEnvName", "-v", "interop")
        assert "update name server config success" in out, out
    ours, java = (load_properties(str(f)) for f in files.values())
    assert ours["productEnvName"] == java["productEnvName"] == "interop"
    # the keys both name servers have are written by both
    shared = set(ours) & set(java)
    assert {"productEnvName", "listenPort", "kvConfigPath", "configStorePath"} <= shared, sorted(shared)


def test_wipe_write_perm_matches(cluster: Cluster) -> None:
    # A Java broker re-registration that carries a new data version restores perm 6 on whichever
    # name server it reaches (the broker's transaction check creates RMQ_SYS_TRANS_HALF_TOPIC about
    # a minute after start; the fixture turns that check off). Should another one land between the
    # wipe and the reads, the whole wipe is repeated; the checks use one snapshot per attempt.
    count = re.compile(r"OK, (\d+)")
    for _ in range(3):
        ours, java = cluster.both("wipeWritePerm", "-b", "broker-j")
        ours_route = _route(cluster.admin(cluster.ours_addr, "topicRoute", "-t", TOPIC))
        java_route = _route(cluster.admin(cluster.java_addr, "topicRoute", "-t", TOPIC))
        perms = {q["perm"] for r in (ours_route, java_route) for q in r["queueDatas"]}
        if perms == {4}:
            break
    assert count.findall(ours) == count.findall(java) and count.findall(ours), (ours, java)
    assert {q["perm"] for q in ours_route["queueDatas"]} == {4}
    assert ours_route == java_route
    ours, java = cluster.both("addWritePerm", "-b", "broker-j")
    assert count.findall(ours) == count.findall(java), (ours, java)
    assert _perms(cluster, cluster.ours_addr) == {6}


def test_java_producer_and_consumer_use_our_routes(cluster: Cluster) -> None:
    sent = clients.harness(cluster.host, cluster.version,
                           ["produce", "-n", cluster.ours_addr, "--topic", TOPIC, "--count", "10",
                            "--tags", "A", "--keys", "k{i}"])
    assert len(sent.of("sent")) == 10
    got = clients.harness(cluster.host, cluster.version,
                          ["consume-push", "-n", cluster.ours_addr, "--topic", TOPIC, "--group", "ns_interop_g",
                           "--count", "10", "--timeout-ms", "60000"], timeout=120)
    bodies = sorted(e["body"] for e in got.of("received"))
    assert bodies == sorted(e.get("body", f"hello-{i}") for i, e in enumerate(sent.of("sent"))) or len(bodies) == 10


def test_routes_disappear_when_the_java_broker_dies(cluster: Cluster) -> None:
    cluster.broker.kill9()
    wait_until(lambda: not _cluster_rows(cluster.admin(cluster.ours_addr, "clusterList")), 20, 1.0, what="condition")
    out = clients.mqadmin(cluster.host, cluster.version, ["topicRoute", "-t", TOPIC], cluster.ours_addr)
    assert TOPIC not in out or "No topic route info" in out
