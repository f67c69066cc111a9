"""The rmqpy name server and broker against the official Go client (rocketmq-client-go/v2).

Our ``twistd rmq-namesrv`` and ``rmq-broker`` run as real processes on the client host's
``host_ip`` for the whole module; the Go harness (tests/interop/go, built by its build.sh)
runs inside the client host (a network namespace), as do the Java harness runs of the
cross-client tests. Every test uses its own topic and groups.
"""
from __future__ import annotations

import collections
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from tests.interop import clients, goharness, isolation, jvm, servers
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
    # without this the redeliveries would wait for that refresh. The warm-up reads a topic of its
    # own: the Go client's Shutdown persists offsets without waiting for a consume that has just
    # returned, so a second run of the group on the same topic got warm-0 again (CI, under load)
    warm = f"{topic}_warm"
    _go_produce(client_host, ns, warm, pgroup, 1, body="warm")
    ev = _go_consume(client_host, ns, warm, cgroup, 1, timeout=20)
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


# ------------------------------------------------------------------------------ issue 12: groups, Go members
class _GoMember:
    """A Go push consumer running in the background until its stop file exists (a clean Shutdown, which
    commits its offsets and unregisters)."""

    def __init__(self, host, ns: str, topic: str, group: str, workdir: Path, name: str, *extra: str) -> None:
        self.name, self.out, self.stop_file = name, workdir / f"{name}.jsonl", workdir / f"{name}.stop"
        self.proc = goharness.popen(host, ["consume", "-n", ns, "-topic", topic, "-group", group, "-count", "0",
                                           "-instance", f"go-{name}-{uuid.uuid4().hex[:6]}", "-timeout", "120s",
                                           "-stop-file", str(self.stop_file), *extra], self.out,
                                    err=self.out.with_suffix(".err"))

    def received(self) -> list[dict]:
        return goharness.read_events(self.out).of("received") if self.out.exists() else []

    def bodies(self) -> set[str]:
        return {e["body"] for e in self.received()}

    def leave(self) -> None:
        self.stop_file.touch()
        self.proc.wait(30)
        done = goharness.read_events(self.out).done
        assert self.proc.returncode == 0 and done and done["stopped"], self.tail()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def tail(self) -> str:
        return f"{self.name}: {self.out.read_text()[-1500:]}\n{self.out.with_suffix('.err').read_text()[-1500:]}"


@pytest.fixture(scope="module")
def java_cluster(client_host, go_built, java_built):
    """The real Java 4.9.7 name server and broker (the Go client's generation), as the reference."""
    workdir = Path(tempfile.mkdtemp(prefix="rmqpy-go-javabroker-"))
    c = None
    try:
        c = jvm.JavaCluster(JAVA_VERSION, workdir, client_host.host_ip, {"brokerName": "broker-java"})
        yield c.ns_addr, None
    finally:
        if c is not None:
            c.close(clean=False)  # the store is thrown away
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(params=["rmqpy", pytest.param("javabroker-4.9.7", marks=pytest.mark.reference)])
def group_cluster(request):
    """(namesrv_addr, rmqpy broker or None) of rmqpy's servers or, as the reference, Java's."""
    return request.getfixturevalue("cluster" if request.param == "rmqpy" else "java_cluster")


def _new_topic(host, ns: str, topic: str, queues: int) -> None:
    """A topic whose queues never had a message (mqadmin updateTopic)."""
    out = clients.mqadmin(host, JAVA_VERSION, ["updateTopic", "-c", "DefaultCluster", "-t", topic,
                                               "-r", str(queues), "-w", str(queues)], ns)
    assert "success" in out, out


def test_go_new_group_receives_what_is_sent_while_it_starts(client_host, group_cluster, tmp_path):
    """A Go push consumer of a new group (CONSUME_FROM_LAST_OFFSET) on a topic whose queues never had a
    message; 8 messages are sent while it starts. It gets all 8, once each: rmqpy answers its
    QUERY_CONSUMER_OFFSET with 0 for a queue without messages, or whose message 0 is still in memory, so
    the client never starts at a max offset read after messages arrived."""
    ns, _ = cluster = group_cluster
    topic, pgroup, cgroup = _names("newgrp")
    _new_topic(client_host, ns, topic, 4)
    m = _GoMember(client_host, ns, topic, cgroup, tmp_path, "new", "-from-last")
    try:
        sent = {e["body"] for e in _go_produce(client_host, ns, topic, pgroup, 8)}
        wait_until(lambda: sent <= m.bodies(), 30, 0.2, what="every message sent while the consumer started",
                   diag=lambda: f"{m.tail()}\n{_explain(cluster, goharness.read_events(m.out))}")
        time.sleep(1.0)  # would-be duplicates
        assert sorted(e["body"] for e in m.received()) == sorted(sent)
        m.leave()
    finally:
        m.kill()


