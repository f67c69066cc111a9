"""The rmqpy broker against the official Apache RocketMQ Java clients 4.9.8 and 5.3.3.

One name server (``twistd rmq-namesrv``) and one broker (``twistd rmq-broker -c conf``) run
as real subprocesses for the whole module; the Java harness (tests/interop/java) produces
and consumes through them. Each test uses its own topics and groups, so tests do not see
each other's messages.

Every official Java client (harness, mqadmin) runs on the module's client host (its own
network namespace, the ``client_host`` fixture) and reaches the servers at ``host_ip``: our
servers bind every address and advertise ``host_ip`` (brokerIP1), as do the real Java name
server and broker started here. Raw-socket checks run in the test process, also to host_ip.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from tests.interop import clients, jvm, servers
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]
TWISTD = [sys.executable, "-c", "import sys; from twisted.scripts.twistd import run; sys.argv[0] = 'twistd'; run()"]
VERSIONS = list(jvm.VERSIONS)


# ------------------------------------------------------------------ processes
class Server:
    def __init__(self, tap: str, conf: Path, port: int, workdir: Path, host: str) -> None:
        self.tap, self.conf, self.port, self.workdir, self.host = tap, conf, port, workdir, host
        self.log = workdir / f"{tap}.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> "Server":
        out = open(self.log, "ab")
        self._log_start = out.tell()
        self.proc = subprocess.Popen(TWISTD + ["-n", "--pidfile=", self.tap, "-c", str(self.conf)], cwd=str(ROOT),
                                     env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=out,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.tap} exited {self.proc.returncode}:\n{self.tail()}")
            # "boot success" is logged once the reactor runs: before that a SIGTERM would kill the
            # process without the clean shutdown (twistd installs its handlers in reactor.run)
            if "boot success" in self.log.read_text(errors="replace")[self._log_start:]:
                socket.create_connection((self.host, self.port), 2).close()
                return self
            time.sleep(0.1)
        raise RuntimeError(f"{self.tap} did not listen on {self.port}:\n{self.tail()}")

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)

    def tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


class Cluster:
    def __init__(self, workdir: Path, host) -> None:
        self.workdir, self.host = workdir, host
        self.ip = ip = host.host_ip  # where the client host reaches the servers; they bind 0.0.0.0
        ns_port = servers.free_port()
        self.namesrv = Server("rmq-namesrv", servers.write_conf(workdir / "namesrv.conf", {
            "listenPort": ns_port, "kvConfigPath": workdir / "kvConfig.json"}), ns_port, workdir, ip)
        self.ns_addr = f"{ip}:{ns_port}"
        self.broker_port = servers.free_port()  # its fast port p-2 is free too
        self.broker_addr = f"{ip}:{self.broker_port}"
        self.broker_props = {
            "brokerClusterName": "DefaultCluster", "brokerName": "broker-py", "brokerId": 0,
            "listenPort": self.broker_port, "namesrvAddr": self.ns_addr, "brokerIP1": ip,
            "storePathRootDir": workdir / "store",
            # the sizes the Java brokers of jvm.start_java_broker use, so they can take over this store
            "mappedFileSizeCommitLog": jvm.BROKER_DEFAULTS["mappedFileSizeCommitLog"],
            "mappedFileSizeConsumeQueue": jvm.BROKER_DEFAULTS["mappedFileSizeConsumeQueue"],
            "maxHashSlotNum": jvm.BROKER_DEFAULTS["maxHashSlotNum"], "maxIndexNum": jvm.BROKER_DEFAULTS["maxIndexNum"],
            "autoCreateTopicEnable": True, "enablePropertyFilter": True, "flushDiskType": "ASYNC_FLUSH",
            # no gRPC endpoint: its default port 8081 is one per host, and other test processes
            # (xdist workers) start brokers at the same time (servers.start_broker does the same)
            "grpcServerPort": -1,
        }
        self.broker: Server | None = None

    def start_broker(self, **overrides: object) -> Server:
        props = dict(self.broker_props, **overrides)
        conf = servers.write_conf(self.workdir / "broker.conf", props)
        self.broker = Server("rmq-broker", conf, self.broker_port, self.workdir, self.ip).start()
        return self.broker

    def restart_broker(self, **overrides: object) -> Server:
        assert self.broker is not None
        rc = self.broker.stop()
        # twistd re-raises the SIGTERM it handled once the reactor has stopped cleanly
        assert rc in (0, -signal.SIGTERM), self.broker.tail()
        assert "Server Shut Down." in self.broker.tail(1000), self.broker.tail()
        return self.start_broker(**overrides)


@pytest.fixture(scope="module")
def cluster(java_built, client_host):
    workdir = Path(tempfile.mkdtemp(prefix="rmqpy-broker-java-"))
    c = Cluster(workdir, client_host)
    c.namesrv.start()
    try:
        c.start_broker()
        time.sleep(0.5)
        yield c
    finally:
        if c.broker is not None:
            c.broker.stop()
        c.namesrv.stop()
        if os.environ.get("RMQPY_KEEP_WORKDIR"):
            print(f"work dir kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


# ------------------------------------------------------------------ harness helpers
def uniq(prefix: str, version: str) -> str:
    return f"{prefix}_{version.replace('.', '')}_{uuid.uuid4().hex[:6]}"


#: the consumer learns routes and rebalances every second (client defaults: 30 s and 20 s)
FAST_REBALANCE = ("--poll-namesrv-ms", "1000", "--rebalance-interval-ms", "1000")
ROCKETMQ_SERIALIZE = {"rocketmq.serialize.type": "ROCKETMQ"}  # binary headers instead of JSON


def produce(c: Cluster, version: str, topic: str, count: int, *extra: str, check: bool = True,
            sysprops: dict | None = None) -> jvm.Events:
    ev = clients.harness(c.host, version, ["produce", "-n", c.ns_addr, "-t", topic, "-c", str(count), *extra],
                         timeout=60, check=False, sysprops=sysprops)
    if check:
        assert ev.returncode == 0 and ev.done and ev.done.get("ok"), _explain(ev, c)
    return ev


def consume_push(c: Cluster, version: str, topic: str, group: str, count: int, *extra: str,
                 timeout_ms: int = 30000, sysprops: dict | None = None) -> jvm.Events:
    return clients.harness(c.host, version, ["consume-push", "-n", c.ns_addr, "-t", topic, "-g", group,
                                             "-c", str(count), "--timeout-ms", str(timeout_ms), *extra],
                           timeout=timeout_ms / 1000 + 30, check=False, sysprops=sysprops)


def consume_lite(c: Cluster, version: str, topic: str, group: str, count: int, *extra: str,
                 timeout_ms: int = 30000) -> jvm.Events:
    return clients.harness(c.host, version, ["consume-lite", "-n", c.ns_addr, "-t", topic, "-g", group,
                                             "-c", str(count), "--timeout-ms", str(timeout_ms), *extra],
                           timeout=timeout_ms / 1000 + 30, check=False)


def source_ip(ip: str) -> str:
    """The address this (host-side) process connects to ``ip`` from: the peer address a server sees."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.connect((ip, 9))  # a UDP connect sends nothing
        return u.getsockname()[0]


