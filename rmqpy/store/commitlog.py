"""CommitLog: the append-only record log (facts §6.1, §7.1, §7.6).

The one place records are written: a put's record (:meth:`CommitLog.append_message`), a batch's
(:meth:`CommitLog.append_batch`), the blank record that ends a full file, and the cleared header
of a record taken back (:meth:`CommitLog.undo_append`). What goes in a record (delay level,
queue offset, host flags) and the checks before it is the store's; where the record goes and its
bytes are this module's. Also the recovery scan and the commit log's flush.
"""

from __future__ import annotations

import logging
import struct
from typing import Callable, Iterator, Sequence

from rmqpy.protocol.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    DispatchInfo,
    check_record,
    encode_batch_records,
    encode_record_at,
    peek_record_header,
)
from rmqpy.store.mapped_file import MappedFile, MappedFileQueue
from rmqpy.store.prefault import Prefaulter

log = logging.getLogger(__name__)

END_FILE_MIN_BLANK_LENGTH = 8
_NEVER = 1 << 62  # no commit log offset reaches it
_BLANK = struct.Struct(">iI")


#: a record of a batch as :meth:`CommitLog.append_batch` writes it: (flag, body, properties, size)
BatchRecord = tuple[int, bytes, bytes, int]


class CommitLog:
    def __init__(self, store_path: str, file_size: int, *, readonly: bool = False, check_crc: bool = True,
                 delay_tags_code: Callable[[int, int], int] | None = None,
                 roll: Callable[[int], MappedFile | None] | None = None):
        """``roll(size)`` gives the file a record of ``size`` bytes goes to when the last one has
        no room (None: none can be made; the put fails); by default :meth:`mapped_file_for`,
        the store passes its disk-space guard around it."""
        self.queue = MappedFileQueue(store_path, file_size, readonly=readonly)
        self.roll: Callable[[int], MappedFile | None] = roll if roll is not None else self.mapped_file_for
        self.file_size = file_size
        self.check_crc = check_crc
        self.delay_tags_code = delay_tags_code
        self.readonly = readonly
        self.last_store_timestamp = 0  # of the last appended record
        #: what the last recovery walked: [first file index, files walked, valid records]
        self.recovery_scan = [0, 0, 0]
        #: why the last recovery stopped before the written end (None: at zeros, a clean end)
        self.recovery_torn: str | None = None
        #: faults the last file's next pages in ahead of the writer (:meth:`set_prefault`), or None
        self.prefault: Prefaulter | None = None
        self._prefault_at = _NEVER  # a write that ends past this offset asks it again

    def set_prefault(self, prefault: Prefaulter | None) -> None:
        """Tell ``prefault`` where the appends get to (None: no longer)."""
        self.prefault = prefault
        self._prefault_at = 0 if prefault is not None else _NEVER

    def _ask_prefault(self, mf: MappedFile) -> None:
        assert self.prefault is not None
        self._prefault_at = self.prefault.ahead(mf, mf.wrote_position)

    def load(self) -> None:
        self.queue.load()

    # ------------------------------------------------------------------ offsets
    def get_min_offset(self) -> int:
        f = self.queue.first()
        return f.file_from_offset if f is not None else 0

    def get_max_offset(self) -> int:
        return self.queue.max_wrote_offset()

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    # ------------------------------------------------------------------ read
    def get_data(self, offset: int, size: int) -> bytes | None:
        mf = self.queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.read(offset - mf.file_from_offset, size)

    def get_record_size(self, offset: int) -> int | None:
        mf = self.queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + 8 > mf.readable_position():
            return None
        assert mf.mm is not None  # readable bytes: mapped
        total: int
        total, magic = _BLANK.unpack_from(mf.mm, pos)
        if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2) or total <= 0:
            return None
        return total

    def iter_records(self, start: int, end: int | None = None,
                     check_crc: bool | None = None) -> Iterator[tuple[int, DispatchInfo]]:
        """(offset, DispatchInfo) for each record from ``start``; blank records are skipped;
        stops at the first invalid record (yielding it) or at ``end``/max offset."""
        check = self.check_crc if check_crc is None else check_crc
        off = start
        limit = self.get_max_offset() if end is None else end
        while off < limit:
            mf = self.queue.find_mapped_file_by_offset(off)
            if mf is None:
                return
            pos = off - mf.file_from_offset
            wrote = mf.readable_position()
            mm = mf.mm
            while pos < wrote and mf.file_from_offset + pos < limit:
                assert mm is not None  # readable bytes: mapped
                d = check_record(memoryview(mm)[:wrote], pos, check_crc=check,
                                 delay_tags_code=self.delay_tags_code)
                if not d.success:
                    yield mf.file_from_offset + pos, d
                    return
                if d.size == 0:
                    break
                yield mf.file_from_offset + pos, d
                pos += d.size
            off = mf.end_offset

    # ------------------------------------------------------------------ write
    def mapped_file_for(self, size: int) -> MappedFile:
        """The file the next record of ``size`` bytes goes into; writes the blank
        end-of-file record and rolls over when it does not fit."""
        mf = self.queue.get_last_mapped_file(0)
        assert mf is not None  # None only when read-only
        if size + END_FILE_MIN_BLANK_LENGTH > mf.remaining():
            remaining = mf.remaining()
            if remaining >= 8:
                assert mf.mm is not None  # writable: mapped
                _BLANK.pack_into(mf.mm, mf.wrote_position, remaining, BLANK_MAGIC_CODE)
            mf.wrote_position = mf.file_size
            mf = self.queue.get_last_mapped_file(0)
            assert mf is not None
            if size + END_FILE_MIN_BLANK_LENGTH > mf.remaining():
                raise ValueError(f"record of {size} bytes does not fit in a commitlog file of {self.file_size}")
        return mf

    def append_message(self, size: int, topic: bytes, queue_id: int, flag: int, body: bytes, props: bytes,
                       sys_flag: int, born_timestamp: int, born_host: bytes, store_timestamp: int,
                       store_host: bytes, reconsume_times: int, prepared_transaction_offset: int,
                       queue_offset: int) -> int:
        """Write one record of ``size`` bytes (:func:`record_size`, the host flags of ``sys_flag``
        already set) at the end of the log; its physical offset, or -1 when no file could take it
        (Java ``CommitLog.putMessage`` with ``DefaultAppendMessageCallback.doAppend``)."""
        mf = self._file_with_room(size)
        if mf is None:
            return -1
        pos = mf.wrote_position
        phy = mf.file_from_offset + pos
        assert mf.mm is not None  # writable: mapped
        encode_record_at(mf.mm, pos, size, topic, queue_id, flag, body, props, sys_flag, born_timestamp,
                         born_host, store_timestamp, store_host, reconsume_times, prepared_transaction_offset,
                         queue_offset, phy)
        mf.wrote_position = pos + size
        self.last_store_timestamp = store_timestamp
        if phy + size > self._prefault_at:
            self._ask_prefault(mf)
        return phy

    def _file_with_room(self, size: int) -> MappedFile | None:
        """The last file when ``size`` bytes fit in it, else a new one (``roll``); None when no file
        could be made."""
        files = self.queue.files
        mf = files[-1] if files else None
        if mf is None or size + END_FILE_MIN_BLANK_LENGTH > mf.file_size - mf.wrote_position:
            return self.roll(size)  # no room left in the last file (or no file yet): roll over
        return mf

    def append_batch(self, records: Sequence[BatchRecord], total: int, topic: bytes, queue_id: int,
                     sys_flag: int, born_timestamp: int, born_host: bytes, store_timestamp: int,
                     store_host: bytes, reconsume_times: int, queue_offset: int) -> int:
        """Write a batch's records (``total`` bytes, consecutive queue offsets from
        ``queue_offset``) into one file; the first record's physical offset, or -1 when no file
        could take them (Java ``CommitLog.putMessages``). The records are encoded apart and
        copied into the file in one write. As :meth:`append_message` (and Java's ``putMessages``),
        the last file takes them when it has room; only otherwise ``roll`` (the store's free-space
        check around :meth:`mapped_file_for`)."""
        mf = self._file_with_room(total)
        if mf is None:
            return -1
        assert mf.mm is not None  # writable: mapped
        pos = mf.wrote_position
        first = mf.file_from_offset + pos
        mf.mm[pos:pos + total] = encode_batch_records(records, total, topic, queue_id, sys_flag, born_timestamp,
                                                      born_host, store_timestamp, store_host, reconsume_times,
                                                      queue_offset, first)
        mf.wrote_position = pos + total
        self.last_store_timestamp = store_timestamp
        if first + total > self._prefault_at:
            self._ask_prefault(mf)
        return first

    def append_data(self, start: int, data: bytes) -> bool:
        """Append replicated bytes verbatim at ``start``, which must be the current end (a
        slave's HA append, Java ``CommitLog.appendData``); False when it is not, or when the
        bytes do not fit in the file that holds ``start``."""
        mf = self.queue.get_last_mapped_file(start)
        if mf is None or mf.file_from_offset + mf.wrote_position != start:
            return False
        return mf.append(data)

    def undo_append(self, offset: int) -> None:
        """Take back the record(s) written from ``offset`` on (the last ones of the log): the
        header is cleared so that recovery ends there, and the write position goes back."""
        mf = self.queue.find_mapped_file_by_offset(offset)
        assert mf is not None and mf.mm is not None  # just written: mapped
        pos = offset - mf.file_from_offset
        mf.mm[pos:pos + 8] = bytes(8)
        mf.wrote_position = pos
        mf.flushed_position = min(mf.flushed_position, pos)  # the next record there must be flushed anew

    def is_offset_aligned(self, offset: int) -> bool:
        """Java ``isOffsetAligned``: no data at ``offset``, or a whole record (or a file's blank
        end) starts there."""
        mf = self.queue.find_mapped_file_by_offset(offset)
        if mf is None or mf.mm is None:
            return True
        pos, wrote = offset - mf.file_from_offset, mf.readable_position()
        if pos >= wrote:
            return True
        return check_record(memoryview(mf.mm)[:wrote], pos, check_crc=self.check_crc,
                            delay_tags_code=self.delay_tags_code).success

    def truncate_to(self, offset: int, detach: list[MappedFile], zeros: list[tuple[MappedFile, int, int]]) -> None:
        """Cut the log at ``offset`` (a replica's truncation, Java ``CommitLog.truncateDirtyFiles``):
        later files go to ``detach`` and the cut file's bytes after ``offset`` to ``zeros``, for
        the caller to destroy and clear off the reactor, before anything is appended again."""
        mf = self.queue.find_mapped_file_by_offset(offset)
        old_wrote = mf.wrote_position if mf is not None else 0
        self.queue.truncate_dirty_files(offset, detach)
        if mf is not None and mf in self.queue.files and not self.readonly and old_wrote > mf.wrote_position:
            zeros.append((mf, mf.wrote_position, old_wrote))

    # ------------------------------------------------------------------ flush
    def flush_blocking(self) -> None:
        """fsync every file with unflushed bytes (blocking: run it in a thread)."""
        for mf in list(self.queue.files):
            if mf.wrote_position > mf.flushed_position and mf.fd is not None:
                mf.flush_sync()

    # ------------------------------------------------------------------ recovery
    def _scan_from(self, index: int, on_record: Callable[[DispatchInfo], None] | None) -> int:
        """Walk records from file ``index``; returns the end of valid data."""
        files = self.queue.files
        mf = files[index]
        process = mf.file_from_offset
        pos = 0
        self.recovery_scan = [index, 1, 0]
        self.recovery_torn = None
        while True:
            mm = mf.mm
            view = memoryview(mm)[:mf.readable_position()] if mm is not None else b""
            d = check_record(view, pos, check_crc=self.check_crc, delay_tags_code=self.delay_tags_code)
            if d.success and d.size > 0:
                if d.commit_log_offset != mf.file_from_offset + pos:
                    log.warning("commitlog: record at %d claims offset %d; stopping recovery there",
                                mf.file_from_offset + pos, d.commit_log_offset)
                    break
                if on_record is not None:
                    on_record(d)
                self.last_store_timestamp = d.store_timestamp
                self.recovery_scan[2] += 1
                pos += d.size
            elif d.success and d.size == 0:  # blank: next file
                index += 1
                if index >= len(files):
                    break
                mf = files[index]
                process = mf.file_from_offset
                pos = 0
                self.recovery_scan[1] += 1
            else:
                if mm is not None and pos + 8 <= len(view) and any(view[pos:pos + 8]):
                    # not the zeros after the last record: a torn or corrupt record
                    self.recovery_torn = d.reason or "invalid record"
                    log.info("commitlog recovery: end of valid data at %d (%s)", mf.file_from_offset + pos,
                             self.recovery_torn)
                break
        return process + pos

    def recover_normally(self) -> int:
        files = self.queue.files
        if not files:
            return 0
        end = self._scan_from(max(0, len(files) - 3), None)
        self._truncate(end)
        return end

    def recover_abnormally(self, is_start_file: Callable[[int, int], bool],
                           on_record: Callable[[DispatchInfo], None]) -> int:
        """Pick the last file whose first record passes ``is_start_file(magic, store_ts)``,
        re-dispatch every record from there, truncate after the last valid one."""
        files = self.queue.files
        if not files:
            return 0
        index = len(files) - 1
        while index >= 0:
            mf = files[index]
            if mf.mm is not None and mf.mapped_len >= 64:
                total, magic, sts = peek_record_header(mf.mm, 0)
                if magic in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2) and sts != 0 and is_start_file(magic, sts):
                    break
            index -= 1
        index = max(index, 0)
        end = self._scan_from(index, on_record)
        self._truncate(end)
        return end

    def _truncate(self, end: int) -> None:
        old_max = self.queue.max_wrote_offset()
        old_files = len(self.queue.files)
        self.queue.truncate_dirty_files(end)
        deleted = old_files - len(self.queue.files)
        if self.recovery_torn is not None or deleted:
            log.info("commitlog recovery: truncated after offset %d (%s; %d later files deleted)", end,
                     self.recovery_torn or "end of valid data", deleted)
        for f in self.queue.files:
            f.flushed_position = f.wrote_position
        last = self.queue.last()
        if last is not None and not self.readonly and end < old_max:
            # clear the torn tail so that a later crash cannot resurrect it
            last.zero(last.wrote_position, min(last.file_size, last.wrote_position + (5 << 20)))

    # ------------------------------------------------------------------ retention
    def close(self) -> None:
        self.queue.close()
