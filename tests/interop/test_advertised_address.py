"""The broker's advertised address (brokerIP1) against official Java clients on a client host.

The classic RocketMQ-in-Docker trouble: the broker listens on every address, but registers
with the name server under a ``brokerIP1`` that clients cannot reach (the host's 127.0.0.1,
which inside a container or namespace is the client's own loopback, or an address the client
has no route to). The name server hands that address out in every route, so a producer that
reaches the name server fine still cannot send. This module checks what the user sees:

* with a wrong brokerIP1 the official producer (4.9.8 and 5.3.3) fails with the client's own
  error: ``MQClientException`` "Send [3] times, still failed ..." whose cause is
  ``RemotingConnectException`` "connect to <brokerIP1>:<port> failed" (response code 10001,
  CONNECT_BROKER_EXCEPTION), and nothing is stored;
* ``mqadmin clusterList`` shows the advertised (wrong) address, which is how a user finds out;
* after a restart with the right brokerIP1 (the client host's ``host_ip``) the same producer
  succeeds, its messages are the first in their queues, and clusterList shows the right address.

Our name server and broker run on the host bound to every address; the clients run on the
module's client host (its own network namespace or podman container), so the broker is
reachable at ``host_ip`` whatever it advertises.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.interop import clients, isolation, jvm, servers

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(isolation.isolation_kind() in ("none", "external"),
                       reason=f"{isolation.ENV_ISOLATION}={isolation.isolation_kind()}: clients are not on a "
                              "client host of their own, so a wrong brokerIP1 is not unreachable for them"),
]

VERSIONS = list(jvm.VERSIONS)
#: wrong advertised addresses: the host's loopback (the client host's 127.0.0.1 is its own, nothing
#: listens there) and an address the client host has no route to (TEST-NET-1, RFC 5737)
WRONG = {"loopback": "127.0.0.1", "unroutable": "192.0.2.1"}
CONNECT_BROKER_EXCEPTION = 10001  # ClientErrorCode.CONNECT_BROKER_EXCEPTION


@pytest.fixture(scope="module")
def namesrv(java_built, client_host):
    workdir = Path(tempfile.mkdtemp(prefix="rmqpy-advertised-"))
    ns = servers.start_namesrv(workdir / "ns", host=client_host.host_ip)  # binds 0.0.0.0
    try:
        yield ns
    finally:
        ns.stop()
        shutil.rmtree(workdir, ignore_errors=True)


class Broker:
    """rmq-broker on the host, listening on 0.0.0.0, advertising ``ip``; restartable on one store."""

    def __init__(self, workdir: Path, namesrv, host_ip: str) -> None:
        self.workdir, self.namesrv, self.host_ip = workdir, namesrv, host_ip
        self.port = servers.free_port()
        self.proc: servers.ServerProcess | None = None
        self.ip = ""

    @property
    def advertised(self) -> str:
        return f"{self.ip}:{self.port}"

    def start(self, ip: str) -> None:
        self.ip = ip
        # ServerProcess waits on host_ip:port: the broker listens there whatever it advertises
        self.proc = servers.start_broker(self.workdir, f"{self.host_ip}:{self.namesrv.port}",
                                         {"brokerIP1": ip, "brokerName": "broker-adv"}, port=self.port,
                                         host=self.host_ip)
        assert jvm.wait_broker_registered(f"{self.host_ip}:{self.namesrv.port}", self.advertised, "TBW102", 30), \
            f"broker not registered as {self.advertised}:\n{self.proc.log_tail()}"

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()
            self.proc = None

    def store_records(self) -> int:
        """Messages in the store, by the store tool (the broker must be stopped)."""
        p = subprocess.run([sys.executable, "-m", "rmqpy.store", "verify", str(self.workdir / "store")],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(servers.ROOT)})
        assert p.returncode == 0, p.stdout + p.stderr
        report = json.loads(p.stdout)
        assert report["ok"], report
        return report["records"]


@pytest.fixture
def broker(namesrv, client_host, tmp_path):
    b = Broker(tmp_path / "broker", namesrv, client_host.host_ip)
    yield b
    b.stop()


def produce(client_host, namesrv, version: str, topic: str, count: int) -> jvm.Events:
    return clients.harness(client_host, version,
                           ["produce", "-n", f"{client_host.host_ip}:{namesrv.port}", "-t", topic, "-c", str(count),
                            "--body", "adv-{i}", "--send-timeout-ms", "3000"],
                           timeout=90, check=False)


def cluster_list(client_host, namesrv, version: str) -> tuple[str, str]:
    """``mqadmin clusterList`` on the client host: (stdout, stderr)."""
    home = jvm.default_home()
    cmd = jvm.java_cmd(version, jvm.FASTEXIT_MAIN,
                       [jvm.MQADMIN_MAIN, "clusterList", "-n", f"{client_host.host_ip}:{namesrv.port}"],
                       {"rmq.logback.configurationFile": "rmq.tools.logback.xml"}, kind="harness", home=home)
    p = client_host.run(cmd, timeout=90, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL)
    assert p.returncode == 0, f"mqadmin clusterList exited {p.returncode}:\n{p.stdout}\n{p.stderr[-3000:]}"
    return p.stdout, p.stderr


def broker_rows(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if "broker-adv" in line]


@pytest.mark.parametrize("wrong", sorted(WRONG))
@pytest.mark.parametrize("version", VERSIONS)
def test_wrong_broker_ip1_is_a_clear_client_error_and_the_right_one_works(
        version, wrong, namesrv, broker, client_host):
    topic = f"TAdv_{version.replace('.', '')}_{wrong}_{uuid.uuid4().hex[:6]}"
    broker.start(WRONG[wrong])

    # clusterList shows what the broker advertises: that is how a user finds the mistake
    out, err = cluster_list(client_host, namesrv, version)
    rows = broker_rows(out)
    assert [r[3] for r in rows] == [broker.advertised], out
    assert f"{client_host.host_ip}:{broker.port}" not in out
    # ... with an empty #Version column, and mqadmin's stack trace says it could not connect there
    assert not rows[0][4].startswith("V"), out
    assert f"RemotingConnectException: connect to {broker.advertised} failed" in err, err[-3000:]

    ev = produce(client_host, namesrv, version, topic, 3)
    assert ev.returncode != 0 and ev.of("sent") == [], ev
    err = ev.errors[0]
    # the client's own words: MQClientException "Send [3] times, still failed, ... Topic: <t>"
    assert err["class"] == "org.apache.rocketmq.client.exception.MQClientException", err
    assert err["message"].startswith("Send [3] times, still failed"), err
    assert f"Topic: {topic}" in err["message"], err
    assert err["responseCode"] == CONNECT_BROKER_EXCEPTION, err
    # ... caused by not reaching the advertised address (not host_ip, where it listens)
    cause = err["causes"][0]
    assert cause["class"] == "org.apache.rocketmq.remoting.exception.RemotingConnectException", err
    assert cause["message"] == f"connect to {broker.advertised} failed", err
    assert (ev.done["ok"], ev.done["sent"], ev.done["failed"]) == (False, 0, 1), ev.done

    # nothing reached the store
    broker.stop()
    assert broker.store_records() == 0

    # the fix: advertise the address the client host reaches; same store, same producer
    broker.start(client_host.host_ip)
    out, err = cluster_list(client_host, namesrv, version)
    rows = broker_rows(out)
    assert [r[3] for r in rows] == [broker.advertised], out
    assert WRONG[wrong] + f":{broker.port}" not in out
    assert rows[0][4].startswith("V"), out  # the broker's runtime info was fetched at that address
    assert "RemotingConnectException" not in err, err[-3000:]
    ev = produce(client_host, namesrv, version, topic, 3)
    assert ev.returncode == 0 and ev.done["ok"], ev.errors
    sent = ev.of("sent")
    assert [e["status"] for e in sent] == ["SEND_OK"] * 3
    # every message the first in its queue: the failed sends left nothing behind
    by_queue: dict[int, list[int]] = {}
    for e in sent:
        by_queue.setdefault(e["queueId"], []).append(e["queueOffset"])
    assert all(offs == list(range(len(offs))) for offs in by_queue.values()), sent
    broker.stop()
    assert broker.store_records() == 3
