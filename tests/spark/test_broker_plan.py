"""Broker mode's planning (offsets resolved per queue, ranges, trigger caps, data loss) and the sink's
schema check, without brokers; reading through real brokers is tests/interop/test_spark_cluster_java.py."""
from __future__ import annotations

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
