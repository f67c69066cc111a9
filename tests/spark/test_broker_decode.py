"""Broker mode's column-wise decode of pull bodies gives, column by column, the rows of the
message-by-message decode (``PullConsumer.pull``'s MessageExt list through ``to_batch``)."""
from __future__ import annotations

import collections
import zlib

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("numpy")

import pyarrow as pa  # noqa: E402
from rmqpy_spark import broker as B  # noqa: E402
from rmqpy_spark.options import BrokerOptions  # noqa: E402

from rmqpy.client import PullResult, PullStatus  # noqa: E402
from rmqpy.client.requests import decode_pull_body, subscription  # noqa: E402
from rmqpy.protocol import message as M  # noqa: E402
from rmqpy.protocol import sysflag as SF  # noqa: E402

TOPIC = "DecodeT"


def record(i: int, props: str, *, body: bytes | None = None, sys_flag: int = 0, born=("10.0.0.7", 51234),
           store=("192.168.1.20", 10911), topic: str = TOPIC) -> bytes:
    body = (b"body-%d-" % i) * (i % 7 + 1) if body is None else body
    props_b = props.encode("utf-8", "surrogateescape")
    bh, sh = M.host_bytes(born), M.host_bytes(store)
    sys_flag |= (SF.BORNHOST_V6_FLAG if len(bh) == 20 else 0) | (SF.STOREHOSTADDRESS_V6_FLAG if len(sh) == 20 else 0)
    topic_b = topic.encode()
    out = bytearray(M.record_size(sys_flag, len(body), len(topic_b), len(props_b)))
    M.encode_record_into(out, 0, topic_bytes=topic_b, queue_id=1, flag=i % 3, body=body, props_bytes=props_b,
                         sys_flag=sys_flag, born_timestamp=1_700_000_000_000 + i, born_host=bh,
                         store_timestamp=1_700_000_001_000 + i, store_host=sh, reconsume_times=i % 2,
                         prepared_transaction_offset=i * 3, queue_offset=i, physical_offset=5000 + 977 * i)
    return bytes(out)


def props(i: int) -> str:
    # the broker appends WAIT (and a batch's properties) again: a name twice, the last value counts
    return (f"TAGS\x01{'red' if i % 3 else 'blue'}\x02KEYS\x01k-{i} k{i}\x02WAIT\x01true\x02"
            f"UNIQ_KEY\x01AC11000100{i:022X}\x02WAIT\x01{'false' if i % 2 else 'true'}\x02x\x02\x01v\x02")


class FakeConsumer:
    """pull / pull_raw / pull_stream over a list of records (queue offset = index), as a broker
    answers: at most ``per_pull`` records per answer, the offsets in ``hidden`` skipped as its tag
    hash filter skips them (at most ``scan`` offsets looked at per pull: NO_MATCHED_MSG when none
    matched), those below ``gone`` deleted (OFFSET_ILLEGAL), ``delta`` as a static topic's offsetDelta."""

    def __init__(self, records: list[bytes], per_pull: int = 5, delta: int | None = None,
                 hidden: frozenset[int] = frozenset(), scan: int = 1000, gone: int = 0) -> None:
        self.records, self.per_pull, self.delta = records, per_pull, delta
        self.hidden, self.scan, self.gone = hidden, scan, gone
        self.pulls = 0

    def pull_raw(self, mq, offset, max_nums, sub_expression="*", timeout_ms=0):
        self.pulls += 1
        d = self.delta or 0
        o = stop = offset - d
        if o >= len(self.records):
            return PullResult(PullStatus.NO_NEW_MSG, offset, d, d + len(self.records))
        if o < self.gone:  # deleted by retention: the broker moves the consumer to its min offset
            return PullResult(PullStatus.OFFSET_ILLEGAL, self.gone + d, self.gone + d, d + len(self.records))
        found = []
        while stop < min(len(self.records), o + self.scan) and len(found) < min(max_nums, self.per_pull):
            if stop + d not in self.hidden:
                found.append(self.records[stop])
            stop += 1
        status = PullStatus.FOUND if found else PullStatus.NO_MATCHED_MSG
        return PullResult(status, stop + d, d, d + len(self.records), body=b"".join(found) or None,
                          offset_delta=self.delta)

    def pull(self, mq, offset, max_nums, sub_expression="*", timeout_ms=0):
        res = self.pull_raw(mq, offset, max_nums, sub_expression, timeout_ms)
        if res.body:
            res.messages = decode_pull_body(res.body, mq, subscription(mq.topic, sub_expression), res.min_offset,
                                            res.max_offset, res.offset_delta)
        return res

    def pull_stream(self, mq, sub_expression="*", timeout_ms=0):
        return FakeStream(self, mq, sub_expression)


class FakeStream:
    """``PullStream`` over a FakeConsumer: each answer is made when it is received."""

    def __init__(self, c: FakeConsumer, mq, sub_expression: str) -> None:
        self.c, self.mq, self.sub = c, mq, sub_expression
        self.sent: collections.deque = collections.deque()
        self.most = 0  # pulls in flight at most

    def send(self, pulls):
        self.sent.extend(pulls)
        self.most = max(self.most, len(self.sent))

    def receive(self):
        off, n = self.sent.popleft()
        return self.c.pull_raw(self.mq, off, n, self.sub)

    def __enter__(self):
        return self

    def __exit__(self, kind, *exc):
        assert kind is not None or not self.sent, "answers left unread"


