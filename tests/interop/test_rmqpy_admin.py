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
    # rmqpy reports itself as 5.3.3 and active, as a 5.3.3 master is (issue 33: was V4_9_8, false)
    assert b[1].split()[4] == "V5_3_3" and b[1].split()[-1] == "true" and b[0].split()[-1] == "#ACTIVATED", b
    # mqadmin 4.9.8 has no #ACTIVATED column; its #Version column is the broker's brokerVersionDesc
    old = [line for line in clients.mqadmin(host, "4.9.8", ["clusterList"], c.ns_addr).splitlines()
           if line.startswith(("#Cluster", "DefaultCluster"))]
    assert len(old) == 2 and old[0].split()[6] == "#Version" and old[1].split()[4] == "V5_3_3", old
    assert 0.0 <= float(old[1].split()[-1]) <= 1.0, old  # #SPACE: the store's disk use, as Java's, not -1
    a = [line.split(":")[0].strip() for line in ours(c, "brokerStatus", "-b", c.broker_addr).splitlines()]
    b = [line.split(":")[0].strip() for line in theirs(c, host, "brokerStatus", "-b", c.broker_addr).splitlines()]
    assert a == b and "brokerVersionDesc" in a


def _without(text: str, *prefixes: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip() and not line.startswith(prefixes)]


def test_consumer_progress_and_message_queries_print_what_mqadmin_prints(cluster) -> None:
    """A Java 5.3.3 producer sends 3 keyed messages, a push consumer takes them and leaves; then
    both tools show the group's progress and find the messages by key, offset id and unique id."""
    c, host = cluster
    ours(c, "updateTopic", "-b", c.broker_addr, "-t", "AdmMsg", "-r", "2", "-w", "2")
    sent = clients.harness(host, VERSION, ["produce", "-n", c.ns_addr, "--topic", "AdmMsg", "--count", "3",
                                           "--keys", "akey{i}", "--tags", "TagA"]).of("sent")
    assert len(sent) == 3, sent
    got = clients.harness(host, VERSION, ["consume-push", "-n", c.ns_addr, "--topic", "AdmMsg", "--group", "adm_g",
                                          "--count", "3", "--from", "first", "--timeout-ms", "60000"], timeout=120)
    assert len(got.of("received")) >= 3, got

    a = ours(c, "consumerProgress", "-g", "adm_g")
    b = theirs(c, host, "consumerProgress", "-g", "adm_g")
    assert _without(a, "Consume TPS") == _without(b, "Consume TPS"), f"ours:\n{a}\nmqadmin:\n{b}"
    assert "Consume Diff Total: 0" in a and a.count("AdmMsg") == 2
    a, b = ours(c, "consumerProgress"), theirs(c, host, "consumerProgress")
    row = [line.split() for line in a.splitlines() if line.startswith("adm_g ")]
    assert a.splitlines()[0] == b.splitlines()[0] and row, f"ours:\n{a}\nmqadmin:\n{b}"
    assert row == [line.split() for line in b.splitlines() if line.startswith("adm_g ")]

    m = sent[1]
    a = ours(c, "queryMsgByKey", "-t", "AdmMsg", "-k", "akey1")
    b = theirs(c, host, "queryMsgByKey", "-t", "AdmMsg", "-k", "akey1")
    assert a == b and m["msgId"] in a, f"ours:\n{a}\nmqadmin:\n{b}"
    for msg_id in (m["offsetMsgId"], m["msgId"]):
        a = ours(c, "queryMsgById", "-t", "AdmMsg", "-i", msg_id, "-f", "UTF-8")
        b = theirs(c, host, "queryMsgById", "-t", "AdmMsg", "-i", msg_id, "-f", "UTF-8")
        assert _without(a) == _without(b), f"ours:\n{a}\nmqadmin:\n{b}"
        assert f"OffsetID:            {m['offsetMsgId']}" in a and "Keys:                [akey1]" in a
