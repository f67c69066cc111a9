import os
import struct

import pytest
from twisted.internet import defer

from rmqpy.protocol.message import (
    BLANK_MAGIC_CODE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageExtBatch,
    create_offset_msg_id,
    decode_record,
    decode_records,
    encode_batch_body,
    java_string_hash,
)
from rmqpy.store.checkpoint import StoreCheckpoint
from rmqpy.store.consume_queue import UNIT
from rmqpy.store.mapped_file import StoreError
from rmqpy.store.message_store import GetMessageStatus, MessageStore, PutMessageStatus
from rmqpy.store.time_search import Boundary

from .conftest import STORE_HOST, T0, msg, small_config


class TagFilter:
    def __init__(self, *tags):
        self.codes = {java_string_hash(t) for t in tags}

    def takes_all(self):
        return False, False

    def is_matched_by_consume_queue(self, tags_code):
        return tags_code in self.codes

    def is_matched_by_commit_log(self, record, props):
        return True


def test_put_get_roundtrip(harness):
    s = harness.open()
    r = harness.put(msg(tags="TagA", keys="k1 k2", uniq="U1", body=b"hello"))
    assert r.is_ok() and r.put_message_status == PutMessageStatus.PUT_OK
    a = r.append_message_result
    assert a.wrote_offset == 0 and a.logics_offset == 0
    assert a.msg_id == create_offset_msg_id(STORE_HOST, 0)
    g = s.get_message("G", "T", 0, 0, 32)
    assert g.status == GetMessageStatus.FOUND and g.message_count == 1
    assert g.next_begin_offset == 1 and g.min_offset == 0 and g.max_offset == 1
    m = decode_record(g.message_list[0])
    assert m.body == b"hello" and m.tags == "TagA" and m.store_host == STORE_HOST
    assert m.born_host == ("10.1.2.3", 5555) and m.store_timestamp == int(T0 * 1000)
    assert s.look_message_by_offset(0).body == b"hello"
    assert s.select_one_message_by_offset(0) == g.message_list[0]


def test_get_statuses(harness):
    s = harness.open()
    g = s.get_message("G", "T", 0, 0, 32)
    assert g.status == GetMessageStatus.NO_MESSAGE_IN_QUEUE and g.next_begin_offset == 0
    for _i in range(3):
        harness.put(msg())
    assert s.get_message("G", "T", 0, 3, 32).status == GetMessageStatus.OFFSET_OVERFLOW_ONE
    g = s.get_message("G", "T", 0, 10, 32)
    assert g.status == GetMessageStatus.OFFSET_OVERFLOW_BADLY and g.next_begin_offset == 3
    g = s.get_message("G", "T", 0, 1, 1)
    assert g.status == GetMessageStatus.FOUND and g.message_count == 1 and g.next_begin_offset == 2


def test_tag_filter_and_tags_code(harness):
    s = harness.open()
    for i in range(10):
        harness.put(msg(tags="A" if i % 2 else "B"))
    cq = s.find_consume_queue("T", 0)
    assert cq.get_unit(0)[2] == java_string_hash("B")
    g = s.get_message("G", "T", 0, 0, 32, message_filter=TagFilter("A"))
    assert g.status == GetMessageStatus.FOUND and g.message_count == 5
    assert all(decode_record(r).tags == "A" for r in g.message_list)
    g = s.get_message("G", "T", 0, 0, 32, message_filter=TagFilter("C"))
    assert g.status == GetMessageStatus.NO_MATCHED_MESSAGE and g.next_begin_offset == 10


