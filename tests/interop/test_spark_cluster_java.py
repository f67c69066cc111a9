"""The ``rocketmq`` Spark format on a real Spark standalone cluster, against a cluster of two brokers.

One module-wide setup: rmqpy's name server with two brokers registered to it, rmqpy's
(``broker-py``) and the real Java 5.3.3 broker (``broker-java``); a Spark master and two workers,
each its own JVM started from the pyspark installation; the driver (this process) submits to the
master, so every read and write runs in executors on the workers. Messages are produced and
consumed by the official Java 5.3.3 client (our harness, on the client host).

* batch read: the rows are exactly the messages the Java producer sent, on both brokers;
* streaming read with a checkpoint, stopped mid-stream and restarted (more messages sent while
  it is down): every message once, none lost, none twice; the query's group offsets (option
  group) are what mqadmin consumerProgress shows;
* sink: rows with binary bodies, tags, keys and properties written by the executors, consumed
  by a Java push consumer: bodies byte-identical, tags, keys and properties as written.
"""
from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import sys
from pathlib import Path

import pytest

from tests.interop import clients, jvm, servers
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

pytest.importorskip("pyspark", reason="pyspark not installed (the [spark] extra)")
pytest.importorskip("pyarrow")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "spark") not in sys.path:
    sys.path.insert(0, str(ROOT / "spark"))

from tests.spark.standalone import StandaloneCluster  # noqa: E402

JAVA = "5.3.3"


class Brokers:
    """rmqpy's name server, rmqpy's broker and the Java 5.3.3 broker, in one cluster (DefaultCluster)."""

    def __init__(self, tmp: Path, host: str) -> None:
        self.host = host
        self.ns = servers.start_namesrv(tmp / "ns", host=host)
        self.ns_addr = self.ns.addr
        self.py = self.java = None
        try:
            self.py = servers.start_broker(tmp / "broker-py", self.ns_addr, host=host, props={"brokerName": "broker-py"})
            self.java = jvm.start_java_broker(JAVA, tmp / "broker-java", self.ns_addr,
                                              {"bindAddress": "0.0.0.0", "brokerName": "broker-java"}, broker_ip=host)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.java is not None:
            self.java.kill9()  # the store is thrown away
        if self.py is not None:
            self.py.stop()
        self.ns.stop()


