"""The official RocketMQ 5.x Go client (``github.com/apache/rocketmq-clients/golang/v5`` v5.1.2, gRPC)
against rmqpy's own gRPC endpoint (``grpcServerPort``, rmqpy/proxy/grpc/), against Apache's
``rocketmq-proxy`` 5.3.3 (cluster mode) in front of rmqpy's broker (POP and the remoting codes of 5.x,
as a Java 5 deployment would run it), and against the reference, that proxy in front of the Java 5.3.3
broker.

The client runs in the client host (tests/interop/go5/, built by its build.sh), with its own defaults
(TLS, which both endpoints accept on their one port). The Go client of this version has a Producer and
a SimpleConsumer, no PushConsumer. What a Go user sees, the same on both targets:

* two SimpleConsumers of one group, each with five receives in flight (goroutines), receive every
  message exactly once (attempt 1) when each is acked;
* FIFO (a ``message.type=FIFO`` topic, an orderly group, two message groups) with five receives in
  flight: each message group is acked in the order it was sent, also when one of its messages is not
  acked the first time (it comes back as attempt 2, the ones after it wait for it);
* a message with a delivery timestamp does not come before it;
* a tag filter (``TagA || TagC``) and an SQL92 filter (both brokers with ``enablePropertyFilter``)
  each receive exactly their subset of one topic;
* a message not acked comes back after the receive's invisible duration (10 s, both servers' minimum)
  as attempt 2; one given a short invisible duration by ChangeInvisibleDuration (the Go client's nack)
  comes back after it, well before the 10 s.

The targets start and run at once, each with its own servers (the module fixture), to keep CI time
down: their waits (the JVMs' start, the invisible durations) overlap. On each target the
consumers start first, in parallel; then one producer sends for every scenario; the consumers stop
together once every scenario has what it waits for, and a little later (to catch extra deliveries).
Each test asserts on its own scenario's events. All the while a background load (a producer and a
SimpleConsumer through grpcio, tests/interop/grpc_load.py) runs on the same endpoint, and must be served
whole too.
"""
from __future__ import annotations

import json
import subprocess
import time
import traceback
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import pytest

from tests import reference
from tests.interop import goharness, grpc_load, jvm, servers
from tests.interop.waiting import wait_until

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(not goharness.available(goharness.BINARY5), reason="no Go toolchain and no built Go harness"),
]

VERSION = "5.3.3"
TARGETS = ("rmqpy", "rmqpy-proxy", "java-proxy")
#: both brokers filter by SQL92 only with enablePropertyFilter (Java's BrokerConfig, rmqpy's alike)
BROKER_PROPS: dict[str, object] = {"brokerName": "broker-go5", "enablePropertyFilter": True}

#: topic -> message.type (None: a normal topic without the attribute)
TOPICS: dict[str, str | None] = {"GoOnce": None, "GoFifo": "FIFO", "GoDelay": "DELAY", "GoFilter": None,
                                 "GoRedo": None, grpc_load.TOPIC: None}
#: consumer group -> orderly (consumeMessageOrderly: what makes the proxy's receive FIFO)
GROUPS = {"go5_once": False, "go5_fifo": True, "go5_delay": False, "go5_tag": False, "go5_sql": False,
          "go5_redo": False}
ONCE = 40
FILTERED = 12
DELAY_MS = 5000
INVISIBLE_S = 10  # minInvisibleTimeMillsForRecv of both servers: the shortest a receive may ask for
NACK_S = 2
#: the producer's runs (harness produce -sends): TOPIC,N,MSGGROUP,PREFIX,DELAYMS,TAGS; every message has
#: the user property i=its index. The longest waits first: their clocks start earliest
SENDS = ["GoRedo,2,,r", f"GoDelay,3,,d,{DELAY_MS}", "GoFifo,6,ga,a", "GoFifo,6,gb,b", f"GoOnce,{ONCE},,once",
         f"GoFilter,{FILTERED},,f,,TagA|TagB|TagC"]
