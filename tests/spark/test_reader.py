"""The store scanner behind the Spark data source, without Spark (spark/rmqpy_spark/reader.py)."""
from __future__ import annotations

import hashlib
import os
import struct
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "spark"))
pytest.importorskip("pyarrow")
pytest.importorskip("numpy")

from rmqpy_spark import reader as R  # noqa: E402

from tests.spark.storegen import Msg, StoreWriter, make_store  # noqa: E402


def _check_rows(rows, msgs):
    assert len(rows) == len(msgs)
    for r, m in zip(rows, msgs):
        assert r["topic"] == m.topic and r["queueId"] == m.queue_id
        assert r["queueOffset"] == m.queue_offset and r["commitLogOffset"] == m.commit_log_offset
        assert r["size"] == m.size and r["flag"] == m.flag and r["sysFlag"] == m.sys_flag
        assert r["msgId"] == m.msg_id and r["uniqKey"] == m.uniq_key
        assert r["tags"] == m.tags and r["keys"] == m.keys
        assert dict(r["properties"]) == m.properties
        assert r["body"] == m.body
        assert r["preparedTransactionOffset"] == m.prepared_offset
        assert int(r["storeTimestamp"].timestamp() * 1000) == m.store_ts
        assert int(r["bornTimestamp"].timestamp() * 1000) == m.born_ts


def _snapshot(root: Path) -> dict:
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.stat()
        out[str(p)] = (st.st_mtime_ns, st.st_size, hashlib.md5(p.read_bytes()).hexdigest() if p.is_file() else None)
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    w = make_store(str(root))
    w.close()
    return root, w


def test_all_fields_match_what_was_written(store):
    root, w = store
    assert len(R.list_commitlog(str(root))) >= 3
    before = _snapshot(root)
    rows = R.read_all(str(root)).to_pylist()
    _check_rows(rows, w.messages)
    v6 = [r for r in rows if r["tags"] == "V6"][0]
    assert v6["bornHost"] == "[::1]:5555" and v6["storeHost"] == "[fe80::1]:10911" and len(v6["msgId"]) == 56
    assert rows[0]["bornHost"] == "10.1.2.3:40000" and rows[0]["storeHost"] == "127.0.0.1:10911"
    assert _snapshot(root) == before  # strictly read-only: nothing written, created or touched


@pytest.mark.parametrize("split", [997, 4096, 20000, 1 << 30])
def test_any_split_of_the_files_gives_each_record_once(store, split):
    root, w = store
    exp = [m.commit_log_offset for m in w.messages]
    got = []
    for sp in R.plan_commitlog(str(root), split):
        for b in R.scan_commitlog_file(sp.path, sp.base, sp.start, sp.end, chunk=3000):
            got.extend(b.column("commitLogOffset").to_pylist())
    assert got == exp
    got = []  # fixed-position ranges everywhere: each range re-synchronises
    for base, path, size in R.list_commitlog(str(root)):
        for a in range(0, size, split):
            for b in R.scan_commitlog_file(path, base, a, min(size, a + split), chunk=3000):
                got.extend(b.column("commitLogOffset").to_pylist())
    assert got == exp


def test_leftover_records_past_the_written_end_are_not_returned(tmp_path):
    w = StoreWriter(str(tmp_path), 1 << 20)
    for i in range(40):
        w.add(Msg("T", 0, f"m{i}".encode() * 30))
    w.close()
    # a truncated past: record 30 torn (zeroed header), 31.. are intact leftovers naming their offsets
    path = tmp_path / "commitlog" / ("%020d" % 0)
    b = bytearray(path.read_bytes())
    b[w.messages[30].commit_log_offset:w.messages[30].commit_log_offset + 40] = bytes(40)
    path.write_bytes(bytes(b))
    exp = [m.commit_log_offset for m in w.messages[:30]]
    for split in (500, 2000, 1 << 20):
        got = [o for sp in R.plan_commitlog(str(tmp_path), split)
               for bt in R.scan_commitlog_file(sp.path, sp.base, sp.start, sp.end)
               for o in bt.column("commitLogOffset").to_pylist()]
        assert got == exp, split


