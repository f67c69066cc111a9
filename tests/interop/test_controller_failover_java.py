"""Issue 28, slice 3: an rmqpy master and its replica (rmqpy, or Apache's 5.3.3 broker) replicate under
Apache's 5.3.3 controller and fail over when the master is killed.

One JVM: Apache's 5.3.3 name server with its controller embedded (as test_controller_mode_java.py).
``py-a`` (rmqpy) starts first and is elected master (controller id 1); ``py-b`` joins as its replica
(id 2), learns the master's HA address from the name server's registration answer and copies it
over AutoSwitch HA; the master reports the grown in-sync set (ALTER_SYNC_STATE_SET) and ``mqadmin
getSyncStateSet`` lists both. Both run ``allAckInSyncStateSet=true``: a Java 5.3.3 producer sends
300 messages, each SEND_OK only once the replica held it, so the replica's commit log equals the
master's up to the master's max offset as soon as the producer is done. Then ``kill -9`` of the
master: the controller elects the replica, sends succeed again (time from the kill to the first
SEND_OK is printed), and every acknowledged message is read back from the new master. The old
master, restarted on its store, becomes the new master's replica (the handshake finds where both
logs agree: here its end, so nothing is cut), its commit log and epoch file then equal the new
master's, and it is in the in-sync set again.

Run with a Java 5.3.3 replica only in CI: an rmqpy replica of an rmqpy master, failing over and
rejoining, is test_python_controller_java's mixed set under three standalone controllers; this module
keeps the embedded controller and ``mqadmin haStatus`` of an AutoSwitch master.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from rmqpy.client import Message, Producer, PullConsumer, PullStatus
from rmqpy.protocol.codes import RequestCode
from tests.interop import clients, jvm, servers
from tests.interop.test_controller_mode_java import _sections
from tests.interop.test_ha_java import _ha_status
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

JAVA = "5.3.3"
CLUSTER = "FoCluster"
SET = "broker-fo"
TOPIC = "FoTopic"
COUNT = 300


def _runtime(addr: str) -> dict[str, str]:
    """A broker's runtime table; {} while it cannot answer (a wait's poll, across a kill)."""
    try:
        return _runtime_now(addr)
    except (OSError, ValueError, AssertionError):
        return {}


def _runtime_now(addr: str) -> dict[str, str]:
    """A broker's runtime table, which it must answer now (not a poll): a failure says why."""
    code, remark, _ext, body = jvm.remoting_request(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert code == 0, (addr, code, remark)
    return json.loads(body)["table"]


def _commit_log(store: Path, end: int) -> bytes:
    out = bytearray()
    for f in sorted((store / "commitlog").iterdir()):
        start = int(f.name)
        if start >= end:
            break
        out += f.read_bytes()[:end - start]
    return bytes(out)


def _store(workdir: Path) -> Path:
    return workdir / "store"


def _keys_on(ns_addr: str, topic: str) -> set[str]:
    """Every message key of ``topic`` read from its queues' broker (the set's master)."""
    keys: set[str] = set()
    with PullConsumer(ns_addr, group="GFoReader") as consumer:
        for mq in consumer.fetch_queues(topic):
            offset = consumer.min_offset(mq)
            while True:
                res = consumer.pull(mq, offset, max_nums=32)
                for m in res.messages:
                    keys.update((m.keys or "").split())  # KEYS: space-separated
                if res.status != PullStatus.FOUND:
                    break
                offset = res.next_begin_offset
    return keys


# the rmqpy replica of an rmqpy master runs in test_python_controller_java's mixed set (three standalone
# controllers, the same failover and rejoin); here the Java replica, under the embedded controller
@pytest.mark.parametrize("replica", ["java"])
def test_replica_copies_an_rmqpy_master_and_takes_over_after_kill9(java_built, client_host, tmp_path: Path,
                                                                   replica: str):
    ip = client_host.host_ip
    t0 = time.monotonic()
    ns, ns_addr, ctl = jvm.start_java_namesrv_with_controller(JAVA, tmp_path / "ns", ip)
    brokers: dict[str, Any] = {}
    props = {"brokerClusterName": CLUSTER, "brokerName": SET, "enableControllerMode": True, "controllerAddr": ctl,
             "brokerIP1": ip, "brokerIP2": ip, "mappedFileSizeCommitLog": 4 * 1024 * 1024,
             "allAckInSyncStateSet": True}

    def start(name: str, kind: str = "rmqpy") -> str:
        if kind == "java":  # Apache's 5.3.3 broker, the same keys
            proc = jvm.start_java_broker(JAVA, tmp_path / name, ns_addr, {**props, "bindAddress": "0.0.0.0"},
                                         broker_ip=ip, wait_registered=False)
            brokers[name] = proc
            return f"{ip}:{proc.port}"
        port = servers.free_port()
        brokers[name] = servers.start_broker(tmp_path / name, ns_addr, props={**props, "listenPort": port},
                                             port=port, host=ip)
        return f"{ip}:{port}"

    def tail(name: str) -> str:
        return brokers[name].log_tail(3000 if name == "py-a" or replica == "rmqpy" else 60)

    try:
        a = start("py-a")
        wait_until(lambda: jvm.broker_registered(ns_addr, a), 30, what="py-a registered as master",
                   diag=lambda: tail("py-a"))
        b = start("py-b", replica)
        # the replica found the master's HA port through the name server, the master asked the
        # controller to take it into the in-sync set (a 5.3.3 broker's first registration comes
        # about 10 s after its start: see jvm.start_java_broker)
        if replica == "rmqpy":
            wait_until(lambda: _runtime(b).get("haConnectedToMaster") == "true", 30,
                       what="py-b connected to py-a's HA port", diag=lambda: tail("py-b"))
            assert _runtime_now(b)["haMasterAddress"] == f"{ip}:{int(a.rsplit(':', 1)[1]) + 1}"
        wait_until(lambda: _runtime(a).get("haSyncStateSet") == "1,2", 60, what="py-b in py-a's in-sync set",
                   diag=lambda: tail("py-a") + tail("py-b"))
        up = time.monotonic() - t0

        clients.mqadmin(client_host, JAVA, ["updateTopic", "-c", CLUSTER, "-t", TOPIC, "-r", "4", "-w", "4"],
                        ns_addr)
        ev = clients.harness(client_host, JAVA, ["produce", "-n", ns_addr, "-t", TOPIC, "-c", str(COUNT),
                                                 "--keys", "k{i}", "--body-size", "512"], timeout=120, check=False)
        assert ev.done and ev.done.get("ok"), (ev.errors[:3], tail("py-a"))
        sent = ev.of("sent")
        assert len(sent) == COUNT and {(e["brokerName"], e["status"]) for e in sent} == {(SET, "SEND_OK")}
        acked = {e["keys"] for e in sent}
        end = int(_runtime_now(a)["commitLogMaxOffset"])
        # allAckInSyncStateSet: each SEND_OK came after py-b held the message, nothing to wait for
        assert int(_runtime_now(b)["commitLogMaxOffset"]) >= end
        assert _commit_log(_store(tmp_path / "py-b"), end) == _commit_log(tmp_path / "py-a" / "store", end)

        sss = _sections(clients.mqadmin(client_host, JAVA, ["getSyncStateSet", "-a", ctl, "-b", SET], ns_addr),
                        "brokerName", "brokerName")[SET]
        assert sss["#MasterBrokerId"] == "1" and sss["#SyncStateSetNums"] == "2", sss
        in_sync = sorted(v for k, v in sss.items() if k.startswith("InSyncReplica"))
        assert [f"brokerId={i}" in v and "alive=true" in v for i, v in zip((1, 2), in_sync)] == [True, True], sss
        # mqadmin haStatus on the master: its replica, in the in-sync set (OK, #InSyncSlaveNum its size - 1),
        # every acknowledged byte held (each SEND_OK waited for it)
        fields, rows = _ha_status(client_host, ns_addr, a)
        assert fields == {"#MasterAddr": a, "#MasterCommitLogMaxOffset": str(end), "#SlaveNum": "1",
                          "#InSyncSlaveNum": "1"}, fields
        [[slave_addr, ack, diff, _speed, status, transfer_from]] = rows
        assert slave_addr.rsplit(":", 1)[0] == ip and (ack, diff, status, transfer_from) == \
            (str(end), "0", "OK", str(end)), rows

        # kill -9 of the master: the controller elects the replica, sends succeed again
        brokers["py-a"].kill9()
        killed = time.monotonic()
        first_ok = None
        tries = 0
        while time.monotonic() - killed < 60:
            tries += 1
            try:
                with Producer(ns_addr, group="PFoAfter") as producer:
                    r = producer.send(Message(TOPIC, b"after the kill", keys=["after-0"]))
                if r.status == "SEND_OK" and r.queue.broker_name == SET:
                    first_ok = time.monotonic() - killed
                    break
            except Exception:  # noqa: BLE001 (no route, the old master refused, the new one not registered yet)
                pass
            time.sleep(0.2)
        assert first_ok is not None, tail("py-b")
        if replica == "rmqpy":
            runtime = _runtime(b)
            assert runtime.get("haSlaveConnections") == "0", runtime  # a master now, no replica left
        ev = clients.harness(client_host, JAVA, ["produce", "-n", ns_addr, "-t", TOPIC, "-c", "20",
                                                 "--keys", "after-j{i}"], timeout=60, check=False)
        assert ev.done and ev.done.get("ok"), (ev.errors[:3], tail("py-b"))
        after = ev.of("sent")
        assert {(e["brokerName"], e["status"]) for e in after} == {(SET, "SEND_OK")}
        acked |= {e["keys"] for e in after} | {"after-0"}
        read = _keys_on(ns_addr, TOPIC)
        assert acked <= read, sorted(acked - read)[:10]
        sss = _sections(clients.mqadmin(client_host, JAVA, ["getSyncStateSet", "-a", ctl, "-b", SET], ns_addr),
                        "brokerName", "brokerName")[SET]
        assert sss["#MasterBrokerId"] == "2" and sss["#MasterAddr"] == b and sss["#MasterEpoch"] == "2", sss
        failed_over = time.monotonic() - t0

        # the old master restarts on its store: a replica of the new master (its HA port from the
        # name server), its log cut where the two agree, then caught up, in the in-sync set again
        restarted = time.monotonic()
        port_a = int(a.rsplit(":", 1)[1])
        brokers["py-a"] = servers.start_broker(tmp_path / "py-a", ns_addr, props={**props, "listenPort": port_a},
                                               port=port_a, host=ip)
        wait_until(lambda: _runtime(a).get("haMasterAddress") == f"{ip}:{int(b.rsplit(':', 1)[1]) + 1}", 30,
                   what="py-a a replica of py-b", diag=lambda: tail("py-a"))
        new_end = int(_runtime_now(b)["commitLogMaxOffset"])
        wait_until(lambda: int(_runtime(a).get("commitLogMaxOffset", -1)) >= new_end, 30, what="py-a caught up",
                   diag=lambda: tail("py-a"))
        assert _commit_log(tmp_path / "py-a" / "store", new_end) == _commit_log(_store(tmp_path / "py-b"), new_end)

        def epoch_file(store: Path) -> str:
            return (store / "epochFileCheckpoint").read_text() if (store / "epochFileCheckpoint").exists() else ""
        wait_until(lambda: epoch_file(tmp_path / "py-a" / "store") == epoch_file(_store(tmp_path / "py-b")), 10,
                   what="py-a's epoch file is py-b's", diag=lambda: epoch_file(tmp_path / "py-a" / "store") + " vs "
                   + epoch_file(_store(tmp_path / "py-b")))
        assert epoch_file(tmp_path / "py-a" / "store").count("\n") >= 3  # a count and two epochs

        def both_in_sync() -> bool:
            out = clients.mqadmin(client_host, JAVA, ["getSyncStateSet", "-a", ctl, "-b", SET], ns_addr)
            return _sections(out, "brokerName", "brokerName")[SET].get("#SyncStateSetNums") == "2"
        wait_until(both_in_sync, 30, what="py-a back in the in-sync set", diag=lambda: tail("py-b"))
        print(f"set up in {up:.1f} s; kill -9 of the master to the first SEND_OK on the new one: {first_ok:.1f} s "
              f"({tries} tries); failed over at {failed_over:.1f} s; the old master back in sync "
              f"{time.monotonic() - restarted:.1f} s after its restart; all in {time.monotonic() - t0:.1f} s")
    finally:
        for broker in brokers.values():
            broker.kill9()
        ns.kill9()