def _explain(ev: jvm.Events, c: Cluster) -> str:
    return (f"exit {ev.returncode}; errors {ev.errors[:3]}\nstderr:\n{(ev.stderr or '')[-2500:]}\n"
            f"broker log:\n{c.broker.tail(2500) if c.broker else ''}")


def bodies(ev: jvm.Events) -> list[str]:
    return [e["body"] for e in ev.of("received")]


# ------------------------------------------------------------------ tests
@pytest.mark.parametrize("version", VERSIONS)
def test_send_modes_and_push_consume(cluster: Cluster, version: str) -> None:
    """sync, async, oneway and batch sends; a push consumer gets every body, tag and key intact."""
    topic = uniq("TSend", version)
    expected = {}
    for mode in ("sync", "async", "oneway", "batch"):
        ev = produce(cluster, version, topic, 6, "--mode", mode, "--tags", f"tag-{mode}",
                     "--keys", f"key-{mode}-{{i}}", "--body", f"{mode}-body-{{i}}")
        sent = ev.of("sent")
        if mode == "batch":  # one send, one offsetMsgId per message
            assert len(sent) == 1 and sent[0]["status"] == "SEND_OK", _explain(ev, cluster)
            ids = sent[0]["offsetMsgId"].split(",")
            assert len(ids) == 6 and all(len(i) == 32 for i in ids)
        elif mode != "oneway":
            assert len(sent) == 6, _explain(ev, cluster)
            for s in sent:
                assert s["status"] == "SEND_OK" and len(s["offsetMsgId"]) == 32
                assert s["queueOffset"] >= 0 and s["regionId"] == "DefaultRegion"
        for i in range(6):
            expected[f"{mode}-body-{i}"] = (f"tag-{mode}", f"key-{mode}-{i}")
    time.sleep(0.5)  # oneway sends are not acknowledged
    ev = consume_push(cluster, version, topic, uniq("GSend", version), len(expected), "--from", "first",
                      "--linger-ms", "1000")
    assert ev.returncode == 0, _explain(ev, cluster)
    got = {e["body"]: (e["tags"], e["keys"]) for e in ev.of("received")}
    assert got == expected
    for e in ev.of("received"):
        assert e["storeHost"] == cluster.broker_addr
        assert e["bornHost"].startswith(f"{cluster.host.client_ip}:")
        assert e["properties"].get("CLUSTER") == "DefaultCluster"
    # stored as the broker of the producer's generation stores it (docs/compatibility.md): 5.3.3 adds
    # MSG_REGION and TRACE_ON and keeps WAIT; 4.9.7 drops WAIT but where a batch's own properties bring it
    five = version.startswith("5.")
    for e in ev.of("received"):
        props = e["properties"]
        assert ("MSG_REGION" in props, "TRACE_ON" in props, "WAIT" in props) == \
            (five, five, five or e["body"].startswith("batch-")), e
        assert not five or (props["MSG_REGION"], props["TRACE_ON"]) == ("DefaultRegion", "true"), e
    # each message its own id: the 5.x client's batch UNIQ_KEY is not stored with the batch's messages
    ids = [e["msgId"] for e in ev.of("received")]
    assert len(set(ids)) == len(ids) == len(expected), ids


