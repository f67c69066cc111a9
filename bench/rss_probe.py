"""The RSS of a broker started with the default conf: idle, after the bench's send phase, after a
consumer drained it (issue 29's RSS goal).

    python bench/rss_probe.py [--variants "RMQPY_RESIDENT_MB=0,"] [--rounds 2] [--seconds 8]
                              [--warmup 2] [--size 1024] [--threads 16]

Not a test. Per variant (environment settings for the broker, comma-separated; an empty one is
the environment as it is), per round: ``twistd rmq-namesrv`` + ``twistd rmq-broker -c`` a copy of
conf/broker.conf (only its ports, name server address and store directory changed; the gRPC
endpoint on, as by default, on a free port), 3 s idle, then broker_bench.py's send phase (LoadGen
on the Java client 4.9.8, sync sends from ``--threads`` threads) and consume phase. Prints the
broker's RSS split (bench/rss_split.py) at each point; the variants alternate within a round.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import rss_split  # noqa: E402
from bench.broker_bench import build_loadgen, run_loadgen  # noqa: E402
from tests.interop import jvm, servers  # noqa: E402

#: conf/broker.conf keys this probe sets itself
OWN_KEYS = {"listenPort", "namesrvAddr", "storePathRootDir", "grpcServerPort", "brokerIP1"}


def default_conf() -> dict[str, str]:
    props = {}
    for line in (ROOT / "conf" / "broker.conf").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            if k.strip() not in OWN_KEYS:
                props[k.strip()] = v.strip()
    return props


def point(pid: int) -> dict:
    return {**rss_split.status(pid), "kinds": rss_split.by_kind(pid)}


def one(work: Path, env: dict[str, str], a: argparse.Namespace, home: Path, tag: str) -> dict:
    saved = dict(os.environ)
    os.environ.update(env)  # the servers inherit it
    ns = broker = None
    try:
        ns = servers.start_namesrv(work / "ns")
        port = servers.free_port()
        conf = servers.write_conf(work / "broker" / "broker.conf", {
            **default_conf(), "listenPort": port, "namesrvAddr": ns.addr, "brokerIP1": "127.0.0.1",
            "storePathRootDir": work / "broker" / "store", "grpcServerPort": servers.free_port()})
        broker = servers.ServerProcess("rmq-broker", ["-c", str(conf)], work / "broker", port).start(60)
        assert broker.proc is not None
        pid = broker.proc.pid
        if not jvm.wait_broker_registered(ns.addr, broker.addr, "TBW102", 30):
            raise RuntimeError("the broker did not register")
        time.sleep(3)
        out = {"idle": point(pid)}
        topic = f"Rss_{tag}_{int(time.time())}"
        prod = run_loadgen([str(x) for x in ["produce", "-n", ns.addr, "-t", topic, "--mode", "sync", "--threads",
                                             a.threads, "--body-size", a.size, "--warmup", a.warmup,
                                             "--seconds", a.seconds]], home, timeout=a.warmup + a.seconds + 90)
        out["after send"] = point(pid)
        cons = run_loadgen([str(x) for x in ["consume", "-n", ns.addr, "-t", topic, "-g", f"cg_{topic}", "--expect",
                                             prod["totalOk"], "--seconds", a.seconds, "--idle-ms", 5000]],
                           home, timeout=a.seconds + 120)
        out["after consume"] = point(pid)
        time.sleep(3)
        out["3 s later"] = point(pid)
        out["sent"], out["tps"], out["consumed"] = prod["totalOk"], prod["tps"], cons["received"]
        return out
    finally:
        for s in (broker, ns):
            if s is not None:
                s.stop()
        os.environ.clear()
        os.environ.update(saved)


def show(name: str, rnd: int, r: dict, load: float) -> None:
    print(f"\n{name or '(as is)'}, round {rnd}: sent {r['sent']:,} ({r['tps']:,.0f}/s), consumed {r['consumed']:,}, "
          f"load {load:.1f}")
    print("| point | VmRSS | RssAnon | RssFile | VmHWM | top mappings (MiB) |")
    print("|---|---:|---:|---:|---:|---|")
    for p in ("idle", "after send", "after consume", "3 s later"):
        st = r[p]
        top = ", ".join(f"{k} {v:,.1f}" for k, v in list(st["kinds"].items())[:5])
        print(f"| {p} | {st.get('VmRSS', 0):,.1f} | {st.get('RssAnon', 0):,.1f} | {st.get('RssFile', 0):,.1f} | "
              f"{st.get('VmHWM', 0):,.1f} | {top} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",", help="comma-separated K=V[;K=V] environments; empty: as is")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=16)
    a = ap.parse_args()
    variants = list(dict.fromkeys(v.strip() for v in a.variants.split(",")))
    jvm.ensure_built()
    build_loadgen()
    work = Path(tempfile.mkdtemp(prefix="rmqpy-rss-probe-"))
    home = jvm.prepare_home(work / "client-home")
    try:
        for rnd in range(a.rounds):
            for i, v in enumerate(variants if rnd % 2 == 0 else variants[::-1]):
                env = dict(kv.split("=", 1) for kv in v.split(";") if kv)
                load = os.getloadavg()[0]
                r = one(work / f"r{rnd}-{i}", env, a, home, f"{rnd}{i}")
                show(v, rnd, r, load)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
