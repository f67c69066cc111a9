"""Several rmqpy brokers on one host, one per core (``./run.sh --brokers N``, issue 19): the
configurations ``rmqpy.tools.multibroker`` makes from ``conf/multi-core/broker.conf`` give
brokers of one cluster that register with one name server, and the official Java producer
spreads its sends over both.

The brokers get free ports instead of 10911 and 10921 and no gRPC endpoint, as every broker
of the suite; everything else is what ``./run.sh --brokers 2`` starts.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from rmqpy.common.properties import load_properties
from rmqpy.tools.multibroker import broker_overrides
from tests.interop import clients, servers

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "conf" / "multi-core" / "broker.conf"
N = 2
COUNT = 40


def test_two_brokers_of_one_host_register_and_take_sends(java_built, client_host):
    ip = client_host.host_ip
    workdir = Path(tempfile.mkdtemp(prefix="rmqpy-multi-"))
    ns = servers.start_namesrv(workdir / "ns", host=ip)
    ns_addr = f"{ip}:{ns.port}"
    brokers: list[servers.ServerProcess] = []
    try:
        for i in range(N):
            port = servers.free_port()
            props: dict[str, object] = {**load_properties(str(TEMPLATE)),
                                        **broker_overrides(i, store_root=str(workdir / "stores"), listen_port=port),
                                        "namesrvAddr": ns_addr, "grpcServerPort": -1}
            brokers.append(servers.start_broker(workdir / f"broker-{i}", ns_addr, props, port=port, host=ip))
        out = clients.mqadmin(client_host, "4.9.8", ["clusterList"], ns_addr)
        for i in range(N):
            assert f"broker-{i}" in out, out
        assert out.count("DefaultCluster") >= N, out
        # issue 33: a 4.9 mqadmin shows each rmqpy broker at the release it reports, 5.3.3 (#Version)
        rows = [line.split() for line in out.splitlines() if line.startswith("DefaultCluster")]
        assert sorted(r[1] for r in rows) == [f"broker-{i}" for i in range(N)], out
        assert {r[4] for r in rows} == {"V5_3_3"}, out
        ev = clients.harness(client_host, "4.9.8", ["produce", "-n", ns_addr, "-t", "TopicMultiCore",
                                                    "-c", str(COUNT)], timeout=180)
        sent = ev.of("sent")
        assert len(sent) == COUNT and {e.get("status") for e in sent} == {"SEND_OK"}
        assert {e.get("brokerName") for e in sent} == {f"broker-{i}" for i in range(N)}
        # each broker stored its share in its own store
        for i in range(N):
            assert (workdir / "stores" / f"broker-{i}" / "commitlog").is_dir()
    finally:
        for b in reversed(brokers):
            b.stop()
        ns.stop()
        shutil.rmtree(workdir, ignore_errors=True)
