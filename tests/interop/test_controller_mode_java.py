"""Issue 28, slice 1: an rmqpy broker in controller mode under Apache's controller, beside a Java
5.3.3 broker in controller mode as the reference.

One JVM: Apache's 5.3.3 name server with its controller embedded (``enableControllerInNamesrv``,
DLedger with one peer). Two brokers of one cluster, each the only replica of its set: ``broker-py``
(rmqpy, ``enableControllerMode=true``) and ``broker-java`` (Java 5.3.3, the same keys). Each must
take broker id 1 from the controller, elect itself, become SYNC_MASTER registered with brokerId 0,
and a Java 5.3.3 producer gets SEND_OK from both. What ``mqadmin`` 5.3.3 prints of the two sets
(``getSyncStateSet``, ``getBrokerEpoch``, ``clusterList``) must be the same field for field but for
the broker names, addresses and offsets; ``getControllerMetaData`` names the leader.
"""
from __future__ import annotations

import concurrent.futures
import re
import time
from pathlib import Path

import pytest

from tests.interop import clients, jvm, servers
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

JAVA = "5.3.3"
CLUSTER = "CtlCluster"
SETS = {"rmqpy": "broker-py", "java": "broker-java"}


def _props(ctl: str, ns: str, ip: str, name: str) -> dict[str, object]:
    return {"brokerClusterName": CLUSTER, "brokerName": name, "enableControllerMode": True, "controllerAddr": ctl,
            "namesrvAddr": ns, "brokerIP1": ip, "brokerIP2": ip, "autoCreateTopicEnable": True,
            "mappedFileSizeCommitLog": 4 * 1024 * 1024}


def _sections(out: str, start: str, key: str) -> dict[str, dict[str, str]]:
    """mqadmin's blocks of ``#name\tvalue`` (or ``#name: value``) lines, each block from its ``#start``
    line on, by the value of its ``#key`` line; repeated names (replicas, epochs) are numbered."""
    blocks: list[dict[str, str]] = []
    for line in out.splitlines():
        name, sep, value = line.partition("\t")
        if not sep:
            name, sep, value = line.partition(": ")
        if not sep or not name.strip():
            continue
        name, value = name.strip().rstrip(":"), value.strip()
        if name == f"#{start}" or not blocks:
            blocks.append({})
        current = blocks[-1]
        if name in current:
            name = f"{name}[{sum(1 for k in current if k.startswith(name))}]"
        current[name] = value
    return {b.get(f"#{key}", "?"): b for b in blocks}


def _normalized(section: dict[str, str], names: dict[str, str], addrs: dict[str, str]) -> dict[str, str]:
    """Broker names and addresses replaced by what they stand for, offsets by their kind."""
    out = {}
    for key, value in section.items():
        for real, alias in {**names, **addrs}.items():
            value = value.replace(real, alias)
        out[key] = re.sub(r"endOffset=\d+", "endOffset=<max>", value)
    return out


