"""Configuration of several brokers on one host, one per core (``./run.sh --brokers N``).

    python3 -m rmqpy.tools.multibroker N OUTDIR [--template rmqpy/conf/multi-core/broker.conf]
                                       [--store-root ~/store] [--base-port 10911]

A broker runs its reactor on one core; RocketMQ scales a cluster by adding brokers, so N
masters with distinct brokerNames, ports and stores in one cluster are how rmqpy uses N cores.
Writes ``OUTDIR/broker-<i>.conf``: the template with broker ``i``'s own keys appended (a later
key wins in a properties file, as in Java's ``Properties.load``) and prints their paths.
"""
from __future__ import annotations

import argparse
import os
import sys

#: listen ports of consecutive brokers are this far apart (each also uses listenPort+1 for HA)
PORT_STEP = 10
MAX_BROKERS = 64


def broker_overrides(i: int, *, store_root: str, base_port: int = 10911, grpc_base_port: int = 8081,
                     listen_port: int | None = None) -> dict[str, str]:
    """The keys that make broker ``i`` of a host distinct from the others."""
    if not 0 <= i < MAX_BROKERS:
        raise ValueError(f"broker index {i} is not in 0..{MAX_BROKERS - 1}")
    return {
        "brokerName": f"broker-{i}",
        "listenPort": str(listen_port if listen_port is not None else base_port + PORT_STEP * i),
        "storePathRootDir": os.path.join(store_root, f"broker-{i}"),
        "grpcServerPort": str(grpc_base_port + i) if grpc_base_port >= 0 else "-1",
    }


def render(template: str, overrides: dict[str, str]) -> str:
    lines = [template.rstrip("\n"), "", "# this broker's own keys (rmqpy.tools.multibroker)"]
    lines += [f"{k}={v}" for k, v in overrides.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("brokers", type=int)
    ap.add_argument("outdir")
    # the sample installed with the package (conf/multi-core in a checkout links to it)
    ap.add_argument("--template", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                        "conf", "multi-core", "broker.conf"))
    ap.add_argument("--store-root", default=os.path.join(os.path.expanduser("~"), "store"))
    ap.add_argument("--base-port", type=int, default=10911)
    a = ap.parse_args(argv)
    if not 1 <= a.brokers <= MAX_BROKERS:
        print(f"multibroker: the number of brokers must be in 1..{MAX_BROKERS}", file=sys.stderr)
        return 2
    if not 1 <= a.base_port <= 65535 - PORT_STEP * a.brokers:
        print("multibroker: --base-port leaves no room for the brokers' ports", file=sys.stderr)
        return 2
    with open(a.template, encoding="utf-8") as f:
        template = f.read()
    os.makedirs(a.outdir, exist_ok=True)
    for i in range(a.brokers):
        path = os.path.join(a.outdir, f"broker-{i}.conf")
        with open(path, "w", encoding="utf-8") as f:
            f.write(render(template, broker_overrides(i, store_root=a.store_root, base_port=a.base_port)))
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
