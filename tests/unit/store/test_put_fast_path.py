"""The store's put path (put_message_now, encode_record_at, the consume queue's append fast
path, the precomputed offsetMsgId) writes what the general encoder describes, and waits for
the disk exactly when SYNC_FLUSH asks it to."""
from __future__ import annotations

from twisted.internet import defer

from rmqpy.protocol.message import TRANSACTION_PREPARED_TYPE, MessageExtBrokerInner, create_offset_msg_id, encode_record, java_string_hash
from rmqpy.store.message_store import PutMessageResult, PutMessageStatus

from .conftest import STORE_HOST, T0, msg


def test_put_message_now_answers_at_once_in_async_flush(harness):
    s = harness.open()
    r = s.put_message_now(msg(uniq="U1"))
    assert isinstance(r, PutMessageResult) and r.is_ok()
    d = s.put_message(msg(uniq="U2"))
    assert isinstance(d, defer.Deferred)
    out = []
    d.addCallback(out.append)
    assert out[0].is_ok() and out[0].append_message_result.logics_offset == 1


def test_put_message_now_waits_for_the_flush_in_sync_flush(harness, monkeypatch):
    s = harness.open(flushDiskType="SYNC_FLUSH")
    pending = []

    def fake_in_thread(fn, *a):
        d = defer.Deferred()
        pending.append((fn, a, d))
        return d
    monkeypatch.setattr(s.blocking, "run", fake_in_thread)
    d = s.put_message_now(msg())
    assert isinstance(d, defer.Deferred) and len(pending) == 1
    out = []
    d.addCallback(out.append)
    assert out == []  # not acknowledged before the fsync
    fn, a, fd = pending.pop()
    fn(*a)
    fd.callback(None)
    assert out[0].is_ok()
    # WAIT=false: answered at once, the flush still kicked
    r = s.put_message_now(msg(props={"WAIT": "false"}))
    assert isinstance(r, PutMessageResult) and r.is_ok() and len(pending) == 1


def test_put_message_now_failures_are_results(harness):
    s = harness.open()
    r = s.put_message_now(msg(topic="t" * 128))
    assert isinstance(r, PutMessageResult) and r.put_message_status == PutMessageStatus.MESSAGE_ILLEGAL
    s.shutdown_flag = True
    r = s.put_message_now(msg())
    assert r.put_message_status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    s.shutdown_flag = False


def test_records_units_and_msg_ids_match_the_general_encoder(harness):
    s = harness.open(mappedFileSizeConsumeQueue=20 * 7)  # several consume queue files
    cases = [msg(body=b"", tags="TagA", keys="k1 k2", uniq="U0"),
             msg(body=b"x" * 128, uniq="U1"),
             msg(body=bytes(range(256)) * 4, props={"CLUSTER": "DefaultCluster", "\u00e9": "\u4e2d"}),
             MessageExtBrokerInner(topic="T", queue_id=0, body=b"v6", properties={"TAGS": "B"},
                                   born_host=("::1", 7), born_timestamp=5, reconsume_times=3, flag=9),
             msg(body=b"prepared", sys_flag=TRANSACTION_PREPARED_TYPE, prepared_transaction_offset=77)]
    cases += [msg(body=b"m%d" % i, tags="T%d" % (i % 3)) for i in range(20)]
    expected_units = []
    for i, m in enumerate(cases):
        reference = MessageExtBrokerInner(**{k: getattr(m, k) for k in m.__dataclass_fields__})
        reference.properties = dict(m.properties)
        reference.store_host = STORE_HOST
        r = s.put_message_now(m)
        assert r.is_ok(), r
        a = r.append_message_result
        assert a.msg_id == create_offset_msg_id(STORE_HOST, a.wrote_offset)
        prepared = m.sys_flag & 0xC == TRANSACTION_PREPARED_TYPE
        want = encode_record(reference, queue_offset=0 if prepared else a.logics_offset,
                             physical_offset=a.wrote_offset, store_timestamp=int(T0 * 1000))
        assert s.commit_log.get_data(a.wrote_offset, a.wrote_bytes) == want, i
        if not prepared:
            tags = m.properties.get("TAGS")
            expected_units.append((a.wrote_offset, a.wrote_bytes, java_string_hash(tags) if tags else 0))
    cq = s.find_consume_queue("T", 0)
    assert len(cq.queue.files) > 2
    assert [cq.get_unit(i) for i in range(cq.get_max_offset_in_queue())] == expected_units
    # the store still reads back what it wrote after a restart (recovery walks the records)
    harness.close()
    s = harness.open(mappedFileSizeConsumeQueue=20 * 7)
    cq = s.find_consume_queue("T", 0)
    assert [cq.get_unit(i) for i in range(cq.get_max_offset_in_queue())] == expected_units


