"""The real proof: a store written by the Apache RocketMQ Java broker, read as a DataFrame.

The Java broker (small commit log files, so there are several) stores messages of three
topics sent by the Java producer (single sends with tags/keys/properties, a batch send, and
compressed bodies); after it stops, the DataFrame must equal what the producer reported.

The Java name server and broker run on the host, bound to every address and advertising the
client host's ``host_ip``; the Java producer runs on a client host of its own (a network
namespace, or a podman container: ``RMQPY_INTEROP_ISOLATION``), as in tests/interop/.
"""
from __future__ import annotations

import zlib

import pytest

from tests.interop import clients, isolation, jvm

pytestmark = pytest.mark.interop

N = 120


def _body(template: str, size: int, i: int) -> bytes:
    """Common.body of the harness: template with {i}, padded with letters to ``size``."""
    head = template.replace("{i}", str(i)).encode()
    if size < 0 or size == len(head):
        return head
    return head[:size] + bytes(ord("a") + ((k + i) % 26) for k in range(min(size, len(head)), size))


@pytest.fixture(scope="module", params=["4.9.8", "5.3.3"])
def java_store(request, tmp_path_factory):
    version = request.param
    jvm.ensure_built()
    tmp = tmp_path_factory.mktemp(f"java-{version}")
    runs = {}
    with isolation.get_host_network().new_client_host() as ch:
        ns = jvm.start_java_namesrv(version, workdir=tmp / "ns", props={"bindAddress": "0.0.0.0"})
        try:
            addr = f"{ch.host_ip}:{ns.port}"
            broker = jvm.start_java_broker(version, tmp / "broker", addr, {
                "mappedFileSizeCommitLog": 64 * 1024, "maxMessageSize": 16 * 1024,
                "mappedFileSizeConsumeQueue": 20 * 40, "bindAddress": "0.0.0.0"}, broker_ip=ch.host_ip)
            try:
                common = ["-n", addr, "-c", str(N), "--tags", "TagA,TagB,TagC", "--keys", "key-{i} k2-{i}",
                          "--prop", "color=c{i}", "--body", "body-{i}-"]
                runs["SPARK_A"] = clients.harness(ch, version, ["produce", "-t", "SPARK_A", *common, "--body-size",
                                                                "700", "--queue-mod", "4"], timeout=180).of("sent")
                runs["SPARK_B"] = clients.harness(ch, version, ["produce", "-t", "SPARK_B", *common, "--body-size",
                                                                "300", "--mode", "batch", "--batch-size", "10"],
                                                  timeout=180).of("sent")
                runs["SPARK_C"] = clients.harness(ch, version, ["produce", "-t", "SPARK_C", "-n", addr, "-c", "30",
                                                                "--keys", "zip-{i}", "--body", "zip-{i}-",
                                                                "--body-size", "6000", "--compress-over", "4096"],
                                                  timeout=180).of("sent")
            finally:
                broker.stop()
        finally:
            ns.stop()
        runs["client"] = (ch.client_ip, ch.host_ip, broker.port)
    return version, tmp / "broker" / "store", runs


def test_dataframe_equals_what_the_java_producer_sent(spark, java_store):
    from rmqpy_spark import reader as R
    version, root, runs = java_store
    assert len(R.list_commitlog(str(root))) >= 3
    df = spark.read.format("rocketmq").option("splitBytes", 40000).load(str(root))
    rows = {r.msgId: r for r in df.where("topic like 'SPARK_%'").collect()}
    # single sends
    a = runs["SPARK_A"]
    assert len(a) == N and all(e["status"] == "SEND_OK" for e in a)
    for e in a:
        r = rows[e["offsetMsgId"]]
        i = e["i"]
        assert (r.topic, r.queueId, r.queueOffset, r.uniqKey) == ("SPARK_A", e["queueId"], e["queueOffset"], e["msgId"])
        assert r.tags == e["tags"] and r.keys == f"key-{i} k2-{i}" and r.properties["color"] == f"c{i}"
        assert bytes(r.body) == _body("body-{i}-", 700, i)
        assert "%08x" % zlib.crc32(bytes(r.body)) == e["bodyCrc32"]
    # the producer sent from its client host to the broker's advertised address
    client_ip, host_ip, port = runs["client"]
    assert {(r.bornHost.rsplit(":", 1)[0], r.storeHost) for r in rows.values()} == {(client_ip, f"{host_ip}:{port}")}
    # batch sends (no selector: the topic is auto-created on the first send): one event per batch of 10
    b = runs["SPARK_B"]
    assert sum(e["batchSize"] for e in b) == N
    for e in b:
        stored = [rows[x].uniqKey for x in e["offsetMsgIds"]]
        if version.startswith("4."):
            assert stored == e["msgIds"]
        else:
            # the 5.3.3 broker appends the batch's own properties (UNIQ_KEY, WAIT, ...) after each
            # message's; Java's parser keeps the last, so every message of a batch shows the batch's id
            assert len(set(stored)) == 1 and stored[0] not in e["msgIds"]
        for j, off_id in enumerate(e["offsetMsgIds"]):
            r = rows[off_id]
            i = e["i"] + j
            assert (r.topic, r.queueId, r.queueOffset) == ("SPARK_B", e["queueId"], e["queueOffset"] + j)
            assert r.keys == f"key-{i} k2-{i}" and bytes(r.body) == _body("body-{i}-", 300, i)
    # compressed by the client: stored compressed (sysFlag bit 0), returned inflated
    c = runs["SPARK_C"]
    assert len(c) == 30
    for e in c:
        r = rows[e["offsetMsgId"]]
        assert r.sysFlag & 1 and bytes(r.body) == _body("zip-{i}-", 6000, e["i"])
    assert len(rows) == 2 * N + 30
    # one map entry per property name
    assert df.where("size(map_keys(properties)) != size(array_distinct(map_keys(properties)))").count() == 0
    # counts per topic and queue agree with the consume queue way in
    cq = spark.read.format("rocketmq").option("partitioning", "consumequeue").option("topics", "SPARK_A,SPARK_B,SPARK_C") \
        .load(str(root))
    assert sorted(r.msgId for r in cq.select("msgId").collect()) == sorted(rows)


def test_stream_over_the_java_store(spark, java_store, tmp_path):
    version, root, runs = java_store
    q = (spark.readStream.format("rocketmq").option("topics", "SPARK_A,SPARK_B").load(str(root))
         .select("topic", "queueId", "queueOffset", "msgId").writeStream.format("parquet")
         .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    got = sorted(r.msgId for r in spark.read.parquet(str(tmp_path / "out")).collect())
    exp = sorted([e["offsetMsgId"] for e in runs["SPARK_A"]] + [x for e in runs["SPARK_B"] for x in e["offsetMsgIds"]])
    assert got == exp
