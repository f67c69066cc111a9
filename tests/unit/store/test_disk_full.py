"""A full disk refuses puts and never crashes (issue 11, row 4); Java's used-space ratio."""
import errno
import os
from types import SimpleNamespace

import pytest

from rmqpy.store import cleanup, space, space_guard
from rmqpy.store.mapped_file import MappedFile
from rmqpy.store.message_store import GetMessageStatus, PutMessageStatus

from .conftest import msg

CL_SIZE = 64 * 1024  # small_config's commit log file size
CQ_SIZE = 20 * 50


class FailingAllocator:
    """posix_fallocate that answers ENOSPC for the sizes listed in ``fail_sizes``."""

    def __init__(self):
        self.fail_sizes: set[int] = set()
        self.failed = 0

    def __call__(self, fd, offset, length):
        if length in self.fail_sizes or ("tails" in self.fail_sizes and offset > 0):
            self.failed += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        space.posix_allocate(fd, offset, length)


@pytest.fixture
def alloc():
    a = FailingAllocator()
    prev = space.set_allocator(a)
    yield a
    space.set_allocator(prev)


def fill_commit_log_file(harness, body=b"x" * 1000):
    """Puts until the next put would roll the commit log; returns the PUT_OK results."""
    out = []
    s = harness.store
    while True:
        mf = s.commit_log.queue.last()
        if mf is not None and mf.remaining() < len(body) + 100:  # a record is body + 92 bytes, + 8 of blank
            return out
        r = harness.put(msg(body=body, qid=len(out) % 2))
        assert r.put_message_status == PutMessageStatus.PUT_OK
        out.append(r)


def test_java_ratio_formula(monkeypatch):
    # total 1000 blocks, 900 free for root, 850 usable: used 100 / (100 + 850) = 10.5% -> 0.11
    st = SimpleNamespace(f_blocks=1000, f_bfree=900, f_bavail=850, f_frsize=4096)
    monkeypatch.setattr(space.os, "statvfs", lambda p: st)
    assert space.disk_used_ratio("/x") == 0.11
    st.f_bfree = st.f_bavail = 900  # exactly 10%: no rounding up
    assert space.disk_used_ratio("/x") == 0.10
    assert space.disk_used_ratio("") == -1.0


def test_java_ratio_on_a_real_dir(tmp_path):
    st = os.statvfs(tmp_path)
    used = (st.f_blocks - st.f_bfree)
    entire = used + st.f_bavail
    r = space.disk_used_ratio(str(tmp_path))
    assert abs(r - used / entire) <= 0.0100001 and r >= used / entire - 1e-9
    assert space.disk_used_ratio(str(tmp_path / "missing")) == -1.0


def test_mapped_file_reservation_failure_leaves_no_file(tmp_path, alloc):
    alloc.fail_sizes.add(4096)
    with pytest.raises(OSError) as e:
        MappedFile(str(tmp_path / "00000000000000000000"), 4096)
    assert e.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path) == []


def test_new_mapped_file_has_its_blocks(tmp_path):
    mf = MappedFile(str(tmp_path / "00000000000000000000"), 1 << 20)
    try:
        assert os.stat(mf.path).st_blocks * 512 >= 1 << 20  # not sparse
    finally:
        mf.close()


def test_commit_log_roll_on_full_disk_refuses_then_recovers(harness, alloc):
    s = harness.open()
    ok = fill_commit_log_file(harness)
    files_before = sorted(os.listdir(s.config.commitlog_dir))
    alloc.fail_sizes.add(CL_SIZE)
    r = harness.put(msg(body=b"y" * 1000))
    assert r.put_message_status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert s.disk_full
    assert sorted(os.listdir(s.config.commitlog_dir)) == files_before  # no new or half-made file
    # reads go on meanwhile
    g = s.get_message("G", "T", 0, 0, 32)
    assert g.status == GetMessageStatus.FOUND and g.message_count > 0
    # still full: refused without touching the disk again until the recheck interval passed
    n = alloc.failed
    assert harness.put(msg()).put_message_status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert alloc.failed == n
    harness.clock.advance(0.2)  # the disk looks free (statvfs), but the reservation still fails
    assert harness.put(msg()).put_message_status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert alloc.failed == n + 1
    alloc.fail_sizes.clear()  # space is back
    harness.clock.advance(0.2)
    r = harness.put(msg(body=b"z" * 1000))
    assert r.put_message_status == PutMessageStatus.PUT_OK and not s.disk_full
    assert r.append_message_result.wrote_offset == CL_SIZE
    harness.close()
    s = harness.open()
    total = sum(s.get_max_offset_in_queue("T", q) for q in (0, 1))
    assert total == len(ok) + 1


