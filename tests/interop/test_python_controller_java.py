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
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rmqpy.client import Message, Producer
from rmqpy.protocol.codes import RequestCode
from rmqpy.store.commitlog import CommitLog
from tests.interop import clients, grpcpy, jvm, servers
from tests.interop.test_controller_failover_java import _commit_log, _keys_on, _runtime
from tests.interop.test_controller_mode_java import _sections
from tests.interop.waiting import concurrently, wait_until

pytestmark = pytest.mark.interop

JAVA = "5.3.3"
CLUSTER = "PyCtlCluster"
SET = "broker-pyctl"
TOPIC = "PyCtlTopic"
COUNT = 100


def start_controllers(tmp: Path, ip: str, kind: str = "rmqpy") -> tuple[dict[str, Any], dict[str, str]]:
    """Three controllers of one DLedger group ``pyctl``, started side by side: rmqpy's (``twistd
    rmq-controller``, PySyncObj on ``controllerRaftPeers``) or Apache's 5.3.3 ``ControllerStartup``
    (``kind`` "java", DLedger); (peer id -> process, peer id -> address). Both scan for dead brokers
    and masters every 2 s."""
    ports = {f"n{i}": servers.free_port() for i in range(3)}
    peers = ";".join(f"{p}-{ip}:{port}" for p, port in ports.items())
    keys = {"controllerDLegerGroup": "pyctl", "controllerDLegerPeers": peers,
            "scanNotActiveBrokerInterval": 2000, "scanInactiveMasterInterval": 2000}

    def start(peer: str) -> Any:
        if kind == "java":
            return jvm.start_java_controller(JAVA, tmp / peer, ports[peer], {**keys, "controllerDLegerSelfId": peer})
        return procs[peer].start()
    procs: dict[str, Any] = {}
    if kind == "rmqpy":
        raft_peers = ";".join(f"{p}-{ip}:{servers.free_port()}" for p in ports)
        for peer, port in ports.items():
            conf = servers.write_conf(tmp / peer / "controller.conf", {
                **keys, "controllerDLegerSelfId": peer, "controllerRaftPeers": raft_peers,
                "controllerStorePath": tmp / peer / "store"})
            procs[peer] = servers.ServerProcess("rmq-controller", ["-c", str(conf)], tmp / peer, port, ip)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        procs.update(zip(ports, pool.map(start, ports)))
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


def sync_state(leader: str, name: str = SET) -> dict:
    """What the controller at ``leader`` holds of set ``name`` (masterAddress, masterEpoch, inSyncReplicas...)."""
    try:
        code, _r, _e, body = jvm.remoting_request(leader, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                                                  body=json.dumps([name]).encode())
    except (OSError, ValueError):
        return {}
    return json.loads(body).get("replicasInfoTable", {}).get(name, {}) if code == 0 else {}


def start_member(kind: str, workdir: Path, ns_addr: str, props: dict, ip: str, port: int | None = None) -> Any:
    """One broker of a set in controller mode: Apache's 5.3.3 (``kind`` "java") or rmqpy's, on ``port``
    (a free one by default; the same one to restart it on its store)."""
    if kind == "java":
        return jvm.start_java_broker(JAVA, workdir, ns_addr, {**props, "bindAddress": "0.0.0.0"}, broker_ip=ip,
                                     listen_port=port, wait_registered=False)
    port = port or servers.free_port()
    return servers.start_broker(workdir, ns_addr, props={**props, "listenPort": port}, port=port, host=ip)


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
                 "controllerAddr": ";".join(live), "brokerIP1": ip, "brokerIP2": ip,
                 "mappedFileSizeCommitLog": 4 * 1024 * 1024, "allAckInSyncStateSet": True}

        def start(name: str) -> object:
            return start_member(name.split("-")[0], tmp_path / name, ns.addr, props, ip)

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


