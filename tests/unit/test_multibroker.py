"""rmqpy.tools.multibroker: the configurations of ``./run.sh --brokers N`` (issue 19) load as
broker settings, with distinct names, ports (listenPort-2 .. listenPort+1 each) and stores."""

import os

import pytest

from rmqpy.broker.config import load_settings
from rmqpy.tools import multibroker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_n_brokers_are_distinct_members_of_one_cluster(tmp_path):
    rc = multibroker.main(["4", str(tmp_path / "confs"), "--template",
                           os.path.join(ROOT, "conf", "multi-core", "broker.conf"),
                           "--store-root", str(tmp_path / "stores")])
    assert rc == 0
    settings = [load_settings(str(tmp_path / "confs" / f"broker-{i}.conf")) for i in range(4)]
    assert {s.broker.brokerClusterName for s in settings} == {"DefaultCluster"}
    assert [s.broker.brokerName for s in settings] == ["broker-0", "broker-1", "broker-2", "broker-3"]
    ports = [s.netty.listenPort for s in settings]
    assert ports == [10911, 10921, 10931, 10941]
    used = [p + d for p in ports for d in (-2, -1, 0, 1)]
    assert len(set(used)) == len(used)
    assert len({s.broker.grpcServerPort for s in settings}) == 4
    stores = {s.store.storePathRootDir for s in settings}
    assert stores == {str(tmp_path / "stores" / f"broker-{i}") for i in range(4)}


@pytest.mark.parametrize("argv", [["0", "x"], ["65", "x"], ["2", "x", "--base-port", "65530"]])
def test_bad_counts_and_ports_are_refused(tmp_path, argv, capsys):
    argv[1] = str(tmp_path / argv[1])
    assert multibroker.main(argv) == 2
    assert "multibroker:" in capsys.readouterr().err
    assert not os.path.exists(argv[1])