def per_message(c: FakeConsumer, r: B.QueueRange, opts: BrokerOptions) -> pa.Table:
    """The rows as broker mode made them before (one pull at a time, one MessageExt per message)."""
    off, rows = r.start, []
    while off < r.end:
        res = c.pull(r.mq, off, min(opts.pull_batch_size, r.end - off), opts.sub_expression)
        rows += [m for m in res.messages if off <= m.queue_offset < r.end]
        off = res.next_begin_offset
    return pa.Table.from_batches([B.to_batch(rows, r.broker)])


def check_same(records: list[bytes], start: int = 0, end: int | None = None, delta: int | None = None,
               sub: str = "*", batch_rows: int = 7, **broker) -> int:
    end = len(records) + (delta or 0) if end is None else end
    opts = BrokerOptions({"nameServer": "127.0.0.1:9876", "topic": TOPIC, "subExpression": sub,
                          "batchRows": str(batch_rows), "pullBatchSize": "32"})
    c = FakeConsumer(records, delta=delta, **broker)
    r = B.QueueRange(TOPIC, "broker-a", 1, start, end)
    want = per_message(c, r, opts)
    got = pa.Table.from_batches(list(B.read_range(c, r, opts)), schema=B.BROKER_ARROW_SCHEMA)
    assert got.schema == want.schema == B.BROKER_ARROW_SCHEMA
    assert got.num_rows == want.num_rows
    for name in want.column_names:
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name
    return got.num_rows


def test_columns_equal_the_message_by_message_decode(monkeypatch):
    def no(*a, **k):
        raise AssertionError("the per-message path ran")

    monkeypatch.setattr(B, "decode_pull_body", no)  # every batch here takes the column-wise decode
    recs = [record(i, props(i)) for i in range(40)]
    assert check_same(recs) == 40
    assert check_same(recs, start=3, end=31) == 28
    assert check_same(recs, sub="blue || green") == 14  # the exact tags, after the broker's hash filter
    assert check_same(recs, delta=1000, start=1005, end=1030) == 25  # a static topic's logical offsets
    assert check_same(recs, batch_rows=1000) == 40


def test_records_the_column_decode_leaves_to_the_per_message_path():
    base = [record(i, props(i)) for i in range(12)]
    body = b"zipped " * 50
    cases = {
        "ipv6 hosts": record(5, props(5), born=("fe80::1", 7), store=("2001:db8::2", 10911)),
        "zlib body": record(5, props(5), body=zlib.compress(body), sys_flag=SF.COMPRESSED_FLAG | SF.COMPRESSION_ZLIB),
        "MIN_OFFSET stored": record(5, props(5) + "MIN_OFFSET\x017\x02"),
        "not UTF-8": record(5, props(5) + "bad\x01\udcff\x02"),
        "no properties": record(5, ""),
    }
    for what, rec in cases.items():
        recs = base[:5] + [rec] + base[6:]
        assert check_same(recs) == 12, what
        assert check_same(recs, sub="red") == (7 if what == "no properties" else 8), what


def test_pulls_sent_ahead_give_the_rows_of_one_pull_at_a_time(monkeypatch):
    """Answers shorter than predicted (gaps), a filter that makes the broker skip further than
    predicted (overlaps) and pulls that match nothing: the rows of pulling one at a time."""
    recs = [record(i, props(i)) for i in range(300)]
    streams: list[FakeStream] = []
    orig = FakeConsumer.pull_stream

    def recording(self, *a, **k):
        streams.append(orig(self, *a, **k))
        return streams[-1]

    monkeypatch.setattr(FakeConsumer, "pull_stream", recording)
    assert check_same(recs, per_pull=32) == 300
    assert streams[-1].most == B.PULLS_IN_FLIGHT
    assert check_same(recs, per_pull=5) == 300  # the first guess (32 a pull) is wrong
    assert check_same(recs, per_pull=32, start=17, end=250, batch_rows=64) == 233
    hidden = frozenset(i for i in range(300) if i % 7 in (2, 3) or 100 <= i < 160)
    for per_pull, scan in ((32, 1000), (5, 1000), (32, 20), (3, 4)):
        n = check_same(recs, per_pull=per_pull, hidden=hidden, scan=scan)
        assert n == 300 - len(hidden), (per_pull, scan)
    assert check_same(recs, per_pull=32, hidden=hidden, delta=1000, start=1010, end=1290) \
        == sum(1 for i in range(1010, 1290) if i not in hidden)


def test_pulls_sent_ahead_into_deleted_offsets_fail_or_skip_them():
    recs = [record(i, props(i)) for i in range(200)]
    r = B.QueueRange(TOPIC, "broker-a", 1, 0, 200)

    def read(fail: str, **broker) -> list[int]:
        opts = BrokerOptions({"nameServer": "127.0.0.1:9876", "topic": TOPIC, "failOnDataLoss": fail})
        batches = B.read_range(FakeConsumer(recs, **broker), r, opts)
        return [o for b in batches for o in b.column("queueOffset").to_pylist()]

    for per_pull in (5, 32):
        assert read("false", gone=70, per_pull=per_pull) == list(range(70, 200))
        with pytest.raises(B.DataLossError, match="OFFSET_ILLEGAL"):
            read("true", gone=70, per_pull=per_pull)