def test_record_copied_into_a_body_does_not_fool_resync(tmp_path):
    w = StoreWriter(str(tmp_path), 1 << 16)
    first = w.add(Msg("T", 0, b"x" * 50))
    w.close()
    raw = open(tmp_path / "commitlog" / ("%020d" % 0), "rb").read()[:first.size]
    for i in range(40):  # bodies that hold whole stored records
        w.add(Msg("T", 0, b"pad" * (i % 5) + raw + b"tail"))
    w.close()
    offs = [m.commit_log_offset for m in w.messages]
    for split in (50, 333, 1000):
        got = []
        for sp in R.plan_commitlog(str(tmp_path), split):
            for b in R.scan_commitlog_file(sp.path, sp.base, sp.start, sp.end):
                got.extend(b.column("commitLogOffset").to_pylist())
        assert got == offs


def test_stops_at_torn_or_corrupt_tail(tmp_path):
    w = StoreWriter(str(tmp_path), 1 << 20)
    for i in range(20):
        w.add(Msg("T", i % 2, f"m{i}".encode() * 10))
    # a half-written record: header claims 300 bytes, only part written
    torn = struct.pack(">iI", 300, 0xDAA320A7) + b"\x01" * 40
    w.close(torn_tail=torn)
    assert len(R.read_all(str(tmp_path))) == 20
    # corrupt the CRC of the last complete record: the data ends before it
    path = tmp_path / "commitlog" / ("%020d" % 0)
    b = bytearray(path.read_bytes())
    last = w.messages[-1]
    b[last.commit_log_offset + 8] ^= 0x55
    path.write_bytes(bytes(b))
    t = R.read_all(str(tmp_path))
    assert t.column("commitLogOffset").to_pylist() == [m.commit_log_offset for m in w.messages[:-1]]
    assert len(R.read_all(str(tmp_path), R.ScanOptions(check_crc=False))) == 20
    # the consume queue unit of that record is not offered (queue_bounds checks the record)
    lo, hi = R.queue_bounds(str(tmp_path), "T", last.queue_id)
    assert hi == last.queue_offset


def test_consume_queue_ranges(store):
    root, w = store
    n = 0
    for t, q in R.list_queues(str(root)):
        lo, hi = R.queue_bounds(str(root), t, q)
        exp = [m for m in w.dispatched() if (m.topic, m.queue_id) == (t, q)]
        assert (lo, hi) == (0, len(exp))
        for a, b in ((lo, hi), (1, 3), (hi - 1, hi)):
            rows = [r for bt in R.read_queue_range(str(root), t, q, a, b) for r in bt.to_pylist()]
            _check_rows(rows, exp[a:b])
        n += len(exp)
    assert n == len(w.dispatched()) == len(w.messages) - 1  # the PREPARED record has no unit


