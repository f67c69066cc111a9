"""The epoch file of controller mode (Java ``EpochFileCache`` over ``CheckpointFile``).

Each master term of a broker set has an epoch, a number the controller raises at every
election. A broker keeps, for each epoch it holds data of, the commit log offset where that
epoch's data starts; the entry's end is where the next epoch starts (the last entry's end is
open, :data:`LAST_EPOCH_END_OFFSET`, or the store's max offset where a caller sets it). When a
replica connects to a new master both compare their lists: the last epoch both have with the
same start offset is where their logs agree up to the smaller of the two ends
(:meth:`EpochCache.find_consistent_point`), and the replica cuts its log there.

On disk the list is ``<storePathRootDir>/epochFileCheckpoint`` (``storePathEpochFile``), a text
file as Java's ``CheckpointFile`` writes it::

    2                 the number of entries
    773307083         CRC32 of the entry lines below (with their line ends), & 0x7fffffff
    7-7000            epoch-startOffset, one entry a line, epochs ascending
    8-8000

Lines end with ``\\n`` (Java's ``System.lineSeparator()`` on Linux). A CRC of 0 is not checked.
Before each write the previous content is copied to ``epochFileCheckpoint.bak``
(``MixAll.string2File``); a file that cannot be read (missing, no entries, a count or CRC that
does not match, a line that is not a number) is read from the ``.bak`` instead. As Java's, an
empty list is never written: truncating every entry leaves the file as it was.

:class:`EpochCache` is the list in memory (what the HA protocol compares); :class:`EpochFile`
adds the file: every change is written off the reactor through ``in_thread``, the newest list
only (:class:`~rmqpy.common.filewrite.LatestWriter`), so a burst of changes costs one write.
"""
from __future__ import annotations

import bisect
import logging
import os
import re
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from twisted.internet import defer
from twisted.python.failure import Failure

from rmqpy.common.filewrite import LatestWriter, write_file_atomically

log = logging.getLogger(__name__)

#: the end offset of an epoch no later epoch closed yet (Java ``EpochEntry.LAST_EPOCH_END_OFFSET``,
#: ``Long.MAX_VALUE``)
LAST_EPOCH_END_OFFSET = (1 << 63) - 1
#: the file's name under the store root (Java ``MessageStoreConfig.getStorePathEpochFile``)
EPOCH_FILE_NAME = "epochFileCheckpoint"


class EpochFileError(Exception):
    """Neither the epoch file nor its ``.bak`` could be read."""


@dataclass(frozen=True)
class EpochEntry:
    """One epoch: where its data starts in the commit log and where it ends (exclusive)."""
    epoch: int
    start_offset: int
    end_offset: int = LAST_EPOCH_END_OFFSET

    def with_end(self, end_offset: int) -> "EpochEntry":
        return EpochEntry(self.epoch, self.start_offset, end_offset)


def java_crc32(data: bytes) -> int:
    """Java ``UtilAll.crc32``: CRC32 with the sign bit cleared."""
    return zlib.crc32(data) & 0x7FFFFFFF


def encode_epoch_file(entries: Iterable[EpochEntry]) -> str:
    """The text of a checkpoint file holding ``entries`` (Java ``CheckpointFile.write``)."""
    lines = "".join(f"{e.epoch}-{e.start_offset}\n" for e in entries)
    count = lines.count("\n")
    return f"{count}\n{java_crc32(lines.encode('utf-8'))}\n{lines}"


def decode_epoch_file(text: str) -> list[EpochEntry]:
    """The entries of a checkpoint file's text; ValueError when the count, the CRC or a number
    does not match (Java ``CheckpointFile.read``; a line that is not ``a-b`` counts for the CRC
    but is no entry). Ends are filled in from the next entry's start."""
    lines = re.split(r"\r\n|\r|\n", text)  # Java's readLine ends a line at any of them
    if len(lines) < 2:
        raise ValueError("no count and CRC lines")
    expected_count, expected_crc = int(lines[0]), int(lines[1])
    body = lines[2:]
    if body and body[-1] == "":
        body.pop()  # the last line's end
    entries: list[EpochEntry] = []
    for line in body:
        parts = line.split("-")
        if len(parts) == 2:
            entries.append(EpochEntry(int(parts[0]), int(parts[1])))
    if len(entries) != expected_count:
        raise ValueError(f"expected {expected_count} entries, found {len(entries)}")
    crc = java_crc32("".join(line + "\n" for line in body).encode("utf-8"))
    if expected_crc != 0 and crc != expected_crc:
        raise ValueError(f"entries CRC {crc}, the file says {expected_crc}")
    return _with_ends(entries)


def _with_ends(entries: Iterable[EpochEntry]) -> list[EpochEntry]:
    """Entries ordered by epoch (a later one of the same epoch wins, as in Java's map), each
    ending where the next starts; the last keeps its own end."""
    by_epoch: dict[int, EpochEntry] = {}
    for e in entries:
        by_epoch[e.epoch] = e
    ordered = [by_epoch[k] for k in sorted(by_epoch)]
    return [e.with_end(ordered[i + 1].start_offset) if i + 1 < len(ordered) else e
            for i, e in enumerate(ordered)]


def read_epoch_file(path: str) -> list[EpochEntry]:
    """The entries of ``path``, or of ``path.bak`` when ``path`` is missing, empty or corrupt
    (blocking; at startup). :class:`EpochFileError` when both exist and neither can be read."""
    def read_one(p: str) -> list[EpochEntry]:
        if not os.path.exists(p):
            return []
        with open(p, encoding="utf-8") as fh:
            return decode_epoch_file(fh.read())

    try:
        entries = read_one(path)
        if entries:
            return entries
    except (ValueError, OSError, UnicodeDecodeError) as e:
        log.warning("epoch file %s unreadable (%s): reading %s.bak", path, e, path)
    try:
        return read_one(path + ".bak")
    except (ValueError, OSError, UnicodeDecodeError) as e:
        raise EpochFileError(f"neither {path} nor its .bak can be read: {e}") from e


