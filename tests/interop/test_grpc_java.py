"""The official RocketMQ 5.x gRPC Java client (``rocketmq-client-java`` 5.0.8, Maven Central) against
rmqpy's own gRPC endpoint (``grpcServerPort``, rmqpy/proxy/grpc/), and the same scenarios through
Apache's ``rocketmq-proxy`` 5.3.3 in front of the Java 5.3.3 broker as the reference, and through that
proxy in front of rmqpy (POP and the remoting codes of 5.x, as a Java 5 deployment would run it).

The client runs in the client host (tests/interop/java/grpc/, ``GrpcHarness``). What a Java user sees:

* Producer: normal, FIFO (message group) and delay (delivery timestamp) sends; the Java client has
  no batch send (its Producer sends one message per call);
* SimpleConsumer: every message received once when each is acked; a message not acked comes back
  after its invisible duration as attempt 2, and changeInvisibleDuration moves that time;
* FIFO: while a message of a group is neither acked nor back, the ones after it do not come;
* delay: no message comes before its delivery timestamp;
* PushConsumer (concurrent): every message consumed exactly once, also when consuming one takes
  longer than the invisible time of its receive (the server renews the receipt handle);
* transactions: a committed message is delivered, a rolled back one is not, and one left open is
  committed by the producer's TransactionChecker when the server checks it back over Telemetry;
* the broker's requests to a running PushConsumer over Telemetry (the reference for these is the
  proxy in local mode, their own fixture): a message consumed directly is answered alike; for mqadmin
  consumerStatus with jstack rmqpy prints the client's thread stack trace, the reference sends the
  client nothing and times out.

One server set per target (module-scoped). The scenarios share it, each on its own topic and group,
and run together to keep CI short: one consumer per scenario starts (all in parallel), then one
producer sends for all of them (the longest consumer waits out two invisible times); each test
asserts on its own scenario's events. While a target's consumers wait, the next target's servers
start (``Prestarts``). All along, a background load (a producer and a SimpleConsumer through grpcio,
tests/interop/grpc_load.py) runs on the same endpoint, and must be served whole too.
"""
from __future__ import annotations

import json
import subprocess
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable

import pytest

from tests import reference
from tests.interop import clients, grpc_load, jvm, servers
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

VERSION = "5.3.3"


class Target:
    """One gRPC endpoint and the name server whose brokers it fronts."""

    def __init__(self, kind: str, host, tmp: Path) -> None:
        self.kind, self.host = kind, host
        self.cluster: servers.Cluster | jvm.JavaCluster
        self.proxy = None
        if kind == "rmqpy":
            port = servers.free_port()
            self.cluster = servers.Cluster(tmp / "rmqpy", host.host_ip, {"brokerName": "broker-grpc-java",
                                                                          "grpcServerPort": port, **TX_PROPS,
                                                                          **RENEW_PROPS})
            self.endpoint = f"{host.host_ip}:{port}"
        elif kind == "rmqpy-proxy":  # Apache's proxy 5.3.3 (cluster mode) in front of rmqpy: POP, remoting
            self.cluster = servers.Cluster(tmp / "rmqpy", host.host_ip, {"brokerName": "broker-grpc-java",
                                                                          "grpcServerPort": -1, **TX_PROPS})
            try:
                self.proxy = jvm.start_java_proxy(VERSION, tmp / "proxy", self.cluster.ns_addr, props=RENEW_PROPS)
            except BaseException:
                self.cluster.close()
                raise
            self.endpoint = f"{host.host_ip}:{self.proxy.port}"
        else:
            self.cluster = jvm.JavaCluster(VERSION, tmp, host.host_ip, {"brokerName": "broker-grpc-java", **TX_PROPS})
            try:
                self.proxy = jvm.start_java_proxy(VERSION, tmp / "proxy", self.cluster.ns_addr, props=RENEW_PROPS)
            except BaseException:
                self.cluster.close(clean=False)
                raise
            self.endpoint = f"{host.host_ip}:{self.proxy.port}"

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.kill9()
            print(self.proxy.log_tail(40))
        if isinstance(self.cluster, jvm.JavaCluster):
            self.cluster.close(clean=False)
        else:
            self.cluster.close()
            print(self.cluster.broker.log_tail(3000))

    def admin(self, *commands: list[str]) -> None:
        """mqadmin COMMAND -c DefaultCluster ARGS for each command (one JVM for all of them)."""
        outs = clients.mqadmin_batch(self.host, VERSION, [[c[0], "-c", "DefaultCluster", *c[1:]] for c in commands],
                                     self.cluster.ns_addr)
        for out in outs:
            assert "success" in out or "isOrder=true" in out, out

    @staticmethod
    def topic_command(topic: str, *extra: str) -> list[str]:
        return ["updateTopic", "-t", topic, "-r", "4", "-w", "4", *extra]

    def harness_cmd(self, command: str, *args: str) -> tuple[list[str], Path]:
        home = jvm.default_home()
        return jvm.grpc_harness_cmd([command, "--endpoint", self.endpoint, *args], home=home), home


