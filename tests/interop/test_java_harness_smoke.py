"""The Java side of the interop suite, proved against the REAL Java servers.

No rmqpy code runs here: the official Apache RocketMQ name server and broker
(see jvm.SERVER_VERSIONS) are started from the Maven Central jars, and our
harness (tests/interop/java) plus mqadmin talk to them. What these tests
accept is what "correct" looks like for the rmqpy interop tests.
"""

from __future__ import annotations

import json
import uuid

import pytest

from tests.interop import jvm

#: every test here is a reference run (tests/reference.py): CI runs it again only when its inputs change
pytestmark = [pytest.mark.interop, pytest.mark.reference, pytest.mark.timeout(300)]


class JavaServers:
    def __init__(self, version: str, namesrv: jvm.JavaProcess, broker: jvm.JavaProcess):
        self.version = version
        self.namesrv = namesrv
        self.broker = broker
        self.ns = namesrv.addr

    def harness(self, *args: str, timeout: float = 90.0, check: bool = True) -> jvm.Events:
        return jvm.harness(self.version, list(args), timeout=timeout, check=check)

    def mqadmin(self, *args: str, timeout: float = 60.0) -> tuple[int, str, str]:
        return jvm.mqadmin(self.version, list(args), self.ns, timeout=timeout)


@pytest.fixture(scope="module", params=jvm.VERSIONS)
def java(request, tmp_path_factory):
    """A real Java name server + broker of one version, shared by the module."""
    version = request.param
    jvm.ensure_built()
    work = tmp_path_factory.mktemp(f"java-{version}")
    namesrv = jvm.start_java_namesrv(version, workdir=work / "namesrv")
    try:
        broker = jvm.start_java_broker(
            version, work / "broker", namesrv.addr,
            {"brokerName": "smoke-broker", "brokerClusterName": "SmokeCluster", "enablePropertyFilter": True},
        )
    except BaseException:
        namesrv.stop()
        raise
    try:
        yield JavaServers(version, namesrv, broker)
    finally:
        # the store is thrown away: no need to wait out 5.3.3's ~18 s shutdown (or 5 s of it)
        broker.kill9()
        namesrv.kill9()


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def test_produce_sync_then_push_consume(java):
    topic, group = f"Smoke_{_uid()}", f"smoke_c_{_uid()}"
    sent = java.harness("produce", "-n", java.ns, "-t", topic, "-c", "10", "--tags", "TagA,TagB",
                        "--keys", "key-{i}", "--body", "body-{i}", "--prop", "idx={i}")
    sends = sent.of("sent")
    assert len(sends) == 10
    assert all(s["status"] == "SEND_OK" for s in sends)
    assert {s["brokerName"] for s in sends} == {"smoke-broker"}
    assert len({s["msgId"] for s in sends}) == 10
    assert len({s["offsetMsgId"] for s in sends}) == 10
    # offsets grow by one per queue
    by_queue: dict[int, list[int]] = {}
    for s in sends:
        by_queue.setdefault(s["queueId"], []).append(s["queueOffset"])
    for offsets in by_queue.values():
        assert offsets == list(range(len(offsets)))
    assert sent.done == {**sent.done, "ok": True, "sent": 10, "failed": 0}

    got = java.harness("consume-push", "-n", java.ns, "-t", topic, "-g", group, "-c", "10",
                       "--timeout-ms", "60000")
    assert got.of("started")
    recv = got.of("received")
    assert len(recv) == 10
    assert got.done["ok"] and got.done["consumed"] == 10 and got.done["distinct"] == 10
    assert sorted(r["keys"] for r in recv) == sorted(f"key-{i}" for i in range(10))
    assert sorted(r["body"] for r in recv) == sorted(f"body-{i}" for i in range(10))
    for r in recv:
        i = int(r["keys"].split("-")[1])
        assert r["topic"] == topic
        assert r["tags"] == ("TagA" if i % 2 == 0 else "TagB")
        assert r["properties"]["idx"] == str(i)
        assert r["reconsumeTimes"] == 0
        assert r["brokerName"] == "smoke-broker"
    # what the producer was told is what the consumer sees
    sent_by_id = {s["msgId"]: s for s in sends}
    for r in recv:
        s = sent_by_id[r["msgId"]]
        assert (s["queueId"], s["queueOffset"], s["offsetMsgId"]) == (r["queueId"], r["queueOffset"], r["offsetMsgId"])