#: the broker sets under Apache's controllers, in start order (the first elects itself master): the
#: issue's mixed set, a Java-majority set, and the all-Java set as the reference
SETS = {"mixed": ("py", "py", "java"), "jmaj": ("java", "java", "py"), "java": ("java", "java", "java")}
#: the sets CI runs: the all-Java reference (three more JVMs, ~25 s of CI) runs in
#: bench/controller_failover_sets.py, beside the other two, each round
CI_SETS = ("mixed", "jmaj")
#: SEND_OKs each producer must have before the kill and after the failover
LOAD = 10
#: the producers a set can have: the 4.9.8 remoting client, the 5.1.2 Python gRPC client (through Apache's
#: proxy: bench/controller_failover_sets.py)
CLIENTS = ("remoting", "grpc")


def commit_log_end(store: Path) -> int:
    """Where the last whole record of the commit log under ``store`` ends (a killed broker's written end)."""
    log = CommitLog(str(store / "commitlog"), 4 * 1024 * 1024, readonly=True)
    log.load()
    try:
        return max((off + d.size for off, d in log.iter_records(log.get_min_offset()) if d.success), default=0)
    finally:
        log.close()


def epoch_entries(store: Path) -> list[tuple[int, int]]:
    """The (epoch, start offset) entries of a store's epoch file (Java's ``CheckpointFile``)."""
    lines = (store / "epochFileCheckpoint").read_text().split("\n") if (store / "epochFileCheckpoint").exists() else []
    return [(int(a), int(b)) for a, _, b in (line.partition("-") for line in lines[2:] if line)]