GO_JAVA_HANDOVER = ("the Java broker answers the new owner's QUERY_CONSUMER_OFFSET before the old owner's commit "
                    "(see test_broker_groups_java.JAVA_HANDOVER): what the old owner consumed since its last commit "
                    "may come again (measured with Go members on the 4.9.7 broker: 5 of 8 runs, runs of 2 to 4 "
                    "per moved queue; rmqpy: 12 of 12 passed)")


def test_go_group_grows_while_messages_flow_exactly_once(client_host, group_cluster, tmp_path, request):
    """A Go group grows from 1 to 3 members while a Go producer sends: the broker notifies the members,
    they split the queues, and every message is consumed once, except the one in the listener when its
    queue changed hands (the Go client, as Java's, does not advance a dropped queue's offset: at most 1 per
    queue with one consuming goroutine). Each new owner's offset query waits for the old owner's commit
    (rmqpy/broker/handover.py), and every old owner commits in time.

    3 queues, so that no member gives up two at once: the Go client (v2.1.2) then commits only one of
    them (``remoteBrokerOffsetStore.persist([mq])`` drops the other queues' offsets from its table), and
    the broker can only wait HANDOVER_MAX_MS and answer the other's last commit (docs/compatibility.md)."""
    import threading
    ns, broker = group_cluster
    if broker is None and "java" in request.node.callspec.id:  # a race in Java: it passes sometimes
        request.applymarker(pytest.mark.xfail(strict=False, reason=GO_JAVA_HANDOVER))
    topic, pgroup, cgroup = _names("grow")
    _new_topic(client_host, ns, topic, 3)
    sent = {e["body"] for e in _go_produce(client_host, ns, topic, pgroup, 3, body="warm")}
    members = [_GoMember(client_host, ns, topic, cgroup, tmp_path, "a", "-goroutines", "1")]
    a = members[0]
    stop = threading.Event()
    errors: list[BaseException] = []

    def flow() -> None:
        try:
            for r in range(12):  # until c has taken its queue, at most 12 rounds
                if stop.is_set() and r >= 3:
                    return
                sent.update(e["body"] for e in _go_produce(client_host, ns, topic, pgroup, 12, body=f"flow{r}"))
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    def diag() -> str:
        return "\n".join(m.tail() for m in members)

    producer = threading.Thread(target=flow, daemon=True)
    try:
        wait_until(lambda: sent <= a.bodies(), 30, 0.2, what="the first member consuming the 4 first messages",
                   diag=diag)
        producer.start()
        for name in "bc":
            m = _GoMember(client_host, ns, topic, cgroup, tmp_path, name, "-goroutines", "1")
            members.append(m)
            wait_until(lambda m=m: bool(m.received()), 40, 0.2, what=f"member {name} consuming", diag=diag)
        stop.set()
        producer.join(120)
        assert not errors and not producer.is_alive(), errors
        wait_until(lambda: sent <= set().union(*(m.bodies() for m in members)), 30, 0.2,
                   what="every message sent while the group grew", diag=diag)
        time.sleep(1.5)  # would-be duplicates
        for m in reversed(members):
            m.leave()
        received = [(m.name, e) for m in members for e in m.received()]
        counts = collections.Counter(e["body"] for _, e in received)
        assert set(counts) == sent, sent - set(counts)
        doubled = {b: n for b, n in counts.items() if n > 1}
        per_queue = collections.Counter(next(e["queueId"] for _, e in received if e["body"] == b) for b in doubled)
        where = {b: [(n, e["queueId"], e["queueOffset"]) for n, e in received if e["body"] == b] for b in doubled}
        assert max(doubled.values(), default=1) <= 2 and max(per_queue.values(), default=0) <= 1, where
        if broker is not None:  # each new owner's offset query was answered after the old owner's commit
            late = [line for line in broker.log_tail(1_000_000).splitlines() if "did not let go" in line and cgroup in line]
            assert not late, late
    finally:
        stop.set()
        for m in members:
            m.kill()
