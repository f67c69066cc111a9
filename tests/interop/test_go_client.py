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
from tests.interop.waiting import wait_until

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
        host, port = ext["namesrv"]
        yield f"{host}:{port}", None
        return
    workdir = Path(tempfile.mkdtemp(prefix="rmqpy-go-client-"))
    c = None
    try:
        props = {"flushDiskType": "ASYNC_FLUSH", "enablePropertyFilter": True}
        c = servers.Cluster(workdir, client_host.host_ip, props)
        _wait_registered(c.broker)
        yield c.ns_addr, c.broker
    finally:
        if c is not None:
            c.close()
        if os.environ.get("RMQPY_KEEP_WORKDIR"):
            print(f"work dir kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def _wait_registered(broker: servers.ServerProcess, timeout: float = 15) -> None:
    """Wait until the broker has logged its boot (and so its first registration)."""
    if wait_until(lambda: "boot success" in broker.log_tail(200_000), timeout, 0.1):
        time.sleep(0.5)


def _names(prefix: str) -> tuple[str, str, str]:
    run = uuid.uuid4().hex[:8]
    return f"Go{prefix}_{run}", f"GID_go_p_{prefix}_{run}", f"GID_go_c_{prefix}_{run}"


def _explain(cluster, events) -> str:
    _, broker = cluster
    tail = broker.log_tail(3000) if broker is not None else ""
    return f"events: {list(events)[-5:]}\nstderr: {events.stderr[-2000:]}\nbroker log:\n{tail}"


def _go_produce(host, ns: str, topic: str, group: str, count: int, tags: str = "TagA,TagB",
                keys: str = "gokey", body: str = "go-body", mode: str = "sync", extra: tuple = ()):
    ev = goharness.run(host, ["produce", "-n", ns, "-topic", topic, "-group", group, "-count", count,
                              "-tags", tags, "-keys", keys, "-body", body, "-prop", "origin=go",
                              "-mode", mode, "-timeout", "40s", *extra], timeout=55)
    sent = ev.of("sent")
    if mode in ("sync", "async"):
        assert len(sent) == count, ev
    assert ev.done["failed"] == 0, ev
    return sent if mode in ("sync", "async") else ev


def _go_consume(host, ns: str, topic: str, group: str, count: int, tags: str = "*", timeout: int = 40,
                extra: tuple = ()):
    # the broker registers a topic it auto-created with the name server at once, but a one-way
    # producer may exit before the broker has even read its send: the route can lag a moment
    for _attempt in range(10):
        ev = goharness.run(host, ["consume", "-n", ns, "-topic", topic, "-group", group, "-count", count,
                                  "-tags", tags, "-timeout", f"{timeout}s", *extra], timeout=timeout + 15,
                           check=False)
        if ev.done or not any("route info not found" in e.get("error", "") for e in ev.errors):
            return ev
        time.sleep(0.5)
    return ev


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


@pytest.mark.parametrize("mode", ["async", "oneway", "batch"])
def test_go_send_modes(client_host, cluster, mode):
    ns, _ = cluster
    topic, pgroup, cgroup = _names(mode)
    _go_produce(client_host, ns, topic, pgroup, 8, tags="M", mode=mode)
    ev = _go_consume(client_host, ns, topic, cgroup, 8, timeout=30, extra=("-linger", "1s"))
    assert ev.done and not ev.done["timedOut"], _explain(cluster, ev)
    got = ev.of("received")
    assert sorted(e["body"] for e in got) == sorted(f"go-body-{i}" for i in range(8)), _explain(cluster, ev)
    assert sorted(e["keys"] for e in got) == sorted(f"gokey-{i}" for i in range(8))
    assert all(e["tags"] == "M" for e in got)


def test_go_consumer_resumes_from_committed_offset(client_host, cluster):
    ns, _ = cluster
    topic, pgroup, cgroup = _names("resume")
    _go_produce(client_host, ns, topic, pgroup, 6, body="first")
    ev = _go_consume(client_host, ns, topic, cgroup, 6, timeout=30)
    assert ev.done and not ev.done["timedOut"], _explain(cluster, ev)
    _go_produce(client_host, ns, topic, pgroup, 4, body="second")
    ev = _go_consume(client_host, ns, topic, cgroup, 4, timeout=30, extra=("-linger", "2s"))
    assert ev.done and not ev.done["timedOut"], _explain(cluster, ev)
    assert sorted(e["body"] for e in ev.of("received")) == [f"second-{i}" for i in range(4)], _explain(cluster, ev)


def test_go_consume_retry_later_redelivers(client_host, cluster):
    """ConsumeRetryLater: the Go client sends the message back (delay level 1) and gets it again
    from the group's retry topic with reconsumeTimes 1."""
    ns, _ = cluster
    topic, pgroup, cgroup = _names("retry")
    # a first run of the group makes the broker create %RETRY%group (on the heartbeat); the Go
    # client reads routes before its first heartbeat and refreshes them only every 30 s, so
    # without this the redeliveries would wait for that refresh
    sent = _go_produce(client_host, ns, topic, pgroup, 1, body="warm")
    ev = _go_consume(client_host, ns, topic, cgroup, 1, timeout=20)
    assert ev.done and not ev.done["timedOut"], _explain(cluster, ev)
    sent = _go_produce(client_host, ns, topic, pgroup, 3)
    ev = _go_consume(client_host, ns, topic, cgroup, 3, timeout=40,
                     extra=("-reconsume-later", "1", "-retry-delay-level", "1"))
    assert ev.done and not ev.done["timedOut"], _explain(cluster, ev)
    got = ev.of("received")
    ok = {e["msgId"]: e for e in got if e["result"] == "SUCCESS"}
    assert set(ok) == {e["msgId"] for e in sent}, _explain(cluster, ev)
    for e in ok.values():
        assert e["reconsumeTimes"] == 1, e
        assert e["topic"] == topic, e  # the client restores the original topic
        assert e["body"].startswith("go-body-"), e


def test_go_consume_sql_filter(client_host, cluster):
    ns, _ = cluster
    topic, pgroup, cgroup = _names("sql")
    sent = _go_produce(client_host, ns, topic, pgroup, 9, tags="X,Y,Z")
    want = {e["msgId"] for e in sent if e["tags"] != "Y"}
    ev = _go_consume(client_host, ns, topic, cgroup, len(want), timeout=30,
                     extra=("-sql", "TAGS <> 'Y' AND origin = 'go'", "-linger", "1s"))
    assert ev.done and not ev.done["timedOut"], _explain(cluster, ev)
    assert {e["msgId"] for e in ev.of("received")} == want, _explain(cluster, ev)


def test_go_orderly_consume(client_host, cluster):
    ns, _ = cluster
    topic, pgroup, cgroup = _names("orderly")
    sent = _go_produce(client_host, ns, topic, pgroup, 12)
    ev = _go_consume(client_host, ns, topic, cgroup, 12, timeout=40, extra=("-orderly",))
    assert ev.done and not ev.done["timedOut"], _explain(cluster, ev)
    got = ev.of("received")
    assert {e["msgId"] for e in got} == {e["msgId"] for e in sent}
    per_queue: dict[int, list[int]] = {}
    for e in got:
        per_queue.setdefault(e["queueId"], []).append(e["queueOffset"])
    for offs in per_queue.values():
        assert offs == sorted(offs), per_queue


def test_go_delay_level(client_host, cluster):
    ns, _ = cluster
    topic, pgroup, cgroup = _names("delay")
    t0 = time.monotonic()
    sent = _go_produce(client_host, ns, topic, pgroup, 2, extra=("-delay", "2"))  # level 2 = 5 s
    ev = _go_consume(client_host, ns, topic, cgroup, 2, timeout=40)
    elapsed = time.monotonic() - t0
    assert ev.done and not ev.done["timedOut"], _explain(cluster, ev)
    assert {e["msgId"] for e in ev.of("received")} == {e["msgId"] for e in sent}
    assert elapsed >= 4.0, elapsed
    assert all(e["topic"] == topic for e in ev.of("received"))


def test_go_broadcast_consume(client_host, cluster, tmp_path):
    """Two broadcasting consumers of one group each get every message."""
    ns, _ = cluster
    topic, pgroup, cgroup = _names("bcast")
    _go_produce(client_host, ns, topic, pgroup, 1, body="warm")  # the topic exists before they start
    outs = [tmp_path / f"c{k}.jsonl" for k in range(2)]
    procs = [goharness.popen(client_host, ["consume", "-n", ns, "-topic", topic, "-group", cgroup,
                                           "-count", "7", "-broadcast", "-timeout", "40s"], out,
                             err=out.with_suffix(".err"))
             for out in outs]
    try:
        time.sleep(1)
        _go_produce(client_host, ns, topic, pgroup, 6)
        for p in procs:
            p.wait(55)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(5)
    for out in outs:
        ev = goharness.read_events(out)
        why = (out.read_text()[-3000:], out.with_suffix(".err").read_text()[-2000:])
        assert ev.done and not ev.done["timedOut"], why
        bodies = sorted(e["body"] for e in ev.of("received"))
        assert bodies == sorted(["warm-0"] + [f"go-body-{i}" for i in range(6)]), why


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