TAG_FILTER = "TagA || TagC"
SQL_FILTER = "i BETWEEN 4 AND 9 AND TAGS <> 'TagB'"
IN_FLIGHT = ["-inflight", "5"]
#: consumer name -> its harness arguments (simple-consume)
CONSUMERS: dict[str, list[str]] = {
    # two consumers of one group, five receives of up to four messages in flight each
    "once-1": ["-topic", "GoOnce", "-group", "go5_once", *IN_FLIGHT, "-batch", "4", "-invisible", f"{INVISIBLE_S}s"],
    "once-2": ["-topic", "GoOnce", "-group", "go5_once", *IN_FLIGHT, "-batch", "4", "-invisible", f"{INVISIBLE_S}s"],
    # a-1 not acked the first time, nor what follows it in its batch and group
    "fifo": ["-topic", "GoFifo", "-group", "go5_fifo", *IN_FLIGHT, "-batch", "3", "-invisible", f"{INVISIBLE_S}s",
             "-no-ack", "a-1", "-hold-group"],
    "delay": ["-topic", "GoDelay", "-group", "go5_delay", "-inflight", "2", "-invisible", f"{INVISIBLE_S}s"],
    "tag": ["-topic", "GoFilter", "-group", "go5_tag", "-inflight", "2", "-batch", "4", "-tags", TAG_FILTER],
    "sql": ["-topic", "GoFilter", "-group", "go5_sql", "-inflight", "2", "-batch", "4", "-sql", SQL_FILTER],
    # r-0 not acked, r-1 hidden NACK_S more seconds instead (a nack)
    "redo": ["-topic", "GoRedo", "-group", "go5_redo", "-inflight", "2", "-invisible", f"{INVISIBLE_S}s",
             "-no-ack", "r-0", "-change", f"r-1={NACK_S}s"],
}
TAGS = ("TagA", "TagB", "TagC")
TAG_SUBSET = [f"f-{i}" for i in range(FILTERED) if TAGS[i % 3] in ("TagA", "TagC")]
SQL_SUBSET = [f"f-{i}" for i in range(FILTERED) if 4 <= i <= 9 and TAGS[i % 3] != "TagB"]
#: what each scenario waits for: acked bodies (of its consumers); the run ends when all have theirs
EXPECTED: dict[str, tuple[tuple[str, ...], list[str]]] = {
    "once": (("once-1", "once-2"), [f"once-{i}" for i in range(ONCE)]),
    "fifo": (("fifo",), [f"{g}-{i}" for g in "ab" for i in range(6)]),
    "delay": (("delay",), [f"d-{i}" for i in range(3)]),
    "tag": (("tag",), TAG_SUBSET),
    "sql": (("sql",), SQL_SUBSET),
    "redo": (("redo",), ["r-0", "r-1"]),
}
LINGER_S = 2.0  # after every scenario has its messages, to catch extra deliveries
RUN_TIMEOUT_S = 50.0  # from the first send (the longest wait, the reference's revive, took 19-20 s)
#: the reference's own timing, seen by test_grpc_java (a changed checkpoint never back within 60 s in two of
#: four loaded runs; not in this module's runs so far): Apache's 5.3.3 PopReviveService.consumeReviveMessage
#: moves a revive queue's end time forward only while the timer store has neither a dequeue nor an enqueue
#: backlog, so a changed checkpoint alone in its revive queue can wait for later traffic there. The run
#: does not wait for the nacked message on the reference; its test is an xfail there if it did not come
JAVA_REVIVE_WAITS = ("Apache's 5.3.3 revive moves a revive queue's end time only without timer backlog: "
                     "a lone changed checkpoint can wait for later traffic")