@pytest.fixture(scope="module")
def env(java_built, client_host, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spark-cluster")
    # the Spark cluster starts while the brokers do (the 5.3.3 broker registers ~10 s after its start)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        spark_cluster = pool.submit(StandaloneCluster, tmp / "spark")
        try:
            brokers = Brokers(tmp, client_host.host_ip)
        except BaseException:
            try:
                spark_cluster.result().close()
            except Exception:
                pass
            raise
        try:
            cluster = spark_cluster.result()
        except BaseException:
            brokers.close()
            raise
    try:
        spark = cluster.session()
        yield brokers, cluster, spark, client_host, tmp
        spark.stop()
    finally:
        cluster.close()
        brokers.close()


def create_topic(env, topic: str) -> None:
    """The topic on both brokers (2 queues each), then seen by a client on both."""
    brokers, _c, _s, host, _tmp = env
    out = clients.mqadmin(host, JAVA, ["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2"],
                          brokers.ns_addr)
    assert "success" in out.lower(), out
    from rmqpy.client import PullConsumer

    c = PullConsumer(name_server=brokers.ns_addr, group="spark_test_probe")
    try:
        def both():
            try:
                return {mq.broker_name for mq in c.fetch_queues(topic)} == {"broker-py", "broker-java"}
            except Exception:
                return False
        assert wait_until(both, 30, 0.2), f"route of {topic} does not list both brokers"
    finally:
        c.shutdown()


def produce(env, topic: str, count: int, run: str) -> list[dict]:
    brokers, _c, _s, host, _tmp = env
    ev = clients.harness(host, JAVA, ["produce", "-n", brokers.ns_addr, "-t", topic, "-c", str(count),
                                      "--tags", "red,blue", "--keys", f"{run}-{{i}}", "--body", f"{run}-body-{{i}}"])
    sent = ev.of("sent")
    assert len(sent) == count and all(e["status"] == "SEND_OK" for e in sent), ev.errors
    return sent


def _sent_key(e: dict) -> tuple:
    return (e["brokerName"], e["queueId"], e["queueOffset"], e["msgId"], e["tags"], e["keys"], e["body"].encode())


def _row_key(r) -> tuple:
    return (r.brokerName, r.queueId, r.queueOffset, r.uniqKey, r.tags, r.keys, bytes(r.body))


def test_batch_read_gives_exactly_the_sent_messages_of_both_brokers(env):
    brokers, _c, spark, _h, _tmp = env
    create_topic(env, "SparkBatchT")
    sent = produce(env, "SparkBatchT", 40, "b")
    assert {e["brokerName"] for e in sent} == {"broker-py", "broker-java"}
    df = (spark.read.format("rocketmq").option("nameServer", brokers.ns_addr).option("topic", "SparkBatchT")
          .option("maxQueueSplit", 4).load())
    assert df.rdd.getNumPartitions() >= 10  # 4 queues of ~10 messages, split by 4
    rows = df.collect()
    assert sorted(_row_key(r) for r in rows) == sorted(_sent_key(e) for e in sent)
    # the executors ran on both workers
    assert spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() == 3  # the driver and two executors
    # tag filter and an explicit range, as rocketmq-spark writes offsets
    red = (spark.read.format("rocketmq").option("nameServer", brokers.ns_addr).option("topic", "SparkBatchT")
           .option("subExpression", "red").load().collect())
    assert sorted(_row_key(r) for r in red) == sorted(_sent_key(e) for e in sent if e["tags"] == "red")
    ending = json.dumps({"SparkBatchT": {"broker-java": {"0": 2}, "broker-py": {"1": 3}}})
    starting = json.dumps({"SparkBatchT": {"broker-py": {"1": 1}}})
    part = (spark.read.format("rocketmq").option("nameServer", brokers.ns_addr).option("topic", "SparkBatchT")
            .option("startingOffsets", starting).option("endingOffsets", ending).load())
    got = sorted((r.brokerName, r.queueId, r.queueOffset) for r in part.select("brokerName", "queueId", "queueOffset")
                 .collect())
    exp = sorted((e["brokerName"], e["queueId"], e["queueOffset"]) for e in sent
                 if (e["brokerName"], e["queueId"]) == ("broker-java", 0) and e["queueOffset"] < 2
                 or (e["brokerName"], e["queueId"]) == ("broker-py", 1) and 1 <= e["queueOffset"] < 3
                 or (e["brokerName"], e["queueId"]) in (("broker-java", 1), ("broker-py", 0)))
    assert got == exp


def _start_stream(env, topic: str, out: Path, ckpt: Path, available_now: bool):
    brokers, _c, spark, _h, _tmp = env
    df = (spark.readStream.format("rocketmq").option("nameServer", brokers.ns_addr).option("topic", topic)
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 6).option("group", "spark_stream_g")
          .load().select("brokerName", "queueId", "queueOffset", "uniqKey", "body"))
    w = df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
    return (w.trigger(availableNow=True) if available_now else w.trigger(processingTime="200 milliseconds")).start()


def test_stream_stopped_and_restarted_mid_stream_delivers_each_message_once(env):
    brokers, _c, spark, host, tmp = env
    create_topic(env, "SparkStreamT")
    first = produce(env, "SparkStreamT", 36, "s1")
    out, ckpt = tmp / "stream-out", tmp / "stream-ckpt"
    q = _start_stream(env, "SparkStreamT", out, ckpt, available_now=False)
    try:
        # stop once a micro-batch (of at most 6 of the 36 messages) has been written
        assert wait_until(lambda: any(p["numInputRows"] > 0 for p in q.recentProgress), 120, 0.05), q.exception()
    finally:
        q.stop()
    done = sum(p["numInputRows"] for p in q.recentProgress)
    assert 0 < done < len(first), f"not stopped mid-stream: {done} of {len(first)} read"
    second = produce(env, "SparkStreamT", 12, "s2")  # sent while the query is down
    q = _start_stream(env, "SparkStreamT", out, ckpt, available_now=True)
    assert q.awaitTermination(180), "the restarted query did not finish"
    assert q.exception() is None
    rows = spark.read.parquet(str(out)).collect()
    got = sorted((r.brokerName, r.queueId, r.queueOffset, r.uniqKey, bytes(r.body)) for r in rows)
    exp = sorted((e["brokerName"], e["queueId"], e["queueOffset"], e["msgId"], e["body"].encode())
                 for e in first + second)
    assert got == exp  # each message once: nothing lost, nothing twice
    # option group: the query committed its offsets to both brokers, and mqadmin consumerProgress shows
    # the job's lag (one micro-batch behind: Spark commits a micro-batch's offsets to the source when it
    # plans the next one)
    out = clients.mqadmin(host, JAVA, ["consumerProgress", "-g", "spark_stream_g"], brokers.ns_addr)
    lines = [ln.split() for ln in out.splitlines() if ln.startswith("SparkStreamT ")]
    committed = {(f[1], int(f[2])): (int(f[3]), int(f[4])) for f in lines}  # (broker offset, consumer offset)
    assert set(committed) == {("broker-py", 0), ("broker-py", 1), ("broker-java", 0), ("broker-java", 1)}, out
    assert sum(b for b, _c in committed.values()) == len(first + second), out
    assert all(0 <= c <= b for b, c in committed.values()) and sum(c for _b, c in committed.values()) > 0, out