@pytest.mark.parametrize("version", VERSIONS)
def test_tag_filter(cluster: Cluster, version: str) -> None:
    """Also with the binary (ROCKETMQ) header serialization on both clients."""
    topic = uniq("TTag", version)
    produce(cluster, version, topic, 12, "--tags", "A,B,C", "--body", "b{i}", sysprops=ROCKETMQ_SERIALIZE)
    ev = consume_push(cluster, version, topic, uniq("GTag", version), 8, "--from", "first", "--tags", "A || C",
                      "--linger-ms", "2000", sysprops=ROCKETMQ_SERIALIZE)
    assert ev.returncode == 0, _explain(ev, cluster)
    got = ev.of("received")
    assert sorted(e["body"] for e in got) == sorted(f"b{i}" for i in range(12) if i % 3 != 1)
    assert {e["tags"] for e in got} == {"A", "C"}


@pytest.mark.parametrize("version", VERSIONS)
def test_sql92_filter(cluster: Cluster, version: str) -> None:
    topic = uniq("TSql", version)
    produce(cluster, version, topic, 10, "--prop", "a={i}", "--tags", "X,Y", "--body", "s{i}")
    ev = consume_push(cluster, version, topic, uniq("GSql", version), 3, "--from", "first",
                      "--sql", "a BETWEEN 3 AND 8 AND TAGS = 'X'", "--linger-ms", "2000")
    assert ev.returncode == 0, _explain(ev, cluster)
    assert sorted(bodies(ev)) == ["s4", "s6", "s8"]


@pytest.mark.parametrize("version", VERSIONS)
def test_lite_pull_subscribe_and_assign(cluster: Cluster, version: str) -> None:
    """Also: bodies over 4 KiB arrive compressed by the producer and come back intact."""
    topic = uniq("TLite", version)
    produce(cluster, version, topic, 8, "--body", "l{i}", "--tags", "L")
    big = produce(cluster, version, topic, 2, "--body", "big-{i}-", "--body-size", "20000", "--tags", "BIG")
    big_crcs = sorted(e["bodyCrc32"] for e in big.of("sent"))
    for mode, extra in (("subscribe", ["--from", "first"]), ("assign", ["--seek", "begin"])):
        ev = consume_lite(cluster, version, topic, uniq("GLite", version), 10, "--mode", mode, *extra)
        assert ev.returncode == 0, _explain(ev, cluster)
        got = ev.of("received")
        assert sorted(e["body"] for e in got if e["tags"] == "L") == sorted(f"l{i}" for i in range(8))
        large = [e for e in got if e["tags"] == "BIG"]
        assert sorted(e["bodyCrc32"] for e in large) == big_crcs and {e["bodyLen"] for e in large} == {20000}