def test_filters_in_the_reader(store):
    root, w = store
    o = R.ScanOptions(topics=frozenset({"TopicB"}), queue_ids=frozenset({1, 2}))
    rows = R.read_all(str(root), o).to_pylist()
    _check_rows(rows, [m for m in w.messages if m.topic == "TopicB" and m.queue_id in (1, 2)])
    mid = w.messages[len(w.messages) // 2].store_ts
    rows = R.read_all(str(root), R.ScanOptions(min_store_ms=mid)).to_pylist()
    _check_rows(rows, [m for m in w.messages if m.store_ts >= mid])
    rows = R.read_all(str(root), R.ScanOptions(max_store_ms=mid)).to_pylist()
    _check_rows(rows, [m for m in w.messages if m.store_ts < mid])


def test_compressed_body_is_inflated_unless_asked(store):
    root, w = store
    z = [m for m in w.messages if m.tags == "Z"][0]
    raw = R.read_all(str(root), R.ScanOptions(decompress=False)).to_pylist()
    assert [r["body"] for r in raw if r["tags"] == "Z"] == [z.stored_body]


def test_store_written_by_rmqpy_message_store(tmp_path):
    from twisted.internet.task import Clock

    from rmqpy.protocol.message import MessageExtBrokerInner, create_uniq_id
    from rmqpy.store.config import MessageStoreConfig
    from rmqpy.store.message_store import MessageStore

    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), storePathCommitLog=str(tmp_path / "commitlog"),
                             mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=20 * 100,
                             maxHashSlotNum=100, maxIndexNum=400)
    clock = Clock()
    clock.advance(time.time())
    s = MessageStore(cfg, ("127.0.0.1", 10911), clock)
    assert s.load()
    s.start()
    sent = []
    for i in range(400):
        m = MessageExtBrokerInner(topic=f"RT{i % 2}", queue_id=i % 3, body=f"rmqpy-{i}".encode() * 20,
                                  properties={"TAGS": f"t{i % 4}", "KEYS": f"k{i}", "UNIQ_KEY": create_uniq_id(),
                                              "WAIT": "true"},
                                  born_host=("127.0.0.1", 50000), born_timestamp=int(time.time() * 1000))
        out = []
        s.put_message(m).addCallback(out.append)
        a = out[0].append_message_result
        sent.append((m, a))
        clock.advance(0.001)
    s.shutdown()
    assert len(R.list_commitlog(str(tmp_path))) > 1
    before = _snapshot(tmp_path)
    rows = R.read_all(str(tmp_path)).to_pylist()
    assert len(rows) == 400
    for r, (m, a) in zip(rows, sent):
        assert (r["topic"], r["queueId"], r["queueOffset"], r["msgId"]) == (m.topic, m.queue_id, a.logics_offset,
                                                                            a.msg_id)
        assert r["body"] == m.body and r["keys"] == m.keys and r["uniqKey"] == m.uniq_key
    by_q = {}
    for t, q in R.list_queues(str(tmp_path)):
        lo, hi = R.queue_bounds(str(tmp_path), t, q)
        by_q[(t, q)] = [r["msgId"] for b in R.read_queue_range(str(tmp_path), t, q, lo, hi) for r in b.to_pylist()]
    assert sum(map(len, by_q.values())) == 400
    for (m, a) in sent:
        assert by_q[(m.topic, m.queue_id)][a.logics_offset] == a.msg_id
    assert _snapshot(tmp_path) == before
    assert not os.path.exists(tmp_path / "abort")


@pytest.mark.parametrize("host", ["10.0.0.1", "::1"])  # vectorised path / per-record path (IPv6)
def test_a_property_name_given_twice_keeps_the_last_value(tmp_path, host):
    # as a 5.x broker stores batch messages: the message's properties, then the batch's
    w = StoreWriter(str(tmp_path), 1 << 16)
    w.add(Msg("T", 0, b"a", born_host=(host, 1), raw_props="KEYS\x01k1\x02UNIQ_KEY\x01AAAA\x02WAIT\x01true\x02UNIQ_KEY\x01BBBB\x02"
                                          "WAIT\x01false\x02x\x02\x01y\x02\x01yy\x02zz\x01\x02"))
    w.add(Msg("T", 0, b"b", raw_props="TAGS\x01t\x02UNIQ_KEY\x01CCCC"))  # no trailing separator
    w.add(Msg("T", 0, b"c", raw_props=""))
    w.close()
    rows = R.read_all(str(tmp_path)).to_pylist()
    assert [r["uniqKey"] for r in rows] == ["BBBB", "CCCC", None]
    assert dict(rows[0]["properties"]) == {"KEYS": "k1", "UNIQ_KEY": "BBBB", "WAIT": "false"}
    assert len(rows[0]["properties"]) == 3
    assert rows[0]["keys"] == "k1" and rows[1]["tags"] == "t" and rows[2]["properties"] == []


