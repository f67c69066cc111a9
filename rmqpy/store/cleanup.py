"""Retention and topic clean-up: Java's ``DefaultMessageStore.CleanCommitLogService`` and
``CleanConsumeQueueService``, and its ``deleteTopics`` / ``cleanUnusedTopic`` /
``cleanExpiredConsumerQueue``.

Files are dropped from the tables on the reactor thread; the unlinks run in the store's
:class:`~rmqpy.store.flush.BlockingRunner`.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import Callable, Iterable

from twisted.internet import defer

from rmqpy.protocol.message import SCHEDULE_TOPIC
from rmqpy.store.commitlog import CommitLog
from rmqpy.store.config import MessageStoreConfig
from rmqpy.store.dispatch import CommitLogDispatcher
from rmqpy.store.flush import BlockingRunner
from rmqpy.store.mapped_file import MappedFile
from rmqpy.store.paths import StorePathError, topic_path
from rmqpy.store.space import disk_used_ratio
from rmqpy.store.space_guard import DISK_SPACE_CLEAN_FORCIBLY_RATIO

log = logging.getLogger(__name__)

TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
DELETE_FILES_BATCH_MAX = 10


class CleanService:
    def __init__(self, config: MessageStoreConfig, commit_log: CommitLog, dispatcher: CommitLogDispatcher,
                 topic_queue_table: dict[tuple[str, int], int], runner: BlockingRunner,
                 mark_ratio: Callable[[float], None], now: Callable[[], int]):
        self.config = config
        self.commit_log = commit_log
        self.dispatcher = dispatcher
        self.topic_queue_table = topic_queue_table
        self.runner = runner
        self.mark_ratio = mark_ratio
        self.now = now
        #: called with the commit log's new min offset after a pass deleted files (controller
        #: mode's epoch file drops the epochs that ended before it)
        self.deleted_listeners: list[Callable[[int], None]] = []

    # ------------------------------------------------------------------ retention
    def is_time_to_delete(self) -> bool:
        """The local hour is one of ``deleteWhen``'s (``"04"``, ``"04;16"``)."""
        hours = [h.strip() for h in self.config.deleteWhen.split(";") if h.strip()]
        cur = time.localtime(self.now() / 1000).tm_hour
        return any(int(h) == cur for h in hours if h.isdigit())

    def delete_expired_files(self, *, force_time: bool = False) -> defer.Deferred[int]:
        """One retention pass; a Deferred of the number of commit log files deleted."""
        cfg = self.config
        ratio = disk_used_ratio(cfg.commitlog_dir if os.path.isdir(cfg.commitlog_dir) else cfg.storePathRootDir)
        self.mark_ratio(ratio)
        # Java's getDiskMaxUsedSpaceRatio clamps the setting to 10..95
        space_full = ratio < 0 or ratio > min(95, max(10, cfg.diskMaxUsedSpaceRatio)) / 100.0
        clean_now = ratio > DISK_SPACE_CLEAN_FORCIBLY_RATIO and cfg.cleanFileForciblyEnable
        if not (force_time or self.is_time_to_delete() or space_full):
            return defer.succeed(0)
        reserved_ms = cfg.fileReservedTime * 3600 * 1000
        now_wall = time.time() * 1000
        files = self.commit_log.queue.files
        victims: list[MappedFile] = []
        for mf in files[:-1]:
            if len(victims) >= DELETE_FILES_BATCH_MAX:
                break
            try:
                mtime = os.stat(mf.path).st_mtime * 1000
            except OSError:
                mtime = 0
            if now_wall >= mtime + reserved_ms or clean_now:  # Java deleteExpiredFileByTime
                if mf.wrote_position > mf.flushed_position:
                    break  # never delete unflushed data
                victims.append(mf)
            else:
                break
        if not victims:
            return defer.succeed(0)
        self.commit_log.queue.files = files[len(victims):]
        paths = [mf.path for mf in victims]
        for mf in victims:
            mf.close()
        min_phy = self.commit_log.get_min_offset()
        for qs in self.dispatcher.consume_queue_table.values():
            for cq in qs.values():
                cq.delete_expired_files(min_phy)
        if cfg.messageIndexEnable:
            self.dispatcher.index_service.delete_expired(min_phy)
        log.info("retention: deleting %d commit log files, min offset now %d", len(paths), min_phy)
        for listener in list(self.deleted_listeners):
            try:
                listener(min_phy)
            except Exception:  # noqa: BLE001
                log.exception("retention: a listener of the deleted files failed")

        def unlink_all() -> int:
            for p in paths:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
            return len(paths)
        return self.runner.run(unlink_all)

    # ------------------------------------------------------------------ topics
    def delete_topics(self, names: Iterable[str]) -> int:
        table = self.dispatcher.consume_queue_table
        n = 0
        for t in list(names):
            qs = table.pop(t, None)
            if qs is None:
                continue
            for qid, cq in qs.items():
                cq.destroy()
                self.topic_queue_table.pop((t, qid), None)
            try:
                shutil.rmtree(topic_path(self.config.consume_queue_dir, t))
            except (FileNotFoundError, StorePathError):
                pass
            n += 1
        return n

    def clean_unused_topic(self, topics: Iterable[str]) -> int:
        keep = set(topics)
        victims = [t for t in self.dispatcher.consume_queue_table
                   if t not in keep and t not in (SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC) and not t.startswith("%LMQ%")]
        return self.delete_topics(victims)

    def clean_expired_consumer_queue(self) -> None:
        min_phy = self.commit_log.get_min_offset()
        table = self.dispatcher.consume_queue_table
        for t in list(table):
            if t == SCHEDULE_TOPIC:
                continue
            qs = table[t]
            for qid in list(qs):
                cq = qs[qid]
                if cq.get_max_physic_offset() != -1 and cq.get_max_physic_offset() < min_phy:
                    cq.destroy()
                    del qs[qid]
                    self.topic_queue_table.pop((t, qid), None)
            if not qs:
                del table[t]