class Target:
    """One gRPC endpoint and the broker behind it, with the module's topics and groups."""

    def __init__(self, kind: str, host, tmp: Path) -> None:
        self.kind, self.host, self.tmp = kind, host, tmp
        self.rmqpy: servers.Cluster | None = None
        self.java: list[jvm.JavaProcess] = []
        if kind in ("rmqpy", "rmqpy-proxy"):
            port = servers.free_port() if kind == "rmqpy" else -1
            self.rmqpy = servers.Cluster(tmp / "rmqpy", host.host_ip, {**BROKER_PROPS, "grpcServerPort": port})
            self.ns_addr, self.broker_addr = self.rmqpy.ns_addr, self.rmqpy.broker_addr
            self.endpoint = f"{host.host_ip}:{port}"
            try:
                self.create_resources()
                if kind == "rmqpy-proxy":  # Apache's proxy in front of rmqpy's broker (POP, remoting)
                    proxy = jvm.start_java_proxy(VERSION, tmp / "proxy", self.ns_addr)
                    self.java.append(proxy)
                    self.endpoint = f"{host.host_ip}:{proxy.port}"
            except BaseException:
                self.close()
                raise
        else:
            # the proxy creates its system topics on the cluster at start-up: it starts once the broker is
            # registered, which the topics created here make it do at once (5.3.3's first registration at
            # boot finds no name server "available" yet, its next comes after a fixed 10 s)
            try:
                ns = jvm.start_java_namesrv(VERSION, workdir=tmp / "java-ns", props={"bindAddress": "0.0.0.0"})
                self.java.append(ns)
                self.ns_addr = f"{host.host_ip}:{ns.port}"
                broker = jvm.start_java_broker(VERSION, tmp / "java-broker", self.ns_addr,
                                               {"bindAddress": "0.0.0.0", **BROKER_PROPS}, broker_ip=host.host_ip,
                                               wait_registered=False)
                self.java.append(broker)
                self.broker_addr = f"{host.host_ip}:{broker.port}"
                self.create_resources()
                proxy = jvm.start_java_proxy(VERSION, tmp / "proxy", self.ns_addr)
                self.java.append(proxy)
            except BaseException:
                self.close()
                raise
            self.endpoint = f"{host.host_ip}:{proxy.port}"

    def create_resources(self) -> None:
        """The topics and groups over remoting (UPDATE_AND_CREATE_TOPIC, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP),
        as mqadmin updateTopic / updateSubGroup would, and until the name server routes them."""
        for topic, kind in TOPICS.items():
            fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                      "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": str(kind == "FIFO").lower()}
            if kind:
                fields["attributes"] = f"+message.type={kind}"
            code, remark, _, _ = jvm.remoting_request(self.broker_addr, 17, {k: str(v) for k, v in fields.items()})
            assert code == 0, (self.kind, topic, code, remark)
        for group, orderly in GROUPS.items():
            body = json.dumps({"groupName": group, "consumeEnable": True, "consumeBroadcastEnable": True,
                               "consumeMessageOrderly": orderly, "retryQueueNums": 1, "retryMaxTimes": 16,
                               "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                               "notifyConsumerIdsChangedEnable": True, "groupSysFlag": 0,
                               "consumeTimeoutMinute": 15}).encode()
            code, remark, _, _ = jvm.remoting_request(self.broker_addr, 200, body=body)
            assert code == 0, (self.kind, group, code, remark)
        for topic in TOPICS:
            assert wait_until(lambda t=topic: jvm.remoting_request(self.ns_addr, 105, {"topic": t})[0] == 0, 30, 0.2), \
                f"{self.kind}: {topic} not routed by {self.ns_addr}"

    def log_tail(self) -> str:
        logs = [self.rmqpy.broker.log_tail(3000)] if self.rmqpy is not None else []
        return "\n".join(logs + [p.log_tail(20) for p in self.java if p.name != "namesrv"])

    def close(self) -> None:
        if self.rmqpy is not None:
            self.rmqpy.close()
        for p in reversed(self.java):
            p.kill9()