#: scenario -> (topic, topic options, group, sends, consumer command and options)
SCENARIOS: dict[str, tuple[str, tuple[str, ...], str, list[str], list[str]]] = {
    "once": ("GrpcJavaOnce", (), "grpc_java_once", ["8"],
             ["simple", "-c", "8", "--invisible-s", "20", "--linger-s", "3"]),
    "push": ("GrpcJavaPush", (), "grpc_java_push", ["10"], ["push", "-c", "10", "--linger-s", "3"]),
    # each message takes 12 s to consume, the receive's invisible time is 5 s (RENEW_PROPS)
    "slow": ("GrpcJavaSlow", (), "grpc_java_slow", ["2"],
             ["push", "-c", "2", "--threads", "2", "--consume-ms", "12000", "--linger-s", "4"]),
    # msg-0 not acked (invisible 10 s), msg-1 changed to 20 s
    "redo": ("GrpcJavaRedo", (), "grpc_java_redo", ["2"],
             ["simple", "-c", "2", "--invisible-s", "10", "--no-ack", "msg-0", "--change", "msg-1=20",
              "--linger-s", "1", "--timeout-s", "60"]),
    "delay": ("GrpcJavaDelay", ("-a", "+message.type=DELAY"), "grpc_java_delay", ["2,,msg,8000"],
              ["simple", "-c", "2", "--invisible-s", "20", "--linger-s", "1"]),
    # commit, rollback, and one left open that the check-back over Telemetry commits: the producer
    # (command "transaction", run beside the consumers) sends these, no --sends
    "tx": ("GrpcJavaTx", ("-a", "+message.type=TRANSACTION"), "grpc_java_tx", [],
           ["simple", "-c", "2", "--invisible-s", "20", "--linger-s", "3", "--timeout-s", "90"]),
    # two message groups, receives of one message; a-1 not acked the first time
    "fifo": ("GrpcJavaFifo", ("-o", "true", "-a", "+message.type=FIFO"), "grpc_java_fifo", ["4,ga,a", "4,gb,b"],
             ["simple", "-c", "8", "--invisible-s", "10", "--no-ack", "a-1", "--hold-group", "true", "--batch", "1",
              "--linger-s", "1"]),
}


#: the transaction scenario's producer (its transaction checker must live until the check-back)
TX_PRODUCER = ["transaction", "--topic", "GrpcJavaTx", "--timeout-s", "90"]
#: both servers check open transactions soon (Java's defaults: 6 s old, every 30 s), as test_grpc_python
TX_PROPS = {"transactionTimeOut": 3000, "transactionCheckInterval": 2000}
#: a PushConsumer's receive (auto_renew) hidden 5 s, its handles renewed within 3 s of the end, checked
#: every second (the proxy's keys; defaults 60 s, 10 s, 5 s): the slow scenario outlasts the 5 s
RENEW_PROPS = {"defaultInvisibleTimeMills": 5000, "renewAheadTimeMillis": 3000, "renewSchedulePeriodMillis": 1000}


class Run:
    """What the producers and each scenario's consumer printed."""

    def __init__(self, kind: str, sent: jvm.Events, consumed: dict[str, jvm.Events],
                 load: grpc_load.LoadReport) -> None:
        self.kind, self.sent, self.consumed, self.load = kind, sent, consumed, load

    def scenario(self, name: str) -> tuple[list[dict], jvm.Events]:
        topic = SCENARIOS[name][0]
        produced = self.consumed["tx-producer"] if name == "tx" else self.sent
        consumed = self.consumed[name]
        if self.kind != "java-proxy":
            # a SimpleConsumer receives again after a failed receive; only the reference may need that
            # (under load the Java proxy once missed a receive's deadline: DEADLINE_EXCEEDED after 15 s)
            assert not consumed.of("receive-error"), consumed.of("receive-error")
        return [e for e in produced.of("sent") if e["topic"] == topic], consumed