class BrokerSet:
    """Three brokers of one set under the controllers ``ctl``, with a 4.9.8 producer sending SYNC all the time."""

    def __init__(self, kind: str, tmp: Path, ip: str, ns_addr: str, ctl: list[str]) -> None:
        self.kind, self.tmp, self.ip, self.ns_addr, self.ctl = kind, tmp / kind, ip, ns_addr, ctl
        self.name, self.topic = f"broker-{kind}", f"Fo-{kind}"
        self.master = ""  # once up
        self.props = {"brokerClusterName": CLUSTER, "brokerName": self.name, "enableControllerMode": True,
                      "controllerAddr": ";".join(ctl), "brokerIP1": ip, "brokerIP2": ip,
                      "mappedFileSizeCommitLog": 4 * 1024 * 1024, "allAckInSyncStateSet": True,
                      # no TBW102 route: a send before its topic's route would go to any set's master
                      "autoCreateTopicEnable": False}
        self.members = {f"{k}-{i}": k for i, k in enumerate(SETS[kind], 1)}
        self.procs: dict[str, Any] = {}
        self.producer: clients.BackgroundHarness | None = None
        self.grpc: subprocess.Popen | None = None
        self.clients = CLIENTS[:1]  # and "grpc" once produce() started it

    def start(self, name: str, port: int | None = None) -> None:
        self.procs[name] = start_member(self.members[name], self.tmp / name, self.ns_addr, self.props, self.ip, port)

    def addr(self, name: str) -> str:
        return f"{self.ip}:{self.procs[name].port}"

    def state(self) -> dict:
        return sync_state(leader_of(self.ctl), self.name)

    def named(self, addr: str) -> str:
        return next(n for n in self.procs if self.addr(n) == addr)

    def store(self, name: str) -> Path:
        return self.tmp / name / "store"

    def diag(self) -> str:
        return json.dumps(self.state()) + "".join(p.log_tail(40) for p in self.procs.values())

    def up(self) -> None:
        """The members of the first one's kind start side by side, the first to register with the
        controllers elects itself; then the others join; all three in the in-sync set."""
        kind = SETS[self.kind][0]
        concurrently(*(lambda n=n: self.start(n) for n, k in self.members.items() if k == kind))
        wait_until(lambda: self.state().get("masterAddress"), 60, what=f"{self.kind}: a {kind} master elected",
                   diag=self.diag)
        concurrently(*(lambda n=n: self.start(n) for n, k in self.members.items() if k != kind), lambda: None)
        info = wait_until(lambda: (lambda i: i if len(i.get("inSyncReplicas", [])) == 3 else {})(self.state()), 60,
                          what=f"{self.kind}: all three in sync", diag=self.diag)
        master = self.named(info["masterAddress"])
        assert self.members[master] == kind, info
        wait_until(lambda: jvm.broker_registered(self.ns_addr, info["masterAddress"]), 30,
                   what=f"{self.kind}: the master registered")
        # a Java master's class archive now, not in its kill -9 (a pause of 1-2 s before the kill)
        getattr(self.procs[master], "dump_archive", lambda: None)()
        self.master = master

    def kill_master(self) -> float:
        """kill -9 of the master; when it was dead."""
        self.procs[self.master].kill9()
        return time.monotonic()

    def create_topic(self) -> None:
        """The set's topic on its master (what mqadmin updateTopic sends), then known to each replica
        (their sync from the master: a new master must have it) and routed by the name server."""
        fields = {"topic": self.topic, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                  "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"}
        code, remark, _, _ = jvm.remoting_request(self.addr(self.master), RequestCode.UPDATE_AND_CREATE_TOPIC,
                                                  {k: str(v) for k, v in fields.items()})
        assert code == 0, (self.kind, code, remark)

        def known(name: str) -> bool:
            try:
                code, _, _, body = jvm.remoting_request(self.addr(name), RequestCode.GET_ALL_TOPIC_CONFIG)
            except (OSError, ValueError):
                return False
            return code == 0 and f'"{self.topic}"'.encode() in body
        for name in self.procs:
            wait_until(lambda n=name: known(n), 30, 0.2, what=f"{self.kind}: {name} has {self.topic}", diag=self.diag)
        wait_until(lambda: jvm.remoting_request(self.ns_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                {"topic": self.topic})[0] == 0, 30, 0.2,
                   what=f"{self.kind}: {self.topic} routed")

    def produce(self, host: Any, grpc_endpoint: str | None = None) -> None:
        """Producers sending one message after the other, each going on after a failed send: the
        official 4.9.8 remoting producer (SYNC, its routes polled every second: Java's default is 30 s)
        and, given ``grpc_endpoint`` (Apache's proxy), the official 5.1.2 Python gRPC client, 20 ms between
        two sends (as fast as it can, three of them starved the JVMs on 2 cores: no remoting send in 60 s)."""
        self.producer = clients.BackgroundHarness(host, "4.9.8", [
            "produce", "-n", self.ns_addr, "-t", self.topic, "-g", f"P{self.kind}", "-c", "1000000", "--keys", "k{i}",
            "--continue-on-error", "--send-timeout-ms", "1000", "--poll-namesrv-ms", "1000"], self.tmp / "remoting.jsonl")
        if grpc_endpoint is None:
            return
        self.clients = CLIENTS
        with open(self.tmp / "grpc.jsonl", "w") as out:
            self.grpc = host.popen([sys.executable, str(grpcpy.CLIENT), grpc_endpoint, "produce", self.topic, "1000000",
                                    "--keys", "g{i}", "--continue-on-error", "--pause", "0.02"], stdout=out,
                                   stderr=subprocess.DEVNULL)

    def stop_producers(self) -> None:
        if self.producer is not None:
            self.producer.stop()
        if self.grpc is not None and self.grpc.poll() is None:
            self.grpc.kill()
            self.grpc.wait(10)

    def acked(self, client: str) -> list[dict]:
        """The sends of ``client`` ("remoting", "grpc") answered SEND_OK (a gRPC receipt is one)."""
        return [e for e in clients.read_events(self.tmp / f"{client}.jsonl").of("sent")
                if e.get("status", "SEND_OK") == "SEND_OK"]

    def last_sent(self) -> dict[str, int]:
        """Each producer's last message index sent or failed so far."""
        return {c: max((e["i"] for e in clients.read_events(self.tmp / f"{c}.jsonl") if "i" in e), default=-1)
                for c in self.clients}

    def fail_over(self, killed: float, last: dict[str, int]) -> dict[str, float]:
        """After the master's kill -9 at ``killed``: the seconds to a new master, and for each producer to
        its first SEND_OK of a message sent after the kill (an index past ``last`` + 1, the one in flight)."""
        old = self.addr(self.master)
        info = wait_until(lambda: (lambda i: i if i.get("masterAddress") not in (None, "", old) else {})(
            self.state()), 60, 0.05, what=f"{self.kind}: a new master", diag=self.diag)
        times = {"elected": time.monotonic() - killed}
        pending = set(self.clients)

        def resumed() -> bool:
            for c in list(pending):
                if any(e["i"] > last[c] + 1 for e in self.acked(c)):
                    times[c] = time.monotonic() - killed
                    pending.discard(c)
            return not pending
        wait_until(resumed, 60, 0.05, what=f"{self.kind}: a SEND_OK after the kill from each producer",
                   diag=lambda: f"{pending} {self.diag()}")
        assert info["masterEpoch"] == 2, info
        self.new_master = self.named(info["masterAddress"])
        return times

    def rejoin(self) -> dict[str, int]:
        """The old master, restarted on its store and port: the new master's replica, its commit log cut
        to where the elected epoch starts (what it wrote past that, no replica acked) and caught up, its
        epoch file the new master's, back in the in-sync set. (bytes cut, the common end offset)"""
        old, new = self.master, self.new_master
        written = commit_log_end(self.store(old))
        elected_start = epoch_entries(self.store(new))[-1][1]
        self.start(old, self.procs[old].port)
        # the producer is stopped: final (polled: a loaded JVM may answer a request late)
        end = wait_until(lambda: int(_runtime(self.addr(new)).get("commitLogMaxOffset", 0)), 30,
                         what=f"{self.kind}: {new}'s runtime info", diag=self.diag)
        wait_until(lambda: int(_runtime(self.addr(old)).get("commitLogMaxOffset", -1)) == end, 60,
                   what=f"{self.kind}: {old} caught up to {end}", diag=self.diag)
        assert _commit_log(self.store(old), end) == _commit_log(self.store(new), end), self.kind
        assert [e for e, _ in epoch_entries(self.store(new))] == [1, 2], (self.kind, epoch_entries(self.store(new)))
        wait_until(lambda: epoch_entries(self.store(old)) == epoch_entries(self.store(new)), 10,
                   what=f"{self.kind}: {old}'s epoch file is {new}'s", diag=self.diag)
        wait_until(lambda: len(self.state().get("inSyncReplicas", [])) == 3, 60,
                   what=f"{self.kind}: {old} back in the in-sync set", diag=self.diag)
        return {"cut": max(0, written - elected_start), "end": end}


