"""MessageStore.get_message's loop (filter checks skipped when the filter takes everything, the
commit log file kept from record to record, the batch limits inline) answers what the plain
loop it replaced answers: reference_get_message below is that loop, kept as it was."""
from __future__ import annotations

import time

import pytest

from rmqpy.broker.filter.message_filter import ExpressionMessageFilter
from rmqpy.protocol.bodies.heartbeat import SubscriptionData
from rmqpy.protocol.message import java_string_hash
from rmqpy.store.config import CQ_STORE_UNIT_SIZE
from rmqpy.store.consume_queue import INT_MAX
from rmqpy.store.message_store import TOTAL_PHYSICAL_MEMORY_SIZE, GetMessageResult, GetMessageStatus

from .conftest import msg


def reference_get_message(self, group, topic, queue_id, offset, max_msg_nums, max_total_bytes=None,
                          message_filter=None):
    if self.shutdown_flag:
        return None
    t0 = time.perf_counter()
    res = GetMessageResult(next_begin_offset=offset)
    max_offset_py = self.commit_log.get_max_offset()
    cq = self.find_consume_queue(topic, queue_id)
    min_offset = cq.get_min_offset_in_queue()
    max_offset = cq.get_max_offset_in_queue()
    res.min_offset, res.max_offset = min_offset, max_offset
    if max_offset == 0:
        res.status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
        res.next_begin_offset = self._next_offset_correction(offset, 0)
    elif offset < min_offset:
        res.status = GetMessageStatus.OFFSET_TOO_SMALL
        res.next_begin_offset = self._next_offset_correction(offset, min_offset)
    elif offset == max_offset:
        res.status = GetMessageStatus.OFFSET_OVERFLOW_ONE
        res.next_begin_offset = self._next_offset_correction(offset, offset)
    elif offset > max_offset:
        res.status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
        res.next_begin_offset = self._next_offset_correction(offset, max_offset)
    else:
        units = cq.iter_units_in_file(offset, 1 << 40)  # the whole file, as before the bound
        if units is None:
            res.status = GetMessageStatus.OFFSET_FOUND_NULL
            res.next_begin_offset = self._next_offset_correction(offset, cq.roll_next_file(offset))
        else:
            status = GetMessageStatus.NO_MATCHED_MESSAGE
            next_phy_file_start = None
            max_filter = max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE) // CQ_STORE_UNIT_SIZE
            memory = TOTAL_PHYSICAL_MEMORY_SIZE * self.config.accessMessageInMemoryMaxRatio / 100.0
            max_phy_pulling = 0
            i = 0
            for off_py, size_py, tags_code in units:
                if i >= max_filter:
                    break
                max_phy_pulling = off_py
                if next_phy_file_start is not None and off_py < next_phy_file_start:
                    i += 1
                    continue
                in_disk = (max_offset_py - off_py) > memory
                if self._is_the_batch_full(size_py, max_msg_nums, res.buffer_total_size, len(res.message_list),
                                           in_disk):
                    break
                if max_total_bytes is not None and res.message_list and \
                        res.buffer_total_size + size_py > max_total_bytes:
                    break
                i += 1
                if off_py == 0 and size_py == INT_MAX:  # blank pre-fill unit
                    continue
                if message_filter is not None and not message_filter.is_matched_by_consume_queue(tags_code):
                    continue
                data = self.commit_log.get_data(off_py, size_py)
                if data is None:
                    if res.buffer_total_size == 0:
                        status = GetMessageStatus.MESSAGE_WAS_REMOVING
                    next_phy_file_start = self.commit_log.roll_next_file(off_py)
                    continue
                if message_filter is not None and not message_filter.is_matched_by_commit_log(data, None):
                    if res.buffer_total_size == 0:
                        status = GetMessageStatus.NO_MATCHED_MESSAGE
                    continue
                res.message_list.append(data)
                res.message_queue_offsets.append(offset + i - 1)
                res.buffer_total_size += size_py
                status = GetMessageStatus.FOUND
                next_phy_file_start = None
            res.status = status
            res.next_begin_offset = offset + i
            res.suggest_pulling_from_slave = (max_offset_py - max_phy_pulling) > memory
    (lambda *a: None)(res.status == GetMessageStatus.FOUND, len(res.message_list), time.perf_counter() - t0)
    return res


