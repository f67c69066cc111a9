"""Controller mode under kill -9 (issue 32): a random controller and the set's master, each round.

Three controllers (``--controllers rmqpy``: ``twistd rmq-controller`` on PySyncObj; ``java``: Apache's
5.3.3 name server with its controller embedded, three DLedger peers, used only as controllers;
``java-standalone``: Apache's 5.3.3 ``ControllerStartup``, three DLedger peers), an
rmqpy name server and a set of two rmqpy brokers in controller mode with
``allAckInSyncStateSet=true``. A producer thread sends all the time (rmqpy's blocking producer, keys
numbered). Each round: wait until both brokers are in the SyncStateSet, ``kill -9`` one controller
chosen at random and the master at once, measure how long until the controllers name another
master and until the next SEND_OK, then restart both (the old master rejoins as a replica, the
controller on its store). At the end every key that got SEND_OK must be read back from the set.
Printed: per round the two times, then their median and maximum, the acknowledged and lost
counts, and each controller's RSS. Not part of CI:

    PYTHONPATH=. python3 bench/controller_kill9_loop.py --rounds 50 [--controllers java|java-standalone] [--seed 7]
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmqpy.client import Message, Producer  # noqa: E402
from rmqpy.protocol.codes import RequestCode  # noqa: E402
from tests.interop import jvm, servers  # noqa: E402
from tests.interop.test_controller_failover_java import _keys_on  # noqa: E402

CLUSTER, SET, TOPIC = "BenchCluster", "broker-bench", "BenchTopic"


def rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return -1


def metadata(addr: str) -> dict[str, str]:
    try:
        code, _r, ext, _b = jvm.remoting_request(addr, RequestCode.CONTROLLER_GET_METADATA_INFO, timeout=1)
    except (OSError, ValueError):
        return {}
    return ext if code == 0 else {}


def sync_state(addrs: list[str]) -> dict[str, Any]:
    for addr in addrs:
        if metadata(addr).get("isLeader") != "true":
            continue
        try:
            code, _r, _e, body = jvm.remoting_request(addr, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
                                                      body=json.dumps([SET]).encode(), timeout=2)
        except (OSError, ValueError):
            continue
        if code == 0:
            return json.loads(body).get("replicasInfoTable", {}).get(SET, {})
    return {}


class Controllers:
    """Three controllers of one kind: start, kill -9 and restart each by peer id."""

    def __init__(self, kind: str, tmp: Path) -> None:
        self.kind, self.tmp = kind, tmp
        self.ports = {f"n{i}": servers.free_port() for i in range(3)}
        self.raft = {p: servers.free_port() for p in self.ports}
        self.addrs = {p: f"127.0.0.1:{port}" for p, port in self.ports.items()}
        self.procs: dict[str, Any] = {}

    def peers(self, ports: dict[str, int]) -> str:
        return ";".join(f"{p}-127.0.0.1:{port}" for p, port in ports.items())

    def start(self, peer: str) -> None:
        keys = {"controllerDLegerGroup": "bench", "controllerDLegerPeers": self.peers(self.ports),
                "controllerDLegerSelfId": peer, "controllerStorePath": self.tmp / peer / "store"}
        if self.kind == "rmqpy":
            conf = servers.write_conf(self.tmp / peer / "controller.conf",
                                      {**keys, "controllerRaftPeers": self.peers(self.raft)})
            self.procs[peer] = servers.ServerProcess("rmq-controller", ["-c", str(conf)], self.tmp / peer,
                                                     self.ports[peer]).start()
        elif self.kind == "java-standalone":
            self.procs[peer] = jvm.start_java_controller(jvm_version(), self.tmp / peer, self.ports[peer], keys)
        else:
            self.procs[peer] = jvm.start_java_namesrv(jvm_version(), workdir=self.tmp / peer, props={
                **{k: str(v) for k, v in keys.items()}, "enableControllerInNamesrv": True,
                "mappedFileSize": 4 * 1024 * 1024, "bindAddress": "0.0.0.0"})

    def kill9(self, peer: str) -> None:
        self.procs[peer].kill9()

    def pid(self, peer: str) -> int:
        return int(self.procs[peer].proc.pid)


def jvm_version() -> str:
    return "5.3.3"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--controllers", choices=("rmqpy", "java", "java-standalone"), default="rmqpy")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    if args.controllers != "rmqpy":
        jvm.ensure_built()
    tmp = Path(tempfile.mkdtemp(prefix="ctl-kill9-"))
    try:
        ctl = Controllers(args.controllers, tmp / "ctl")
    except BaseException:  # no free ports (a flood of TIME_WAIT sockets on the machine, say)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    ns = brokers = None
    procs: dict[str, Any] = {}
    stop = threading.Event()
    acked: list[str] = []
    failed = [0]
    try:
        for peer in ctl.ports:
            threading.Thread(target=ctl.start, args=(peer,)).start()
        deadline = time.monotonic() + 90
        while not any(metadata(a).get("isLeader") == "true" for a in ctl.addrs.values()):
            if time.monotonic() > deadline:
                raise SystemExit("no controller leader within 90 s")
            time.sleep(0.2)
        ns = servers.start_namesrv(tmp / "ns")
        ports = {name: servers.free_port() for name in ("b1", "b2")}
        props = {"brokerClusterName": CLUSTER, "brokerName": SET, "enableControllerMode": True,
                 "controllerAddr": ";".join(ctl.addrs.values()), "brokerIP1": "127.0.0.1",
                 "brokerIP2": "127.0.0.1", "mappedFileSizeCommitLog": 4 * 1024 * 1024,
                 "allAckInSyncStateSet": True, "autoCreateTopicEnable": True}

        def start_broker(name: str) -> None:
            procs[name] = servers.start_broker(tmp / name, ns.addr, props={**props, "listenPort": ports[name]},
                                               port=ports[name])
        brokers = ports
        start_broker("b1")
        start_broker("b2")

        def produce() -> None:
            i = 0
            while not stop.is_set():
                try:
                    with Producer(ns.addr, group="PBenchKill9", send_timeout_ms=2000) as producer:
                        while not stop.is_set():
                            key = f"k{i}"
                            i += 1
                            r = producer.send(Message(TOPIC, b"x" * 256, keys=[key]))
                            if r.status == "SEND_OK":
                                acked.append(key)
                except Exception:  # noqa: BLE001 (no master for a moment: counted, sent again)
                    failed[0] += 1
                    time.sleep(0.05)

        producer_thread = threading.Thread(target=produce, daemon=True)
        producer_thread.start()
        elect_times, ok_times = [], []
        addrs = list(ctl.addrs.values())
        for round_no in range(1, args.rounds + 1):
            deadline = time.monotonic() + 120
            while True:
                info = sync_state(addrs)
                if len(info.get("inSyncReplicas", [])) == 2 and all(r["alive"] for r in info["inSyncReplicas"]):
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"round {round_no}: the set not back in sync within 120 s: {info}")
                time.sleep(0.2)
            master = next(n for n, p in brokers.items() if f"127.0.0.1:{p}" == info["masterAddress"])
            victim = rng.choice(sorted(ctl.ports))
            time.sleep(rng.uniform(0.2, 2.0))
            before = len(acked)
            ctl.kill9(victim)
            procs[master].kill9()
            killed = time.monotonic()
            live = [a for p, a in ctl.addrs.items() if p != victim]
            while True:
                info = sync_state(live)
                if info.get("masterAddress") and info["masterAddress"] != f"127.0.0.1:{brokers[master]}":
                    break
                if time.monotonic() - killed > 60:
                    raise SystemExit(f"round {round_no}: no new master within 60 s")
                time.sleep(0.05)
            elect_times.append(time.monotonic() - killed)
            while len(acked) == before or time.monotonic() - killed < elect_times[-1]:
                if time.monotonic() - killed > 60:
                    raise SystemExit(f"round {round_no}: no SEND_OK within 60 s")
                time.sleep(0.02)
            ok_times.append(time.monotonic() - killed)
            print(f"round {round_no}: killed controller {victim} and master {master}: new master after "
                  f"{elect_times[-1]:.2f} s, next SEND_OK after {ok_times[-1]:.2f} s", flush=True)
            ctl.start(victim)
            start_broker(master)
        stop.set()
        producer_thread.join(10)
        read = _keys_on(ns.addr, TOPIC)
        lost = sorted(set(acked) - read)
        rss = {p: rss_mb(ctl.pid(p)) for p in ctl.ports}
        print(f"{args.controllers} controllers, {args.rounds} rounds: new master median "
              f"{statistics.median(elect_times):.2f} s, max {max(elect_times):.2f} s; next SEND_OK median "
              f"{statistics.median(ok_times):.2f} s, max {max(ok_times):.2f} s; {len(acked)} acknowledged, "
              f"{len(lost)} lost{' e.g. ' + ', '.join(lost[:5]) if lost else ''}; {failed[0]} failed sends; "
              f"controller RSS MB {rss}")
        return 1 if lost else 0
    finally:
        stop.set()
        for proc in procs.values():
            proc.kill9()
        for peer in list(ctl.procs):
            ctl.kill9(peer)
        if ns is not None:
            ns.kill9()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
