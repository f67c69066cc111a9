"""IndexFile / IndexService: hash index of message keys (facts §7.3)."""

from __future__ import annotations

import logging
import operator
import os
import re
import struct
import time
from typing import Sequence

from rmqpy.protocol.message import _POW31, TRANSACTION_ROLLBACK_TYPE, java_string_hash
from rmqpy.protocol.sysflag import TRANSACTION_MASK
from rmqpy.speedups import native as _native
from rmqpy.store.mapped_file import MappedFile, StoreError

log = logging.getLogger(__name__)

HEADER = struct.Struct(">qqqqii")  # begin ts, end ts, begin phy, end phy, hashSlotCount, indexCount
HEADER_SIZE = 40
SLOT = struct.Struct(">i")
ITEM = struct.Struct(">iqii")  # keyHash, phyOffset, timeDiff (s), prevIndex
ITEM_SIZE = 20
INT_MAX = 0x7FFFFFFF
_NAME_RE = re.compile(r"^\d{17}$")


def index_key_hash(key: str) -> int:
    """abs(String.hashCode()), 0 when abs overflows (Integer.MIN_VALUE)."""
    h = java_string_hash(key)
    h = -h if h < 0 else h
    return 0 if h > INT_MAX else h


def build_key(topic: str, key: str) -> str:
    return topic + "#" + key


_mul = operator.mul


def _abs_hash(h: int) -> int:
    """index_key_hash from an unsigned 32-bit String.hashCode()."""
    if h & 0x80000000:
        h = 0x100000000 - h  # abs of the negative int32
    return 0 if h > INT_MAX else h


_TAIL = 4  # a UNIQ_KEY's counter, in hex: what changes from one message to the next within a millisecond
_POW31_TAIL = _POW31[_TAIL]
_P3, _P2, _P1 = _POW31[3], _POW31[2], _POW31[1]


class KeyHasher:
    """``index_key_hash(build_key(topic, key))`` with the hash of ``topic#`` worked out once
    per topic: hashCode(p + k) = hashCode(p) * 31^len(k) + hashCode(k) (mod 2^32).

    Keys longer than 16 characters are split the same way once more: the hash of ``topic#``
    plus all but the last 4 characters is kept per topic (at most ``max_heads`` of them),
    since a client's UNIQ_KEYs (MessageClientIDSetter: ip, pid and class loader, then the time of
    the month in ms and a counter) share their first 28 characters within a millisecond, as the
    messages of a batch do, so that only the last 4 are added per message."""

    def __init__(self, max_topics: int = 4096, max_heads: int = 1024) -> None:
        self.prefix: dict[str, tuple[int, dict[str, int]]] = {}
        self.max_topics = max_topics
        self.max_heads = max_heads

    def __call__(self, topic: str, key: str) -> int:
        n = len(key)
        if n > 4096 or not key.isascii():
            return index_key_hash(build_key(topic, key))
        entry = self._topic_entry(topic)
        if n <= 16:
            return _abs_hash((entry[0] * _POW31[n] + sum(map(_mul, key.encode("ascii")[::-1], _POW31))) & 0xFFFFFFFF)
        hh = self._head_hash(entry, key[:-_TAIL], n)
        a, b, c, d = key[-_TAIL:].encode("ascii")
        h = (hh * _POW31_TAIL + a * _P3 + b * _P2 + c * _P1 + d) & 0xFFFFFFFF
        if h & 0x80000000:  # _abs_hash, inline
            h = 0x100000000 - h
        return 0 if h > INT_MAX else h

    def many(self, topic: str, keys: Sequence[str]) -> list[int]:
        """``[self(topic, k) for k in keys]`` (a batch's UNIQ_KEYs): the same hashes, with one look-up
        of the topic and of each run of keys sharing all but their last 4 characters."""
        out: list[int] = []
        append = out.append
        last_head: str | None = None
        hh = 0
        for key in keys:
            n = len(key)
            if n <= 16 or n > 4096 or not key.isascii():
                append(self(topic, key))
                continue
            head = key[:-_TAIL]
            if head != last_head:
                hh = self._head_hash(self._topic_entry(topic), head, n)
                last_head = head
            a, b, c, d = key[-_TAIL:].encode("ascii")
            h = (hh * _POW31_TAIL + a * _P3 + b * _P2 + c * _P1 + d) & 0xFFFFFFFF
            if h & 0x80000000:  # _abs_hash, inline
                h = 0x100000000 - h
            append(0 if h > INT_MAX else h)
        return out

    def _topic_entry(self, topic: str) -> tuple[int, dict[str, int]]:
        """The hash of ``topic + "#"`` and the head hashes kept for the topic's keys."""
        entry = self.prefix.get(topic)
        if entry is None:
            if len(self.prefix) >= self.max_topics:
                self.prefix.clear()
            entry = self.prefix[topic] = (java_string_hash(topic + "#") & 0xFFFFFFFF, {})
        return entry

    def _head_hash(self, entry: tuple[int, dict[str, int]], head: str, n: int) -> int:
        """The hash kept for an ASCII key of ``n`` (17-4096) characters starting with ``head``."""
        hp, heads = entry
        hh = heads.get(head)
        if hh is None:
            if len(heads) >= self.max_heads:
                heads.clear()
            hh = heads[head] = (hp * _POW31[n - _TAIL]
                                + sum(map(_mul, head.encode("ascii")[::-1], _POW31))) & 0xFFFFFFFF
        return hh


