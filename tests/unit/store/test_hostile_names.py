"""Issue 11 rows 2 and 9 in the store: names never leave the root, refused puts write nothing."""
from __future__ import annotations

import os
import struct

import pytest

from rmqpy.protocol.message import MessageExtBatch, encode_batch_body, encode_record_at, encode_record_into, host_bytes
from rmqpy.store.message_store import PutMessageStatus
from rmqpy.store.paths import StorePathError, consume_queue_path, is_safe_name, store_subpath

from .conftest import msg


def _files_under(top) -> set[str]:
    return {os.path.join(d, f) for d, _dirs, files in os.walk(top) for f in files}


@pytest.mark.parametrize("name", ["..", ".", "", "../x", "a/b", "/abs", "x\x00y", "../../../../../../tmp/x"])
def test_unsafe_names_are_refused(tmp_path, name):
    assert not is_safe_name(name)
    with pytest.raises(StorePathError):
        consume_queue_path(str(tmp_path), name, 0)


def test_safe_names_map_under_the_root(tmp_path):
    assert consume_queue_path(str(tmp_path), "%DLQ%g-1|x", 3) == os.path.join(str(tmp_path), "%DLQ%g-1|x", "3")
    with pytest.raises(StorePathError):
        consume_queue_path(str(tmp_path), "T", -1)


def test_a_symlink_leading_out_of_the_root_is_refused(tmp_path):
    root = tmp_path / "cq"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "T")
    with pytest.raises(StorePathError, match="outside the store root"):
        store_subpath(str(root), "T", "0")
    # a symlinked root itself is fine: containment is checked on resolved paths
    os.symlink(root, tmp_path / "alias")
    assert store_subpath(str(tmp_path / "alias"), "U", "0").endswith(os.path.join("alias", "U", "0"))


def test_put_to_a_traversal_topic_is_illegal_and_creates_nothing(harness, tmp_path):
    s = harness.open()
    before = _files_under(tmp_path)
    end = s.commit_log.get_max_offset()
    r = harness.put(msg(topic="%DLQ%../../../../evil"))
    assert r.put_message_status == PutMessageStatus.MESSAGE_ILLEGAL
    assert s.commit_log.get_max_offset() == end
    assert _files_under(tmp_path) == before
    assert not (tmp_path / "evil").exists()


def test_put_with_born_timestamp_2_63_writes_nothing(harness):
    s = harness.open()
    assert harness.put(msg()).put_message_status == PutMessageStatus.PUT_OK
    mf = s.commit_log.queue.files[-1]
    pos = mf.wrote_position
    tail = bytes(mf.mm[pos:pos + 4096])
    for field, value in (("born_timestamp", 1 << 63), ("reconsume_times", 1 << 31), ("flag", -(1 << 31) - 1),
                         ("prepared_transaction_offset", -(1 << 63) - 1)):
        m = msg()
        setattr(m, field, value)
        r = harness.put(m)
        assert r.put_message_status == PutMessageStatus.MESSAGE_ILLEGAL, field
        assert mf.wrote_position == pos
        assert bytes(mf.mm[pos:pos + 4096]) == tail, f"{field}: bytes after the write position changed"
    assert s.get_max_offset_in_queue("T", 0) == 1
    m = msg()
    m.born_timestamp = (1 << 63) - 1
    assert harness.put(m).put_message_status == PutMessageStatus.PUT_OK


def test_batch_with_born_timestamp_2_63_writes_nothing(harness):
    s = harness.open()
    assert harness.put(msg()).put_message_status == PutMessageStatus.PUT_OK
    mf = s.commit_log.queue.files[-1]
    pos = mf.wrote_position
    body = encode_batch_body([(0, b"a", {}), (0, b"b", {})])
    batch = MessageExtBatch(topic="T", queue_id=0, body=body, born_host=("10.1.2.3", 5555),
                            born_timestamp=1 << 63)
    out = []
    s.put_messages(batch).addCallback(out.append)
    assert out[0].put_message_status == PutMessageStatus.MESSAGE_ILLEGAL
    assert mf.wrote_position == pos and not any(mf.mm[pos:pos + 1024])


@pytest.mark.parametrize("encoder", ["at", "into_v4", "into_v6"])
def test_encoders_leave_the_buffer_untouched_on_a_bad_field(encoder):
    buf = bytearray(b"\xee" * 512)
    born = host_bytes(("::1", 1) if encoder == "into_v6" else ("10.0.0.1", 1))
    store = host_bytes(("10.0.0.2", 2))
    kw = dict(topic_bytes=b"T", queue_id=0, flag=0, body=b"xyz", props_bytes=b"", sys_flag=0,
              born_timestamp=1 << 63, born_host=born, store_timestamp=1, store_host=store, reconsume_times=0,
              prepared_transaction_offset=0, queue_offset=0, physical_offset=0)
    with pytest.raises(struct.error):
        if encoder == "at":
            encode_record_at(buf, 16, 91 + 3 + 1, kw["topic_bytes"], 0, 0, kw["body"], b"", 0, 1 << 63, born, 1,
                             store, 0, 0, 0, 0)
        else:
            encode_record_into(buf, 16, **kw)
    assert buf == bytearray(b"\xee" * 512)


def test_encode_record_at_refuses_a_record_that_does_not_fit():
    buf = bytearray(100)
    h = host_bytes(("10.0.0.1", 1))
    with pytest.raises(ValueError):
        encode_record_at(buf, 50, 95, b"T", 0, 0, b"xyz", b"", 0, 1, h, 1, h, 0, 0, 0, 0)
    assert buf == bytearray(100)


def test_a_topic_directory_symlinked_out_is_skipped_on_load(harness, tmp_path):
    s = harness.open()
    assert harness.put(msg()).put_message_status == PutMessageStatus.PUT_OK
    harness.close()
    outside = tmp_path / "elsewhere"
    (outside / "0").mkdir(parents=True)
    os.symlink(outside, tmp_path / "store" / "consumequeue" / "Evil")
    s = harness.open()
    assert "Evil" not in s.consume_queue_table
    assert s.get_max_offset_in_queue("T", 0) == 1


def test_find_consume_queue_leaves_no_entry_for_a_refused_topic(harness):
    s = harness.open()
    with pytest.raises(StorePathError):
        s.find_consume_queue("../x", 0)
    assert "../x" not in s.consume_queue_table
    assert s.find_consume_queue("../x", 0, create=False) is None


def test_verify_tool_skips_a_topic_directory_symlinked_out(harness, tmp_path):
    import json
    import subprocess
    import sys
    harness.open()
    assert harness.put(msg()).put_message_status == PutMessageStatus.PUT_OK
    harness.close()
    outside = tmp_path / "elsewhere" / "0"
    outside.mkdir(parents=True)
    (outside / ("0" * 20)).write_bytes(b"\0" * 1000)
    os.symlink(outside.parent, tmp_path / "store" / "consumequeue" / "Evil")
    r = subprocess.run([sys.executable, "-m", "rmqpy.store", "verify", str(tmp_path / "store")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["ok"] and "outside the store root" in r.stderr
