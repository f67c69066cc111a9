"""Issue 32, first slice: Java 5.3.3 brokers in controller mode under three rmqpy controllers
(``twistd rmq-controller`` on PySyncObj), with rmqpy's name server.

Three controllers elect a Raft leader; a Java 5.3.3 master and a Java 5.3.3 replica of one set
(``controllerAddr`` lists the three, ``allAckInSyncStateSet=true``) start together: one takes broker id
1 and elects itself, the other joins as its replica, and the master grows the in-sync set to both
(ALTER_SYNC_STATE_SET). The official 5.3.3 producer gets SEND_OK. What ``mqadmin`` 5.3.3 prints of the
controllers and the set (``getControllerMetaData``, ``getSyncStateSet``) has Java's fields. Then
``kill -9`` of the controller leader: the two left elect a new one, which holds the same set (its
epochs unchanged) and answers the brokers. Then ``kill -9`` of the master: the new controller leader
sees its connection close, elects the replica, tells it (NOTIFY_BROKER_ROLE_CHANGED), and sends
succeed again; every acknowledged message is read back from the new master. The killed controller,
restarted on its journal, follows the new leader.

``mixed`` is the set the issue names: an rmqpy master (started first, so it elects itself), an rmqpy
replica and a Java 5.3.3 replica; and its kill is the issue's second scenario, the master and the
controller leader at once, so that the election falls to a controller that was not leader when the
master's connection closed (its scan for dead masters elects). The new master is whichever replica
the controller's policy picks.
"""
from __future__ import annotations

import concurrent.futures
import json
import time
from pathlib import Path

import pytest

from rmqpy.client import Message, Producer
from rmqpy.protocol.codes import RequestCode
from tests.interop import clients, jvm, servers
from tests.interop.test_controller_failover_java import _keys_on
from tests.interop.test_controller_mode_java import _sections
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

JAVA = "5.3.3"
CLUSTER = "PyCtlCluster"
SET = "broker-pyctl"
TOPIC = "PyCtlTopic"
COUNT = 100


def start_controllers(tmp: Path, ip: str) -> tuple[dict[str, servers.ServerProcess], dict[str, str]]:
    ports = {f"n{i}": servers.free_port() for i in range(3)}
    raft = {p: servers.free_port() for p in ports}
    peers = ";".join(f"{p}-{ip}:{port}" for p, port in ports.items())
    raft_peers = ";".join(f"{p}-{ip}:{port}" for p, port in raft.items())
    procs = {}
    for peer, port in ports.items():
        conf = servers.write_conf(tmp / peer / "controller.conf", {
            "controllerDLegerGroup": "pyctl", "controllerDLegerPeers": peers, "controllerDLegerSelfId": peer,
            "controllerRaftPeers": raft_peers, "controllerStorePath": tmp / peer / "store",
            "scanNotActiveBrokerInterval": 2000, "scanInactiveMasterInterval": 2000})
        procs[peer] = servers.ServerProcess("rmq-controller", ["-c", str(conf)], tmp / peer, port, ip)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda p: p.start(), procs.values()))
    return procs, {p: f"{ip}:{port}" for p, port in ports.items()}


