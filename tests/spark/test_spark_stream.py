"""spark.readStream.format("rocketmq"): exact consume queue offset ranges per micro-batch."""
from __future__ import annotations

import json
import time

from tests.spark.storegen import Msg, make_store


def _run(spark, root, out, ckpt, *, available_now=True, **opts):
    r = spark.readStream.format("rocketmq")
    for k, v in opts.items():
        r = r.option(k, v)
    df = r.load(str(root)).select("topic", "queueId", "queueOffset", "msgId", "body")
    w = df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
    q = (w.trigger(availableNow=True) if available_now else w.trigger(processingTime="1 second")).start()
    if available_now:
        q.awaitTermination(120)
    return q


def _read_out(spark, out):
    return sorted((r.topic, r.queueId, r.queueOffset, r.msgId) for r in spark.read.parquet(str(out)).collect())


def _exp(msgs):
    return sorted((m.topic, m.queue_id, m.queue_offset, m.msg_id) for m in msgs)


def test_available_now_then_restart_reads_only_new_messages(spark, tmp_path):
    root, out, ckpt = tmp_path / "store", tmp_path / "out", tmp_path / "ckpt"
    w = make_store(str(root), n=90)
    w.close()
    q = _run(spark, root, out, ckpt)
    assert q.exception() is None
    assert _read_out(spark, out) == _exp(w.dispatched())
    last = q.lastProgress["sources"][0]["endOffset"]
    end = json.loads(last) if isinstance(last, str) else last
    assert end["TopicA"]["0"] == sum(1 for m in w.dispatched() if (m.topic, m.queue_id) == ("TopicA", 0))
    # the broker goes on writing (and a new topic appears); the restarted query picks up exactly the rest
    for i in range(40):
        w.add(Msg("TopicNew" if i % 4 == 0 else "TopicB", i % 2, f"later-{i}".encode(), tags="L"))
    w.close()
    q = _run(spark, root, out, ckpt)
    assert q.exception() is None
    got = _read_out(spark, out)
    assert got == _exp(w.dispatched())
    assert len(set(got)) == len(got)


def test_max_messages_per_trigger_splits_into_batches(spark, tmp_path):
    root, out, ckpt = tmp_path / "store", tmp_path / "out", tmp_path / "ckpt"
    w = make_store(str(root), n=60, extras=False)
    w.close()
    q = _run(spark, root, out, ckpt, maxMessagesPerTrigger=25)
    assert q.exception() is None
    batches = [p for p in q.recentProgress if p["numInputRows"] > 0]
    assert [p["numInputRows"] for p in batches] == [25, 25, 10]
    assert _read_out(spark, out) == _exp(w.dispatched())


def test_starting_offsets_latest_and_json(spark, tmp_path):
    root = tmp_path / "store"
    w = make_store(str(root), n=60, extras=False)
    w.close()
    q = _run(spark, root, tmp_path / "o1", tmp_path / "c1", startingOffsets="latest")
    assert q.exception() is None
    assert q.lastProgress is None or all(p["numInputRows"] == 0 for p in q.recentProgress)
    start = {"TopicA": {"0": 2, "1": -1}, "TopicB": {"2": -2}}
    q = _run(spark, root, tmp_path / "o2", tmp_path / "c2", startingOffsets=json.dumps(start), topics="TopicA,TopicB")
    assert q.exception() is None
    exp = [m for m in w.dispatched()
           if (m.topic == "TopicA" and m.queue_id == 0 and m.queue_offset >= 2)
           or (m.topic == "TopicA" and m.queue_id not in (0, 1)) or m.topic == "TopicB"]
    assert _read_out(spark, tmp_path / "o2") == _exp(exp)


def test_processing_time_trigger_follows_a_writer(spark, tmp_path):
    root, out, ckpt = tmp_path / "store", tmp_path / "out", tmp_path / "ckpt"
    w = make_store(str(root), n=30, extras=False)
    w.close()
    q = _run(spark, root, out, ckpt, available_now=False)
    try:
        for round_ in range(2):
            deadline = time.time() + 60
            while time.time() < deadline:
                if q.exception() is not None:
                    raise q.exception()
                try:
                    if len(_read_out(spark, out)) == len(w.dispatched()):
                        break
                except Exception:  # no parquet file yet
                    pass
                time.sleep(1)
            assert _read_out(spark, out) == _exp(w.dispatched())
            for i in range(15):
                w.add(Msg("TopicC", i % 4, f"live-{round_}-{i}".encode()))
            w.close()
    finally:
        q.stop()
    assert len(_read_out(spark, out)) == len(set(_read_out(spark, out)))