def run_scenarios(t: Target, tmp: Path, while_waiting: Callable[[], None] | None = None) -> Run:
    """``while_waiting``: called once everything is sent, while the consumers wait out their invisible
    times and check-backs (20-30 s of next to no CPU). All along, a background load runs on the same
    endpoint (tests/interop/grpc_load.py)."""
    admin = [t.topic_command(grpc_load.TOPIC)]
    for name, (topic, topic_opts, group, _, _) in SCENARIOS.items():
        admin.append(t.topic_command(topic, *topic_opts))
        if name == "fifo":
            admin.append(["updateSubGroup", "-g", group, "-o", "true"])
    t.admin(*admin)
    load = grpc_load.GrpcLoad(t.endpoint).start()
    try:
        sent, consumed = _scenarios(t, tmp, while_waiting)
    finally:
        report = load.stop()
    return Run(t.kind, sent, consumed, report)


def _scenarios(t: Target, tmp: Path, while_waiting: Callable[[], None] | None
               ) -> tuple[jvm.Events, dict[str, jvm.Events]]:
    sends = ";".join(f"{topic},{spec}" for topic, _, _, specs, _ in SCENARIOS.values() for spec in specs)
    runs = {name: [consumer[0], "--topic", topic, "--group", group, *consumer[1:]]
            for name, (topic, _, group, _, consumer) in SCENARIOS.items()}
    runs["tx-producer"] = TX_PRODUCER
    # the consumers first: they are polling before anything is sent (so a delayed message that came
    # early would be seen), then one producer sends for every scenario
    procs = {}
    for name, argv in runs.items():
        cmd, home = t.harness_cmd(*argv)
        out, err = tmp / f"{name}.out", tmp / f"{name}.err"
        with open(out, "w") as fo, open(err, "w") as fe:
            procs[name] = (t.host.popen(cmd, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL, stdout=fo,
                                        stderr=fe), out, err)
    try:
        for name, (proc, out, err) in procs.items():
            if name != "tx-producer":
                wait_until(lambda p=proc, o=out: '"started"' in o.read_text() or p.poll() is not None, 90, 0.2,
                           what=f"{name} started")
                assert proc.poll() is None, f"{name} exited {proc.poll()}: {out.read_text()}\n{err.read_text()[-3000:]}"
        cmd, home = t.harness_cmd("produce", "--sends", sends)
        produced = t.host.run(cmd, timeout=120, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL)
        sent = jvm.Events(jvm._parse_lines(produced.stdout))
        assert produced.returncode == 0, f"produce exited {produced.returncode}: {sent[-4:]}\n{produced.stderr[-3000:]}"
    except BaseException:
        for proc, _, _ in procs.values():
            proc.kill()
        raise
    consumed = {}
    if while_waiting is not None:
        while_waiting()
    for name, (proc, out, err) in procs.items():
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        ev = jvm.Events(jvm._parse_lines(out.read_text()))
        ev.returncode, ev.stderr = proc.returncode, err.read_text(errors="replace")
        consumed[name] = ev
    return sent, consumed


#: a server set of this module: (fixture, its param)
Key = tuple[str, str]


class Prestarts:
    """The module's server sets, in the order its selected tests first use them. A set that takes long
    to start (Apache's proxy, Java servers: 20-40 s, mostly CPU) is started in a thread while the
    previous target's consumers wait out their invisible times (``run_scenarios``' ``while_waiting``),
    instead of alone after them; rmqpy's own starts in seconds, when its tests come."""

    def __init__(self, request, host, tmp_path_factory) -> None:
        self.host, self.tmp_path_factory = host, tmp_path_factory
        self.order: list[Key] = []
        for item in reference.to_run(request):
            if not hasattr(item, "callspec"):
                continue
            for name in ("run", "relay_target"):
                key = (name, item.callspec.params.get(name))
                if name in item.fixturenames and key not in self.order:
                    self.order.append(key)
        self.started: dict[Key, tuple[threading.Thread, dict]] = {}

    def _start(self, key: Key) -> tuple[Target, Path]:
        name, kind = key
        tmp = self.tmp_path_factory.mktemp(f"grpc-java-{kind}" if name == "run" else f"grpc-java-relay-{kind}")
        if name == "relay_target":
            return (Target("rmqpy", self.host, tmp) if kind == "rmqpy" else LocalProxyTarget(self.host, tmp)), tmp
        return Target(kind, self.host, tmp), tmp

    def start_next(self, after: Key) -> None:
        """Starts, in a thread, the first server set after ``after`` that is not rmqpy's own."""
        following = self.order[self.order.index(after) + 1:] if after in self.order else []
        key = next((k for k in following if k[1] != "rmqpy"), None)
        if key is None or key in self.started:
            return
        box: dict = {}

        def start() -> None:
            try:
                box["started"] = self._start(key)
            except BaseException as exc:  # raised by take()
                box["error"] = exc

        thread = threading.Thread(target=start, name=f"grpc-java-start-{key[1]}", daemon=True)
        thread.start()
        self.started[key] = (thread, box)

    def take(self, key: Key) -> tuple[Target, Path]:
        """The server set of ``key``: the one started ahead (once it is up), or started now."""
        if key not in self.started:
            return self._start(key)
        thread, box = self.started.pop(key)
        thread.join(300)
        if "error" in box:
            raise box["error"]
        assert "started" in box, f"{key} did not start within 300 s"
        return box["started"]

    def close(self) -> None:
        """Stops what was started ahead and never taken (its tests failed before, or were not run)."""
        for thread, box in self.started.values():
            thread.join(300)
            if "started" in box:
                box["started"][0].close()
        self.started.clear()