def test_rollover_blank_record_and_cq_files(harness):
    s = harness.open()
    n = 800  # ~ 219 B each -> several 64 KiB files
    for i in range(n):
        harness.put(msg(qid=i % 2, body=b"y" * 100))
    files = s.commit_log.queue.files
    assert len(files) >= 3
    first = files[0]
    # find the blank record at the end of the first file
    pos = 0
    while True:
        size, magic = struct.unpack_from(">iI", first.mm, pos)
        if magic == BLANK_MAGIC_CODE:
            assert pos + size == first.file_size
            break
        pos += size
    assert files[1].file_name == "%020d" % (64 * 1024)
    # every queue offset readable, CQ spans several files of 50 units
    for q in (0, 1):
        assert s.get_max_offset_in_queue("T", q) == n // 2
        assert len(s.find_consume_queue("T", q).queue.files) >= 8
        off = 0
        seen = 0
        while off < n // 2:
            g = s.get_message("G", "T", q, off, 32)
            assert g.status == GetMessageStatus.FOUND
            for i, r in enumerate(g.message_list):
                assert decode_record(r).queue_offset == off + i
            seen += g.message_count
            off = g.next_begin_offset
        assert seen == n // 2


def test_consume_queue_unit_layout(harness):
    harness.open()
    harness.put(msg(tags="TagA"))
    harness.put(msg(tags=None))
    path = os.path.join(str(harness.root), "consumequeue", "T", "0", "%020d" % 0)
    assert os.path.getsize(path) == 20 * 50
    with open(path, "rb") as f:
        data = f.read(60)
    u0 = UNIT.unpack_from(data, 0)
    u1 = UNIT.unpack_from(data, 20)
    assert u0[0] == 0 and u0[2] == java_string_hash("TagA")
    assert u1[0] == u0[1] and u1[2] == 0
    assert UNIT.unpack_from(data, 40) == (0, 0, 0)


def test_index_query_and_hash_chain(harness):
    s = harness.open()
    for i in range(30):
        harness.put(msg(keys=f"key{i % 3} other{i}", uniq=f"U{i}"))
    r = s.query_message("T", "key1", 32, 0, 2**62)
    found = [decode_record(x) for x in r.message_list]
    assert len(found) == 10 and all("key1" in m.keys.split() for m in found)
    assert r.index_last_update_phyoffset == s.look_message_by_offset(
        s.get_commit_log_offset_in_queue("T", 0, 29)).commit_log_offset
    assert [decode_record(x).uniq_key for x in s.query_message("T", "U7", 32, 0, 2**62).message_list] == ["U7"]
    # file layout: header, indexCount starts at 1
    f = s.index_service.files[-1]
    hdr = struct.unpack_from(">qqqqii", f.mm, 0)
    assert hdr[5] == 1 + 30 * 3 and hdr[0] == int(T0 * 1000)
    assert os.path.getsize(f.path) == 40 + 64 * 4 + 256 * 20


def test_index_rolls_to_new_file(harness):
    s = harness.open()
    for i in range(200):  # 2 keys each -> > 256 entries
        harness.put(msg(keys=f"k{i}", uniq=f"U{i}"))
        harness.clock.advance(0.01)
    assert len(s.index_service.files) >= 2
    assert len(s.query_message("T", "k5", 32, 0, 2**62).message_list) == 1
    assert len(s.query_message("T", "k199", 32, 0, 2**62).message_list) == 1


def test_checkpoint_layout(tmp_path):
    p = str(tmp_path / "checkpoint")
    cp = StoreCheckpoint(p)
    cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = 10_000, 20_000, 5_000
    cp.flush()
    cp.close()
    data = open(p, "rb").read()
    assert len(data) == 4096
    assert struct.unpack_from(">qqq", data, 0) == (10_000, 20_000, 5_000)
    cp2 = StoreCheckpoint(p)
    assert cp2.get_min_timestamp() == 7_000 and cp2.get_min_timestamp_index() == 5_000
    cp2.close()


