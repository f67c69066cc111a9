"""spark.read.format("rocketmq") on a local[2] SparkSession."""
from __future__ import annotations

import datetime as dt

import pytest

from tests.spark.storegen import make_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("sparkstore")
    w = make_store(str(root), n=600)
    w.close()
    return root, w


def _key(r):
    return r["commitLogOffset"]


def test_batch_rows_equal_the_stored_messages(spark, store):
    root, w = store
    df = spark.read.format("rocketmq").option("splitBytes", 9000).load(str(root))
    assert df.rdd.getNumPartitions() > 2
    rows = sorted(df.collect(), key=_key)
    assert len(rows) == len(w.messages)
    for r, m in zip(rows, w.messages):
        assert (r.topic, r.queueId, r.queueOffset, r.commitLogOffset, r.size) == (
            m.topic, m.queue_id, m.queue_offset, m.commit_log_offset, m.size)
        assert (r.msgId, r.uniqKey, r.tags, r.keys, bytes(r.body)) == (m.msg_id, m.uniq_key, m.tags, m.keys, m.body)
        assert dict(r.properties) == m.properties and r.sysFlag == m.sys_flag and r.flag == m.flag
        assert int(r.storeTimestamp.replace(tzinfo=dt.timezone.utc).timestamp() * 1000) == m.store_ts
    assert df.schema.simpleString().startswith("struct<topic:string,queueId:int,queueOffset:bigint")


def test_consumequeue_partitioning_gives_the_dispatched_messages(spark, store):
    root, w = store
    df = spark.read.format("rocketmq").option("partitioning", "consumequeue").option("unitsPerSplit", 30) \
        .load(str(root))
    got = sorted((r.topic, r.queueId, r.queueOffset, r.msgId) for r in df.select(
        "topic", "queueId", "queueOffset", "msgId").collect())
    exp = sorted((m.topic, m.queue_id, m.queue_offset, m.msg_id) for m in w.dispatched())
    assert got == exp


@pytest.mark.parametrize("partitioning", ["commitlog", "consumequeue"])
def test_options_topics_queue_ids_and_time(spark, store, partitioning):
    root, w = store
    mid = w.messages[len(w.messages) // 2].store_ts
    iso = dt.datetime.fromtimestamp(mid / 1000, dt.timezone.utc).isoformat()
    df = (spark.read.format("rocketmq").option("partitioning", partitioning).option("topics", "TopicA,TopicC")
          .option("queueIds", "0,3").option("startTime", iso).load(str(root)))
    got = sorted(r.commitLogOffset for r in df.select("commitLogOffset").collect())
    pool = w.messages if partitioning == "commitlog" else w.dispatched()
    exp = sorted(m.commit_log_offset for m in pool
                 if m.topic in ("TopicA", "TopicC") and m.queue_id in (0, 3) and m.store_ts >= mid)
    assert got == exp and got
    df = spark.read.format("rocketmq").option("partitioning", partitioning).option("endTime", str(mid)).load(str(root))
    assert df.count() == sum(1 for m in pool if m.store_ts < mid)


@pytest.mark.parametrize("pushdown", ["true", "false"])
def test_where_on_topic_and_time_with_and_without_pushdown(spark, store, pushdown):
    from pyspark.sql import functions as F
    root, w = store
    mid = w.messages[len(w.messages) // 3].store_ts
    old = spark.conf.get("spark.sql.python.filterPushdown.enabled", "false")
    spark.conf.set("spark.sql.python.filterPushdown.enabled", pushdown)
    try:
        t = F.lit(dt.datetime.fromtimestamp(mid / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")) \
            .cast("timestamp")
        df = spark.read.format("rocketmq").load(str(root)).where(
            (F.col("topic") == "TopicB") & (F.col("storeTimestamp") > t) & F.col("queueId").isin(1, 2))
        plan = df._jdf.queryExecution().executedPlan().toString()
        got = sorted(r.commitLogOffset for r in df.select("commitLogOffset").collect())
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", old)
    exp = sorted(m.commit_log_offset for m in w.messages
                 if m.topic == "TopicB" and m.store_ts > mid and m.queue_id in (1, 2))
    assert got == exp and got
    if pushdown == "true":  # the filters went into the reader, Spark keeps only the null checks
        assert "TopicB" not in plan, plan


def test_transaction_records_are_all_there_and_filterable(spark, store):
    root, w = store
    df = spark.read.format("rocketmq").load(str(root))
    rows = df.where("(sysFlag & 12) = 4").collect()  # TRANSACTION_PREPARED_TYPE
    assert [r.keys for r in rows] == ["k-prepared"]
    commit = df.where("(sysFlag & 12) = 8").collect()
    assert [r.preparedTransactionOffset for r in commit] == [rows[0].commitLogOffset]


def test_find_by_key_example_query(spark, store):
    from pyspark.sql import functions as F
    root, w = store
    df = spark.read.format("rocketmq").load(str(root))
    hit = df.where(F.array_contains(F.split("keys", " "), "alt-77")).select("msgId", "uniqKey").collect()
    m = w.messages[77]
    assert [(r.msgId, r.uniqKey) for r in hit] == [(m.msg_id, m.uniq_key)]


def test_empty_or_missing_store(spark, tmp_path):
    (tmp_path / "commitlog").mkdir()
    assert spark.read.format("rocketmq").load(str(tmp_path)).count() == 0
    with pytest.raises(Exception):  # noqa: B017 (the JVM error class varies with the Spark version)
        spark.read.format("rocketmq").load(str(tmp_path / "nope")).count()
