"""MessageStore.truncate_files: a controller-mode replica's cut of its store (Java
``DefaultMessageStore.truncateFiles``)."""
from __future__ import annotations

from .conftest import StoreHarness, msg


def test_truncate_files_cuts_commit_log_consume_queues_and_index(tmp_path):
    """MessageStore.truncate_files (Java truncateFiles): a cut inside a file clears the rest of
    that file, later files go, the consume queues lose the units of the records after the cut,
    the queues' next offsets follow, the index forgets them; a cut inside a record is refused."""
    h = StoreHarness(tmp_path / "s")
    store = h.open()
    offsets = []
    for i in range(400):
        offsets.append(h.put(msg(qid=i % 2, body=bytes([i % 251]) * 200, keys=f"k{i}")).append_message_result.wrote_offset)
    files = len(store.commit_log.queue.files)
    assert files >= 2
    cut = offsets[250]
    assert store.truncate_files(cut + 1).result is False  # inside a record
    assert store.truncate_files(store.get_max_phy_offset()).result is True  # nothing after it
    assert store.truncate_files(cut).result is True
    assert store.get_max_phy_offset() == cut
    mf = store.commit_log.queue.find_mapped_file_by_offset(cut)
    assert mf is not None and mf.mm is not None
    assert mf.mm[cut - mf.file_from_offset:] == bytes(mf.file_size - (cut - mf.file_from_offset))
    assert [f.file_from_offset for f in store.commit_log.queue.files][-1] == mf.file_from_offset
    assert store.get_max_offset_in_queue("T", 0) == 125 and store.get_max_offset_in_queue("T", 1) == 125
    assert store.query_message("T", "k249", 5, 0, 2**62).message_list
    h.put(msg(qid=0, body=b"new", keys="k-new"))
    assert store.get_max_offset_in_queue("T", 0) == 126
    assert store.query_message("T", "k-new", 5, 0, 2**62).message_list
    h.close()
    store = h.open()
    assert store.get_max_offset_in_queue("T", 0) == 126 and store.get_max_offset_in_queue("T", 1) == 125