class Run:
    """What the producer and each consumer printed on one target."""

    def __init__(self, kind: str, sent: jvm.Events, consumed: dict[str, jvm.Events], took: float, logs: str,
                 load: grpc_load.LoadReport) -> None:
        self.kind, self.sent, self.consumed, self.took, self.logs = kind, sent, consumed, took, logs
        self.load = load

    def sent_to(self, topic: str) -> list[dict]:
        return [e for e in self.sent.of("sent") if e["topic"] == topic]

    def events(self, *names: str) -> jvm.Events:
        """The events of these consumers (checked: exited 0, no error of any kind)."""
        out = jvm.Events()
        for name in names:
            ev = self.consumed[name]
            assert ev.returncode == 0, f"{self.kind} {name} exited {ev.returncode}: {ev[-6:]}\n{ev.stderr[-3000:]}"
            bad = [e for e in ev if e.get("event") in ("error", "receive-error", "ack-error")
                   or (e.get("event") == "changed" and "error" in e)]
            if self.kind != "rmqpy":
                bad = [e for e in bad if not _settings_not_yet_synced(e, ev)]
            assert not bad, f"{self.kind} {name}: {bad[:10]}"
            out.extend(ev)
        return out


#: what Apache's proxy 5.3.3 answers a receive that comes before the client's settings (ReceiveMessageActivity
#: reads them from GrpcClientSettingsManager, filled when the Telemetry stream's Settings command is
#: processed): the Go client's Start() sends its settings on that stream and returns without waiting
#: for the answer (client.go mustSyncSettingsToTargert: cs.publish), so the first receives can win
SETTINGS_NPE = 'Cannot invoke "apache.rocketmq.v2.Settings.getSubscription()" because "settings" is null'


def _settings_not_yet_synced(e: dict, ev: jvm.Events) -> bool:
    """A receive-error of Apache's proxy before its consumer's first message: its settings not there yet."""
    first = min((r["at"] for r in ev.of("received")), default=e["at"] + 1)
    return e.get("event") == "receive-error" and SETTINGS_NPE in e["error"] and e["at"] < first


def _read(path: Path) -> jvm.Events:
    return jvm.Events(jvm._parse_lines(path.read_text(errors="replace"))) if path.exists() else jvm.Events()


def _satisfied(outs: dict[str, Path], kind: str) -> Callable[[], bool]:
    def check() -> bool:
        for scenario, (names, bodies) in EXPECTED.items():
            if scenario == "redo" and kind == "java-proxy":
                bodies = ["r-0"]  # JAVA_REVIVE_WAITS
            acked = {e["body"] for n in names for e in _read(outs[n]).of("acked")}
            if not set(bodies) <= acked:
                return False
        return True
    return check


