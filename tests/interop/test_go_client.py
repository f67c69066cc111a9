"""The rmqpy name server and broker against the official Go client (rocketmq-client-go/v2).

Our ``twistd rmq-namesrv`` and ``rmq-broker`` run as real processes on the client host's
``host_ip`` for the whole module; the Go harness (tests/interop/go, built by its build.sh)
runs inside the client host (a network namespace), as do the Java harness runs of the
cross-client tests. Every test uses its own topic and groups.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from tests.interop import clients, goharness, isolation, servers

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(not goharness.available(), reason="no Go toolchain and no built Go harness"),
]

JAVA_VERSION = "4.9.8"


@pytest.fixture(scope="module")
def go_built() -> None:
    goharness.ensure_built()


@pytest.fixture(scope="module")
def cluster(client_host, go_built):
    """(namesrv_addr, broker ServerProcess or None) reachable from ``client_host``."""
    ext = isolation.external_servers()
    if ext is not None:
        yield ext["namesrv"] if isinstance(ext.get("namesrv"), str) else "%s:%s" % tuple(ext["namesrv"]), None
        return
    workdir = Path(tempfile.mkdtemp(prefix="rmqpy-go-client-"))
    ns = servers.start_namesrv(workdir / "ns", host=client_host.host_ip)
    broker = None
    try:
        broker = servers.start_broker(workdir / "broker", ns.addr, {"flushDiskType": "ASYNC_FLUSH"},
                                      host=client_host.host_ip)
        _wait_registered(broker)
        yield ns.addr, broker
    finally:
        if broker is not None:
            broker.stop()
        ns.stop()
        if os.environ.get("RMQPY_KEEP_WORKDIR"):
            print(f"work dir kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _wait_registered(broker: servers.ServerProcess, timeout: float = 15) -> None:
    """Wait until the broker has logged its boot (and so its first registration)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "boot success" in broker.log_tail(200_000):
            time.sleep(0.5)
            return
        time.sleep(0.1)


def _names(prefix: str) -> tuple[str, str, str]:
    run = uuid.uuid4().hex[:8]
    return f"Go{prefix}_{run}", f"GID_go_p_{prefix}_{run}", f"GID_go_c_{prefix}_{run}"


def _explain(cluster, events) -> str:
    _, broker = cluster
    tail = broker.log_tail(3000) if broker is not None else ""
    return f"events: {list(events)[-5:]}\nstderr: {events.stderr[-2000:]}\nbroker log:\n{tail}"


def _go_produce(host, ns: str, topic: str, group: str, count: int, tags: str = "TagA,TagB",
                keys: str = "gokey", body: str = "go-body"):
    ev = goharness.run(host, ["produce", "-n", ns, "-topic", topic, "-group", group, "-count", count,
                              "-tags", tags, "-keys", keys, "-body", body, "-prop", "origin=go",
                              "-timeout", "40s"], timeout=55)
    sent = ev.of("sent")
    assert len(sent) == count, ev
    return sent


def _go_consume(host, ns: str, topic: str, group: str, count: int, tags: str = "*", timeout: int = 40):
    return goharness.run(host, ["consume", "-n", ns, "-topic", topic, "-group", group, "-count", count,
                                "-tags", tags, "-timeout", f"{timeout}s"], timeout=timeout + 15, check=False)


# ------------------------------------------------------------------------------ Go <-> Go
def test_go_produce(client_host, cluster):
    ns, _ = cluster
    topic, pgroup, _ = _names("produce")
    sent = _go_produce(client_host, ns, topic, pgroup, 5)
    for i, e in enumerate(sent):
        assert e["status"] == "SEND_OK", e
        assert e["index"] == i
        assert len(e["msgId"]) == 32, e  # the client's unique id (hex)
        assert len(e["offsetMsgId"]) == 32, e  # store host + commit log offset
        assert e["topic"] == topic and e["brokerName"] == "broker-py", e
        assert 0 <= e["queueId"] < 16 and e["queueOffset"] >= 0, e
    # offsets grow by one per queue
    by_queue: dict[int, list[int]] = {}
    for e in sent:
        by_queue.setdefault(e["queueId"], []).append(e["queueOffset"])
    for offs in by_queue.values():
        assert offs == list(range(offs[0], offs[0] + len(offs))), by_queue