def test_restart_normal(harness):
    s = harness.open()
    for i in range(500):
        harness.put(msg(qid=i % 4, keys=f"k{i}"))
    maxphy = s.get_max_phy_offset()
    harness.close()
    assert not os.path.exists(os.path.join(str(harness.root), "abort"))
    s = harness.open()
    assert s.last_exit_ok
    assert s.get_max_phy_offset() == maxphy
    assert [s.get_max_offset_in_queue("T", q) for q in range(4)] == [125] * 4
    r = harness.put(msg(qid=0))
    assert r.append_message_result.logics_offset == 125 and r.append_message_result.wrote_offset == maxphy
    assert len(s.query_message("T", "k42", 32, 0, 2**62).message_list) == 1


def test_restart_abnormal_torn_tail(harness):
    s = harness.open()
    for i in range(300):
        harness.put(msg(qid=i % 2))
    good_end = s.get_max_phy_offset()
    last = s.commit_log.queue.last()
    # a torn record: header written, body garbage, beyond the last good record
    rec = bytearray(s.select_one_message_by_offset(s.get_commit_log_offset_in_queue("T", 0, 0)))
    pos = last.wrote_position
    last.mm[pos:pos + 60] = bytes(rec[:60])
    harness.crash()
    assert os.path.exists(os.path.join(str(harness.root), "abort"))
    s = harness.open()
    assert not s.last_exit_ok
    assert s.get_max_phy_offset() == good_end
    assert s.get_max_offset_in_queue("T", 0) == 150
    r = harness.put(msg(qid=1))
    assert r.append_message_result.wrote_offset == good_end and r.append_message_result.logics_offset == 150
    g = s.get_message("G", "T", 1, 148, 32)  # a read stops at the end of a CQ file (50 units)
    assert [decode_record(x).queue_offset for x in g.message_list] == [148, 149]
    g = s.get_message("G", "T", 1, g.next_begin_offset, 32)
    assert [decode_record(x).queue_offset for x in g.message_list] == [150]


def test_abnormal_recovery_truncates_cq_past_commitlog(harness):
    s = harness.open(maxIndexNum=1024)
    for i in range(100):
        harness.put(msg(keys=f"k{i}"))
    # corrupt record #60's body: recovery must stop there and the CQ must follow
    phy60 = s.get_commit_log_offset_in_queue("T", 0, 60)
    mf = s.commit_log.queue.find_mapped_file_by_offset(phy60)
    mf.mm[phy60 - mf.file_from_offset + 100] ^= 0xFF
    harness.crash()
    s = harness.open(maxIndexNum=1024)
    assert s.get_max_phy_offset() == phy60
    assert s.get_max_offset_in_queue("T", 0) == 60
    assert harness.put(msg(keys="after-crash")).append_message_result.logics_offset == 60
    # the index accepts the record written over the truncated tail
    assert len(s.query_message("T", "after-crash", 32, 0, 2**62).message_list) == 1


def test_cq_rebuilt_from_commitlog_when_missing(harness):
    s = harness.open()
    for i in range(50):
        harness.put(msg(qid=i % 2, tags="X"))
    harness.close()
    import shutil
    shutil.rmtree(os.path.join(str(harness.root), "consumequeue"))
    s = harness.open()
    assert s.get_max_offset_in_queue("T", 0) == 25 and s.get_max_offset_in_queue("T", 1) == 25
    assert s.find_consume_queue("T", 1).get_unit(3)[2] == java_string_hash("X")


def test_transaction_prepared_not_dispatched(harness):
    s = harness.open()
    r = harness.put(msg(topic="TX", sys_flag=TRANSACTION_PREPARED_TYPE, uniq="H1"))
    assert r.is_ok() and r.append_message_result.logics_offset == 0
    harness.put(msg(topic="TX", sys_flag=TRANSACTION_ROLLBACK_TYPE))
    assert s.get_max_offset_in_queue("TX", 0) == 0
    assert len(s.query_message("TX", "H1", 32, 0, 2**62).message_list) == 1
    harness.put(msg(topic="TX"))
    assert s.get_max_offset_in_queue("TX", 0) == 1