def metadata(addr: str) -> dict[str, str]:
    try:
        code, _remark, ext, _body = jvm.remoting_request(addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
    except (OSError, ValueError):
        return {}
    return ext if code == 0 else {}


def leader_of(addrs: list[str]) -> str:
    """The controller that says it leads, "" while none does."""
    for addr in addrs:
        if metadata(addr).get("isLeader") == "true":
            return addr
    return ""


def sync_state(leader: str) -> dict:
    try:
        code, _r, _e, body = jvm.remoting_request(leader, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                                                  body=json.dumps([SET]).encode())
    except (OSError, ValueError):
        return {}
    return json.loads(body).get("replicasInfoTable", {}).get(SET, {}) if code == 0 else {}


@pytest.mark.parametrize("members", ["java", "mixed"])
def test_brokers_fail_over_under_rmqpy_controllers(java_built, client_host, tmp_path: Path, members: str):
    ip = client_host.host_ip
    t0 = time.monotonic()
    procs: dict[str, object] = {}
    ctls, ctl_addrs = start_controllers(tmp_path / "ctl", ip)
    procs.update(ctls)
    live = list(ctl_addrs.values())
    try:
        leader = wait_until(lambda: leader_of(live), 20, what="a controller leader",
                            diag=lambda: "".join(p.log_tail(1500) for p in ctls.values()))
        ns = servers.start_namesrv(tmp_path / "ns", host=ip)
        procs["ns"] = ns
        props = {"brokerClusterName": CLUSTER, "brokerName": SET, "enableControllerMode": True,
                 "controllerAddr": ";".join(live), "brokerIP1": ip, "brokerIP2": ip, "bindAddress": "0.0.0.0",
                 "mappedFileSizeCommitLog": 4 * 1024 * 1024, "allAckInSyncStateSet": True}

        def start(name: str) -> object:
            if name.startswith("java"):
                return jvm.start_java_broker(JAVA, tmp_path / name, ns.addr, props, broker_ip=ip,
                                             wait_registered=False)
            port = servers.free_port()
            return servers.start_broker(tmp_path / name, ns.addr, props={**props, "listenPort": port}, port=port,
                                        host=ip)

        if members == "mixed":  # the rmqpy master first: it elects itself
            procs["py-1"] = start("py-1")
            wait_until(lambda: sync_state(leader).get("masterBrokerId") == 1, 30, what="py-1 elected",
                       diag=lambda: procs["py-1"].log_tail(3000))  # type: ignore[attr-defined]
            later = ("java-2", "py-3")
        else:
            later = ("java-1", "java-2")
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            started = {n: pool.submit(start, n) for n in later}
            for name, future in started.items():
                procs[name] = future.result()
        names = [n for n in procs if n.startswith(("java", "py"))]
        addr_of = {name: f"{ip}:{procs[name].port}" for name in names}  # type: ignore[attr-defined]

        def all_in_sync() -> dict:
            info = sync_state(leader)
            return info if len(info.get("inSyncReplicas", [])) == len(names) else {}
        info = wait_until(all_in_sync, 60, what="every broker in the set's in-sync replicas",
                          diag=lambda: json.dumps(sync_state(leader)) + ctls[_peer(ctl_addrs, leader)].log_tail(3000))
        master_addr = info["masterAddress"]
        master = next(n for n, a in addr_of.items() if a == master_addr)
        if members == "mixed":
            assert master == "py-1", info
        # one ALTER_SYNC_STATE_SET per replica taken in, or one for both (java: they start together)
        assert (info["masterBrokerId"], info["masterEpoch"]) == (1, 1), info
        sss_epoch = info["syncStateSetEpoch"]
        assert 2 <= sss_epoch <= len(names), info
        assert {r["brokerAddress"] for r in info["inSyncReplicas"]} == set(addr_of.values()), info
        assert all(r["alive"] for r in info["inSyncReplicas"]), info
        wait_until(lambda: jvm.broker_registered(ns.addr, master_addr), 30, what="the master registered")
        up = time.monotonic() - t0

        # mqadmin 5.3.3 reads the controllers as it reads Apache's
        meta = _sections(clients.mqadmin(client_host, JAVA, ["getControllerMetaData", "-a", live[0]], ns.addr),
                         "ControllerGroup", "ControllerGroup")["pyctl"]
        assert meta["#ControllerLeaderAddress"] == leader and meta["#ControllerLeaderId"] == _peer(ctl_addrs, leader)
        assert sorted(v for k, v in meta.items() if k.startswith("#Peer")) == sorted(
            f"{p}:{a}" for p, a in ctl_addrs.items()), meta
        sss = _sections(clients.mqadmin(client_host, JAVA, ["getSyncStateSet", "-a", leader, "-b", SET], ns.addr),
                        "brokerName", "brokerName")[SET]
        assert {k: v for k, v in sss.items() if not k.startswith("InSyncReplica")} == {
            "#brokerName": SET, "#MasterBrokerId": "1", "#MasterAddr": master_addr, "#MasterEpoch": "1",
            "#SyncStateSetEpoch": str(sss_epoch), "#SyncStateSetNums": str(len(names))}, sss

        clients.mqadmin(client_host, JAVA, ["updateTopic", "-c", CLUSTER, "-t", TOPIC, "-r", "4", "-w", "4"], ns.addr)
        ev = clients.harness(client_host, JAVA, ["produce", "-n", ns.addr, "-t", TOPIC, "-c", str(COUNT),
                                                 "--keys", "k{i}"], timeout=60, check=False)
        assert ev.done and ev.done.get("ok"), ev.errors[:3]
        sent = ev.of("sent")
        assert len(sent) == COUNT and {(e["brokerName"], e["status"]) for e in sent} == {(SET, "SEND_OK")}
        acked = {e["keys"] for e in sent}

        old_ctl = _peer(ctl_addrs, leader)
        if members == "java":
            # kill -9 of the controller leader: the two left elect one that holds the same set
            ctls[old_ctl].kill9()
            killed_ctl = time.monotonic()
            live.remove(leader)
            leader = wait_until(lambda: leader_of(live), 20, what="a new controller leader",
                                diag=lambda: "".join(ctls[_peer(ctl_addrs, a)].log_tail(1500) for a in live))
            new_leader_s = time.monotonic() - killed_ctl
            info = sync_state(leader)
            assert (info["masterAddress"], info["masterEpoch"], info["syncStateSetEpoch"]) == (
                master_addr, 1, sss_epoch), info
            assert all(r["alive"] for r in info["inSyncReplicas"]), info  # the brokers' heartbeats reach it too
            # then kill -9 of the master: the new leader sees its connection close and elects a replica
            procs[master].kill9()  # type: ignore[attr-defined]
            killed = time.monotonic()
        else:
            # kill -9 of the master and of the controller leader at once: the election falls to a
            # controller that is not leader yet when the master's connection closes; once leader, its
            # scan for dead masters (every 2 s here) elects a replica
            procs[master].kill9()  # type: ignore[attr-defined]
            ctls[old_ctl].kill9()
            killed = killed_ctl = time.monotonic()
            live.remove(leader)
            leader = wait_until(lambda: leader_of(live), 20, what="a new controller leader",
                                diag=lambda: "".join(ctls[_peer(ctl_addrs, a)].log_tail(1500) for a in live))
            new_leader_s = time.monotonic() - killed_ctl
        info = wait_until(lambda: (lambda i: i if i.get("masterBrokerId", 1) not in (1, None) else {})(
            sync_state(leader)), 30, what="a replica elected",
            diag=lambda: json.dumps(sync_state(leader)) + ctls[_peer(ctl_addrs, leader)].log_tail(3000))
        elected_s = time.monotonic() - killed
        replica = next(n for n, a in addr_of.items() if a == info["masterAddress"])
        assert info["masterEpoch"] == 2 and replica != master, info
        first_ok = None
        while time.monotonic() - killed < 60:
            try:
                with Producer(ns.addr, group="PPyCtlAfter") as producer:
                    r = producer.send(Message(TOPIC, b"after the kill", keys=["after-0"]))
                if r.status == "SEND_OK" and r.queue.broker_name == SET:
                    first_ok = time.monotonic() - killed
                    break
            except Exception:  # noqa: BLE001 (no route yet, the new master not registered yet)
                pass
            time.sleep(0.2)
        assert first_ok is not None, procs[replica].log_tail(60)  # type: ignore[attr-defined]
        acked.add("after-0")
        read = _keys_on(ns.addr, TOPIC)
        assert acked <= read, sorted(acked - read)[:10]
        # the killed controller, restarted on its journal, follows the new leader
        ctls[old_ctl].start()
        wait_until(lambda: metadata(ctl_addrs[old_ctl]).get("controllerLeaderAddress") == leader, 20,
                   what="the restarted controller following the leader", diag=lambda: ctls[old_ctl].log_tail(2000))
        print(f"{members}: controllers and set up in {up:.1f} s; a new controller leader {new_leader_s:.1f} s after "
              f"kill -9 of the old; {replica} elected {elected_s:.1f} s and the first SEND_OK on it "
              f"{first_ok:.1f} s after kill -9 of the master; all in {time.monotonic() - t0:.1f} s")
    finally:
        for proc in procs.values():
            proc.kill9()  # type: ignore[attr-defined]


def _peer(ctl_addrs: dict[str, str], addr: str) -> str:
    return next(p for p, a in ctl_addrs.items() if a == addr)