@pytest.fixture(scope="module")
def prestarts(request, java_built, client_host, tmp_path_factory):
    p = Prestarts(request, client_host, tmp_path_factory)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture(scope="module", params=["rmqpy", "rmqpy-proxy", pytest.param("java-proxy", marks=pytest.mark.reference)])
def run(request, prestarts: Prestarts) -> Run:
    key = ("run", request.param)
    t, tmp = prestarts.take(key)
    try:
        yield run_scenarios(t, tmp, while_waiting=lambda: prestarts.start_next(key))
    finally:
        t.close()


def _ok(ev: jvm.Events) -> None:
    assert ev.returncode == 0, f"consumer exited {ev.returncode}: {ev[-6:]}\n{ev.stderr[-3000:]}"


def _once(got: list[dict], sent: list[dict]) -> None:
    counts = Counter(r["msgId"] for r in got)
    assert sorted(counts) == sorted(s["msgId"] for s in sent), got
    assert set(counts.values()) == {1}, counts
    assert {r["body"] for r in got} == {s["body"] for s in sent}


def test_simple_consumer_receives_each_message_once(run: Run) -> None:
    sent, ev = run.scenario("once")
    _ok(ev)
    _once(ev.of("received"), sent)
    assert all(r["attempt"] == 1 and r["topic"] == "GrpcJavaOnce" for r in ev.of("received"))


def test_push_consumer_consumes_each_message_once(run: Run) -> None:
    sent, ev = run.scenario("push")
    _ok(ev)
    _once(ev.of("received"), sent)
    assert ev.done == {"event": "done", "ok": True, "consumed": 10, "distinct": 10}


def test_push_consumer_consuming_longer_than_the_invisible_time_gets_each_message_once(run: Run) -> None:
    """The listener takes 12 s per message, the receive hides it 5 s: rmqpy renews the receipt handle
    while the client holds it (with the tracking disabled each message came 3-4 times), and the
    client's ack with the handle it got is accepted (mapped to the renewed one). The reference (proxy
    5.3.3 in cluster mode, Java 5.3.3 broker) delivered each message twice (2 of 2 runs):
    attempt 2 about 20 s after the first, the broker's revive of the first 5 s checkpoint ~8 s after
    the pop (docs/compatibility.md): allowed for the reference."""
    sent, ev = run.scenario("slow")
    _ok(ev)
    got = ev.of("received")
    assert ev.done == {"event": "done", "ok": True, "consumed": 2, "distinct": 2}
    took = {c["body"]: c["at"] for c in ev.of("consumed")}
    first = {r["body"]: r["at"] for r in reversed(got)}
    assert len(took) == 2 and all(took[b] - first[b] >= 12_000 > RENEW_PROPS["defaultInvisibleTimeMills"] * 2
                                  for b in took), ev
    if run.kind == "rmqpy":
        _once(got, sent)
    else:
        assert {r["msgId"] for r in got} == {s["msgId"] for s in sent}, got


#: the reference's own timing, seen once in a fresh-clone CI run at full load (session 14, the background
#: load beside it as in every run since): Apache's 5.3.3 broker behind the proxy had not checked the open
#: transaction back (transactionCheckInterval 2 s) when the consumer gave up after 90 s
JAVA_CHECK_BACK_LATE = ("Apache's 5.3.3 broker behind the proxy did not check the open transaction back within "
                        "the consumer's 90 s under the suite's load")
#: the reference's own timing (seen in two of four loaded runs of this session: msg-1 never came back
#: within the consumer's 60 s): Apache's 5.3.3 PopReviveService.consumeReviveMessage moves a revive
#: queue's end time forward only while the timer store has neither a dequeue nor an enqueue backlog,
#: so the changed checkpoint, alone in its revive queue, waits for later traffic there
JAVA_REVIVE_WAITS = ("Apache's 5.3.3 revive moves a revive queue's end time only without timer backlog: "
                     "a lone changed checkpoint can wait for later traffic")