def test_sets_fail_over_under_java_controllers(java_built, client_host, tmp_path: Path):
    """Three standalone Apache 5.3.3 controllers (``ControllerStartup``, DLedger) and two sets side by
    side: mixed (rmqpy master + rmqpy + Java 5.3.3) and Java-majority (Java master + Java + rmqpy); all
    Java, the reference, with them in bench/controller_failover_sets.py. The 4.9.8 remoting producer
    sends SYNC to each set all the time; ``kill -9`` of the masters at once: each set elects a
    replica, the producers resume (the time from the kill to the first SEND_OK of a message sent after
    it is printed, per set), every acknowledged message is read back from the new master; each old
    master, restarted, rejoins as a replica, its commit log cut to the elected epoch's start and then
    equal to the new master's. With a gRPC producer too: bench/controller_failover_sets.py."""
    run_sets(client_host, tmp_path, grpc=False, kinds=CI_SETS)


def run_sets(client_host: Any, tmp_path: Path, grpc: bool, kinds: tuple[str, ...] = tuple(SETS)
             ) -> dict[str, dict[str, float]]:
    """The scenario of :func:`test_sets_fail_over_under_java_controllers`; with ``grpc``, Apache's 5.3.3
    proxy (cluster mode) in front of the sets and the 5.1.2 Python gRPC client sending to each set
    through it as well (rmqpy's own gRPC port serves its broker only: a client pointed at it cannot
    follow a new master). Per set, the seconds from the kill to the new master ("elected") and to each
    producer's first SEND_OK ("remoting", "grpc"). ``kinds``: which of :data:`SETS` run."""
    ip = client_host.host_ip
    t0 = time.monotonic()
    ctls, ctl_addrs = start_controllers(tmp_path / "ctl", ip, "java")
    ctl = list(ctl_addrs.values())
    sets: dict[str, BrokerSet] = {}
    ns = proxy = None
    try:
        wait_until(lambda: leader_of(ctl), 30, what="a controller leader",
                   diag=lambda: "".join(p.log_tail(30) for p in ctls.values()))
        ns = servers.start_namesrv(tmp_path / "ns", host=ip)
        sets = {k: BrokerSet(k, tmp_path, ip, ns.addr, ctl) for k in kinds}
        started: list[Any] = []

        def start_proxy() -> None:
            """Apache's proxy, its routes refreshed every second, once a master of the cluster is up (it
            makes a system topic there at start)."""
            wait_until(lambda: any(s.master for s in sets.values()), 120, what="a master up")
            started.append(jvm.start_java_proxy(JAVA, tmp_path / "proxy", ns.addr, props={  # type: ignore[union-attr]
                "rocketMQClusterName": CLUSTER, "topicRouteServiceCacheRefreshSeconds": 1}))
        concurrently(*(lambda s=s: (s.up(), s.create_topic()) for s in sets.values()),
                     *((start_proxy,) if grpc else ()))
        proxy = started[0] if started else None
        for s in sets.values():
            s.produce(client_host, f"{ip}:{proxy.port}" if proxy is not None else None)
        up = time.monotonic() - t0
        for s in sets.values():
            for c in s.clients:
                wait_until(lambda s=s, c=c: len(s.acked(c)) >= LOAD, 60, 0.2, what=f"{s.kind}: {LOAD} SEND_OK ({c})",
                           diag=s.diag)

        loaded = time.monotonic()
        killed = {k: s.kill_master() for k, s in sets.items()}
        last = {k: s.last_sent() for k, s in sets.items()}
        times: dict[str, dict[str, float]] = {}
        concurrently(*(lambda k=k, s=s: times.__setitem__(k, s.fail_over(killed[k], last[k]))
                       for k, s in sets.items()))
        after = time.monotonic()
        for k, s in sets.items():
            for c in s.clients:
                wait_until(lambda k=k, s=s, c=c: sum(e["i"] > last[k][c] + 1 for e in s.acked(c)) >= LOAD, 60, 0.2,
                           what=f"{k}: {LOAD} SEND_OK after the failover ({c})", diag=s.diag)
            s.stop_producers()
        acked = {k: {e["keys"] for c in s.clients for e in s.acked(c)} for k, s in sets.items()}
        for k, s in sets.items():
            read = _keys_on(ns.addr, s.topic)
            assert acked[k] <= read, (k, sorted(acked[k] - read)[:10])
        failed_over = time.monotonic()

        rejoined: dict[str, dict[str, int]] = {}
        concurrently(*(lambda k=k, s=s: rejoined.__setitem__(k, s.rejoin()) for k, s in sets.items()))
        for k, s in sets.items():
            t = times[k]
            grpc_ok = f" and {t['grpc']:.2f} s (5.1.2 gRPC, proxy)" if "grpc" in t else ""
            print(f"{k} ({' + '.join(SETS[k])}): {s.new_master} elected {t['elected']:.2f} s after kill -9 of "
                  f"{s.master}, first SEND_OK {t['remoting']:.2f} s (4.9.8 remoting){grpc_ok}; {len(acked[k])} "
                  f"acknowledged, all read back; {s.master} rejoined, {rejoined[k]['cut']} unreplicated bytes cut, "
                  f"equal up to {rejoined[k]['end']}")
        print(f"sets up in {up:.1f} s, loaded in {loaded - t0 - up:.1f} s, failed over in {after - loaded:.1f} s, "
              f"more load and read back in {failed_over - after:.1f} s, rejoined in {time.monotonic() - failed_over:.1f}"
              f" s, all in {time.monotonic() - t0:.1f} s")
        return times
    finally:
        for s in sets.values():
            s.stop_producers()
            for proc in s.procs.values():
                proc.kill9()
        for server in (proxy, ns):
            if server is not None:
                server.kill9()
        for proc in ctls.values():
            proc.kill9()
