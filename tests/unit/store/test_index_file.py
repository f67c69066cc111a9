"""IndexFile on MappedFile: sizing, refusal of a foreign length, and close with live views."""
import os

import pytest

from rmqpy.store.index import HEADER_SIZE, ITEM_SIZE, IndexFile, IndexService, build_key


def _size(slots: int, items: int) -> int:
    return HEADER_SIZE + slots * 4 + items * ITEM_SIZE


def test_new_file_has_its_full_size_and_no_leftover_temp(tmp_path):
    path = str(tmp_path / "20261122000000000")
    f = IndexFile(path, 16, 8)
    assert os.path.getsize(path) == _size(16, 8)
    assert os.listdir(tmp_path) == ["20261122000000000"]
    assert f.put_key(build_key("T", "k"), 100, 1_000)
    f.close()


def test_wrong_length_is_refused_with_the_expected_size(tmp_path):
    path = tmp_path / "20261122000000000"
    path.write_bytes(b"\0" * 100)
    with pytest.raises(ValueError, match=str(_size(16, 8))):
        IndexFile(str(path), 16, 8)


def test_short_file_opened_read_only_is_refused(tmp_path):
    path = tmp_path / "20261122000000000"
    path.write_bytes(b"\0" * (HEADER_SIZE - 1))
    with pytest.raises(ValueError, match="too short"):
        IndexFile(str(path), 16, 8, readonly=True)


def test_close_with_a_live_view_does_not_raise(tmp_path):
    f = IndexFile(str(tmp_path / "20261122000000000"), 16, 8)
    view = memoryview(f.mm)  # e.g. a reader still holding a slice
    f.close()
    assert f.mm is None
    view.release()


def test_read_only_service_skips_a_foreign_length_file(tmp_path):
    (tmp_path / "20261122000000000").write_bytes(b"\0" * 10)
    svc = IndexService(str(tmp_path), 16, 8, readonly=True)
    svc.load(True, 0)
    assert svc.files == []