def test_key_hasher_matches_index_key_hash():
    import random

    from rmqpy.store.index import KeyHasher, build_key, index_key_hash
    rng = random.Random(3)
    hasher = KeyHasher(max_topics=3)
    topics = ["T", "BenchTopic", "%RETRY%g", "t\u00e9", "x" * 127, "polygenelubricants"[:-1]]
    alphabet = "aZ09#_- \u00e9\U0001F600"
    keys = ["", "s", "7F00000100002A9F0000000000000001", "k" * 4096, "k" * 4097]
    keys += ["".join(rng.choices(alphabet, k=rng.randrange(40))) for _ in range(2000)]
    for key in keys:
        topic = rng.choice(topics)
        assert hasher(topic, key) == index_key_hash(build_key(topic, key)), (topic, key)
    assert hasher("polygenelubricant", "s") == index_key_hash("polygenelubricant#s")
    # long keys through the per-topic cache of heads (all but the last 4 characters), a tiny one
    hasher = KeyHasher(max_topics=2, max_heads=2)
    for i in range(3000):
        topic = topics[i % 3]
        key = "7F0000010000%04X0000%012X" % (i % 5, i * 7919) + "x" * (i % 3)
        assert hasher(topic, key) == index_key_hash(build_key(topic, key)), (topic, key)



def test_key_hasher_many_is_each_key_hashed():
    """KeyHasher.many (a batch's UNIQ_KEYs, issue 29): runs of keys sharing a head, heads changing,
    short, long, non-ASCII and empty keys, a tiny cache that is cleared on the way."""
    import random

    from rmqpy.store.index import KeyHasher, build_key, index_key_hash
    rng = random.Random(29)
    hasher = KeyHasher(max_topics=2, max_heads=2)
    alphabet = "aZ09#_- \u00e9"
    for round_ in range(300):
        topic = rng.choice(["T", "BenchTopic", "t\u00e9"])
        keys = []
        for _ in range(rng.randrange(40)):
            pick = rng.randrange(6)
            if pick < 3:  # a client's UNIQ_KEYs: a few heads, counters at the end
                keys.append("7F00000100002A9F%04X%012X" % (rng.randrange(3), round_ * 100 + len(keys)))
            elif pick == 3:
                keys.append("".join(rng.choices(alphabet, k=rng.randrange(30))))
            elif pick == 4:
                keys.append("k" * rng.choice([16, 17, 4096, 4097]))
            else:
                keys.append("7F00000100002A9F\u00e9%012X" % len(keys))
        assert hasher.many(topic, keys) == [index_key_hash(build_key(topic, k)) for k in keys], (topic, keys)

def test_index_built_on_put_is_what_put_key_writes(tmp_path):
    from rmqpy.protocol.message import DispatchInfo
    from rmqpy.store.index import IndexFile, IndexService, build_key
    svc = IndexService(str(tmp_path / "a"), 16, 64, now=lambda: 1_700_000_000_000)
    dispatched = []
    for i in range(150):  # three files' worth of keys
        d = DispatchInfo(100, True, "T" if i % 3 else "U", 0, i * 100, 0, 1_700_000_000_000 + i * 1000, i,
                         "k%d  k%d" % (i % 5, i % 7) if i % 2 else "", "UNIQ%d" % i if i % 4 else None, 0, 0, None)
        svc.build_index(d)
        dispatched.append(d)
    names = [f.file_name for f in svc.files]
    assert len(names) > 1
    # the same keys through the general put_key, file by file
    os_dir = tmp_path / "b"
    os_dir.mkdir()
    files = []
    f = None
    for d in dispatched:
        keys = ([d.uniq_key] if d.uniq_key else []) + [k for k in d.keys.split(" ") if k]
        for k in keys:
            if f is None or not f.put_key(build_key(d.topic, k), d.commit_log_offset, d.store_timestamp):
                last = f
                f = IndexFile(str(os_dir / names[len(files)]), 16, 64)
                if last is not None:
                    f.begin_phy_offset = f.end_phy_offset = last.end_phy_offset
                    f.begin_timestamp = f.end_timestamp = last.end_timestamp
                    f._write_header()
                files.append(f)
                assert f.put_key(build_key(d.topic, k), d.commit_log_offset, d.store_timestamp)
    assert [bytes(x.mm) for x in files] == [bytes(x.mm) for x in svc.files]
    for x in files:
        x.close()
    svc.close()