def test_tag_filter_and_sql92(java):
    topic = f"Filter_{_uid()}"
    java.harness("produce", "-n", java.ns, "-t", topic, "-c", "6", "--tags", "A,B,C", "--keys", "k{i}",
                 "--prop", "n={i}")
    tagged = java.harness("consume-push", "-n", java.ns, "-t", topic, "-g", f"tag_{_uid()}", "--tags", "A || C",
                          "-c", "4", "--timeout-ms", "60000", "--linger-ms", "1500")
    assert sorted(r["keys"] for r in tagged.of("received")) == ["k0", "k2", "k3", "k5"]
    sql = java.harness("consume-push", "-n", java.ns, "-t", topic, "-g", f"sql_{_uid()}", "--sql", "n >= 4",
                       "-c", "2", "--timeout-ms", "60000", "--linger-ms", "1500")
    assert sorted(r["keys"] for r in sql.of("received")) == ["k4", "k5"]


def test_send_modes_and_lite_pull(java):
    topic = f"Modes_{_uid()}"
    asyncs = java.harness("produce", "-n", java.ns, "-t", topic, "-c", "4", "--mode", "async", "--keys", "a{i}",
                          "--queue-id", "0")
    assert sorted(s["i"] for s in asyncs.of("sent")) == [0, 1, 2, 3]
    assert {s["queueId"] for s in asyncs.of("sent")} == {0}
    oneway = java.harness("produce", "-n", java.ns, "-t", topic, "-c", "2", "--mode", "oneway", "--keys", "o{i}",
                          "--queue-id", "0")
    assert [s["status"] for s in oneway.of("sent")] == ["ONEWAY", "ONEWAY"]
    batch = java.harness("produce", "-n", java.ns, "-t", topic, "-c", "3", "--mode", "batch", "--keys", "b{i}",
                         "--queue-id", "0")
    (b,) = batch.of("sent")
    assert b["status"] == "SEND_OK" and b["batchSize"] == 3 and len(b["msgIds"]) == 3

    lite = java.harness("consume-lite", "-n", java.ns, "-t", topic, "-g", f"lite_{_uid()}", "--mode", "assign",
                        "--queue-ids", "0", "--seek", "begin", "-c", "9", "--timeout-ms", "60000")
    (started,) = lite.of("started")
    assert [q["queueId"] for q in started["assigned"]] == [0]
    recv = lite.of("received")
    assert len(recv) == 9
    assert [r["queueOffset"] for r in recv] == list(range(9))
    assert sorted(r["keys"] for r in recv) == sorted(
        [f"a{i}" for i in range(4)] + ["o0", "o1"] + [f"b{i}" for i in range(3)])

    sub = java.harness("consume-lite", "-n", java.ns, "-t", topic, "-g", f"lite_s_{_uid()}", "-c", "9",
                       "--timeout-ms", "60000")
    assert sub.done["received"] == 9


def test_reconsume_later_redelivers(java):
    topic, group = f"Retry_{_uid()}", f"retry_{_uid()}"
    java.harness("produce", "-n", java.ns, "-t", topic, "-c", "2", "--keys", "r{i}")
    # The redelivery comes from %RETRY%group, a topic the broker creates on the
    # first send-back; the client learns its route from its periodic name
    # server poll (30 s by default) and takes its queues at the next
    # rebalance (20 s), so make both 1 s here.
    ev = java.harness("consume-push", "-n", java.ns, "-t", topic, "-g", group, "-c", "2",
                      "--reconsume-later", "1", "--retry-delay-level", "1", "--timeout-ms", "60000",
                      "--poll-namesrv-ms", "1000", "--rebalance-interval-ms", "1000")
    recv = ev.of("received")
    assert len(recv) == 4
    for key in ("r0", "r1"):
        deliveries = [r for r in recv if r["keys"] == key]
        assert [d["delivery"] for d in deliveries] == [1, 2]
        assert [d["result"] for d in deliveries] == ["RECONSUME_LATER", "CONSUME_SUCCESS"]
        assert [d["reconsumeTimes"] for d in deliveries] == [0, 1]
        assert deliveries[0]["msgId"] == deliveries[1]["msgId"]
        # redelivered from %RETRY%group; the client restores the real topic
        # from the RETRY_TOPIC property
        assert deliveries[1]["topic"] == topic
        assert deliveries[1]["properties"]["RETRY_TOPIC"] == topic