def run_scenarios(t: Target) -> Run:
    binary = str(goharness.ensure_built5())
    tmp = t.tmp
    stop = tmp / "stop"
    procs: dict[str, tuple[subprocess.Popen, Path, Path]] = {}
    load = grpc_load.GrpcLoad(t.endpoint).start()  # the scenarios run beside it
    try:
        for name, args in CONSUMERS.items():
            out, err = tmp / f"{name}.out", tmp / f"{name}.err"
            cmd = [binary, "simple-consume", "-endpoint", t.endpoint, *args, "-stop-file", str(stop),
                   "-timeout", f"{RUN_TIMEOUT_S + 45:.0f}s", "-log-dir", str(tmp / "logs" / name)]
            with open(out, "w") as fo, open(err, "w") as fe:
                procs[name] = (t.host.popen(cmd, cwd=str(goharness.GO5_DIR), stdin=subprocess.DEVNULL, stdout=fo,
                                            stderr=fe), out, err)
        # every consumer receiving before anything is sent: a delayed message that came early is seen
        for name, (proc, out, err) in procs.items():
            wait_until(lambda p=proc, o=out: '"started"' in o.read_text() or p.poll() is not None, 60, 0.1,
                       what=f"{t.kind} {name} started")
            assert proc.poll() is None, f"{t.kind} {name} exited {proc.poll()}: {out.read_text()}\n" \
                                        f"{err.read_text()[-3000:]}"
        started = time.monotonic()
        produced = t.host.run([binary, "produce", "-endpoint", t.endpoint, "-sends", ";".join(SENDS),
                               "-log-dir", str(tmp / "logs" / "produce"), "-timeout", "60s"],
                              timeout=90, cwd=str(goharness.GO5_DIR), stdin=subprocess.DEVNULL)
        sent = jvm.Events(jvm._parse_lines(produced.stdout))
        sent.returncode, sent.stderr = produced.returncode, produced.stderr
        assert produced.returncode == 0, f"{t.kind}: produce exited {produced.returncode}: {sent[-4:]}\n" \
                                         f"{produced.stderr[-3000:]}"
        outs = {name: out for name, (_, out, _) in procs.items()}
        if wait_until(_satisfied(outs, t.kind), max(1.0, RUN_TIMEOUT_S - (time.monotonic() - started)), 0.25):
            time.sleep(LINGER_S)
        took = time.monotonic() - started
        stop.touch()
        consumed = {}
        for name, (proc, out, err) in procs.items():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            ev = _read(out)
            ev.returncode, ev.stderr = proc.returncode, err.read_text(errors="replace")
            consumed[name] = ev
    finally:
        report = load.stop()
        for proc, _, _ in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    return Run(t.kind, sent, consumed, took, t.log_tail(), report)


def _target_run(kind: str, host, tmp: Path) -> Run:
    began = time.monotonic()
    t = Target(kind, host, tmp)
    print(f"{kind}: servers up, topics and groups created in {time.monotonic() - began:.1f} s")
    try:
        return run_scenarios(t)
    finally:
        t.close()


@pytest.fixture(scope="module")
def runs(request, java_built, client_host, tmp_path_factory) -> dict[str, Run | str]:
    """Every selected target's run, made at once: kind -> Run, or the traceback of its failure (a
    reference proven on its inputs is not run: tests/reference.py)."""
    goharness.ensure_built5()
    kinds = [kind for kind in TARGETS
             if any(getattr(item, "callspec", None) is not None and item.callspec.params.get("run") == kind
                    for item in reference.to_run(request))]
    tmps = {kind: tmp_path_factory.mktemp(f"grpc-go5-{kind}") for kind in kinds}
    out: dict[str, Run | str] = {}
    with ThreadPoolExecutor(max(1, len(kinds))) as pool:
        futures = {kind: pool.submit(_target_run, kind, client_host, tmps[kind]) for kind in kinds}
        for kind, f in futures.items():
            try:
                out[kind] = f.result()
            except Exception:
                out[kind] = traceback.format_exc()
    for kind, r in out.items():
        print(f"{kind}: " + (f"scenarios took {r.took:.1f} s from the first send" if isinstance(r, Run) else r))
    return out


@pytest.fixture(params=[pytest.param(t, marks=pytest.mark.reference) if t == "java-proxy" else t for t in TARGETS])
def run(request, runs) -> Run:
    r = runs[request.param]
    if not isinstance(r, Run):
        pytest.fail(f"{request.param}: the run failed:\n{r}")
    print(f"{r.kind}: the end of the servers' logs (shown when a test fails):\n{r.logs}")
    return r


def _once(got: list[dict], sent: list[dict]) -> None:
    counts = Counter(r["msgId"] for r in got)
    assert sorted(counts) == sorted(s["msgId"] for s in sent), got
    assert set(counts.values()) == {1}, counts
    assert sorted(r["body"] for r in got) == sorted(s["body"] for s in sent)