class EpochCache:
    """The epoch list in memory, by ascending epoch (Java ``EpochFileCache`` without a file)."""

    def __init__(self, entries: Iterable[EpochEntry] = ()) -> None:
        self._entries: list[EpochEntry] = _with_ends(entries)

    # ------------------------------------------------------------------ reads
    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def first(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def last(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def last_epoch(self) -> int:
        """The last epoch, -1 with none."""
        return self._entries[-1].epoch if self._entries else -1

    def get(self, epoch: int) -> EpochEntry | None:
        i = self._index(epoch)
        return self._entries[i] if i is not None else None

    def next_entry(self, epoch: int) -> EpochEntry | None:
        """The first entry of an epoch above ``epoch``."""
        i = bisect.bisect_right([e.epoch for e in self._entries], epoch)
        return self._entries[i] if i < len(self._entries) else None

    def find_by_offset(self, offset: int) -> EpochEntry | None:
        """The entry whose [start, end) holds ``offset``."""
        for e in self._entries:
            if e.start_offset <= offset < e.end_offset:
                return e
        return None

    def find_consistent_point(self, other: "EpochCache") -> int:
        """Where this log and ``other``'s agree up to: from this list's last epoch down, the first
        epoch ``other`` has with the same start offset; the smaller of the two ends. -1 when they
        share no epoch (Java ``findConsistentPoint``)."""
        for mine in reversed(self._entries):
            theirs = other.get(mine.epoch)
            if theirs is not None and theirs.start_offset == mine.start_offset:
                return min(mine.end_offset, theirs.end_offset)
        return -1

    def _index(self, epoch: int) -> int | None:
        keys = [e.epoch for e in self._entries]
        i = bisect.bisect_left(keys, epoch)
        return i if i < len(keys) and keys[i] == epoch else None

    # ------------------------------------------------------------------ changes
    def init_entries(self, entries: Iterable[EpochEntry]) -> None:
        """Replace the list (Java ``initCacheFromEntries``)."""
        self._entries = _with_ends(entries)
        self._changed()

    def append(self, entry: EpochEntry) -> bool:
        """Add a later epoch starting at a later offset; the previous last entry ends where it
        starts. False (nothing changes) when the epoch or the start is not above the last's."""
        last = self.last()
        if last is not None:
            if last.epoch >= entry.epoch or last.start_offset >= entry.start_offset:
                log.error("epoch entry %s does not follow the last one %s: not appended", entry, last)
                return False
            self._entries[-1] = last.with_end(entry.start_offset)
        self._entries.append(entry.with_end(LAST_EPOCH_END_OFFSET))
        self._changed()
        return True

    def set_last_end_offset(self, end_offset: int) -> None:
        """The last entry ends at ``end_offset`` (the store's max offset) unless it starts after
        it (Java ``setLastEpochEntryEndOffset``; memory only)."""
        last = self.last()
        if last is not None and last.start_offset <= end_offset:
            self._entries[-1] = last.with_end(end_offset)

    def truncate_suffix_by_epoch(self, epoch: int) -> None:
        """Drop the entries of epochs >= ``epoch``."""
        self._truncate_suffix(lambda e: e.epoch >= epoch)

    def truncate_suffix_by_offset(self, offset: int) -> None:
        """Drop the entries that start at or after ``offset``."""
        self._truncate_suffix(lambda e: e.start_offset >= offset)

    def _truncate_suffix(self, drop: Callable[[EpochEntry], bool]) -> None:
        # Java sets the new last entry's end to LAST_EPOCH_END_OFFSET on a copy, so its map keeps
        # the old end; the last entry's end is open here, as Java's comment means it to be
        kept = [e for e in self._entries if not drop(e)]
        if kept:
            kept[-1] = kept[-1].with_end(LAST_EPOCH_END_OFFSET)
        self._entries = kept
        self._changed()

    def truncate_prefix_by_offset(self, offset: int) -> None:
        """Drop the entries that end at or before ``offset`` (their data was deleted)."""
        self._entries = [e for e in self._entries if e.end_offset > offset]
        self._changed()

    def _changed(self) -> None:
        """A hook for :class:`EpochFile`."""


class EpochFile(EpochCache):
    """:class:`EpochCache` kept in ``path`` (Java ``EpochFileCache(path)``).

    The file is read when this is built (blocking, at startup, as the store's other files);
    each change is then written off the reactor with ``in_thread(fn, *args) -> Deferred``
    (the store's :class:`~rmqpy.store.flush.BlockingRunner` ``run``). :meth:`when_written`
    fires once the list as it is now is on disk."""

    def __init__(self, path: str, in_thread: Callable[..., defer.Deferred[Any]]) -> None:
        self.path = path
        self._writer = LatestWriter(self._write, in_thread, self._write_failed)
        super().__init__(read_epoch_file(path))

    def _changed(self) -> None:
        self._writer.write(self.entries())

    def _write(self, entries: list[EpochEntry]) -> None:
        if not entries:
            return  # Java's CheckpointFile.write writes nothing for an empty list
        write_file_atomically(self.path, encode_epoch_file(entries))

    def _write_failed(self, failure: Failure) -> None:
        log.error("writing the epoch file %s failed: %s", self.path, failure.getErrorMessage())

    def when_written(self) -> defer.Deferred[Any]:
        return self._writer.when_idle()