def _same(a, b):
    assert (a.status, a.next_begin_offset, a.min_offset, a.max_offset, a.buffer_total_size,
            a.suggest_pulling_from_slave) == (b.status, b.next_begin_offset, b.min_offset, b.max_offset,
                                              b.buffer_total_size, b.suggest_pulling_from_slave)
    assert a.message_list == b.message_list and a.message_queue_offsets == b.message_queue_offsets


class _OddCodes:
    """A filter that takes nothing wholesale: every call goes through."""

    def takes_all(self):
        return False, False

    def is_matched_by_consume_queue(self, tags_code, cq_ext=None):
        return tags_code % 2 == 1

    def is_matched_by_commit_log(self, data, properties):
        return len(data) % 3 != 0


@pytest.mark.parametrize("extra", [{}, {"maxTransferCountOnMessageInMemory": 5},
                                   {"maxTransferBytesOnMessageInMemory": 900},
                                   {"accessMessageInMemoryMaxRatio": 0, "maxTransferCountOnMessageInDisk": 3}])
def test_get_message_answers_as_the_reference_loop(harness, extra):
    s = harness.open(**extra)
    tags = ["A", "B", "C", None]
    for i in range(1200):  # several 64 KiB commit log files and 50-unit consume queue files
        harness.put(msg(qid=i % 2, body=b"y" * (50 + i % 97), tags=tags[i % 4], keys=f"k{i}"))
    subs = [None, SubscriptionData("T", "*"), SubscriptionData("T", "A || C", ["A", "C"],
                                                                [java_string_hash("A"), java_string_hash("C")])]
    filters = [None, _OddCodes()] + [ExpressionMessageFilter(sub) for sub in subs]

    def compare():
        for f in filters:
            for qid in (0, 1):
                for offset in (-1, 0, 1, 7, 49, 50, 51, 120, 250, 330, 480, 599, 600, 601, 900):
                    for nums, max_bytes in ((32, None), (1, None), (10, 700), (64, 20000)):
                        _same(s.get_message("G", "T", qid, offset, nums, max_bytes, f),
                              reference_get_message(s, "G", "T", qid, offset, nums, max_bytes, f))
    compare()
    # the first commit log files gone (as after clean-up): MESSAGE_WAS_REMOVING / skipping past them
    files = s.commit_log.queue.files
    assert len(files) > 3
    s.commit_log.queue.delete_first_files(2)
    compare()


def test_a_pull_reads_at_most_its_filter_window_of_a_long_consume_queue_file(harness):
    """A consume queue file holds up to 300,000 units; a pull looks at 800 of them at most (Java's
    16,000 bytes), and copies no more than that out of the mapping: the answers are the reference
    loop's, which read the file to its end."""
    s = harness.open(mappedFileSizeConsumeQueue=20 * 3000, mappedFileSizeCommitLog=1 << 20)
    for i in range(2000):  # one queue, one consume queue file; tag B only every 500th message
        harness.put(msg(qid=0, body=b"z" * 40, tags="B" if i % 500 == 499 else "A"))
    cq = s.find_consume_queue("T", 0)
    assert len(list(cq.iter_units_in_file(0, 800))) == 800
    assert len(list(cq.iter_units_in_file(1990, 800))) == 10  # the file's written end
    assert list(cq.iter_units_in_file(3, 2)) == [cq.get_unit(3), cq.get_unit(4)]
    assert list(cq.iter_units_in_file(3, 0)) == []
    only_b = ExpressionMessageFilter(SubscriptionData("T", "B", ["B"], [java_string_hash("B")]))
    for f in (None, only_b):
        for offset in (0, 1, 499, 500, 1199, 1999):
            for nums in (32, 1, 1000):
                _same(s.get_message("G", "T", 0, offset, nums, None, f),
                      reference_get_message(s, "G", "T", 0, offset, nums, None, f))
    # the filter window ends the pull: from 0, B's first match (499) is inside it, 1499 is not
    first = s.get_message("G", "T", 0, 0, 32, None, only_b)
    assert first.message_queue_offsets == [499] and first.next_begin_offset == 800