def test_rmqpy_and_java_brokers_become_masters_under_apaches_controller(java_built, client_host, tmp_path: Path):
    ip = client_host.host_ip
    t0 = time.monotonic()
    ns, ns_addr, ctl = jvm.start_java_namesrv_with_controller(JAVA, tmp_path / "ns", ip)
    brokers: dict[str, object] = {}
    try:
        def start_rmqpy() -> servers.ServerProcess:
            port = servers.free_port()
            return servers.start_broker(tmp_path / "py", ns_addr, props={
                **_props(ctl, ns_addr, ip, SETS["rmqpy"]), "listenPort": port}, port=port, host=ip)

        def start_java() -> jvm.JavaProcess:
            return jvm.start_java_broker(JAVA, tmp_path / "java", ns_addr, {
                **_props(ctl, ns_addr, ip, SETS["java"]), "bindAddress": "0.0.0.0"}, broker_ip=ip,
                wait_registered=False)

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            started = {kind: pool.submit(fn) for kind, fn in (("java", start_java), ("rmqpy", start_rmqpy))}
            for kind, future in started.items():
                brokers[kind] = future.result()
        addrs = {"rmqpy": f"{ip}:{brokers['rmqpy'].port}", "java": f"{ip}:{brokers['java'].port}"}  # type: ignore[attr-defined]
        for kind, addr in addrs.items():
            wait_until(lambda a=addr: jvm.broker_registered(ns_addr, a), 30, what=f"the {kind} broker registered",
                       diag=lambda k=kind: brokers[k].log_tail(3000))  # type: ignore[attr-defined]
        started_at = time.monotonic() - t0

        # both masters: brokerId 0 in the name server's table
        out = clients.mqadmin(client_host, JAVA, ["clusterList", "-c", CLUSTER], ns_addr)
        rows = {r[1]: (r[2], r[3]) for r in (line.split() for line in out.splitlines()) if r and r[0] == CLUSTER}
        assert rows == {SETS["rmqpy"]: ("0", addrs["rmqpy"]), SETS["java"]: ("0", addrs["java"])}, out

        # the official 5.3.3 producer: SEND_OK from each master
        clients.mqadmin(client_host, JAVA, ["updateTopic", "-c", CLUSTER, "-t", "CtlTopic", "-r", "2", "-w", "2"],
                        ns_addr)
        ev = clients.harness(client_host, JAVA, ["produce", "-n", ns_addr, "-t", "CtlTopic", "-c", "8"], timeout=60,
                             check=False)
        sent = ev.of("sent")
        assert ev.done and ev.done.get("ok"), (ev.errors[:3], brokers["rmqpy"].log_tail(2000))  # type: ignore[attr-defined]
        assert {(e["brokerName"], e["status"]) for e in sent} == {(SETS["rmqpy"], "SEND_OK"), (SETS["java"], "SEND_OK")}

        # what mqadmin prints of both sets: equal once names and addresses are masked
        names = {SETS["rmqpy"]: "<broker>", SETS["java"]: "<broker>"}
        masked = {addrs["rmqpy"]: "<addr>", addrs["java"]: "<addr>"}
        sss = _sections(clients.mqadmin(client_host, JAVA, ["getSyncStateSet", "-a", ctl, "-c", CLUSTER], ns_addr),
                        "brokerName", "brokerName")
        epochs = _sections(clients.mqadmin(client_host, JAVA, ["getBrokerEpoch", "-c", CLUSTER], ns_addr),
                           "clusterName", "brokerName")
        meta = _sections(clients.mqadmin(client_host, JAVA, ["getControllerMetaData", "-a", ctl], ns_addr),
                         "ControllerGroup", "ControllerGroup")
        for printed in (sss, epochs):
            assert set(printed) == set(SETS.values()), printed
        py, java = SETS["rmqpy"], SETS["java"]
        assert _normalized(sss[py], names, masked) == _normalized(sss[java], names, masked), sss
        assert _normalized(epochs[py], names, masked) == _normalized(epochs[java], names, masked), epochs
        # the fields themselves, so that a change both sides share shows too
        assert {k: v for k, v in sss[py].items() if k != "#MasterAddr"} == {
            "#brokerName": py, "#MasterBrokerId": "1", "#MasterEpoch": "1", "#SyncStateSetEpoch": "1",
            "#SyncStateSetNums": "1", "InSyncReplica": f"ReplicaIdentity{{brokerName='{py}', brokerId=1, "
                                                      f"brokerAddress='{addrs['rmqpy']}', alive=true}}"}, sss[py]
        assert sss[py]["#MasterAddr"] == addrs["rmqpy"]
        assert epochs[py]["#brokerId"] == "0" and epochs[py]["#clusterName"] == CLUSTER
        assert re.fullmatch(r"EpochEntry\{epoch=1, startOffset=0, endOffset=\d+}", epochs[py]["#Epoch"]), epochs[py]
        assert meta["ctl"]["#ControllerLeaderAddress"] == ctl and meta["ctl"]["#Peer"] == f"n0:{ctl}", meta
        # the controller's oneway NOTIFY_BROKER_ROLE_CHANGED after the election reached rmqpy and was read
        log = brokers["rmqpy"].log.read_text(errors="replace")  # type: ignore[attr-defined]
        assert "Receive notifyBrokerRoleChanged request" in log and "masterEpoch=1" in log, log[-3000:]
        # the broker id from the controller, in Java's file
        assert (tmp_path / "py" / "store" / "brokerIdentity").read_text() == f"{CLUSTER}#{py}#1"
        assert (tmp_path / "java" / "store" / "brokerIdentity").read_text() == f"{CLUSTER}#{java}#1"
        print(f"controller and brokers up and registered in {started_at:.1f} s, all in {time.monotonic() - t0:.1f} s")
    finally:
        for broker in brokers.values():
            broker.kill9()  # type: ignore[attr-defined]
        ns.kill9()