def test_free_space_checked_before_a_roll(harness, monkeypatch):
    s = harness.open()
    fill_commit_log_file(harness)
    free = [CL_SIZE + space.FREE_SPACE_HEADROOM - 1]
    monkeypatch.setattr(space_guard, "free_bytes", lambda p: free[0])
    r = harness.put(msg(body=b"y" * 1000))
    assert r.put_message_status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert len(s.commit_log.queue.files) == 1
    free[0] += 1
    harness.clock.advance(0.2)
    assert harness.put(msg(body=b"y" * 1000)).put_message_status == PutMessageStatus.PUT_OK
    assert len(s.commit_log.queue.files) == 2


def test_batch_checks_free_space_only_before_a_roll(harness, monkeypatch):
    # as a single put (and Java's putMessages): a batch that fits in the current file is written
    # without looking at the disk; one that needs the next file is refused while it cannot be made
    from rmqpy.protocol.message import MessageExtBatch, encode_batch_body
    s = harness.open()
    assert harness.put(msg(body=b"y")).put_message_status == PutMessageStatus.PUT_OK  # the first file
    free = [CL_SIZE + space.FREE_SPACE_HEADROOM - 1]
    looked = []
    monkeypatch.setattr(space_guard, "free_bytes", lambda p: looked.append(p) or free[0])

    def put_batch(n):
        out = []
        body = encode_batch_body([(0, b"z" * 1000, "") for _ in range(n)])
        s.put_messages(MessageExtBatch(topic="T", queue_id=0, body=body, born_host=("127.0.0.1", 1),
                                       store_host=("127.0.0.1", 2))).addCallback(out.append)
        return out[0]

    assert put_batch(4).put_message_status == PutMessageStatus.PUT_OK
    assert looked == [] and len(s.commit_log.queue.files) == 1
    fill_commit_log_file(harness)
    assert put_batch(4).put_message_status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert looked and len(s.commit_log.queue.files) == 1
    free[0] += 1
    harness.clock.advance(0.2)
    assert put_batch(4).put_message_status == PutMessageStatus.PUT_OK
    assert len(s.commit_log.queue.files) == 2


def test_consume_queue_roll_failure_takes_the_record_back(harness, alloc):
    s = harness.open()
    for _i in range(50):  # one consume queue file holds 50 units
        assert harness.put(msg(qid=0)).put_message_status == PutMessageStatus.PUT_OK
    max_phy = s.get_max_phy_offset()
    alloc.fail_sizes.add(CQ_SIZE)
    r = harness.put(msg(qid=0, body=b"lost"))
    assert r.put_message_status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert s.get_max_phy_offset() == max_phy
    assert s.get_max_offset_in_queue("T", 0) == 50
    alloc.fail_sizes.clear()
    harness.clock.advance(0.2)
    r = harness.put(msg(qid=0, body=b"kept"))
    assert r.put_message_status == PutMessageStatus.PUT_OK
    assert r.append_message_result.wrote_offset == max_phy and r.append_message_result.logics_offset == 50
    harness.crash()  # recovery must not see the taken-back record either
    s = harness.open()
    assert s.get_max_offset_in_queue("T", 0) == 51
    g = s.get_message("G", "T", 0, 50, 32)
    assert g.message_count == 1 and b"kept" in g.message_list[0]