@pytest.mark.parametrize("version", VERSIONS)
def test_offsets_survive_broker_restart(cluster: Cluster, version: str) -> None:
    """Consume part, restart the broker, consume the rest with the same group: nothing is lost."""
    topic, group = uniq("TRestart", version), uniq("GRestart", version)
    total = 30
    produce(cluster, version, topic, total, "--body", "r{i}", "--queue-mod", "2")
    # one message per pull, pulls spaced out: the consumer stops well before taking everything
    first = consume_push(cluster, version, topic, group, 6, "--from", "first", "--threads", "1",
                         "--consume-batch", "1", "--pull-batch", "1", "--pull-interval-ms", "300")
    assert first.returncode == 0, _explain(first, cluster)
    seen = set(bodies(first))
    before = committed_offsets(cluster, group, topic)
    cluster.restart_broker()
    time.sleep(1.0)
    assert committed_offsets(cluster, group, topic) == before, "consumer offsets changed across the restart"
    rest = {f"r{i}" for i in range(total)} - seen
    assert rest, "the first consumer took everything; nothing left to prove"
    second = consume_push(cluster, version, topic, group, len(rest), "--from", "first", "--linger-ms", "3000")
    assert second.returncode == 0, _explain(second, cluster)
    got = set(bodies(second))
    assert rest <= got
    # the second consumer started from the committed offsets, not from the beginning
    assert len(got) <= total - sum(before.values()), (before, sorted(got))


def committed_offsets(cluster: Cluster, group: str, topic: str, queues: int = 4) -> dict[int, int]:
    """QUERY_CONSUMER_OFFSET per queue, as the client asks for it (-1 when none is stored)."""
    from rmqpy.protocol.codes import RequestCode
    from rmqpy.protocol.command import RemotingCommand
    from rmqpy.tools.blocking_client import BlockingClient
    out = {}
    with BlockingClient(cluster.broker_addr) as client:
        for q in range(queues):
            resp = client.invoke(RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, ext_fields={
                "consumerGroup": group, "topic": topic, "queueId": str(q)}))
            out[q] = int(resp.ext_fields["offset"]) if resp.code == 0 else -1
    return {q: o for q, o in out.items() if o > 0}


@pytest.mark.parametrize("version", VERSIONS)
def test_bad_input_gets_java_codes(cluster: Cluster, version: str) -> None:
    topic = uniq("TBad", version)
    produce(cluster, version, topic, 1)
    # a body over maxMessageSize (4 MiB): MESSAGE_ILLEGAL (13)
    ev = produce(cluster, version, topic, 1, "--body-size", str(4 * 1024 * 1024 + 1), "--max-message-size",
                 str(16 * 1024 * 1024), "--compress-over", str(64 * 1024 * 1024), "--retries", "0", check=False)
    err = ev.errors[0] if ev.errors else {}
    assert err.get("responseCode") == 13, _explain(ev, cluster)
    assert "the message is illegal, maybe msg body or properties length not matched. msg body length limit " \
           "4194304B" in str(err)
    # A queue id the topic does not have: SYSTEM_ERROR (1) "request queueId[N] is illegal, ...".
    # The harness's MessageQueueSelector refuses queues missing from the route, so this request is
    # sent as the 4.9.8 client would send it (SEND_MESSAGE_V2, same header fields) by a raw client.
    from rmqpy.protocol.codes import RequestCode
    from rmqpy.protocol.command import RemotingCommand
    from rmqpy.tools.blocking_client import BlockingClient
    ext = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "99", "f": "0", "g": str(int(time.time() * 1000)),
           "h": "0", "i": "WAIT\x01true\x02", "j": "0", "k": "false", "m": "false", "n": "broker-py"}
    me = source_ip(cluster.ip)
    with BlockingClient(cluster.broker_addr) as client:
        resp = client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, body=b"x", ext_fields=ext))
        assert resp.code == 1
        assert resp.remark.startswith(f"request queueId[99] is illegal, TopicConfig [topicName={topic}, "
                                      "readQueueNums=4, writeQueueNums=4, perm=RW-, topicFilterType=SINGLE_TAG, "
                                      f"topicSysFlag=0, order=false] Producer: {me}:")
        assert resp.ext_fields["MSG_REGION"] == "DefaultRegion" and resp.ext_fields["TRACE_ON"] == "true"
        pull = {"consumerGroup": "G", "topic": topic, "queueId": "99", "queueOffset": "0", "maxMsgNums": "32",
                "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "15000", "subscription": "*",
                "subVersion": "0", "expressionType": "TAG"}
        resp = client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE, ext_fields=pull))
        assert resp.code == 1
        assert resp.remark.startswith(f"queueId[99] is illegal, topic:[{topic}] topicConfig.readQueueNums:[4] "
                                      f"consumer:[/{me}:")


