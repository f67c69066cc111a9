"""The commit log's pages behind its tail dropped from the broker's page tables (issue 29's RSS goal).

Every page of the commit log a put writes or a pull reads stays mapped in the process, so the
broker's RSS grows by every byte stored until the file is deleted: after the send phases of the
issue 19 matrix it was 0.5-0.9 GiB, almost all of it the commit log's pages (RssFile), which made
rmqpy's RSS 0.54-0.70 of the Java broker's (whose 1 GiB heap comes on top of the same pages).

Those pages are the kernel's page cache, shared with the file: ``madvise(MADV_DONTNEED)`` on a
shared file mapping takes them out of this process' page tables and leaves them, and their data,
in the page cache (a dirty page stays dirty there and is written back as before). A later read
through the mapping maps the cached page again (a minor fault; measured 9.6 ms against 7.4 ms for
64 MiB read in 32 KiB reads, page cache warm). So nothing a reader sees changes, nor what
survives ``kill -9`` (the page cache) or a power loss (what the flush's fsync wrote). Java keeps
every page it touched mapped: this is rmqpy's own choice, on by default, off with
``RMQPY_RESIDENT_MB=0``; the memory is the page cache's either way, what changes is the RSS the
process is charged (``ps``, the OOM killer's score, per-process monitoring).

What is dropped, once per :data:`INTERVAL` s in the store's blocking-work thread: the pages of
the commit log older than the last :data:`WINDOW` bytes and already flushed (clean, so cheap to
drop: 1.8 us per MiB measured, against 32 us for dirty ones), from where the last pass stopped;
and, files in turn, up to :data:`SWEEP` bytes of mapping before that point per pass, for the
pages pulls of older messages mapped again.
"""

from __future__ import annotations

import logging
import os

from rmqpy.store.mapped_file import MappedFileQueue

log = logging.getLogger(__name__)

#: the newest bytes of the commit log left mapped (pulls of new messages read there)
WINDOW = 16 << 20
#: seconds between two passes
INTERVAL = 1.0
#: the mapping a pass sweeps for pages reads mapped again, files in turn (at least one file): a
#: madvise walks the range's page tables, about 0.4 ms per GiB once they were populated
SWEEP = 1 << 30
#: ``RMQPY_RESIDENT_MB=N``: leave the newest N MiB mapped instead of :data:`WINDOW`; 0: drop nothing
ENV = "RMQPY_RESIDENT_MB"


def window_from_env() -> int | None:
    """The window in bytes, or None when the environment turns dropping off."""
    raw = os.environ.get(ENV, "")
    if not raw:
        return WINDOW
    try:
        mib = float(raw)
    except ValueError:
        log.warning("%s=%r is not a number of MiB; using %d MiB", ENV, raw, WINDOW >> 20)
        return WINDOW
    return int(mib * (1 << 20)) if mib > 0 else None


class ResidentWindow:
    """Where the commit log's pages were dropped up to, and which older file the sweep is at.

    :meth:`trim` runs in a thread; the reactor thread only reads the offsets it passes in."""

    def __init__(self, queue: MappedFileQueue, window: int = WINDOW):
        self.queue = queue
        self.window = window
        self.interval = INTERVAL
        self.sweep = SWEEP
        self.released_to = 0  # commit log offset: the pages before it were dropped at least once
        self._sweep = 0  # the index of the older file the next sweep drops
        self.passes = 0

    def limit(self, flushed: int, written: int) -> int:
        """The offset pages are dropped up to: flushed, and :attr:`window` behind the end."""
        return max(0, min(flushed, written - self.window))

    def trim(self, limit: int) -> int:
        """Drop the pages of [:attr:`released_to`, ``limit``), then those before it of files in
        turn, :attr:`sweep` bytes of them (pulls of older messages map pages again); returns the
        bytes advised."""
        files = list(self.queue.files)
        if not files:
            return 0
        self.released_to = min(self.released_to, limit)  # the log was truncated back
        advised = 0
        start = max(self.released_to, files[0].file_from_offset)
        if limit > start:
            for mf in files:
                lo, hi = max(start, mf.file_from_offset), min(limit, mf.end_offset)
                if lo < hi:
                    advised += mf.release(lo - mf.file_from_offset, hi - mf.file_from_offset)
            self.released_to = limit
        behind = [mf for mf in files if mf.file_from_offset < self.released_to]
        swept = 0
        for _ in range(len(behind)):  # what reads mapped again: files in turn, SWEEP bytes a pass
            if swept >= self.sweep:
                break
            mf = behind[self._sweep % len(behind)]
            self._sweep = (self._sweep + 1) % len(behind)
            swept += mf.file_size
            advised += mf.release(0, min(mf.file_size, self.released_to - mf.file_from_offset))
        self.passes += 1
        return advised