def test_index_roll_failure_keeps_the_record_and_refuses_the_next(harness, alloc):
    s = harness.open()
    index_size = s.index_service.file_size()
    alloc.fail_sizes.add(index_size)
    r = harness.put(msg(keys="k1"))
    assert r.put_message_status == PutMessageStatus.PUT_OK  # stored; only its key lookup is lost
    assert s.disk_full
    assert harness.put(msg()).put_message_status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    alloc.fail_sizes.clear()
    harness.clock.advance(0.2)
    assert harness.put(msg(keys="k2")).put_message_status == PutMessageStatus.PUT_OK


def test_index_roll_failure_keeps_the_batch_and_refuses_the_next(harness, alloc):
    # as a single put (above) and Java, whose reput thread indexes records already stored
    # (IndexService.buildIndex: the batch stays, the index error refuses later puts)
    from rmqpy.protocol.message import MessageExtBatch, encode_batch_body
    s = harness.open()
    alloc.fail_sizes.add(s.index_service.file_size())
    body = encode_batch_body([(0, f"b{i}".encode(), {"KEYS": f"k{i}"}) for i in range(3)])
    out = []
    s.put_messages(MessageExtBatch(topic="T", queue_id=0, body=body, born_host=("127.0.0.1", 1),
                                   store_host=("127.0.0.1", 2))).addCallback(out.append)
    assert out[0].put_message_status == PutMessageStatus.PUT_OK  # stored; only the key lookup is lost
    assert s.get_max_offset_in_queue("T", 0) == 3 and s.disk_full
    g = s.get_message("G", "T", 0, 0, 32)
    assert g.message_count == 3 and b"b2" in g.message_list[2]
    assert harness.put(msg()).put_message_status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    alloc.fail_sizes.clear()
    harness.clock.advance(0.2)
    assert harness.put(msg(keys="k9")).put_message_status == PutMessageStatus.PUT_OK
    harness.crash()  # recovery keeps the batch too
    s = harness.open()
    assert s.get_max_offset_in_queue("T", 0) == 4


def test_sparse_tail_reserved_at_load(harness, alloc):
    harness.open()
    harness.put(msg(body=b"x" * 5000))  # the commit log's free part starts in its second page
    harness.close()
    alloc.fail_sizes.add("tails")  # the files written next are sparse and the disk is full
    s = harness.open()
    assert s.disk_full
    assert harness.put(msg()).put_message_status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    alloc.fail_sizes.clear()
    harness.clock.advance(0.2)
    assert harness.put(msg()).put_message_status == PutMessageStatus.PUT_OK


def test_ratio_marks_full_with_java_hysteresis(harness, monkeypatch):
    s = harness.open()
    ratio = [0.91]
    monkeypatch.setattr(cleanup, "disk_used_ratio", lambda p: ratio[0])
    monkeypatch.setattr(space_guard, "disk_used_ratio", lambda p: ratio[0])
    s.delete_expired_files()
    assert harness.put(msg()).put_message_status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    ratio[0] = 0.88  # between 0.85 and 0.90 the state stays
    harness.clock.advance(0.2)
    assert harness.put(msg()).put_message_status == PutMessageStatus.SERVICE_NOT_AVAILABLE
    ratio[0] = 0.85
    harness.clock.advance(0.2)
    assert harness.put(msg()).put_message_status == PutMessageStatus.PUT_OK


def test_space_pressure_never_deletes_unexpired_files_unless_forced(harness, monkeypatch):
    # Java deleteExpiredFileByTime: a file goes when expired or when cleanImmediately (ratio >
    # 0.85) and cleanFileForciblyEnable; diskMaxUsedSpaceRatio alone only starts the pass
    s = harness.open(cleanFileForciblyEnable=False, diskMaxUsedSpaceRatio=75)
    for _ in range(3):
        fill_commit_log_file(harness)
        harness.put(msg(body=b"r" * 1000))
    s.flush_commitlog_now()
    for mf in s.commit_log.queue.files:
        mf.flushed_position = mf.wrote_position
    n = len(s.commit_log.queue.files)
    monkeypatch.setattr(cleanup, "disk_used_ratio", lambda p: 0.89)
    out = []
    s.delete_expired_files().addCallback(out.append)
    assert out == [0] and len(s.commit_log.queue.files) == n