def test_unacked_message_comes_back_and_change_invisible_duration_moves_it(run: Run, request) -> None:
    """msg-0 is not acked (invisible 10 s), msg-1 gets changeInvisibleDuration(20 s): both come back as
    attempt 2, msg-0 not before 10 s, msg-1 not before 20 s (without the change: after 10 s)."""
    if run.kind == "java-proxy":  # the reference only; rmqpy's two targets must pass
        request.applymarker(pytest.mark.xfail(strict=False, reason=JAVA_REVIVE_WAITS))
    sent, ev = run.scenario("redo")
    _ok(ev)
    got = ev.of("received")
    by_body = defaultdict(list)
    for r in got:
        by_body[r["body"]].append(r)
    assert sorted(by_body) == ["msg-0", "msg-1"] and {r["msgId"] for r in got} == {s["msgId"] for s in sent}
    for body, invisible_s in (("msg-0", 10), ("msg-1", 20)):
        first, again = by_body[body]  # two deliveries each, no more
        assert (first["attempt"], again["attempt"]) == (1, 2), by_body
        # hidden from the server's pop (before first["at"]) or change (after it) on
        assert again["at"] - first["at"] >= invisible_s * 1000 - 1000, by_body
    assert [c["body"] for c in ev.of("changed")] == ["msg-1"]
    assert sorted(a["body"] for a in ev.of("acked")) == ["msg-0", "msg-1"]


def test_delay_message_does_not_come_before_its_delivery_time(run: Run) -> None:
    sent, ev = run.scenario("delay")
    _ok(ev)
    got = ev.of("received")
    _once(got, sent)
    deliver_at = {s["msgId"]: s["deliverAt"] for s in sent}
    # the consumer was polling before the delivery time, so an early delivery would have been seen
    assert ev.of("started")[0]["at"] < min(deliver_at.values()), (ev.of("started"), deliver_at)
    for r in got:
        assert r["at"] >= deliver_at[r["msgId"]], (r, deliver_at)
        assert r["deliverAt"] == deliver_at[r["msgId"]], r


def test_fifo_group_holds_back_what_follows_an_unacked_message(run: Run) -> None:
    """Two message groups on a FIFO topic, an orderly consumer group, receives of one message: a-1 is
    not acked the first time, so a-2.. must wait until a-1 came back; each group is acked in send order."""
    sent, ev = run.scenario("fifo")
    _ok(ev)
    got = ev.of("received")
    assert all(r.get("group") in ("ga", "gb") for r in got), got
    acked = [a["body"] for a in ev.of("acked")]
    assert [b for b in acked if b.startswith("a")] == ["a-0", "a-1", "a-2", "a-3"], got
    assert [b for b in acked if b.startswith("b")] == ["b-0", "b-1", "b-2", "b-3"], got
    assert [r["attempt"] for r in got if r["body"] == "a-1"] == [1, 2], got
    assert sorted(set(acked)) == sorted(s["body"] for s in sent)


def test_transaction_commit_rollback_and_check_back(run: Run) -> None:
    """The committed and the checked-back message are delivered, the rolled back one never. rmqpy
    checks back only the open transaction, so each comes once, also behind Apache's proxy (which
    needs the broker's transactionId in the send's answer, as 5.3.3 gives it). The Java 5.3.3 broker (through the
    proxy) also checked back the two already ended, about 9 s after their end (transactionCheckInterval
    2 s), and the checker's COMMIT for tx-commit delivered it a second time: allowed for the reference."""
    sent, ev = run.scenario("tx")
    producer = run.consumed["tx-producer"]
    _ok(producer)
    if run.kind == "java-proxy" and ev.returncode != 0 and "tx-check" not in {r["body"] for r in ev.of("received")}:
        pytest.xfail(JAVA_CHECK_BACK_LATE)  # the reference only; rmqpy's two targets must pass
    _ok(ev)
    assert [s["body"] for s in sent] == ["tx-commit", "tx-rollback", "tx-check"], producer
    checked = {c["body"] for c in producer.of("checked")}
    assert "tx-check" in checked, producer
    got = ev.of("received")
    ids = {s["body"]: s["msgId"] for s in sent}
    assert {r["body"]: r["msgId"] for r in got} == {"tx-check": ids["tx-check"], "tx-commit": ids["tx-commit"]}, got
    if run.kind in ("rmqpy", "rmqpy-proxy"):  # rmqpy is the broker: only the open one is checked back
        assert checked == {"tx-check"}, producer
        assert sorted(r["body"] for r in got) == ["tx-check", "tx-commit"], got


