"""ConsumeQueue: per topic-queue index of 20-byte units (facts §7.2)."""

from __future__ import annotations

import logging
import os
import struct
from typing import Any, Iterator, Sequence

from rmqpy.speedups import native as _native
from rmqpy.store.config import CQ_STORE_UNIT_SIZE
from rmqpy.store.mapped_file import MappedFile, MappedFileQueue
from rmqpy.store.paths import consume_queue_path

log = logging.getLogger(__name__)

UNIT = struct.Struct(">qiq")
BLANK_UNIT = UNIT.pack(0, 0x7FFFFFFF, 0)
INT_MAX = 0x7FFFFFFF


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, root_dir: str, mapped_file_size: int, *, readonly: bool = False):
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_size = mapped_file_size
        self.store_path = consume_queue_path(root_dir, topic, queue_id)  # StorePathError outside root_dir
        self.queue = MappedFileQueue(self.store_path, mapped_file_size, readonly=readonly)
        self.max_physic_offset = -1  # end (offset+size) of the last unit
        self.min_logic_offset = 0  # bytes
        self.readonly = readonly

    # ------------------------------------------------------------------ load / recover
    def load(self) -> None:
        self.queue.load()

    def _valid_units_in(self, mf) -> int:
        """Number of leading valid units of a file (valid = offset >= 0 and size > 0).

        Uses a binary search over the (valid prefix, then invalid) layout, then
        walks back over any invalid unit the search jumped over."""
        mm = mf.mm
        if mm is None:
            return 0
        n = mf.readable_position() // CQ_STORE_UNIT_SIZE if mf.readonly else mf.file_size // CQ_STORE_UNIT_SIZE
        n = min(n, mf.mapped_len // CQ_STORE_UNIT_SIZE)

        def valid(i):
            off, size, _t = UNIT.unpack_from(mm, i * CQ_STORE_UNIT_SIZE)
            return off >= 0 and size > 0

        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if valid(mid):
                lo = mid + 1
            else:
                hi = mid
        # lo = first invalid by bisection; make sure the prefix [0, lo) really is valid
        # (check a bounded window linearly; corrupt middles are rare and then we cut there)
        start = max(0, lo - 4096)
        for i in range(start, lo):
            if not valid(i):
                return i
        return lo

    def recover(self) -> None:
        files = self.queue.files
        if not files:
            return
        index = max(0, len(files) - 3)
        process = files[index].file_from_offset
        max_phy = -1
        while index < len(files):
            mf = files[index]
            units = self._valid_units_in(mf)
            if units:  # so mapped
                assert mf.mm is not None
                last = UNIT.unpack_from(mf.mm, (units - 1) * CQ_STORE_UNIT_SIZE)
                if not (last[0] == 0 and last[1] == INT_MAX):
                    max_phy = last[0] + last[1]
            process = mf.file_from_offset + units * CQ_STORE_UNIT_SIZE
            if units * CQ_STORE_UNIT_SIZE < mf.file_size:
                break
            index += 1
        self.max_physic_offset = max_phy
        self.queue.truncate_dirty_files(process)
        for mf in self.queue.files:
            mf.flushed_position = mf.wrote_position
        if self.queue.files and not self.readonly:
            tail = self.queue.files[-1]
            tail.zero(tail.wrote_position, min(tail.file_size, tail.wrote_position + 4096))
        self.min_logic_offset = self.queue.min_offset() if self.queue.files else 0

    # ------------------------------------------------------------------ offsets
    def get_max_offset_in_queue(self) -> int:
        return self.queue.max_wrote_offset() // CQ_STORE_UNIT_SIZE

    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def get_max_physic_offset(self) -> int:
        return self.max_physic_offset

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """Set the min logic offset to the first unit whose commitlog offset >= phy_min_offset."""
        first = self.queue.first()
        if first is None:
            return
        n = first.wrote_position // CQ_STORE_UNIT_SIZE
        mm = first.mm
        lo, hi = 0, n
        # units in a file are in increasing commitlog order except blank pre-fill units (offset 0)
        while lo < hi:
            assert mm is not None  # units written: mapped
            mid = (lo + hi) // 2
            off, size, _ = UNIT.unpack_from(mm, mid * CQ_STORE_UNIT_SIZE)
            if off >= phy_min_offset and not (off == 0 and size == INT_MAX):
                hi = mid
            else:
                lo = mid + 1
        cand = first.file_from_offset + lo * CQ_STORE_UNIT_SIZE
        self.min_logic_offset = max(self.min_logic_offset, cand) if lo < n else max(
            self.min_logic_offset, first.file_from_offset + n * CQ_STORE_UNIT_SIZE)

    # ------------------------------------------------------------------ write
    def put(self, phy_offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Write the unit for logical offset ``cq_offset`` (idempotent for re-dispatch)."""
        if phy_offset + size <= self.max_physic_offset:
            return True  # already there
        pos = cq_offset * CQ_STORE_UNIT_SIZE
        files = self.queue.files
        if files:  # the usual case: the unit goes right at the end of the last file, which has room
            mf: MappedFile | None
            mf = files[-1]
            wrote = mf.wrote_position
            if mf.file_from_offset + wrote == pos and wrote + CQ_STORE_UNIT_SIZE <= mf.file_size:
                mm = mf.mm
                assert mm is not None  # writable: mapped
                UNIT.pack_into(mm, wrote, phy_offset, size, tags_code)
                mf.wrote_position = wrote + CQ_STORE_UNIT_SIZE
                self.max_physic_offset = phy_offset + size
                return True
        cur = self.queue.max_wrote_offset()
        if not self.queue.files:
            mf = self.queue.get_last_mapped_file(pos)
            assert mf is not None  # None only when read-only
            if pos > mf.file_from_offset:
                self.min_logic_offset = pos
                self._fill_blank(mf, pos - mf.file_from_offset)
            elif pos == mf.file_from_offset:
                self.min_logic_offset = pos
            cur = self.queue.max_wrote_offset()
        if pos < cur:
            log.warning("consume queue %s-%d: unit %d already written (max %d)", self.topic, self.queue_id,
                        cq_offset, cur // CQ_STORE_UNIT_SIZE)
            return True
        while cur < pos:  # gap: fill with blank units
            mf = self.queue.get_last_mapped_file(cur)
            assert mf is not None
            n = min(pos - cur, mf.remaining())
            self._fill_blank(mf, mf.wrote_position + n)
            cur = self.queue.max_wrote_offset()
        mf = self.queue.get_last_mapped_file(pos)
        assert mf is not None
        ok = mf.append(UNIT.pack(phy_offset, size, tags_code))
        if ok:
            self.max_physic_offset = phy_offset + size
        return ok

    def put_batch(self, units: Sequence[tuple[int, int, int, int, Any]]) -> None:
        """:meth:`put` of each of a batch put's records, ``(phy, size, tags_code, cq_offset, ...)``
        with consecutive ``cq_offset``s and increasing ``phy``: when they all go at the end of the
        last file, packed together and written in one copy (the same bytes); else one by one."""
        first = units[0]
        files = self.queue.files
        if files and first[0] + first[1] > self.max_physic_offset:
            mf = files[-1]
            wrote = mf.wrote_position
            end = wrote + len(units) * CQ_STORE_UNIT_SIZE
            if mf.file_from_offset + wrote == first[3] * CQ_STORE_UNIT_SIZE and end <= mf.file_size:
                mm = mf.mm
                assert mm is not None  # writable: mapped
                if _native is not None:
                    mm[wrote:end] = _native.consume_queue_units(units)
                else:
                    pack = UNIT.pack
                    mm[wrote:end] = b"".join([pack(u[0], u[1], u[2]) for u in units])
                mf.wrote_position = end
                last = units[-1]
                self.max_physic_offset = last[0] + last[1]
                return
        put = self.put
        for u in units:
            put(u[0], u[1], u[2], u[3])

    @staticmethod
    def _fill_blank(mf, upto: int) -> None:
        while mf.wrote_position < upto:
            mf.append(BLANK_UNIT)

    # ------------------------------------------------------------------ read
    def get_unit(self, offset: int) -> tuple[int, int, int] | None:
        pos = offset * CQ_STORE_UNIT_SIZE
        if pos < self.min_logic_offset:
            return None
        mf = self.queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        if rel + CQ_STORE_UNIT_SIZE > mf.readable_position():
            return None
        assert mf.mm is not None  # readable bytes: mapped
        return UNIT.unpack_from(mf.mm, rel)

    def iter_units_in_file(self, offset: int, limit: int) -> Iterator[tuple[int, int, int]] | None:
        """At most ``limit`` units from ``offset`` on, as far as the file holding it has written
        data (Java ``getIndexBuffer``, of which a pull reads at most 16,000 bytes), or None if that
        file is gone. The units are copied out of the mapping: the limit keeps a pull's copy to
        what it reads, not the rest of a file of up to 300,000 units (6 MB per pull of a
        backlogged queue)."""
        pos = offset * CQ_STORE_UNIT_SIZE
        if pos < self.min_logic_offset:
            return None
        mf = self.queue.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        rel = pos - mf.file_from_offset
        end = mf.readable_position()
        if rel >= end:
            return None
        assert mf.mm is not None  # readable bytes: mapped
        data = mf.mm[rel:min(end, rel + max(0, limit) * CQ_STORE_UNIT_SIZE)]
        return UNIT.iter_unpack(data)

    def units_bytes(self, offset: int, end: int) -> bytes:
        """The raw 20-byte units from ``offset`` up to ``end`` (queue offsets), as far as the file
        holding ``offset`` has written units; b"" when that file is gone or ``offset`` is below the
        min offset. A reader walks on from ``offset`` plus the units returned."""
        pos = offset * CQ_STORE_UNIT_SIZE
        if pos < self.min_logic_offset or end <= offset:
            return b""
        mf = self.queue.find_mapped_file_by_offset(pos)
        if mf is None or mf.mm is None:
            return b""
        rel = pos - mf.file_from_offset
        stop = min(mf.readable_position(), end * CQ_STORE_UNIT_SIZE - mf.file_from_offset)
        return bytes(mf.mm[rel:stop]) if stop > rel else b""

    def roll_next_file(self, offset: int) -> int:
        units_per_file = self.mapped_file_size // CQ_STORE_UNIT_SIZE
        return offset + units_per_file - offset % units_per_file

    def last_unit(self) -> tuple[int, int, int] | None:
        m = self.get_max_offset_in_queue()
        return self.get_unit(m - 1) if m > 0 else None

    # ------------------------------------------------------------------ maintenance
    def truncate_dirty_logic_files(self, phy_offset: int, detach: list[MappedFile] | None = None,
                                   zeros: list[tuple[MappedFile, int, int]] | None = None) -> None:
        """Drop units whose commitlog record ends past ``phy_offset``. With ``detach`` and
        ``zeros``, files after the cut and the byte ranges to clear are handed to the caller
        (to destroy and zero off the reactor) instead of done here."""
        max_off = self.get_max_offset_in_queue()
        lo = self.get_min_offset_in_queue()
        cut = max_off
        i = max_off - 1
        while i >= lo:
            u = self.get_unit(i)
            if u is None:
                break
            off, size, _ = u
            if off == 0 and size == INT_MAX:
                i -= 1
                continue
            if off + size > phy_offset:
                cut = i
                i -= 1
                continue
            break
        if cut < max_off:
            pos = cut * CQ_STORE_UNIT_SIZE
            last = self.queue.find_mapped_file_by_offset(pos)
            self.queue.truncate_dirty_files(pos, detach)
            if last is not None and not self.readonly and last in self.queue.files:
                end = (last.file_size if max_off * CQ_STORE_UNIT_SIZE >= last.end_offset
                       else max_off * CQ_STORE_UNIT_SIZE - last.file_from_offset)
                if zeros is not None:
                    zeros.append((last, last.wrote_position, end))
                else:
                    last.zero(last.wrote_position, end)
            if pos < self.min_logic_offset:
                self.min_logic_offset = pos
        # recompute max physic offset
        self.max_physic_offset = -1
        j = self.get_max_offset_in_queue() - 1
        while j >= self.get_min_offset_in_queue():
            u = self.get_unit(j)
            if u is None:
                break
            if not (u[0] == 0 and u[1] == INT_MAX):
                self.max_physic_offset = u[0] + u[1]
                break
            j -= 1

    def delete_expired_files(self, min_commitlog_offset: int) -> int:
        """Delete leading files whose last unit is below the commitlog minimum (never the last file)."""
        n = 0
        files = self.queue.files
        while len(files) - n > 1:
            mf = files[n]
            if mf.wrote_position < CQ_STORE_UNIT_SIZE:
                break
            assert mf.mm is not None  # units written: mapped
            off, size, _ = UNIT.unpack_from(mf.mm, mf.wrote_position - CQ_STORE_UNIT_SIZE)
            if off + size <= min_commitlog_offset or (off == 0 and size == INT_MAX):
                n += 1
            else:
                break
        for mf in self.queue.delete_first_files(n):
            mf.destroy()
        if n:
            self.min_logic_offset = max(self.min_logic_offset, self.queue.min_offset())
        self.correct_min_offset(min_commitlog_offset)
        return n

    def flush_sync(self) -> None:
        for mf in list(self.queue.files):
            if mf.wrote_position > mf.flushed_position:
                try:
                    mf.flush_sync()
                except (OSError, ValueError):
                    pass

    def destroy(self) -> None:
        self.queue.destroy()
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        try:
            os.rmdir(os.path.dirname(self.store_path))
        except OSError:
            pass

    def close(self) -> None:
        self.queue.close()