def test_two_consumers_with_receives_in_flight_receive_each_message_once(run: Run) -> None:
    sent = run.sent_to("GoOnce")
    assert len(sent) == ONCE
    ev = run.events("once-1", "once-2")
    got = ev.of("received")
    _once(got, sent)
    assert all(r["attempt"] == 1 and r["topic"] == "GoOnce" for r in got), got
    # the user's properties and only them; the born host the client sent (its host name)
    assert all(r["properties"] == {"i": r["body"].split("-")[1]} for r in got), got
    assert {r["bornHost"] for r in got} == {run.sent.done["hostname"]}, got
    assert sorted(a["msgId"] for a in ev.of("acked")) == sorted(s["msgId"] for s in sent)
    split = {n: len(run.consumed[n].of("received")) for n in ("once-1", "once-2")}
    print(f"{run.kind}: received by consumer {split}, by receive in flight "
          f"{Counter((r['worker']) for r in got)}")


def test_fifo_message_groups_keep_their_order_with_receives_in_flight(run: Run) -> None:
    """No message of a group is delivered while one before it is neither acked nor in the same receive
    (the events in the order printed: "acking" is printed before the ack is sent); in each message group
    the deliveries that were acked came in send order; a-1, not acked the first time, came back as
    attempt 2 (and a-2 as attempt 2 too where it came in a-1's receive and was held)."""
    sent = run.sent_to("GoFifo")
    ev = run.events("fifo")
    got = ev.of("received")
    acking: set[str] = set()
    batches: dict[tuple[int, int], list[str]] = defaultdict(list)
    for e in ev:
        if e["event"] == "acking":
            acking.add(e["body"])
        elif e["event"] == "received":
            g, i = e["body"].split("-")
            batch = batches[(e["worker"], e["receive"])]
            before = {f"{g}-{j}" for j in range(int(i))}
            assert before <= acking | set(batch), f"{e['body']} delivered while {sorted(before - acking)} in flight"
            batch.append(e["body"])
    for r in got:
        group = "ga" if r["body"].startswith("a") else "gb"
        # the proxy's user properties are all but MessageConst.STRING_HASH_SET, which lacks the
        # message group's __SHARDINGKEY (GrpcConverter.buildUserAttributes); rmqpy follows
        assert r.get("group") == group and r["properties"] == {"i": r["body"].split("-")[1], "__SHARDINGKEY": group}, r
    acked = {(a["worker"], a["receive"], a["body"]) for a in ev.of("acked")}
    in_order = [r["body"] for r in got if (r["worker"], r["receive"], r["body"]) in acked]
    for g in "ab":
        assert [b for b in in_order if b.startswith(g)] == [f"{g}-{i}" for i in range(6)], got
    assert [r["attempt"] for r in got if r["body"] == "a-1"] == [1, 2], got
    assert sorted(in_order) == sorted(s["body"] for s in sent)
    assert all(r["attempt"] == 1 for r in got if r["body"].startswith("b")), got


def test_delay_message_does_not_come_before_its_delivery_timestamp(run: Run) -> None:
    sent = run.sent_to("GoDelay")
    ev = run.events("delay")
    got = ev.of("received")
    _once(got, sent)
    deliver_at = {s["msgId"]: s["deliverAt"] for s in sent}
    # the consumer was receiving before the delivery time, so an early delivery would have been seen
    assert ev.of("started")[0]["at"] < min(deliver_at.values()), (ev.of("started"), deliver_at)
    for r in got:
        assert r["at"] >= deliver_at[r["msgId"]], (r, deliver_at)
        assert r["deliverAt"] == deliver_at[r["msgId"]], r


@pytest.mark.parametrize("name, subset", [("tag", TAG_SUBSET), ("sql", SQL_SUBSET)])
def test_tag_and_sql92_filters_receive_exactly_their_subset(run: Run, name: str, subset: list[str]) -> None:
    sent = [s for s in run.sent_to("GoFilter") if s["body"] in subset]
    ev = run.events(name)
    got = ev.of("received")
    _once(got, sent)
    assert all(r["tag"] == TAGS[int(r["properties"]["i"]) % 3] for r in got), got


