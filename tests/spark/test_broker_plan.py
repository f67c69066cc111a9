"""Broker mode's planning (offsets resolved per queue, ranges, trigger caps, data loss) and the sink's
schema check, without brokers; reading through real brokers is tests/interop/test_spark_cluster_java.py."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("pyarrow")

from rmqpy_spark import broker as B  # noqa: E402
from rmqpy_spark.options import OptionError, SinkOptions, broker_offsets, offsets_json, parse_offsets_json  # noqa: E402
from rmqpy_spark.sink import check_schema, row_id  # noqa: E402

BOUNDS = {("T", "a", 0): (5, 20), ("T", "a", 1): (0, 3), ("T", "b", 0): (0, 0)}


def test_resolve_named_queues_and_defaults():
    spec = broker_offsets("startingOffsets", '{"T": {"a": {"0": 7, "1": -1}}}')
    assert B.resolve(spec, BOUNDS, "earliest") == {("T", "a", 0): 7, ("T", "a", 1): 3, ("T", "b", 0): 0}
    assert B.resolve("latest", BOUNDS, "earliest") == {("T", "a", 0): 20, ("T", "a", 1): 3, ("T", "b", 0): 0}
    end = broker_offsets("endingOffsets", '{"T": {"a": {"0": 9}}}')
    assert B.resolve(end, BOUNDS, "latest") == {("T", "a", 0): 9, ("T", "a", 1): 3, ("T", "b", 0): 0}
    with pytest.raises(OptionError, match="broker 'c'"):
        B.resolve(broker_offsets("startingOffsets", '{"T": {"c": {"0": 1}}}'), BOUNDS, "earliest")


def test_data_loss_fails_or_moves_on():
    start = {("T", "a", 0): 2, ("T", "a", 1): 9, ("T", "b", 0): 0}
    with pytest.raises(B.DataLossError, match="offsets 2..4 were deleted"):
        B.check_loss(start, BOUNDS, fail=True)
    assert B.check_loss(start, BOUNDS, fail=False) == {("T", "a", 0): 5, ("T", "a", 1): 3, ("T", "b", 0): 0}


def test_plan_splits_large_queues_and_cap_shares_evenly():
    start = {("T", "a", 0): 5, ("T", "a", 1): 0}
    end = {("T", "a", 0): 20, ("T", "a", 1): 3, ("T", "b", 0): 0}
    ranges = B.plan(start, end, 6)
    assert [(r.broker, r.queue_id, r.start, r.end) for r in ranges] == [
        ("a", 0, 5, 11), ("a", 0, 11, 17), ("a", 0, 17, 20), ("a", 1, 0, 3)]
    capped = B.cap(start, end, 7)
    assert capped == {("T", "a", 0): 9, ("T", "a", 1): 3, ("T", "b", 0): 0}  # 4 + 3 offsets
    assert B.cap(start, end, 100) == end


def test_offsets_json_round_trip_is_rocketmq_spark_layout():
    offs = {("T", "a", 0): 9, ("T", "a", 1): 3, ("U", "b", 2): 0}
    js = offsets_json(offs)
    assert js == {"T": {"a": {"0": 9, "1": 3}}, "U": {"b": {"2": 0}}}
    assert parse_offsets_json(js) == offs


def test_sink_schema_check():
    opts = SinkOptions({"nameserver": "h:1", "topic": "T"})
    check_schema([("body", "binary"), ("tags", "string"), ("keys", "array<string>"),
                  ("properties", "map<string,string>"), ("queueOffset", "bigint")], opts)
    with pytest.raises(OptionError, match="body"):
        check_schema([("value", "binary")], opts)
    with pytest.raises(OptionError, match="unknown column"):
        check_schema([("body", "binary"), ("tag", "string")], opts)
    with pytest.raises(OptionError, match="column tags must be string"):
        check_schema([("body", "binary"), ("tags", "int")], opts)
    with pytest.raises(OptionError, match="option topic or a topic column"):
        check_schema([("body", "string")], SinkOptions({"nameserver": "h:1"}))


def test_row_id_depends_on_where_the_row_comes_from_only():
    assert row_id("w", 1, 2) == row_id("w", 1, 2)
    assert len({row_id("w", 1, 2), row_id("w", 2, 1), row_id("v", 1, 2)}) == 3
    assert len(row_id("w", 0, 0)) == 32


class _RecordingProducer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], object]] = []

    def send(self, msg, queue=None):
        self.calls.append(("send", [msg.body.decode()], queue))
        return SimpleNamespace(status="SEND_OK")

    def send_batch(self, msgs, queue=None):
        self.calls.append(("batch", [m.body.decode() for m in msgs], queue))
        return SimpleNamespace(status="SEND_OK")

    def shutdown(self) -> None:
        pass


def test_sink_batch_size_groups_consecutive_rows_of_one_topic():
    """Option batchSize N sends up to N consecutive rows of one topic (and target queue) in one batch,
    in row order; a topic change or the size cap starts the next one; batchSize 1 sends each alone."""
    import pyarrow as pa
    from rmqpy_spark.sink import Sender

    rows = pa.RecordBatch.from_pydict({"body": [f"m{i}".encode() for i in range(7)],
                                       "topic": ["A", "A", "A", "A", "A", "B", "A"]})
    sender = Sender(SinkOptions({"nameserver": "h:1", "batchsize": "3"}))
    sender.producer = rec = _RecordingProducer()
    assert sender.write(iter([rows]), "w", 0) == 7
    assert [(kind, bodies) for kind, bodies, _ in rec.calls] == [
        ("batch", ["m0", "m1", "m2"]), ("batch", ["m3", "m4"]), ("send", ["m5"]), ("send", ["m6"])]
    single = Sender(SinkOptions({"nameserver": "h:1", "topic": "A"}))
    single.producer = rec = _RecordingProducer()
    single.write(iter([rows.select(["body"])]), "w", 0)
    assert [kind for kind, _, _ in rec.calls] == ["send"] * 7
