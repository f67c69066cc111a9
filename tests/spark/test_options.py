"""Options of the ``rocketmq`` format: unknown names and invalid values are refused, naming the option;
store-mode batch reads honour topic (singular) and startingOffsets/endingOffsets."""
from __future__ import annotations

import json

import pytest

from tests.spark.storegen import make_store

pytest.importorskip("pyarrow")

from rmqpy_spark.options import BrokerOptions, OptionError, SinkOptions, StoreOptions  # noqa: E402


@pytest.mark.parametrize("opts, named", [
    ({"path": "/s", "topicz": "T"}, "topicz"),
    ({"path": "/s", "checkCRC": "maybe"}, "checkCRC"),
    ({"path": "/s", "checkCRC": "yes"}, "checkCRC"),
    ({"path": "/s", "splitBytes": "lots"}, "splitBytes"),
    ({"path": "/s", "partitioning": "random"}, "partitioning"),
    ({"path": "/s", "topic": "bad topic"}, "topic"),
    ({"path": "/s", "startingOffsets": "{not json"}, "startingOffsets"),
    ({"path": "/s", "endingOffsets": '{"T": {"b": {"0": 1}}}'}, "endingOffsets"),
    ({"path": "/s", "startTime": "yesterday"}, "startTime"),
    ({"path": "/s", "maxOffsetsPerTrigger": "10"}, "maxOffsetsPerTrigger"),  # batch query
    ({"path": "/s", "startingOffsets": "latest"}, "startingOffsets"),  # batch query
    ({"path": "/s", "startingOffsets": '{"T": {"0": 1}}', "partitioning": "commitlog"}, "partitioning"),
])
def test_store_options_refused(opts, named):
    with pytest.raises(OptionError, match=named):
        StoreOptions({k.lower(): v for k, v in opts.items()})


def test_store_stream_options():
    o = StoreOptions({"path": "/s", "maxoffsetspertrigger": "25", "startingoffsets": '{"T": {"1": 5}}'},
                     streaming=True)
    assert o.max_per_trigger == 25 and o.starting == {"T": {1: 5}}
    with pytest.raises(OptionError, match="maxOffsetsPerTrigger"):
        StoreOptions({"path": "/s", "maxoffsetspertrigger": "0"}, streaming=True)
    with pytest.raises(OptionError, match="endingOffsets"):
        StoreOptions({"path": "/s", "endingoffsets": "latest"}, streaming=True)


def test_broker_options():
    o = BrokerOptions({"nameserver": "10.0.0.1:9876;10.0.0.2:9876", "topic": "A,B", "subexpression": "x || y",
                       "startingoffsets": '{"A": {"broker-a": {"0": 23, "1": -2}}}', "pullbatchsize": "64",
                       "pulltimeoutms": "5000", "failondataloss": "false", "group": "g1"})
    assert o.topics == ["A", "B"] and o.pull_batch_size == 64 and o.pull_timeout_ms == 5000
    assert o.starting == {("A", "broker-a", 0): 23, ("A", "broker-a", 1): -2} and o.ending == "latest"
    assert not o.fail_on_data_loss and o.group == "g1"
    s = BrokerOptions({"nameserver": "h:1", "topic": "A"}, streaming=True)
    assert s.starting == "latest"  # as Kafka's and rocketmq-spark's streaming sources


@pytest.mark.parametrize("opts, named", [
    ({"nameServer": "h:1"}, "topic"),
    ({"nameServer": "nohostport", "topic": "T"}, "nameServer"),
    ({"nameServer": "h:1", "topic": "T", "queueIds": "1"}, "queueIds"),  # store-mode option
    ({"nameServer": "h:1", "topic": "T", "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({"nameServer": "h:1", "topic": "T", "pullBatchSize": "0"}, "pullBatchSize"),
    ({"nameServer": "h:1", "topic": "T", "startingOffsets": '{"T": {"0": 1}}'}, "startingOffsets"),
    ({"nameServer": "h:1", "topic": "T", "startingOffsets": '{"T": {"b": {"0": -3}}}'}, "startingOffsets"),
    ({"nameServer": "h:1", "topic": "T", "maxOffsetsPerTrigger": "5"}, "maxOffsetsPerTrigger"),  # batch
    ({"nameServer": "h:1", "topic": "T", "accessKey": "a"}, "secretKey"),
    ({"nameServer": "h:1", "topic": "T", "path": "/s"}, "nameServer"),
])
def test_broker_options_refused(opts, named):
    with pytest.raises(OptionError, match=named):
        BrokerOptions({k.lower(): v for k, v in opts.items()})


def test_sink_options():
    with pytest.raises(OptionError, match="nameServer"):
        SinkOptions({"topic": "T"})
    with pytest.raises(OptionError, match="unknown option 'tag'"):
        SinkOptions({"nameserver": "h:1", "tag": "x"})
    assert SinkOptions({"nameserver": "h:1", "topic": "T"}).topic == "T"


# --------------------------------------------------------------------------- through Spark, store mode

@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("optstore")
    w = make_store(str(root), n=240)
    w.close()
    return root, w


def test_topic_singular_reads_that_topic_only(spark, store):
    root, w = store
    got = sorted(r.msgId for r in spark.read.format("rocketmq").option("topic", "TopicB").load(str(root))
                 .select("msgId").collect())
    exp = sorted(m.msg_id for m in w.messages if m.topic == "TopicB")
    assert got == exp and 0 < len(got) < len(w.messages)


def test_batch_starting_and_ending_offsets(spark, store):
    root, w = store
    starting = json.dumps({"TopicA": {"0": 2, "1": -1}})
    ending = json.dumps({"TopicA": {"0": 5}})
    df = (spark.read.format("rocketmq").option("topic", "TopicA").option("startingOffsets", starting)
          .option("endingOffsets", ending).load(str(root)))
    got = sorted((r.queueId, r.queueOffset) for r in df.select("queueId", "queueOffset").collect())
    ends = {q: sum(1 for m in w.dispatched() if (m.topic, m.queue_id) == ("TopicA", q)) for q in range(4)}
    exp = [(0, o) for o in range(2, 5)] + [(q, o) for q in (2, 3) for o in range(ends[q])]
    assert got == sorted(exp)


def test_invalid_value_fails_the_query_naming_the_option(spark, store):
    root, _w = store
    with pytest.raises(Exception, match="checkCRC must be true or false"):
        spark.read.format("rocketmq").option("checkCRC", "maybe").load(str(root)).collect()
    with pytest.raises(Exception, match="unknown option 'topicz'"):
        spark.read.format("rocketmq").option("topicz", "TopicA").load(str(root)).collect()