def test_unacked_message_comes_back_as_attempt_2_and_a_nack_sooner(run: Run) -> None:
    """r-0 not acked (invisible 10 s) comes back as attempt 2 not before 10 s; r-1 given 2 s by
    ChangeInvisibleDuration comes back as attempt 2 after those 2 s, before r-0's 10 s were over (on the
    reference: or an xfail, JAVA_REVIVE_WAITS)."""
    sent = run.sent_to("GoRedo")
    ev = run.events("redo")
    got = ev.of("received")
    by_body = defaultdict(list)
    for r in got:
        by_body[r["body"]].append(r)
    assert sorted(by_body) == ["r-0", "r-1"] and {r["msgId"] for r in got} == {s["msgId"] for s in sent}, got
    nacked = by_body["r-1"]
    if run.kind == "java-proxy" and (len(nacked) == 1 or nacked[1]["at"] - nacked[0]["at"] >= INVISIBLE_S * 1000):
        pytest.xfail(f"{JAVA_REVIVE_WAITS}: {nacked}")
    for body, hidden_s in (("r-0", INVISIBLE_S), ("r-1", NACK_S)):
        first, again = by_body[body]  # two deliveries each, no more
        assert (first["attempt"], again["attempt"]) == (1, 2), by_body
        # hidden from the server's receive (before first["at"]) or change on
        assert again["at"] - first["at"] >= hidden_s * 1000 - 1000, by_body
    first, again = nacked
    assert again["at"] - first["at"] < INVISIBLE_S * 1000, by_body
    assert [c["body"] for c in ev.of("changed")] == ["r-1"]
    assert sorted(a["body"] for a in ev.of("acked")) == ["r-0", "r-1"]


AWAIT_S = 5  # the harness's -await (the SimpleConsumer's awaitDuration)
REQUEST_TIMEOUT_S = 3  # the Go client's request timeout (client_options.go), also sent in its settings


def test_an_empty_receive_is_answered_with_half_the_request_timeout_to_spare(run: Run) -> None:
    """The Go client sends no long_polling_timeout and gives a receive awaitDuration + its 3 s request
    timeout; the proxy holds an empty one that deadline less half the request timeout
    (ReceiveMessageActivity: 6.5 s here), rmqpy alike (rmqpy/proxy/grpc/polling.py)."""
    empty = sorted(ms for ev in run.consumed.values() for d in ev.of("done") for ms in d.get("emptyMs") or [])
    print(f"{run.kind}: {len(empty)} empty receives, ms: min {empty[:1]}, median "
          f"{empty[len(empty) // 2:len(empty) // 2 + 1]}, max {empty[-1:]}")
    assert empty, "no receive came back empty"
    deadline_ms = (AWAIT_S + REQUEST_TIMEOUT_S) * 1000
    # rmqpy: every empty answer with the proxy's margin, whatever the load. The references (Apache's
    # proxy, a JVM) are held to their own rule by the median: on a loaded CI machine single answers
    # came 121 and 294 ms past it (7,121 and 7,294 ms), the proxy starved, not following another rule
    held = empty[-1] if run.kind == "rmqpy" else empty[len(empty) // 2]
    assert held < deadline_ms - REQUEST_TIMEOUT_S * 1000 / 2 + 500, empty


def test_the_scenarios_ran_beside_a_load_that_was_served_whole(run: Run) -> None:
    """All along the scenarios a gRPC producer sent 20 messages a second and a SimpleConsumer kept four
    receives in flight on the same endpoint (tests/interop/grpc_load.py): every call answered OK, every
    message sent received and acked."""
    print(f"{run.kind}: background load {run.load}")
    assert run.load.sent and not run.load.errors and not run.load.missing, str(run.load)
