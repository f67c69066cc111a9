"""What the one-port TLS/plain-text front (rmqpy/proxy/grpc/front.py) costs a plain-text client.

    python bench/grpc_front_cost.py [--rounds 3] [-n 2000] [--inflight 16] [--serial 300]

Two rmqpy clusters side by side: ``tls.server.mode=permissive`` (the default: the Twisted front relays
every connection to grpcio's loopback port) and ``disabled`` (grpcio on the public port itself). Per
round, in alternating order, each on a fresh topic: the official Python client 5.1.2 in plain text
sends ``n`` messages with ``--inflight`` in flight and receives them (bench/grpc_bench.py's worker),
then sends ``--serial`` messages one by one (the round trip of one send). Prints the medians, and the
broker's CPU time per message (/proc) for each mode.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.grpc_bench import cpu_seconds, run_worker  # noqa: E402
from tests.interop import servers  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--serial", type=int, default=300)
    a = ap.parse_args()
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        clusters = {}
        for mode in ("permissive", "disabled"):
            port = servers.free_port()
            c = servers.Cluster(Path(tmp) / mode, "127.0.0.1", {"brokerName": f"broker-{mode}", "grpcServerPort": port,
                                                                 "tls.server.mode": mode})
            clusters[mode] = (c, f"127.0.0.1:{port}")
        try:
            time.sleep(3)
            for r in range(a.rounds):
                for mode in (("permissive", "disabled") if r % 2 == 0 else ("disabled", "permissive")):
                    c, endpoint = clusters[mode]
                    pid = [c.broker.proc.pid]
                    topic, group = f"FrontT{r}{mode[0]}", f"FrontG{r}{mode[0]}"
                    subprocess.run([sys.executable, "-m", "rmqpy.tools.admin", "updateTopic", "-n", c.ns_addr, "-c",
                                    "DefaultCluster", "-t", topic, "-r", "8", "-w", "8"], check=True,
                                   capture_output=True, cwd=ROOT)
                    row = results.setdefault(mode, {})
                    cpu0 = cpu_seconds(pid)
                    sent = run_worker(["send", endpoint, topic, str(a.n), "128", str(a.inflight)])
                    got = run_worker(["receive", endpoint, topic, str(a.n), "128", str(a.inflight), group])
                    cpu = cpu_seconds(pid) - cpu0
                    serial = run_worker(["send", endpoint, topic, str(a.serial), "128", "1"])
                    row.setdefault("send/s", []).append(sent["rate"])
                    row.setdefault("receive/s", []).append(got["rate"])
                    row.setdefault("serial send ms", []).append(1000 / serial["rate"])
                    row.setdefault("broker CPU ms/msg", []).append(1000 * cpu / (2 * a.n))
                    print(mode, r, {k: round(v[-1], 3) for k, v in row.items()}, flush=True)
        finally:
            for c, _ in clusters.values():
                c.close()
    med = {m: {k: statistics.median(v) for k, v in row.items()} for m, row in results.items()}
    print(json.dumps(med, indent=1))
    for k in med["disabled"]:
        print(f"{k}: front/direct = {med['permissive'][k] / med['disabled'][k]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