def test_delay_level_goes_to_schedule_topic_with_delivery_tags_code(harness):
    s = harness.open()
    r = harness.put(msg(topic="D", qid=3, props={"DELAY": "3"}))
    assert r.is_ok()
    assert s.get_max_offset_in_queue("D", 3) == 0
    assert s.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 1
    u = s.find_consume_queue("SCHEDULE_TOPIC_XXXX", 2).get_unit(0)
    assert u[2] == int(T0 * 1000) + 10_000  # level 3 = 10s
    m = s.look_message_by_offset(u[0])
    assert m.properties["REAL_TOPIC"] == "D" and m.properties["REAL_QID"] == "3"
    # after a restart with re-dispatch from the commit log the tagsCode is the same
    harness.close()
    import shutil
    shutil.rmtree(os.path.join(str(harness.root), "consumequeue"))
    s = harness.open()
    assert s.find_consume_queue("SCHEDULE_TOPIC_XXXX", 2).get_unit(0)[2] == int(T0 * 1000) + 10_000


def test_batch_put(harness):
    s = harness.open()
    body = encode_batch_body([(0, b"a", {"UNIQ_KEY": "B1", "TAGS": "t"}), (0, b"bb", {"UNIQ_KEY": "B2"})])
    out = []
    s.put_messages(MessageExtBatch(topic="T", queue_id=1, body=body, properties_string="WAIT\u0001true\u0002",
                                   born_host=("1.2.3.4", 1))).addCallback(out.append)
    r = out[0]
    assert r.is_ok() and r.append_message_result.msg_num == 2
    assert len(r.append_message_result.msg_id.split(",")) == 2
    g = s.get_message("G", "T", 1, 0, 32)
    ms = [decode_record(x) for x in g.message_list]
    assert [m.body for m in ms] == [b"a", b"bb"] and [m.queue_offset for m in ms] == [0, 1]
    assert ms[0].properties == {"UNIQ_KEY": "B1", "TAGS": "t", "WAIT": "true"}


def test_batch_with_a_delay_level_of_its_own_is_refused(harness):
    """Java 4.9.8 and 5.3.3 ``CommitLog.asyncPutMessages``: a batch whose own properties have a delay
    level above 0 is MESSAGE_ILLEGAL; its messages' own DELAY is not looked at (stored as it is, in the
    batch's topic)."""
    s = harness.open()

    def put(props: str, inner: dict[str, str]):
        out = []
        body = encode_batch_body([(0, b"a", inner), (0, b"b", {})])
        s.put_messages(MessageExtBatch(topic="T", queue_id=0, body=body, properties_string=props,
                                       born_host=("1.2.3.4", 1))).addCallback(out.append)
        return out[0].put_message_status

    assert put("DELAY\u00013\u0002", {}) == PutMessageStatus.MESSAGE_ILLEGAL
    assert s.get_max_offset_in_queue("T", 0) == 0 and s.get_max_phy_offset() == 0
    assert put("DELAY\u00010\u0002", {}) == PutMessageStatus.PUT_OK
    assert put("WAIT\u0001true\u0002", {"DELAY": "2"}) == PutMessageStatus.PUT_OK
    g = s.get_message("G", "T", 0, 2, 32)
    assert decode_record(g.message_list[0]).properties["DELAY"] == "2"
    assert s.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 1) == 0


def test_put_rejections(harness):
    harness.open()
    assert harness.put(msg(topic="x" * 128)).put_message_status == PutMessageStatus.MESSAGE_ILLEGAL
    big = harness.put(msg(body=b"z" * (4 * 1024 * 1024 + 1)))
    assert big.put_message_status == PutMessageStatus.MESSAGE_ILLEGAL
    assert harness.put(msg(props={"P": "v" * 40000})).put_message_status == \
        PutMessageStatus.PROPERTIES_SIZE_EXCEEDED