@pytest.mark.parametrize("version", VERSIONS)
def test_garbage_closes_only_its_own_connection(cluster: Cluster, version: str) -> None:
    topic, group = uniq("TGarbage", version), uniq("GGarbage", version)
    produce(cluster, version, topic, 1, "--body", "warmup")
    with clients.BackgroundHarness(cluster.host, version, [
            "consume-push", "-n", cluster.ns_addr, "-t", topic, "-g", group, "-c", "6", "--from", "first",
            "--timeout-ms", "40000"], cluster.workdir / f"harness-{uuid.uuid4().hex[:8]}.jsonl") as consumer:
        consumer.wait_for("started", timeout=30)
        consumer.wait_for("received", timeout=30)
        for garbage in (struct.pack(">II", 12, 0x05000004) + b"\x00" * 8,       # unknown serialize type
                        struct.pack(">II", 20, 0x00000010) + b"{not json!}     ",  # bad JSON header
                        struct.pack(">I", 0x7FFFFFF0) + b"x" * 8):                 # frame too long
            s = socket.create_connection((cluster.ip, cluster.broker_port), 5)
            s.settimeout(5)
            s.sendall(garbage)
            assert s.recv(100) == b"", "the broker must close a connection that sends garbage"
            s.close()
        produce(cluster, version, topic, 5, "--body", "after-{i}")
        events = consumer.collect(timeout=60)
    assert events.returncode == 0, events[-10:]
    assert {f"after-{i}" for i in range(5)} <= set(bodies(events))


@pytest.mark.parametrize("version", VERSIONS)
def test_missing_topic_without_auto_create(cluster: Cluster, version: str) -> None:
    """With autoCreateTopicEnable=false a send to an unknown topic gets TOPIC_NOT_EXIST (17).

    TBW102 stays in topics.json from the earlier run (as on a Java broker whose flag was
    switched off), so the producer still finds a route and asks the broker, which refuses.
    """
    cluster.restart_broker(autoCreateTopicEnable=False)
    try:
        time.sleep(0.5)
        topic = uniq("TMissing", version)
        ev = produce(cluster, version, topic, 1, "--retries", "0", check=False)
        err = ev.errors[0] if ev.errors else {}
        assert err.get("responseCode") == 17, _explain(ev, cluster)
        assert f"topic[{topic}] not exist, apply first please!" in str(err)
    finally:
        cluster.restart_broker()


def test_registers_with_the_name_server_and_unregisters_on_shutdown(cluster: Cluster) -> None:
    from rmqpy.protocol import fastjson
    from rmqpy.protocol.codes import RequestCode
    from rmqpy.protocol.command import RemotingCommand
    from rmqpy.tools.blocking_client import BlockingClient

    def route(topic: str) -> RemotingCommand:
        with BlockingClient(cluster.ns_addr) as ns:
            return ns.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                     ext_fields={"topic": topic}))

    resp = route("TBW102")
    assert resp.code == 0
    data = fastjson.loads(resp.body)
    assert data["brokerDatas"][0]["brokerAddrs"] in ({0: cluster.broker_addr}, {"0": cluster.broker_addr})
    assert data["queueDatas"][0]["perm"] == 7 and data["queueDatas"][0]["writeQueueNums"] == 8
    assert cluster.broker is not None
    cluster.broker.stop()
    try:
        assert route("TBW102").code == 17  # unregistered on the clean shutdown
    finally:
        cluster.start_broker()
    wait_until(lambda: route("TBW102").code == 0, 10, 0.2, what="TBW102 routed again")


@pytest.mark.parametrize("version", VERSIONS)
def test_python_client_and_java_client_see_each_others_messages(cluster: Cluster, version: str) -> None:
    """rmqpy.client.simple sends what the Java consumer reads, and pulls what the Java producer sent."""
    from rmqpy.client.simple import SimpleClient
    topic = uniq("TPy", version)
    with SimpleClient(cluster.ns_addr) as py:
        sent = [py.send(topic, f"py-{i}".encode(), tags="P", keys=f"pk{i}", properties={"a": str(i)}) for i in range(4)]
        assert all(len(r.offset_msg_id) == 32 for r in sent)
        time.sleep(0.5)
        ev = consume_push(cluster, version, topic, uniq("GPy", version), 4, "--from", "first", "--sql", "a >= 0")
        assert ev.returncode == 0, _explain(ev, cluster)
        got = {e["body"]: e for e in ev.of("received")}
        assert sorted(got) == [f"py-{i}" for i in range(4)]
        assert got["py-1"]["keys"] == "pk1" and got["py-1"]["tags"] == "P"
        assert got["py-1"]["msgId"] == sent[1].msg_id and got["py-1"]["offsetMsgId"] == sent[1].offset_msg_id

        jtopic = uniq("TJv", version)
        produce(cluster, version, jtopic, 4, "--body", "java-{i}", "--tags", "J")
        broker = cluster.broker_addr
        bodies_ = []
        for q in range(4):
            result = py.pull(broker, jtopic, "GPyPull", q, 0)
            bodies_ += [m.body.decode() for m in result.messages]
        assert sorted(bodies_) == [f"java-{i}" for i in range(4)]


