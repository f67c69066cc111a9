"""A full disk refuses puts; it never crashes the broker (issue 11, row 4).

The pieces, as :class:`MessageStore` uses them:

* every mapped file's blocks are reserved when it is created (``space.allocate``), and the
  files written next are reserved again at load (a store written by Java, or by an older
  rmqpy, has sparse files): a write through a mapping can then never meet a full disk;
* before the commit log rolls, the free space must hold the new file plus
  ``FREE_SPACE_HEADROOM`` (the small plain writes: config json, offsets, logs);
* a reservation that fails with ENOSPC undoes the record being put (its consume queue unit
  could not be written) and marks the store full: puts are answered SERVICE_NOT_AVAILABLE,
  which the broker turns into Java's "service not available now ... the broker's disk is
  full" reply, while pulls keep being served;
* a refused put looks at the disk again (statvfs, at most every ``SPACE_RECHECK_INTERVAL``)
  and the store accepts puts again once the space it lacked is back.

Within a reserved file no write needs space, so a statvfs per put is needed only while the
store is full (to notice that space came back), not on every put.  The used-ratio marking
is Java's ``CleanCommitLogService.isSpaceToDelete``: over 0.90 the disk is full, at or
below 0.85 it is OK again, in between the state stays.
"""

from __future__ import annotations

import errno
import logging
import os
from typing import TYPE_CHECKING, Any

from rmqpy.store.space import FREE_SPACE_HEADROOM, disk_used_ratio, free_bytes, is_disk_full_error

if TYPE_CHECKING:
    from rmqpy.store.commitlog import CommitLog
    from rmqpy.store.config import MessageStoreConfig
    from rmqpy.store.consume_queue import ConsumeQueue
    from rmqpy.store.flush import BlockingRunner
    from rmqpy.store.index import IndexService
    from rmqpy.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

DISK_SPACE_WARNING_RATIO = 0.90
DISK_SPACE_CLEAN_FORCIBLY_RATIO = 0.85
#: how often a refused put may look at the disk again (seconds)
SPACE_RECHECK_INTERVAL = 0.1