def test_go_produce_consume_20(client_host, cluster):
    ns, _ = cluster
    topic, pgroup, cgroup = _names("pc")
    sent = _go_produce(client_host, ns, topic, pgroup, 20)
    ev = _go_consume(client_host, ns, topic, cgroup, 20)
    assert ev.done and ev.done["received"] >= 20 and not ev.done["timedOut"], _explain(cluster, ev)
    got = {e["msgId"]: e for e in ev.of("received")}
    assert {e["msgId"] for e in sent} <= set(got), _explain(cluster, ev)
    for s in sent:
        r = got[s["msgId"]]
        i = s["index"]
        assert r["topic"] == topic
        assert r["body"] == f"go-body-{i}"
        assert r["tags"] == ("TagA", "TagB")[i % 2]
        assert r["keys"] == f"gokey-{i}"
        assert r["properties"].get("origin") == "go", r
        assert r["queueId"] == s["queueId"] and r["queueOffset"] == s["queueOffset"], (s, r)
        assert r["offsetMsgId"] == s["offsetMsgId"], (s, r)
        assert r["reconsumeTimes"] == 0


def test_go_consume_tag_filter(client_host, cluster):
    ns, _ = cluster
    topic, pgroup, cgroup = _names("tagf")
    sent = _go_produce(client_host, ns, topic, pgroup, 12, tags="TagA,TagB,TagC")
    want = {e["msgId"] for e in sent if e["tags"] in ("TagA", "TagC")}
    ev = _go_consume(client_host, ns, topic, cgroup, len(want), tags="TagA || TagC", timeout=30)
    assert ev.done and not ev.done["timedOut"], _explain(cluster, ev)
    got = ev.of("received")
    assert {e["msgId"] for e in got} == want
    assert all(e["tags"] in ("TagA", "TagC") for e in got)


# ------------------------------------------------------------------------------ Go <-> Java
def test_go_produce_java_consume(client_host, cluster, java_built):
    ns, _ = cluster
    topic, pgroup, cgroup = _names("g2j")
    sent = _go_produce(client_host, ns, topic, pgroup, 5, tags="A")
    ev = clients.harness(client_host, JAVA_VERSION, ["consume-push", "-n", ns, "--topic", topic, "--group", cgroup,
                                                    "--count", "5", "--timeout-ms", "40000"], timeout=55)
    got = {e["msgId"]: e for e in ev.of("received")}
    assert {e["msgId"] for e in sent} <= set(got), _explain(cluster, ev)
    for s in sent:
        r = got[s["msgId"]]
        assert r["body"] == f"go-body-{s['index']}"
        assert r["tags"] == "A" and r["keys"] == f"gokey-{s['index']}"
        assert r["offsetMsgId"] == s["offsetMsgId"]


def test_java_produce_go_consume(client_host, cluster, java_built):
    ns, _ = cluster
    topic, pgroup, cgroup = _names("j2g")
    pev = clients.harness(client_host, JAVA_VERSION, ["produce", "-n", ns, "--topic", topic, "--group", pgroup,
                                                     "--count", "5", "--tags", "A", "--keys", "jkey-{i}"],
                          timeout=55)
    sent = pev.of("sent")
    assert len(sent) == 5, pev
    ev = _go_consume(client_host, ns, topic, cgroup, 5, tags="A")
    assert ev.done and not ev.done["timedOut"], _explain(cluster, ev)
    got = {e["msgId"]: e for e in ev.of("received")}
    assert {e["msgId"] for e in sent} <= set(got), (sent, _explain(cluster, ev))
    bodies = sorted(e["body"] for e in got.values())
    assert bodies == sorted(f"hello-{i}" for i in range(5))
    assert all(e["tags"] == "A" for e in got.values())
    assert sorted(e["keys"] for e in got.values()) == sorted(f"jkey-{i}" for i in range(5))