def test_sink_output_consumed_by_java_push_consumer_byte_identical(env):
    brokers, _c, spark, host, tmp = env
    create_topic(env, "SparkSinkT")
    rows = []
    for i in range(30):
        body = bytes([i, 0, 255, 254]) + os.urandom(8) + f"row-{i}".encode()  # not UTF-8
        rows.append((body, "even" if i % 2 == 0 else "odd", [f"sk-{i}", f"alt-{i}"], {"origin": "spark", "n": str(i)}))
    df = spark.createDataFrame(rows, "body binary, tags string, keys array<string>, properties map<string,string>")
    df.repartition(3).write.format("rocketmq").option("nameServer", brokers.ns_addr).option("topic", "SparkSinkT") \
        .mode("append").save()
    ev = clients.harness(host, JAVA, ["consume-push", "-n", brokers.ns_addr, "-t", "SparkSinkT", "-g", "spark_sink_java",
                                      "-c", str(len(rows)), "--from", "first", "--timeout-ms", "60000",
                                      "--linger-ms", "2000", "--max-body-print", "4096"], timeout=120)
    got = []
    for e in ev.of("received"):
        body = base64.b64decode(e["bodyBase64"]) if "bodyBase64" in e else e["body"].encode()
        props = {k: v for k, v in e["properties"].items() if k in ("origin", "n")}
        got.append((body, e["tags"], e["keys"], props))
    exp = [(b, t, " ".join(k), p) for b, t, k, p in rows]
    assert sorted(got) == sorted(exp)  # every row once, bytes as written
    assert {e["brokerName"] for e in ev.of("received")} == {"broker-py", "broker-java"}
    ids = [e["properties"]["SPARK_ROW_ID"] for e in ev.of("received")]
    assert len(set(ids)) == len(rows)


def test_stream_from_topic_to_topic(env):
    """readStream from one topic, writeStream to another in batches of up to 4: each message once,
    bodies and tags kept."""
    brokers, _c, spark, _h, tmp = env
    create_topic(env, "SparkPipeSrc")
    create_topic(env, "SparkPipeDst")
    sent = produce(env, "SparkPipeSrc", 20, "p")
    src = (spark.readStream.format("rocketmq").option("nameServer", brokers.ns_addr).option("topic", "SparkPipeSrc")
           .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", 8).load()
           .select("body", "tags", "keys", "properties"))
    q = (src.writeStream.format("rocketmq").option("nameServer", brokers.ns_addr).option("topic", "SparkPipeDst")
         .option("batchSize", 4)  # SEND_BATCH_MESSAGE to both brokers; the other sink test sends one by one
         .option("checkpointLocation", str(tmp / "pipe-ckpt")).trigger(availableNow=True).start())
    assert q.awaitTermination(180), "the pipe query did not finish"
    assert q.exception() is None
    out = (spark.read.format("rocketmq").option("nameServer", brokers.ns_addr).option("topic", "SparkPipeDst").load()
           .collect())
    assert sorted((bytes(r.body), r.tags, r.keys) for r in out) == sorted(
        (e["body"].encode(), e["tags"], e["keys"]) for e in sent)
    assert len({r.properties["SPARK_ROW_ID"] for r in out}) == len(sent)