class DiskSpaceGuard:
    """Mixin of :class:`rmqpy.store.message_store.MessageStore`: the disk-full state."""

    # set by MessageStore.__init__
    config: MessageStoreConfig
    reactor: Any
    commit_log: CommitLog
    consume_queue_table: dict[str, dict[int, ConsumeQueue]]
    topic_queue_table: dict[tuple[str, int], int]
    index_service: IndexService
    disk_full: bool
    _ratio_full: bool
    _alloc_failed: bool
    _space_needed: int
    _space_recheck_at: float
    _tails_pending: bool
    blocking: BlockingRunner
    shutdown_flag: bool
    _next_preparing: bool  # a next commit log file is being made in a thread
    _next_prepared_after: int  # the commit log file after which the next was last made (or tried)

    def _space_path(self) -> str:
        cfg = self.config
        return cfg.commitlog_dir if os.path.isdir(cfg.commitlog_dir) else cfg.storePathRootDir

    def _update_disk_full(self) -> None:
        self.disk_full = self._ratio_full or self._alloc_failed

    def _mark_ratio(self, ratio: float) -> None:
        """Java's hysteresis: full over 0.90, OK again only at or below 0.85."""
        if ratio > DISK_SPACE_WARNING_RATIO:
            if not self._ratio_full:
                log.error("physic disk maybe full soon %.2f, so mark disk full", ratio)
            self._ratio_full = True
        elif ratio <= DISK_SPACE_CLEAN_FORCIBLY_RATIO and self._ratio_full:
            log.info("physic disk space OK %.2f, so mark disk ok", ratio)
            self._ratio_full = False
        self._update_disk_full()

    def _alloc_error(self, what: str, path: str, need: int, e: OSError) -> None:
        """A file could not be created or reserved: disk full (ENOSPC) refuses puts until
        ``need`` bytes are free again; another error is only logged (the put fails)."""
        if not is_disk_full_error(e):
            log.error("cannot create %s in %s: %s", what, path, e)
            return
        if not self._alloc_failed:
            log.error("disk full: cannot reserve %d bytes for a %s in %s; puts are refused until "
                      "space is freed", need, what, path)
        self._alloc_failed = True
        self._space_needed = max(self._space_needed, need + FREE_SPACE_HEADROOM)
        self._space_recheck_at = self.reactor.seconds() + SPACE_RECHECK_INTERVAL
        self._update_disk_full()

    def _roll_commit_log(self, size: int) -> MappedFile | None:
        """``commit_log.mapped_file_for(size)`` when the free space holds the next file, else
        None (disk full marked, or CREATE_MAPEDFILE_FAILED for another error)."""
        need = self.config.mappedFileSizeCommitLog
        path = self._space_path()
        free = free_bytes(path)
        if 0 <= free < need + FREE_SPACE_HEADROOM:
            self._alloc_error("commit log file", path, need, OSError(errno.ENOSPC, "free space below the file size"))
            return None
        try:
            mf = self.commit_log.mapped_file_for(size)
        except OSError as e:
            self._alloc_error("commit log file", path, need, e)
            return None
        if mf.file_from_offset != self._next_prepared_after:
            self._prepare_next_commit_log(mf.file_from_offset)
        return mf

    def _prepare_next_commit_log(self, after: int) -> None:
        """Make the file after the one at ``after`` in a thread, so that the roll to it only
        renames it (Java's ``AllocateMappedFileService``); only when the free space holds it
        and the file after it, so that it never takes the room the roll itself needs."""
        queue = self.commit_log.queue
        if not self.blocking.threaded or self._next_preparing:
            return
        self._next_prepared_after = after
        offset = queue.next_offset()
        if offset is None:
            return
        free = free_bytes(self._space_path())
        if 0 <= free < 2 * self.config.mappedFileSizeCommitLog + FREE_SPACE_HEADROOM:
            return
        self._next_preparing = True

        def made(mf: MappedFile) -> None:
            self._next_preparing = False
            if self.shutdown_flag:
                mf.destroy()
            else:
                queue.adopt_next(mf)

        def failed(f: Any) -> None:  # the roll will create the file itself and say why it cannot
            self._next_preparing = False
            log.debug("commit log file %d not made ahead: %s", offset, f.getErrorMessage())

        self.blocking.run(queue.make_next, offset).addCallbacks(made, failed)

    def _undo_append(self, offset: int, queue_offsets: list[tuple[tuple[str, int], int]], cq_path: str,
                     e: OSError) -> None:
        """Take back the record(s) just written from ``offset`` (their consume queue file could not
        be reserved): the commit log ends there again, the queue offsets go back."""
        self.commit_log.undo_append(offset)
        for key, qoff in queue_offsets:
            self.topic_queue_table[key] = qoff
        self._alloc_error("consume queue file", cq_path, self.config.mappedFileSizeConsumeQueue, e)

    def _reserve_tails(self) -> None:
        """Reserve the rest of the files the next writes go to (OSError when the disk cannot)."""
        last = self.commit_log.queue.last()
        if last is not None:
            last.reserve_rest()
        for qs in self.consume_queue_table.values():
            for cq in qs.values():
                f = cq.queue.last()
                if f is not None:
                    f.reserve_rest()
        if self.index_service.files:
            self.index_service.files[-1].mapped.reserve_rest()

    def _reserve_tails_or_mark(self) -> None:
        try:
            self._reserve_tails()
            self._tails_pending = False
        except OSError as e:
            self._tails_pending = True
            self._alloc_error("reservation of the files written next", self._space_path(),
                              self.config.mappedFileSizeCommitLog, e)

    def still_full(self) -> bool:
        """Whether puts are still to be refused; looks at the disk again (rate-limited)."""
        now = self.reactor.seconds()
        if now < self._space_recheck_at:
            return True
        self._space_recheck_at = now + SPACE_RECHECK_INTERVAL
        path = self._space_path()
        if self._alloc_failed and free_bytes(path) >= self._space_needed:
            if self._tails_pending:
                self._reserve_tails_or_mark()
            if not self._tails_pending:
                log.info("disk space is back (%d bytes free): accepting puts again", free_bytes(path))
                self._alloc_failed = False
                self._space_needed = 0
        if self._ratio_full:
            self._mark_ratio(disk_used_ratio(path))
        self._update_disk_full()
        return self.disk_full
