"""A batch put (SEND_BATCH_MESSAGE, ``MessageStore.put_messages``) writes the same bytes as
its messages put one by one (``put_message_now``, each with the batch's properties appended as
the batch path appends them): commit log, consume queues and index files byte for byte, the
same msgIds and queue offsets, the same arrive-listener calls in the same order (issue 29).

Hypothesis draws batches of random bodies, flags, tags, keys, UNIQ_KEYs and other properties,
several batches per store, on consume queue and index files small enough that they roll over
inside a batch. (The commit log is large enough for all of them: a batch goes whole into one
commit log file, rolling over before its first record where single puts would fill the file
first.)"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqpy.protocol.message import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    MessageExtBatch,
    MessageExtBrokerInner,
    decode_batch_body,
    decode_batch_items,
    encode_batch_body,
    encode_batch_records,
    encode_record_into,
    host_bytes,
    properties_to_string,
    record_size,
    string_to_properties,
)
from rmqpy.store.message_store import PutMessageResult

from .conftest import StoreHarness

#: record files only (the checkpoint and config files carry no record bytes)
_DIRS = ("commitlog", "consumequeue", "index")

_text = st.text(st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=("Cs",)),
                min_size=1, max_size=12)
_word = st.text("abcdefgXYZ019_-", min_size=1, max_size=8)
_uniq = st.one_of(st.text("0123456789ABCDEF", min_size=32, max_size=32), _word)


@st.composite
def _properties(draw: Any) -> dict[str, str]:
    props: dict[str, str] = {}
    if draw(st.booleans()):
        props["UNIQ_KEY"] = draw(_uniq)
    if draw(st.booleans()):
        props["TAGS"] = draw(_text)
    if draw(st.booleans()):
        # spaces at either end and doubled: empty keys are skipped by the index
        props["KEYS"] = " ".join(draw(st.lists(st.one_of(_word, st.just("")), min_size=1, max_size=4)))
    for name, value in draw(st.dictionaries(_word.map(lambda w: "p_" + w), _text, max_size=3)).items():
        props[name] = value
    return props


_item = st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), st.binary(max_size=300), _properties())
_batch = st.tuples(
    st.sampled_from(["T", "TopicB", "\u4e3b\u9898"]),
    st.integers(0, 3),
    st.lists(_item, min_size=1, max_size=12),
    st.sampled_from(["", "WAIT\x01true\x02", "WAIT\x01false\x02CLUSTER\x01DefaultCluster\x02",
                     "TAGS\x01batchTag\x02KEYS\x01bk1 bk2\x02"]),
    st.sampled_from([("10.1.2.3", 5555), ("::1", 7)]),
)

#: small consume queue and index files, so that a batch crosses their ends
_SMALL = dict(mappedFileSizeCommitLog=256 * 1024, mappedFileSizeConsumeQueue=20 * 7, maxHashSlotNum=16,
              maxIndexNum=24)


def _files(root: Path) -> dict[str, bytes]:
    out = {}
    for d in _DIRS:
        base = root / d
        for dirpath, _dirs, names in os.walk(base):
            for n in names:
                p = Path(dirpath) / n
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def _inner_properties(props: dict[str, str], batch_props: str) -> str:
    """What the batch path stores as a message's properties: its own, then the batch's."""
    s = properties_to_string(props)
    if batch_props:
        if s and not s.endswith("\x02"):
            s += "\x02"
        s += batch_props
    return s


def _put_both(root: Path, batches: list[Any]) -> tuple[list[Any], list[Any]]:
    """The batches through put_messages into ``root/batch``, their messages one by one into
    ``root/single``; (results, listener calls) of each."""
    outcomes = []
    for name in ("batch", "single"):
        h = StoreHarness(root / name, **_SMALL)
        s = h.open()
        calls: list[tuple[Any, ...]] = []
        s.add_arrive_listener(lambda *a, calls=calls: calls.append(a))
        results = []
        for topic, qid, items, batch_props, born in batches:
            if name == "batch":
                body = encode_batch_body(items)
                out: list[PutMessageResult] = []
                s.put_messages(MessageExtBatch(topic=topic, queue_id=qid, body=body, properties_string=batch_props,
                                               born_host=born, born_timestamp=77)).addCallback(out.append)
                r = out[0]
                a = r.append_message_result
                results.append((r.put_message_status, a.msg_id, a.logics_offset, a.wrote_offset, a.wrote_bytes,
                                a.msg_num) if a is not None else (r.put_message_status,))
            else:
                ids, first = [], None
                wrote = 0
                for flag, mbody, props in items:
                    m = MessageExtBrokerInner(topic=topic, queue_id=qid, body=mbody, flag=flag,
                                              properties_string=_inner_properties(props, batch_props),
                                              born_host=born, born_timestamp=77)
                    r = s.put_message_now(m)
                    assert isinstance(r, PutMessageResult)
                    a = r.append_message_result
                    assert a is not None, r
                    ids.append(a.msg_id)
                    first = first or a
                    wrote += a.wrote_bytes
                assert first is not None
                results.append((r.put_message_status, ",".join(ids), first.logics_offset, first.wrote_offset,
                                wrote, len(items)))
            h.clock.advance(1.7)  # the index entries' time differences are not all 0
        h.close()
        outcomes.append((results, calls))
    return outcomes[0], outcomes[1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_batch, min_size=1, max_size=4))
def test_batch_put_writes_what_single_puts_write(batches):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (b_results, b_calls), (s_results, s_calls) = _put_both(root, batches)
        assert b_results == s_results
        assert b_calls == s_calls
        batch_files = _files(root / "batch")
        single_files = _files(root / "single")
        assert batch_files.keys() == single_files.keys()
        for k in batch_files:
            assert batch_files[k] == single_files[k], k


def test_batch_put_rolls_consume_queue_and_index_files_inside_one_batch(tmp_path):
    """A fixed case that crosses the consume queue's and the index's file ends within one batch
    (7 units per consume queue file, 24 index entries per index file)."""
    items = [(i, bytes([i]) * 1000, {"UNIQ_KEY": "7F00000100002A9F0000%012X" % i, "TAGS": "Tag%d" % (i % 3),
                                     "KEYS": "k%d kk%d" % (i, i)}) for i in range(20)]
    batches = [("T", 1, items[:3], "WAIT\x01true\x02", ("10.1.2.3", 5555)),
               ("T", 1, items[3:], "WAIT\x01true\x02", ("10.1.2.3", 5555))]
    (b_results, b_calls), (s_results, s_calls) = _put_both(tmp_path, batches)
    assert b_results == s_results and b_calls == s_calls
    batch_files = _files(tmp_path / "batch")
    assert len([k for k in batch_files if k.startswith("index")]) >= 2
    assert len([k for k in batch_files if k.startswith("consumequeue")]) >= 3
    assert batch_files == _files(tmp_path / "single")
    # the listener saw each message's properties: its own, then the batch's
    assert b_calls[0][5] == string_to_properties(_inner_properties(items[0][2], "WAIT\x01true\x02"))


_records = st.lists(st.tuples(st.integers(-(1 << 31), (1 << 31) - 1), st.binary(max_size=200),
                              st.binary(max_size=60)), min_size=1, max_size=8)


@settings(max_examples=80, deadline=None)
@given(_records, st.sampled_from([b"T", b"\xe4\xb8\xbb" * 3, b"x" * 127]), st.sampled_from([
    (host_bytes(("10.1.2.3", 5555)), host_bytes(("127.0.0.1", 10911))),
    (host_bytes(("::1", 7)), host_bytes(("127.0.0.1", 10911))),
    (host_bytes(("10.1.2.3", 5555)), host_bytes(("fe80::1", 10911)))]),
    st.integers(0, 1 << 40), st.integers(0, 1 << 40))
def test_encode_batch_records_is_encode_record_into_of_each(records, topic, hosts, queue_offset, phy):
    born, store = hosts
    sys_flag = (BORNHOST_V6_FLAG if len(born) == 20 else 0) | (STOREHOSTADDRESS_V6_FLAG if len(store) == 20 else 0)
    sized = [(flag, body, props, record_size(sys_flag, len(body), len(topic), len(props)))
             for flag, body, props in records]
    total = sum(r[3] for r in sized)
    want = bytearray(total)
    pos = 0
    for i, (flag, body, props, size) in enumerate(sized):
        assert encode_record_into(want, pos, topic_bytes=topic, queue_id=3, flag=flag, body=body, props_bytes=props,
                                  sys_flag=sys_flag, born_timestamp=-5, born_host=born, store_timestamp=1 << 41,
                                  store_host=store, reconsume_times=2, prepared_transaction_offset=0,
                                  queue_offset=queue_offset + i, physical_offset=phy + pos) == size
        pos += size
    got = encode_batch_records(sized, total, topic, 3, sys_flag, -5, born, 1 << 41, store, 2, queue_offset, phy)
    assert got == bytes(want)


@settings(max_examples=80, deadline=None)
@given(st.lists(_item, max_size=6))
def test_decode_batch_items_reads_what_encode_batch_body_wrote(items):
    body = encode_batch_body(items)
    got = decode_batch_items(body)
    assert [(f, b, ps) for f, b, _pb, ps in got] == [(f, b, properties_to_string(p)) for f, b, p in items]
    assert all(pb == ps.encode("utf-8") for _f, _b, pb, ps in got)
    assert [(i.flag, i.body, i.properties_string) for i in decode_batch_body(body)] == [(f, b, ps) for f, b, _pb, ps in got]


def test_put_messages_now_answers_at_once_or_waits_for_the_flush(tmp_path, monkeypatch):
    """put_messages_now: the result itself in ASYNC_FLUSH; in SYNC_FLUSH with WAIT=true a Deferred
    that fires once the flush has run (WAIT=false: at once), as put_message_now."""
    from twisted.internet import defer

    body = encode_batch_body([(0, b"a", {"UNIQ_KEY": "B1"}), (0, b"bb", {"UNIQ_KEY": "B2"})])

    def batch(wait: str) -> MessageExtBatch:
        return MessageExtBatch(topic="T", queue_id=0, body=body, properties_string=f"WAIT\x01{wait}\x02",
                               born_host=("1.2.3.4", 1))
    h = StoreHarness(tmp_path / "async")
    r = h.open().put_messages_now(batch("true"))
    assert isinstance(r, PutMessageResult) and r.is_ok() and r.append_message_result.msg_num == 2
    h.close()
    h = StoreHarness(tmp_path / "sync")
    s = h.open(flushDiskType="SYNC_FLUSH")
    pending = []

    def fake_in_thread(fn, *a):
        d = defer.Deferred()
        pending.append((fn, a, d))
        return d
    monkeypatch.setattr(s.blocking, "run", fake_in_thread)
    d = s.put_messages_now(batch("true"))
    assert isinstance(d, defer.Deferred) and len(pending) == 1
    out: list[PutMessageResult] = []
    d.addCallback(out.append)
    assert out == []  # not acknowledged before the fsync
    fn, a, fd = pending.pop()
    fn(*a)
    fd.callback(None)
    assert out[0].is_ok() and out[0].append_message_result.logics_offset == 0
    r = s.put_messages_now(batch("false"))
    assert isinstance(r, PutMessageResult) and r.is_ok() and r.append_message_result.logics_offset == 2
    h.close()


def test_a_listener_with_a_batch_form_is_told_once_per_batch(tmp_path):
    """add_arrive_listener(cb, batch=...): a batch put calls the batch form once, with every record
    ``(phy, size, tags_code, queue_offset, properties)`` already in the consume queue, and ``cb`` not;
    a listener without one gets its call per record; single puts call ``cb``; removing ``cb`` removes
    its batch form."""
    h = StoreHarness(tmp_path, **_SMALL)
    s = h.open()
    per_record: list[tuple[Any, ...]] = []
    single: list[tuple[Any, ...]] = []
    batched: list[tuple[Any, ...]] = []

    def cb(*a: Any) -> None:
        single.append(a)

    def batch_cb(topic: str, queue_id: int, ts: int, records: Any) -> None:
        cq = s.find_consume_queue(topic, queue_id)
        batched.append((topic, queue_id, ts, [r[:4] for r in records], cq.get_max_offset_in_queue(),
                        [r[4] for r in records]))

    s.add_arrive_listener(lambda *a: per_record.append(a))
    s.add_arrive_listener(cb, batch=batch_cb)
    items = [(0, b"x" * i, {"TAGS": f"t{i}", "UNIQ_KEY": f"U{i}"}) for i in range(9)]  # 9 > 7 units a file
    out: list[PutMessageResult] = []
    s.put_messages(MessageExtBatch(topic="T", queue_id=2, body=encode_batch_body(items), born_host=("10.0.0.1", 1),
                                   properties_string="WAIT\x01true\x02")).addCallback(out.append)
    a = out[0].append_message_result
    assert a is not None and single == []
    assert len(batched) == 1 and len(per_record) == 9
    topic, qid, ts, units, cq_max, props = batched[0]
    assert (topic, qid, ts, cq_max) == ("T", 2, a.store_timestamp, 9)
    assert [(q + 1, t) for _p, _s, t, q in units] == [(c[2], c[3]) for c in per_record]
    assert [u[0] for u in units] == [s.find_consume_queue("T", 2).get_unit(q)[0] for q in range(9)]
    assert props == [c[5] for c in per_record] and props[3]["TAGS"] == "t3" and props[3]["WAIT"] == "true"
    assert h.put(MessageExtBrokerInner(topic="T", queue_id=2, body=b"one", born_host=("10.0.0.1", 1))
                 ).put_message_status.name == "PUT_OK"
    assert len(single) == 1 and single[0][2] == 10 and len(batched) == 1
    s.remove_arrive_listener(cb)
    assert cb not in s.dispatcher.arrive_batch
    s.put_messages(MessageExtBatch(topic="T", queue_id=2, body=encode_batch_body(items[:2]),
                                   born_host=("10.0.0.1", 1)))
    assert len(batched) == 1 and len(single) == 1 and len(per_record) == 12
    h.close()


def test_batches_of_unique_keys_only_index_as_single_puts(tmp_path):
    """The index's batch fast path (UNIQ_KEYs only, room in the last file) and its way out when the
    batch does not fit (24 entries a file: the third batch of 10 crosses the end), and a batch
    without any key; the files as single puts write them."""
    def items(first: int, n: int, uniq: bool = True) -> list[Any]:
        return [(0, b"b%d" % i, {"UNIQ_KEY": "7F00000100002A9F0000%012X" % i} if uniq else {"p": "v"})
                for i in range(first, first + n)]
    born = ("10.1.2.3", 5555)
    batches = [("T", 0, items(0, 10), "", born), ("T", 0, items(10, 10), "WAIT\x01true\x02", born),
               ("T", 1, items(20, 10), "", born), ("T", 1, items(30, 3, uniq=False), "", born),
               ("T", 1, items(33, 10), "", born)]
    (b_results, b_calls), (s_results, s_calls) = _put_both(tmp_path, batches)
    assert b_results == s_results and b_calls == s_calls
    batch_files = _files(tmp_path / "batch")
    assert len([k for k in batch_files if k.startswith("index")]) == 2
    assert batch_files == _files(tmp_path / "single")
