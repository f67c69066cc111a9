"""Failover of three broker sets under three standalone Apache 5.3.3 controllers, with a gRPC producer too
(issue 28): the scenario of tests/interop/test_python_controller_java.py::test_sets_fail_over_under_java_controllers
(mixed rmqpy master + rmqpy + Java 5.3.3, Java-majority Java + Java + rmqpy, all Java as the reference;
``allAckInSyncStateSet=true``; ``kill -9`` of the three masters at once; every acknowledged message read
back; each old master rejoins, its log cut to the elected epoch), plus Apache's 5.3.3 proxy (cluster
mode, routes refreshed every second) in front of the sets and the official 5.1.2 Python gRPC client
sending to each set through it, beside the 4.9.8 remoting producer. Not in CI: the proxy and the three
gRPC clients make the scenario too heavy for the suite's budget on 2 cores.

Printed, per round and set: seconds from the kill to the new master and to each producer's first
SEND_OK; at the end their median and maximum over the rounds.

    PYTHONPATH=. python3 bench/controller_failover_sets.py [--rounds 3] [--no-grpc]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.interop import isolation, jvm  # noqa: E402
from tests.interop.test_python_controller_java import SETS, run_sets  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-grpc", action="store_true", help="the remoting producer only (the CI scenario)")
    args = ap.parse_args()
    jvm.ensure_built()
    net = isolation.HostNetwork()
    host = net.new_client_host()
    rounds: list[dict[str, dict[str, float]]] = []
    try:
        for n in range(1, args.rounds + 1):
            tmp = Path(tempfile.mkdtemp(prefix="ctl-sets-"))
            try:
                print(f"round {n}:", flush=True)
                rounds.append(run_sets(host, tmp, grpc=not args.no_grpc))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        host.close()
        net.close()
    for kind in SETS:
        figures = ", ".join(f"{what} median {statistics.median(r[kind][what] for r in rounds):.2f} s max "
                            f"{max(r[kind][what] for r in rounds):.2f} s" for what in rounds[0][kind])
        print(f"{kind} ({' + '.join(SETS[kind])}), {len(rounds)} rounds: {figures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