def test_arrive_listener(harness):
    s = harness.open()
    calls = []
    s.add_arrive_listener(lambda *a: calls.append(a))
    harness.put(msg(tags="A"))
    assert calls[0][:4] == ("T", 0, 1, java_string_hash("A"))
    assert calls[0][5]["TAGS"] == "A"


def test_offsets_by_time_and_timestamps(harness):
    s = harness.open()
    for _i in range(20):
        harness.put(msg())
        harness.clock.advance(1)
    t0 = int(T0 * 1000)
    assert s.get_message_store_timestamp("T", 0, 5) == t0 + 5000
    # Java 5.3.3's boundary, not 4.9's nearest message (which answered 5, 5, 6, 0, 19): LOWER (the
    # default, also of a request without boundaryType) is the first offset at or after the time, the
    # max offset past the last message; UPPER the last at or before it (rmqpy/store/time_search.py)
    assert s.get_offset_in_queue_by_time("T", 0, t0 + 5000) == 5
    assert s.get_offset_in_queue_by_time("T", 0, t0 + 5400) == 6
    assert s.get_offset_in_queue_by_time("T", 0, t0 + 5600) == 6
    assert s.get_offset_in_queue_by_time("T", 0, 0) == 0
    assert s.get_offset_in_queue_by_time("T", 0, t0 + 10**9) == 20
    upper = Boundary.UPPER
    assert [s.get_offset_in_queue_by_time("T", 0, t, upper) for t in (t0 + 5000, t0 + 5400, t0 + 5600, 0)] \
        == [5, 5, 5, 0]
    assert s.get_offset_in_queue_by_time("T", 0, t0 + 10**9, upper) == 19
    assert s.get_earliest_message_time("T", 0) == t0
    assert s.get_earliest_message_time() == t0
    assert s.get_commit_log_offset_in_queue("T", 0, 0) == 0


def test_sync_flush_group_commit(harness, monkeypatch):
    s = harness.open(flushDiskType="SYNC_FLUSH")
    pending = []

    def fake_in_thread(fn, *a):
        d = defer.Deferred()
        pending.append((fn, a, d))
        return d
    monkeypatch.setattr(s.blocking, "run", fake_in_thread)
    results = []
    for _i in range(10):
        s.put_message(msg()).addCallback(results.append)
    assert results == [] and len(pending) == 1  # one fsync in flight
    fn, a, d = pending.pop()
    fn(*a)
    d.callback(None)
    # the first flush covered only the first put; the rest go in one more flush
    assert len(results) == 1 and len(pending) == 1
    fn, a, d = pending.pop()
    fn(*a)
    d.callback(None)
    assert len(results) == 10 and all(r.is_ok() for r in results) and not pending


def test_sync_flush_timeout(harness, monkeypatch):
    s = harness.open(flushDiskType="SYNC_FLUSH", syncFlushTimeout=100)
    monkeypatch.setattr(s.blocking, "run", lambda fn, *a: defer.Deferred())
    results = []
    s.put_message(msg()).addCallback(results.append)
    harness.clock.advance(0.2)
    assert results[0].put_message_status == PutMessageStatus.FLUSH_DISK_TIMEOUT