def test_popen_orderly_consumer_sees_queue_order(java):
    topic, group = f"Order_{_uid()}", f"order_{_uid()}"
    java.harness("produce", "-n", java.ns, "-t", topic, "-c", "1", "--queue-id", "1", "--keys", "warmup")
    with jvm.harness_popen(java.version, ["consume-push", "-n", java.ns, "-t", topic, "-g", group, "--orderly",
                                          "-c", "6", "--timeout-ms", "60000"]) as consumer:
        consumer.wait_for("started", timeout=60)
        java.harness("produce", "-n", java.ns, "-t", topic, "-c", "5", "--queue-id", "1", "--keys", "o{i}")
        first = consumer.wait_for("received", timeout=60)
        assert first["queueId"] == 1
        events = consumer.collect(timeout=90)
    assert events.returncode == 0, events.stderr[-2000:]
    recv = events.of("received")
    assert [r["keys"] for r in recv] == ["warmup", "o0", "o1", "o2", "o3", "o4"]
    assert [r["queueOffset"] for r in recv] == list(range(6))
    assert {r["thread"].startswith("ConsumeMessageThread_") for r in recv} == {True}


def test_roundtrip(java):
    ev = java.harness("roundtrip", "-n", java.ns, "-t", f"Rt_{_uid()}", "-c", "5", "--body-size", "3000")
    assert ev.done["ok"] and ev.done["received"] == 5 and ev.done["missing"] == []


def test_route_and_cluster_via_harness(java):
    topic = f"Route_{_uid()}"
    java.harness("produce", "-n", java.ns, "-t", topic, "-c", "1")
    route = java.harness("route", "-n", java.ns, "-t", topic).of("route")[0]["route"]
    (bd,) = route["brokerDatas"]
    assert bd["brokerName"] == "smoke-broker" and bd["cluster"] == "SmokeCluster"
    assert bd["brokerAddrs"] == {"0": java.broker.addr}
    (qd,) = route["queueDatas"]
    assert (qd["readQueueNums"], qd["writeQueueNums"], qd["perm"]) == (4, 4, 6)

    info = java.harness("cluster", "-n", java.ns).of("cluster")[0]["clusterInfo"]
    assert info["clusterAddrTable"] == {"SmokeCluster": ["smoke-broker"]}
    assert info["brokerAddrTable"]["smoke-broker"]["brokerAddrs"] == {"0": java.broker.addr}


def test_error_event_carries_response_code(java):
    ev = java.harness("route", "-n", java.ns, "-t", f"NoSuchTopic_{_uid()}", check=False)
    assert ev.returncode == 1
    (err,) = ev.errors
    assert err["class"] == "org.apache.rocketmq.client.exception.MQClientException"
    assert err["responseCode"] == 17  # TOPIC_NOT_EXIST
    usage = java.harness("produce", "-n", java.ns, "--bogus", "1", check=False)
    assert usage.returncode == 2 and usage.errors[0]["class"] == "Usage"


def test_mqadmin_cluster_list_and_topic_route(java):
    rc, out, err = java.mqadmin("clusterList")
    assert rc == 0, err
    line = next(ln for ln in out.splitlines() if "smoke-broker" in ln)
    assert line.split()[:4] == ["SmokeCluster", "smoke-broker", "0", java.broker.addr]
    assert ("V" + jvm.SERVER_VERSIONS[java.version].replace(".", "_")) in line

    topic = f"Admin_{_uid()}"
    rc, out, err = java.mqadmin("updateTopic", "-c", "SmokeCluster", "-t", topic, "-r", "2", "-w", "2")
    assert rc == 0 and "success" in out, out + err
    rc, out, err = java.mqadmin("topicRoute", "-t", topic)
    assert rc == 0, err
    assert java.broker.addr in out and "smoke-broker" in out
    # fastjson writes the brokerAddrs map with a bare numeric key: not JSON
    assert '{0:"' + java.broker.addr + '"' in out.replace("\n", "").replace("\t", "")
    route = json.loads(out.replace("{0:", '{"0":'))
    assert route["queueDatas"][0]["writeQueueNums"] == 2