def time_to_file_name(ms: int) -> str:
    t = time.localtime(ms / 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + "%03d" % (ms % 1000)


class IndexFile:
    """One index file: a header, the hash slots and the linked entries, on a :class:`MappedFile`."""

    def __init__(self, path: str, hash_slot_num: int, index_num: int, *, readonly: bool = False):
        self.path = path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.file_size = HEADER_SIZE + hash_slot_num * 4 + index_num * ITEM_SIZE
        self.readonly = readonly
        try:
            self.mapped = MappedFile(path, self.file_size, readonly=readonly)
        except StoreError as e:
            raise ValueError(f"{e} (maxHashSlotNum/maxIndexNum give {self.file_size} bytes)") from None
        if self.mapped.mapped_len < HEADER_SIZE:
            self.mapped.close()
            raise ValueError(f"{path}: index file too short ({self.mapped.mapped_len} bytes)")
        mm = self.mm = self.mapped.mm
        assert mm is not None  # mapped_len >= HEADER_SIZE: the file is mapped
        self.mapped_len = self.mapped.mapped_len
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = HEADER.unpack_from(mm, 0)
        if self.index_count <= 0:
            self.index_count = 1  # slot 0 of the item area is unused
            self._write_header()
        self.dirty = False

    @property
    def file_name(self) -> str:
        return os.path.basename(self.path)

    def _write_header(self) -> None:
        if not self.readonly:
            assert self.mm is not None  # not closed
            HEADER.pack_into(self.mm, 0, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                             self.end_phy_offset, self.hash_slot_count, self.index_count)

    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        if self.index_count >= self.index_num:
            return False
        return self.put_key_hash(index_key_hash(key), phy_offset, store_timestamp)

    def put_key_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """:meth:`put_key` for a key whose :func:`index_key_hash` is already known."""
        if not self.add_key_hash(key_hash, phy_offset, store_timestamp):
            return False
        self._write_header()
        return True

    def add_key_hash(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """:meth:`put_key_hash` but for the header, which the caller writes (:meth:`_write_header`)
        once after several keys: the entry and its slot are written, the header's fields kept."""
        if self.index_count >= self.index_num:
            return False
        slot_pos = key_hash % self.hash_slot_num
        abs_slot = HEADER_SIZE + slot_pos * 4
        mm = self.mm
        assert mm is not None  # not closed
        slot_value, = SLOT.unpack_from(mm, abs_slot)
        if slot_value <= 0 or slot_value > self.index_count:
            slot_value = 0
        if self.begin_timestamp <= 0:
            diff = 0
        else:
            diff = (store_timestamp - self.begin_timestamp) // 1000
            diff = 0 if diff < 0 else min(diff, INT_MAX)
        abs_index = HEADER_SIZE + self.hash_slot_num * 4 + self.index_count * ITEM_SIZE
        ITEM.pack_into(mm, abs_index, key_hash, phy_offset, diff, slot_value)
        SLOT.pack_into(mm, abs_slot, self.index_count)
        if self.index_count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        if slot_value == 0:
            self.hash_slot_count += 1
        self.index_count += 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        self.dirty = True
        return True

    def add_key_hashes(self, entries: Sequence[tuple[int, int]], store_timestamp: int) -> None:
        """:meth:`add_key_hash` of each ``(key_hash, phy_offset)`` in turn, all of one store time; the
        caller has made sure they fit (``index_count + len(entries) <= index_num``) and writes the
        header after them."""
        if len(entries) > self.index_num - self.index_count:
            raise ValueError(f"{len(entries)} index entries do not fit in {self.file_name}")
        mm = self.mm
        assert mm is not None  # not closed
        slots = self.hash_slot_num
        items = HEADER_SIZE + slots * 4
        unpack_slot = SLOT.unpack_from
        pack_slot = SLOT.pack_into
        pack_item = ITEM.pack_into
        count = self.index_count
        begin_ts = self.begin_timestamp
        slot_count = self.hash_slot_count
        phy_offset = self.end_phy_offset
        if begin_ts <= 0:
            diff = 0
        else:
            diff = (store_timestamp - begin_ts) // 1000
            diff = 0 if diff < 0 else min(diff, INT_MAX)
        if _native is not None and count > 1 and entries:  # past the file's first entry: the loop below, compiled
            count, added = _native.index_add_entries(mm, slots, count, entries, diff)
            self.hash_slot_count = slot_count + added
            self.index_count = count
            self.end_phy_offset = entries[-1][1]
            self.end_timestamp = store_timestamp
            self.dirty = True
            return
        for key_hash, phy_offset in entries:
            abs_slot = HEADER_SIZE + (key_hash % slots) * 4
            slot_value, = unpack_slot(mm, abs_slot)
            if slot_value <= 0 or slot_value > count:
                slot_value = 0
            pack_item(mm, items + count * ITEM_SIZE, key_hash, phy_offset, diff, slot_value)
            pack_slot(mm, abs_slot, count)
            if count <= 1:  # the file's first entry: its time is the file's begin, the next ones' diff 0
                self.begin_phy_offset = phy_offset
                begin_ts = store_timestamp
                diff = 0
            if slot_value == 0:
                slot_count += 1
            count += 1
        if entries:
            self.begin_timestamp = begin_ts
            self.hash_slot_count = slot_count
            self.index_count = count
            self.end_phy_offset = phy_offset
            self.end_timestamp = store_timestamp
            self.dirty = True

    def is_time_matched(self, begin: int, end: int) -> bool:
        return ((begin < self.begin_timestamp and end > self.end_timestamp)
                or (self.begin_timestamp <= begin <= self.end_timestamp)
                or (self.begin_timestamp <= end <= self.end_timestamp))

    def select_phy_offsets(self, out: list[int], key: str, max_num: int, begin: int, end: int) -> None:
        key_hash = index_key_hash(key)
        abs_slot = HEADER_SIZE + (key_hash % self.hash_slot_num) * 4
        if abs_slot + 4 > self.mapped_len:
            return
        mm = self.mm
        assert mm is not None  # not closed
        slot_value, = SLOT.unpack_from(mm, abs_slot)
        if slot_value <= 0 or slot_value > self.index_count or self.index_count <= 1:
            return
        nxt = slot_value
        seen = 0
        while len(out) < max_num and seen < self.index_num:
            seen += 1
            abs_index = HEADER_SIZE + self.hash_slot_num * 4 + nxt * ITEM_SIZE
            if abs_index + ITEM_SIZE > self.mapped_len:
                break
            h, phy, diff, prev = ITEM.unpack_from(mm, abs_index)
            if diff < 0:
                break
            t = self.begin_timestamp + diff * 1000
            if h == key_hash and begin <= t <= end:
                out.append(phy)
            if prev <= 0 or prev > self.index_count or prev == nxt or t < begin:
                break
            nxt = prev

    def flush_sync(self) -> None:
        if not self.readonly and self.mapped.fd is not None:
            self.dirty = False
            os.fsync(self.mapped.fd)

    def close(self) -> None:
        self.mapped.close()
        self.mm = None

    def destroy(self) -> None:
        self.mapped.destroy()
        self.mm = None


class IndexService:
    def __init__(self, store_path: str, hash_slot_num: int, index_num: int, *, readonly: bool = False,
                 now=None, max_msgs_num_batch: int = 64):
        self.store_path = store_path
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.readonly = readonly
        self.files: list[IndexFile] = []
        self.now = now or (lambda: int(time.time() * 1000))
        self.max_msgs_num_batch = max_msgs_num_batch
        self._hasher = KeyHasher()

    def load(self, last_exit_ok: bool, checkpoint_index_ts: int) -> None:
        if not os.path.isdir(self.store_path):
            return
        for name in sorted(os.listdir(self.store_path)):
            full = os.path.join(self.store_path, name)
            if not _NAME_RE.match(name):
                log.warning("ignoring foreign file %s in index directory", full)
                continue
            try:
                f = IndexFile(full, self.hash_slot_num, self.index_num, readonly=self.readonly)
            except ValueError as e:
                if self.readonly:
                    log.warning("%s", e)
                    continue
                raise
            # Java deletes, after an abnormal exit, index files written past the checkpoint.
            # Our index pages survive a process crash, and re-dispatch skips offsets
            # already indexed, so we keep them (a power loss only costs stale hits, which
            # are re-checked against the commit log).
            self.files.append(f)

    def file_size(self) -> int:
        """Bytes of one index file (header, hash slots, entries)."""
        return HEADER_SIZE + self.hash_slot_num * 4 + self.index_num * ITEM_SIZE

    def get_and_create_last(self) -> IndexFile | None:
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_write_full():
            return last
        if self.readonly:
            return None
        os.makedirs(self.store_path, exist_ok=True)
        now = self.now()
        name = time_to_file_name(now)
        while any(f.file_name == name for f in self.files) or (last and name <= last.file_name):
            now += 1
            name = time_to_file_name(now)
        f = IndexFile(os.path.join(self.store_path, name), self.hash_slot_num, self.index_num)
        if last is not None:  # carry the end position like Java
            f.begin_phy_offset = f.end_phy_offset = last.end_phy_offset
            f.begin_timestamp = f.end_timestamp = last.end_timestamp
            f._write_header()
            log.info("%s: index file full, rolled to a new file %s", self.store_path, name)
        self.files.append(f)
        return f

    def build_index(self, d) -> None:
        """Index a DispatchInfo (UNIQ_KEY and KEYS), skipping what is already indexed."""
        self.build_index_keys(d.topic, d.commit_log_offset, d.store_timestamp, d.uniq_key, d.keys, d.sys_flag)

    def build_index_keys(self, topic: str, phy: int, store_timestamp: int, uniq_key: str | None,
                         keys: str | None, sys_flag: int) -> None:
        """:meth:`build_index` from the record's fields (the store's put path has no DispatchInfo)."""
        if sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK_TYPE:
            return
        files = self.files
        f = files[-1] if files else None
        if f is None or f.index_count >= f.index_num:
            f = self.get_and_create_last()
            if f is None:
                return
        if phy < f.end_phy_offset:
            return
        hasher = self._hasher
        if uniq_key:  # _put's first try, inline
            key_hash = hasher(topic, uniq_key)
            if not f.put_key_hash(key_hash, phy, store_timestamp):
                f = self._put(self.get_and_create_last(), key_hash, phy, store_timestamp, uniq_key, 1)
        if keys:
            for k in keys.split(" "):
                if k:
                    f = self._put(f, hasher(topic, k), phy, store_timestamp, k)

    def build_index_batch(self, topic: str, store_timestamp: int, sys_flag: int,
                          entries: Sequence[tuple[int, str | None, str | None]]) -> None:
        """:meth:`build_index_keys` of each record of a batch put, ``(phy, uniq_key, keys)`` each, in
        the order of their (increasing) commit log offsets, all of one topic, store time and sys
        flag: the same entries in the same files, the keys that fit in the current file added in one
        go (:meth:`IndexFile.add_key_hashes`) and its header written once after them."""
        if sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK_TYPE:
            return
        hasher = self._hasher
        files = self.files
        if files and entries and not any([e[2] for e in entries]):
            # the usual batch: UNIQ_KEYs only, all above the last file's end and with room in it (what
            # the loop below does then, without its steps per key)
            last = files[-1]
            uniq = [(e[1], e[0]) for e in entries if e[1]]
            room = last.index_num - last.index_count
            if 0 < room and len(uniq) <= room and entries[0][0] >= last.end_phy_offset:
                if uniq:
                    uniq_keys, uniq_phys = zip(*uniq)
                    hashes = (_native.index_key_hashes(topic, uniq_keys) if _native is not None
                              else hasher.many(topic, uniq_keys))
                    last.add_key_hashes(list(zip(hashes, uniq_phys)), store_timestamp)
                    last._write_header()
                return
        pending: list[tuple[int, int]] = []  # (key_hash, phy) for ``f``, not written yet
        f: IndexFile | None = None
        room = 0  # entries ``f`` still takes after ``pending``
        for phy, uniq_key, keys in entries:
            if f is None or room <= 0:  # as build_index_keys: a full last file is rolled before anything else
                self._flush_pending(f, pending, store_timestamp)
                files = self.files
                f = files[-1] if files else None
                if f is None or f.index_count >= f.index_num:
                    f = self.get_and_create_last()
                    if f is None:
                        return
                room = f.index_num - f.index_count
            # the pending entries are all below ``phy``: end_phy_offset once they are written is too
            if phy < f.end_phy_offset:
                continue
            names = keys.split(" ") if keys else []
            if uniq_key:
                names.insert(0, uniq_key)
            for k in names:
                if not k:
                    continue
                key_hash = hasher(topic, k)
                if room > 0:
                    pending.append((key_hash, phy))
                    room -= 1
                    continue
                # ``f`` is full: _put tries it, then rolls (as build_index_keys does)
                self._flush_pending(f, pending, store_timestamp)
                f = self._put(f, key_hash, phy, store_timestamp, k)
                room = f.index_num - f.index_count if f is not None else 0
        self._flush_pending(f, pending, store_timestamp)

    @staticmethod
    def _flush_pending(f: IndexFile | None, pending: list[tuple[int, int]], store_timestamp: int) -> None:
        """Write ``pending``'s entries into ``f`` and its header after them."""
        if f is not None and pending:
            f.add_key_hashes(pending, store_timestamp)
            f._write_header()
        pending.clear()

    def _put(self, f: IndexFile | None, key_hash: int, phy: int, ts: int, key: str,
             tried: int = 0) -> IndexFile | None:
        for _ in range(tried, 3):
            if f is not None and f.put_key_hash(key_hash, phy, ts):
                return f
            f = self.get_and_create_last()
        log.warning("index: failed to put key %r", key)
        return f

    def query_offsets(self, topic: str, key: str, max_num: int, begin: int, end: int):
        max_num = min(max_num, self.max_msgs_num_batch)
        out: list[int] = []
        last_ts = 0
        last_phy = 0
        for i in range(len(self.files) - 1, -1, -1):
            f = self.files[i]
            if i == len(self.files) - 1:
                last_ts, last_phy = f.end_timestamp, f.end_phy_offset
            if f.is_time_matched(begin, end):
                f.select_phy_offsets(out, build_key(topic, key), max_num, begin, end)
            if f.begin_timestamp < begin or len(out) >= max_num:
                break
        return out, last_ts, last_phy

    def delete_expired(self, min_phy_offset: int) -> int:
        """Delete index files whose entries all point below ``min_phy_offset`` (never the last)."""
        n = 0
        while len(self.files) - n > 1 and self.files[n].end_phy_offset < min_phy_offset:
            n += 1
        for f in self.files[:n]:
            f.destroy()
        self.files = self.files[n:]
        return n

    def flush_sync(self) -> int:
        """fsync dirty index files; returns the end timestamp now known to be on disk."""
        ts = 0
        for f in list(self.files):
            if f.dirty:
                end_ts = f.end_timestamp
                try:
                    f.flush_sync()
                except (OSError, ValueError):
                    continue
                ts = max(ts, end_ts)
        return ts

    def destroy(self) -> None:
        for f in self.files:
            f.destroy()
        self.files = []

    def close(self) -> None:
        for f in self.files:
            f.close()