def test_lock_prevents_second_store(harness):
    harness.open()
    s2 = MessageStore(small_config(harness.root), STORE_HOST, harness.clock)
    # fcntl locks are per process: emulate another process with a subprocess
    import subprocess
    import sys
    code = ("import sys; from rmqpy.store.message_store import MessageStore; "
            "from rmqpy.store.config import MessageStoreConfig; from twisted.internet.task import Clock\n"
            "from rmqpy.store.mapped_file import StoreError\n"
            f"c=MessageStoreConfig(storePathRootDir={str(harness.root)!r})\n"
            "try:\n  MessageStore(c, ('127.0.0.1', 1), Clock()).load()\nexcept StoreError as e:\n"
            "  print('LOCKED', e); sys.exit(0)\nsys.exit(1)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert p.returncode == 0 and "locked" in p.stdout, p.stderr
    del s2


def test_wrong_file_size_is_a_clear_error(harness):
    harness.open()
    harness.put(msg())
    harness.close()
    p = os.path.join(str(harness.root), "commitlog", "%020d" % 0)
    with open(p, "r+b") as f:
        f.truncate(1000)
    with pytest.raises(StoreError, match="00000000000000000000"):
        harness.open()


def test_foreign_files_ignored(harness):
    s = harness.open()
    harness.put(msg())
    harness.close()
    for d in ("commitlog", "index"):
        with open(os.path.join(str(harness.root), d, "README.txt"), "w") as f:
            f.write("hi")
    os.makedirs(os.path.join(str(harness.root), "consumequeue", "T", "notaqueue"))
    s = harness.open()
    assert s.get_max_offset_in_queue("T", 0) == 1


def test_delete_topics_and_runtime_info(harness):
    s = harness.open()
    harness.put(msg(topic="A"))
    harness.put(msg(topic="B"))
    assert s.delete_topics(["A"]) == 1
    assert not os.path.exists(os.path.join(str(harness.root), "consumequeue", "A"))
    assert s.get_max_offset_in_queue("A", 0) == 0
    s.clean_unused_topic({"C"})
    assert s.get_max_offset_in_queue("B", 0) == 0
    info = s.runtime_info()
    for k in ("putTps", "getTransferedTps", "commitLogDiskRatio", "commitLogMinOffset", "commitLogMaxOffset",
              "bootTimestamp", "putMessageTimesTotal", "putLatency99", "consumeQueueDiskRatio"):
        assert k in info and isinstance(info[k], str)
    assert len(info["putTps"].split(" ")) == 3
    assert info["commitLogMaxOffset"] == str(s.get_max_phy_offset())


def test_a_fresh_store_reports_its_disk_ratios(harness):
    """Java's store makes its commitlog and consumequeue directories when it is built, so a broker
    that has stored nothing yet shows its disk use in clusterList's #SPACE, not -1."""
    info = harness.open().runtime_info()
    assert 0.0 <= float(info["commitLogDiskRatio"]) <= 1.0, info["commitLogDiskRatio"]
    assert 0.0 <= float(info["consumeQueueDiskRatio"]) <= 1.0, info["consumeQueueDiskRatio"]


def test_retention_deletes_old_files(harness):
    s = harness.open(fileReservedTime=1)
    for _i in range(800):
        harness.put(msg())
    nfiles = len(s.commit_log.queue.files)
    assert nfiles >= 3
    for f in s.commit_log.queue.files[:-1]:
        f.flushed_position = f.wrote_position
    old = os.path.getmtime(s.commit_log.queue.files[0].path) - 7200
    for f in s.commit_log.queue.files[:2]:
        os.utime(f.path, (old, old))
    out = []
    s.delete_expired_files(force_time=True).addCallback(out.append)
    assert out == [2]
    assert len(s.commit_log.queue.files) == nfiles - 2
    assert s.get_min_phy_offset() == 2 * 64 * 1024
    mn = s.get_min_offset_in_queue("T", 0)
    assert mn > 0
    g = s.get_message("G", "T", 0, 0, 32)
    assert g.status == GetMessageStatus.OFFSET_TOO_SMALL and g.next_begin_offset == mn
    g = s.get_message("G", "T", 0, mn, 32)
    assert g.status == GetMessageStatus.FOUND
    assert decode_record(g.message_list[0]).commit_log_offset >= s.get_min_phy_offset()
    harness.close()
    s = harness.open()
    assert s.get_min_offset_in_queue("T", 0) == mn


def test_decode_records_of_pull_body(harness):
    s = harness.open()
    for i in range(5):
        harness.put(msg(body=bytes([65 + i])))
    g = s.get_message("G", "T", 0, 0, 32)
    assert [m.body for m in decode_records(g.body)] == [b"A", b"B", b"C", b"D", b"E"]