def test_scans_beside_a_writer_see_only_complete_records(tmp_path):
    """A writer appends records in torn pieces (header last, as a crash could leave them in any
    order); every scan returns a prefix of what was written, each record whole."""
    import threading

    from rmqpy.protocol.message import MessageExtBrokerInner, encode_record

    size = 1 << 20
    d = tmp_path / "commitlog"
    d.mkdir()
    path = d / ("%020d" % 0)
    path.write_bytes(bytes(size))
    recs = []
    pos = 0
    for i in range(300):
        m = MessageExtBrokerInner(topic="W", queue_id=0, body=(b"%d-" % i) * (1 + i % 40),
                                  properties={"KEYS": f"k{i}"}, born_host=("127.0.0.1", 1),
                                  store_host=("127.0.0.1", 2))
        r = encode_record(m, queue_offset=i, physical_offset=pos, store_timestamp=1000 + i)
        recs.append((pos, r))
        pos += len(r)
    done = threading.Event()

    def writer():
        fd = os.open(path, os.O_WRONLY)
        try:
            for i, (off, r) in enumerate(recs):
                cut = len(r) // 2
                pieces = [(off + cut, r[cut:]), (off + 8, r[8:cut]), (off, r[:8])]  # size + magic last
                if i % 3 == 0:
                    pieces.reverse()  # header first: the CRC must hold the record back
                for o, b in pieces:
                    os.pwrite(fd, b, o)
                    time.sleep(0.0002)
        finally:
            os.close(fd)
            done.set()

    t = threading.Thread(target=writer)
    t.start()
    scans = 0
    offsets = [o for o, _r in recs]
    while True:
        last = done.is_set()
        got = R.read_all(str(tmp_path)).column("commitLogOffset").to_pylist()
        assert got == offsets[:len(got)]
        scans += 1
        if last:
            break
    t.join()
    assert got == offsets and scans > 1


def _walk_reference(mv, pos, range_end, limit, base, check_crc=True):
    starts, reason, pos = R._walk_records(mv, pos, range_end, limit, base, check_crc, 1 << 30)
    return starts, reason or R.STOP_RANGE, pos


def test_vectorised_walk_agrees_with_the_record_by_record_walk(tmp_path):
    """walk() checks runs of records with numpy; any damage must stop it where the careful
    record-by-record walk stops, with the same reason."""
    import random

    from rmqpy.protocol import sysflag as SF
    w = StoreWriter(str(tmp_path), 1 << 20)
    for i in range(60):
        w.add(Msg(f"T{i % 3}", i % 4, os.urandom(i * 7 % 300), tags="a" if i % 2 else None,
                  props={"k": "v" * (i % 9)}, born_host=("::1", 5) if i == 45 else ("10.1.2.3", 40000),
                  sys_flag=SF.COMPRESSED_FLAG if i % 11 == 0 else 0))
    w.close()
    data = (tmp_path / "commitlog" / ("%020d" % 0)).read_bytes()
    end = w.messages[-1].commit_log_offset + w.messages[-1].size
    rnd = random.Random(7)
    cases = [(bytes(data), 0, end, len(data)), (bytes(data), 0, end // 2, len(data)),
             (bytes(data), 0, end, end - 50)]
    for _ in range(150):
        b = bytearray(data)
        m = rnd.choice(w.messages)
        b[m.commit_log_offset + rnd.randrange(m.size)] ^= 1 << rnd.randrange(8)
        cases.append((bytes(b), 0, end + 30, len(b)))
    for buf, pos, range_end, limit in cases:
        for crc in (True, False):
            assert R.walk(buf, pos, range_end, limit, 0, crc) == _walk_reference(buf, pos, range_end, limit, 0, crc)
            ba = bytearray(buf) + b"\0" * 100  # the scanner reads into a reused, longer bytearray
            assert R.walk(ba, pos, range_end, limit, 0, crc) == _walk_reference(buf, pos, range_end, limit, 0, crc)


def test_crc32_is_zlibs():
    import zlib
    for n in (0, 1, 7, 1000, 70000):
        b = os.urandom(n)
        assert R._crc32(memoryview(b)) == zlib.crc32(b)
