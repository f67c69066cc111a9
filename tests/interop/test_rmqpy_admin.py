"""``rmqpy-admin`` against mqadmin 5.3.3: the same commands on the same rmqpy cluster print the same.

rmqpy-admin runs as a real process on the test host, mqadmin (Maven Central's tools jar) on the
client host; both talk to one ``twistd rmq-namesrv`` + ``rmq-broker``. What legitimately differs
(rates, timestamps, the JVM's log lines) is compared loosely, the rest line for line.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmqpy.protocol import fastjson
from tests.interop import clients, servers

pytestmark = pytest.mark.interop
ROOT = Path(__file__).resolve().parents[2]
VERSION = "5.3.3"


@pytest.fixture(scope="module")
def cluster(java_built, client_host, tmp_path_factory):
    c = servers.Cluster(tmp_path_factory.mktemp("admin"), client_host.host_ip)
    yield c, client_host
    c.close()


def ours(c, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-m", "rmqpy.tools.admin", args[0], "-n", c.ns_addr, *args[1:]],
                         env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout


def theirs(c, host, *args: str) -> str:
    lines = clients.mqadmin(host, VERSION, args, c.ns_addr).splitlines()
    return "\n".join(line for line in lines if not line.startswith("RocketMQLog:") and "SLF4J" not in line) + "\n"


def test_topic_commands_print_what_mqadmin_prints(cluster) -> None:
    c, host = cluster
    a = ours(c, "updateTopic", "-b", c.broker_addr, "-t", "AdmOurs", "-r", "3", "-w", "3")
    b = theirs(c, host, "updateTopic", "-b", c.broker_addr, "-t", "AdmJava", "-r", "3", "-w", "3")
    assert a.replace("AdmOurs", "T") == b.replace("AdmJava", "T"), f"ours:\n{a}\nmqadmin:\n{b}"
    assert set(ours(c, "topicList").split()) == set(theirs(c, host, "topicList").split()) >= {"AdmOurs", "AdmJava"}

    route_a, route_b = ours(c, "topicRoute", "-t", "AdmJava"), theirs(c, host, "topicRoute", "-t", "AdmJava")
    assert _keys_as_text(fastjson.loads(route_a)) == _keys_as_text(fastjson.loads(route_b)), f"{route_a}\n{route_b}"
    status_a, status_b = ours(c, "topicStatus", "-t", "AdmJava"), theirs(c, host, "topicStatus", "-t", "AdmJava")
    assert status_b.startswith(status_a.rstrip("\n")), f"ours:\n{status_a}\nmqadmin:\n{status_b}"  # + "Topic Put TPS"
    assert status_a.count("\n") == 1 + 3

    a = ours(c, "deleteTopic", "-t", "AdmOurs", "-c", "DefaultCluster")
    b = theirs(c, host, "deleteTopic", "-t", "AdmJava", "-c", "DefaultCluster")
    assert a.replace("AdmOurs", "T") == b.replace("AdmJava", "T"), f"ours:\n{a}\nmqadmin:\n{b}"
    assert not {"AdmOurs", "AdmJava"} & set(theirs(c, host, "topicList").split())


def _keys_as_text(value):
    if isinstance(value, dict):
        return {str(k): _keys_as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keys_as_text(v) for v in value]
    return value


def test_cluster_list_and_broker_status_print_what_mqadmin_prints(cluster) -> None:
    c, host = cluster
    a, b = ours(c, "clusterList").splitlines(), theirs(c, host, "clusterList").splitlines()
    assert a[0] == b[0] and len(a) == len(b) == 2, f"ours:\n{a}\nmqadmin:\n{b}"
    assert a[1].split()[:5] == b[1].split()[:5]   # cluster, broker, id, address, version; then rates
    a = [line.split(":")[0].strip() for line in ours(c, "brokerStatus", "-b", c.broker_addr).splitlines()]
    b = [line.split(":")[0].strip() for line in theirs(c, host, "brokerStatus", "-b", c.broker_addr).splitlines()]
    assert a == b and "brokerVersionDesc" in a