def test_the_scenarios_ran_beside_a_load_that_was_served_whole(run: Run) -> None:
    """All along the scenarios a gRPC producer sent 20 messages a second and a SimpleConsumer kept four
    receives in flight on the same endpoint (tests/interop/grpc_load.py): every call answered OK, every
    message sent received and acked."""
    print(f"{run.kind}: background load {run.load}")
    assert run.load.sent and not run.load.errors and not run.load.missing, str(run.load)


# ---------------------------------------------------------------------- consumerStatus with jstack
class LocalProxyTarget(Target):
    """Apache's proxy 5.3.3 in local mode (its broker inside, a Java name server beside it). The
    cluster mode of the module's reference does not relay GET_CONSUMER_RUNNING_INFO to a gRPC client
    (``ClusterProxyRelayService``: "not implement yet"; the broker's request gets no answer), local
    mode does (``LocalProxyRelayService``), and rmqpy answers as local mode."""

    def __init__(self, host, tmp: Path) -> None:  # not super().__init__: it starts other servers
        self.kind, self.host = "java-proxy-local", host
        self.ns = jvm.start_java_namesrv(VERSION, workdir=tmp / "java-ns", props={"bindAddress": "0.0.0.0"})
        self.ns_addr = f"{host.host_ip}:{self.ns.port}"
        self.cluster = self  # Target.admin names the name server as cluster.ns_addr
        try:
            self.proxy = self._start_proxy(tmp / "proxy-local", host.host_ip)
        except BaseException:
            self.ns.kill9()
            raise
        self.endpoint = f"{host.host_ip}:{self.proxy.port}"

    @property
    def broker_addr(self) -> str:
        return f"{self.host.host_ip}:{self.proxy.props['brokerPort']}"

    def _start_proxy(self, workdir: Path, host_ip: str) -> jvm.JavaProcess:
        home = jvm.prepare_home(workdir)
        broker_port = jvm.free_broker_port()
        broker = {**jvm.BROKER_DEFAULTS, "brokerName": "broker-grpc-local", "namesrvAddr": self.ns_addr,
                  "brokerIP1": host_ip, "bindAddress": "0.0.0.0", "listenPort": broker_port,
                  "rocketmqHome": str(home), "storePathRootDir": str(home / "store"),
                  "storePathCommitLog": str(home / "store" / "commitlog")}
        (home / "broker.properties").write_text("".join(f"{k}={v}\n" for k, v in broker.items()))
        grpc_port = jvm.free_port()
        conf = {"rocketMQClusterName": "DefaultCluster", "namesrvAddr": self.ns_addr, "proxyMode": "local",
                "grpcServerPort": grpc_port, "remotingListenPort": jvm.free_port()}
        (home / "rmq-proxy.json").write_text(json.dumps(conf))
        conf["brokerPort"] = broker_port
        cmd = jvm.java_cmd(VERSION, jvm.PROXY_MAIN, ["-pc", str(home / "rmq-proxy.json"), "-pm", "local",
                                                    "-bc", str(home / "broker.properties")],
                           kind="proxy", heap_mb=384, home=home)
        log = home / "proxy.out"
        with open(log, "ab") as logf:
            proc = subprocess.Popen(cmd, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL,
                                    stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        handle = jvm.JavaProcess("proxy", VERSION, proc, log, home, grpc_port, home / "rmq-proxy.json",
                                 {k: str(v) for k, v in conf.items()})
        try:
            wait_until(lambda: "rocketmq-proxy startup successfully" in handle.log_text() or proc.poll() is not None,
                       120, 0.2, what="local proxy started")
            assert proc.poll() is None, handle.log_tail()
            assert jvm.wait_broker_registered(self.ns_addr, f"{host_ip}:{broker_port}", None, 60), handle.log_tail()
        except BaseException:
            handle.kill9()
            raise
        return handle

    def close(self) -> None:
        self.proxy.kill9()
        print(self.proxy.log_tail(40))
        self.ns.kill9()


@pytest.fixture(scope="module", params=["rmqpy", pytest.param("java-proxy-local", marks=pytest.mark.reference)])
def relay_target(request, prestarts: Prestarts):
    t, _ = prestarts.take(("relay_target", request.param))
    try:
        yield t
    finally:
        t.close()


def _client_ids(out: str) -> list[str]:
    """The #ClientId column of ``mqadmin consumerConnection``."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("#ClientId")) + 1
    ids = []
    for line in lines[start:]:
        if not line.strip():
            break
        ids.append(line.split()[0])
    return ids


def _mqadmin_out_and_err(t: Target, args: list[str]) -> str:
    """mqadmin's stdout and stderr: a failed subcommand prints its exception on stderr."""
    home = jvm.default_home()
    cmd = jvm.java_cmd(VERSION, jvm.FASTEXIT_MAIN, [jvm.MQADMIN_MAIN, args[0], "-n", t.cluster.ns_addr, *args[1:]],
                       {"rmq.logback.configurationFile": "rmq.tools.logback.xml"}, kind="harness", home=home)
    proc = t.host.run(cmd, timeout=90, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL)
    return proc.stdout + proc.stderr


def _broker_addr(t: Target) -> str:
    return t.broker_addr if isinstance(t, LocalProxyTarget) else t.cluster.broker_addr


def _start_push(t: Target, topic: str, group: str, tmp: Path) -> tuple[subprocess.Popen, Path, str]:
    """A PushConsumer of ``group`` on ``topic`` (its own topic, and the group's retry topic: mqadmin
    finds the consumer's broker through it, and local mode registers a gRPC consumer without the
    HEART_BEAT that creates it; rmqpy's heartbeat creates it), its events file and its client id once
    the broker lists it."""
    t.admin(t.topic_command(topic), t.topic_command(f"%RETRY%{group}"))
    cmd, home = t.harness_cmd("push", "--topic", topic, "--group", group, "-c", "2", "--timeout-s", "90")
    out, err = tmp / f"{group}.out", tmp / f"{group}.err"
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = t.host.popen(cmd, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL, stdout=fo, stderr=fe)
    try:
        wait_until(lambda: '"started"' in out.read_text() or proc.poll() is not None, 90, 0.2, what="push started")
        assert proc.poll() is None, f"push exited {proc.poll()}: {err.read_text()[-3000:]}"
        ids: list[str] = []
        seen = [""]

        def connected() -> bool:
            seen[0] = clients.mqadmin(t.host, VERSION, ["consumerConnection", "-g", group], t.cluster.ns_addr)
            ids[:] = _client_ids(seen[0]) if "#ClientId" in seen[0] else []
            return bool(ids)

        wait_until(connected, 60, 1.0, what="the push consumer in consumerConnection",
                   diag=lambda: f"{seen[0]}\nconsumer stderr: {err.read_text()[-3000:]}")
    except BaseException:
        proc.kill()
        proc.wait(10)
        raise
    return proc, out, ids[0]


def test_consumer_status_with_jstack_shows_the_push_consumers_thread_stack_trace(relay_target, tmp_path) -> None:
    """``mqadmin consumerStatus -g G -i CLIENT -s`` while a PushConsumer runs. rmqpy asks the client
    over its Telemetry stream (PrintThreadStackTraceCommand) and mqadmin prints the thread stack trace
    it answers. The reference does not get that far (measured, explained below): where rmqpy and Java
    differ, this test records both."""
    t = relay_target
    group = "grpc_java_jstack"
    proc, _, client_id = _start_push(t, "GrpcJavaJstack", group, tmp_path)
    try:
        out = _mqadmin_out_and_err(t, ["consumerStatus", "-g", group, "-i", client_id, "-s"])
        print(f"{t.kind}: consumerStatus -s:\n{out[:3000]}")
        # the broker's own answer, waited for longer than mqadmin's 5 s
        started = time.monotonic()
        code, remark, _, body = jvm.remoting_request(_broker_addr(t), 307, {  # GET_CONSUMER_RUNNING_INFO
            "consumerGroup": group, "clientId": client_id, "jstackEnable": "true"}, timeout=30)
        took = time.monotonic() - started
        print(f"{t.kind}: GET_CONSUMER_RUNNING_INFO answered {code} {remark!r} in {took:.1f} s, {len(body)} bytes")
    finally:
        proc.kill()
        proc.wait(10)
    if t.kind == "rmqpy":
        assert "#Consumer jstack#" in out, out
        jstack = out.split("#Consumer jstack#", 1)[1]
        assert "java.lang.Thread" in jstack, jstack[:2000]
        assert code == 0 and "java.lang.Thread" in json.loads(body)["jstack"], (code, remark)
    else:
        # 5.3.3's broker forwards the request with its header only in extFields (callConsumer), and
        # ProxyChannel reads the header object (readCustomHeader: null), so GrpcClientChannel writes
        # no PrintThreadStackTraceCommand: nothing answers, mqadmin gives up after its 5 s and the
        # broker answers CONSUME_MSG_TIMEOUT (207) after its 10 s. A reference that sends the jstack
        # command would answer (or, unanswered, SYSTEM_BUSY "call remote timeout" after 5 s).
        assert "RemotingTimeoutException" in out and "#Consumer jstack#" not in out, out
        assert code == 207 and took >= 9.5, (code, remark, took)


def _offset_msg_id(store_addr: str, commit_log_offset: int) -> str:
    """MessageDecoder.createMessageId: the store host's IPv4 address and port, then the offset."""
    ip, port = store_addr.rsplit(":", 1)
    raw = bytes(int(p) for p in ip.split(".")) + int(port).to_bytes(4, "big") + commit_log_offset.to_bytes(8, "big")
    return raw.hex().upper()


def test_a_message_consumed_directly_is_verified_by_the_push_consumer(relay_target, tmp_path) -> None:
    """CONSUME_MESSAGE_DIRECTLY to the broker (what mqadmin queryMsgById -g -d sends after its own
    consumerStatus check, which a gRPC consumer does not pass on either server): the broker hands the
    stored message to the client as a VerifyMessageCommand, the client's listener consumes it, and its
    VerifyMessageResult comes back as a ConsumeMessageDirectlyResult, alike on both."""
    t = relay_target
    topic, group = "GrpcJavaVerify", "grpc_java_verify"
    proc, events, client_id = _start_push(t, topic, group, tmp_path)
    try:
        cmd, home = t.harness_cmd("produce", "--sends", f"{topic},1")
        produced = t.host.run(cmd, timeout=120, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL)
        [sent] = jvm.Events(jvm._parse_lines(produced.stdout)).of("sent")
        wait_until(lambda: '"received"' in events.read_text(), 60, 0.5, what="the message consumed")
        detail = clients.mqadmin(t.host, VERSION, ["queryMsgByUniqueKey", "-i", sent["msgId"], "-t", topic],
                                 t.cluster.ns_addr)
        offset = int(next(line.split(":", 1)[1] for line in detail.splitlines() if line.startswith("CommitLog Offset:")))
        msg_id = _offset_msg_id(_broker_addr(t), offset)
        started = time.monotonic()
        code, remark, _, body = jvm.remoting_request(_broker_addr(t), 309, {  # CONSUME_MESSAGE_DIRECTLY
            "consumerGroup": group, "clientId": client_id, "msgId": msg_id, "topic": topic}, timeout=30)
        took = time.monotonic() - started
        print(f"{t.kind}: CONSUME_MESSAGE_DIRECTLY answered {code} {remark!r} in {took:.1f} s: {body[:300]!r}")
        wait_until(lambda: len(jvm.Events(jvm._parse_lines(events.read_text())).of("received")) >= 2, 10, 0.5)
    finally:
        proc.kill()
        proc.wait(10)
    received = jvm.Events(jvm._parse_lines(events.read_text())).of("received")
    assert (code, remark) == (0, ""), (code, remark)
    # ConsumeMessageDirectlyResult.encode() as the proxy answered it (measured, byte for byte)
    assert body == (b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"remark":"from gRPC client",'
                    b'"spentTimeMills":0}'), body
    assert [r["body"] for r in received] == [sent["body"]] * 2, received  # delivered, then verified


def test_a_stock_java_client_with_tls_on_connects_to_the_default_config(java_built, client_host, tmp_path) -> None:
    """``rocketmq-client-java`` speaks TLS unless told otherwise (``ClientConfigurationBuilder.sslEnabled``
    defaults to true, and it trusts any certificate) and the Python client 5.1.2 plain text
    (test_grpc_python.py): rmqpy's default configuration serves both on ``grpcServerPort``, with a
    self-signed certificate, as Apache's proxy does (rmqpy/proxy/grpc/front.py)."""
    port = servers.free_port()
    topic, group = "GrpcJavaTlsDefault", "grpc_java_tls_default"
    with servers.Cluster(tmp_path / "rmqpy", client_host.host_ip,
                         {"brokerName": "broker-grpc-tls", "grpcServerPort": port}) as cluster:
        out = clients.mqadmin(client_host, VERSION, ["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2",
                                                     "-w", "2"], cluster.ns_addr)
        assert "success" in out, out
        home = jvm.default_home()
        endpoint = f"{client_host.host_ip}:{port}"
        events = {}
        for name, argv in (("produce", ["produce", "--topic", topic, "-c", "3"]),
                           ("simple", ["simple", "--topic", topic, "--group", group, "-c", "3", "--invisible-s",
                                       "20", "--linger-s", "1", "--timeout-s", "60"])):
            cmd = jvm.grpc_harness_cmd([argv[0], "--endpoint", endpoint, "--ssl", "default", *argv[1:]], home=home)
            proc = client_host.run(cmd, timeout=120, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL)
            events[name] = jvm.Events(jvm._parse_lines(proc.stdout))
            assert proc.returncode == 0, f"{name} exited {proc.returncode}: {events[name][-4:]}\n{proc.stderr[-3000:]}"
        assert sorted(e["body"] for e in events["simple"].of("received")) == ["msg-0", "msg-1", "msg-2"]