@pytest.mark.parametrize("version", VERSIONS)
def test_registers_with_every_name_server_incl_the_java_one(cluster: Cluster, version: str) -> None:
    """namesrvAddr=ours;java: the broker registers with both; clients of the Java name server use it."""
    java_ns = jvm.start_java_namesrv(version, workdir=cluster.workdir / f"java-ns-{version}",
                                     props={"bindAddress": "0.0.0.0"})
    java_ns_addr = f"{cluster.ip}:{java_ns.port}"
    try:
        cluster.restart_broker(namesrvAddr=f"{cluster.ns_addr};{java_ns_addr}")
        ours = cluster.ns_addr
        cluster.ns_addr = java_ns_addr  # the clients below only know the Java name server
        try:
            topic = uniq("TJavaNs", version)
            produce(cluster, version, topic, 3, "--body", "n{i}")
            ev = consume_push(cluster, version, topic, uniq("GJavaNs", version), 3, "--from", "first")
            assert ev.returncode == 0, f"{_explain(ev, cluster)}\njava name server:\n{java_ns.log_tail()}"
            assert sorted(bodies(ev)) == ["n0", "n1", "n2"]
        finally:
            cluster.ns_addr = ours
    finally:
        java_ns.stop()
        cluster.restart_broker()


@pytest.mark.parametrize("version", VERSIONS)
def test_java_broker_takes_over_the_store_and_hands_it_back(cluster: Cluster, version: str) -> None:
    """Files written by rmq-broker (commit log, consume queues, topics.json, consumerOffset.json,
    subscriptionGroup.json) are read by the real Java broker, and what it writes back by ours:
    a consumer group continues where it stopped across Python -> Java -> Python brokers."""
    topic, group = uniq("THand", version), uniq("GHand", version)
    produce(cluster, version, topic, 12, "--body", "h{i}", "--queue-mod", "2")
    first = consume_push(cluster, version, topic, group, 4, "--from", "first", "--threads", "1",
                         "--consume-batch", "1", "--pull-batch", "1", "--pull-interval-ms", "300")
    assert first.returncode == 0, _explain(first, cluster)
    seen = set(bodies(first))
    assert cluster.broker is not None
    cluster.broker.stop()
    java = None
    try:
        store = cluster.workdir / "store"
        java = jvm.start_java_broker(version, cluster.workdir / f"java-{version}", cluster.ns_addr, {
            "brokerName": "broker-py", "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog"), "enablePropertyFilter": True,
            "bindAddress": "0.0.0.0"}, broker_ip=cluster.ip)
        produce(cluster, version, topic, 4, "--body", "j{i}", "--queue-mod", "2")
        # redeliveries of what the first consumer had not committed count too: linger for the rest.
        # Routes and queues are picked up fast (1 s), and a loaded machine gets 60 s for the 8.
        second = consume_push(cluster, version, topic, group, 8, "--from", "first", "--linger-ms", "3000",
                              *FAST_REBALANCE, timeout_ms=60000)
        assert second.returncode == 0, f"{_explain(second, cluster)}\njava broker:\n{java.log_tail()}"
        got = set(bodies(second))
        assert ({f"h{i}" for i in range(12)} - seen) | {f"j{i}" for i in range(4)} <= got | seen
        assert len(got) < 16, "the Java broker did not continue from the committed offsets"
    finally:
        if java is not None:
            java.stop()
        cluster.start_broker()
    produce(cluster, version, topic, 3, "--body", "p{i}")
    third = consume_push(cluster, version, topic, group, 3, "--from", "first", "--linger-ms", "3000",
                         *FAST_REBALANCE)
    assert third.returncode == 0, _explain(third, cluster)
    assert {f"p{i}" for i in range(3)} <= set(bodies(third))
    assert len(set(bodies(third))) < 10, "rmq-broker did not continue from the offsets the Java broker kept"
