"""The next commit log file made ahead of need (Java's AllocateMappedFileService): made
outside the store directory, renamed into place by the roll, dropped when no longer next, and
a leftover of a killed process deleted at load."""

import os

from rmqpy.store.mapped_file import MappedFileQueue

SIZE = 64 * 1024


def _queue(root):
    q = MappedFileQueue(str(root / "commitlog"), SIZE)
    q.load()
    first = q.get_last_mapped_file(0)
    assert first is not None
    return q


def test_the_roll_renames_the_ready_file_into_place(tmp_path):
    q = _queue(tmp_path)
    off = q.next_offset()
    assert off == SIZE
    mf = q.make_next(off)
    assert os.listdir(tmp_path / "commitlog") == ["%020d" % 0]  # not in the directory yet
    q.adopt_next(mf)
    assert q.ready is mf and q.next_offset() is None
    mf.mm[0:4] = b"ab\0\0"  # a marker: the roll must take this very file
    q.files[0].wrote_position = SIZE
    nxt = q.get_last_mapped_file(0)
    assert nxt is mf and q.ready is None and nxt.file_from_offset == SIZE
    assert sorted(os.listdir(tmp_path / "commitlog")) == ["%020d" % 0, "%020d" % SIZE]
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []
    with open(tmp_path / "commitlog" / ("%020d" % SIZE), "rb") as f:
        assert f.read(2) == b"ab"
    q.close()


def test_a_file_no_longer_next_is_deleted(tmp_path):
    q = _queue(tmp_path)
    mf = q.make_next(SIZE)
    q.files[0].wrote_position = SIZE
    q.get_last_mapped_file(0)  # rolled before the made file arrived: created inline
    q.adopt_next(mf)  # late: no longer the next one
    assert q.ready is None and mf.mm is None
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []
    q.close()


def test_truncation_and_close_drop_the_ready_file(tmp_path):
    q = _queue(tmp_path)
    q.adopt_next(q.make_next(SIZE))
    q.truncate_dirty_files(100)
    assert q.ready is None
    q.adopt_next(q.make_next(SIZE))
    q.close()
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []


def test_a_leftover_of_a_killed_process_is_deleted_at_load(tmp_path):
    q = _queue(tmp_path)
    q.make_next(SIZE)  # made, never adopted: the process died here
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] != []
    q2 = MappedFileQueue(str(tmp_path / "commitlog"), SIZE)
    q2.load()
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []
    assert [f.file_from_offset for f in q2.files] == [0]
