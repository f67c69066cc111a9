"""Opening a store directory read-only: a broker's, live or stopped, rmqpy's or Java's.

No lock, no abort marker, nothing written, truncated or deleted; file sizes are taken from the
files (a store's configured sizes are not known here). Shared by ``python -m rmqpy.store`` and the
Spark source (spark/rmqpy_spark), which read the same commit log and consume queue classes the
broker writes with.

A live broker may delete old files (retention) while a directory is being opened: a file that
disappears between listing and mapping makes the open start over, a bounded number of times.
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, TypeVar

from rmqpy.store.commitlog import CommitLog
from rmqpy.store.config import CQ_STORE_UNIT_SIZE
from rmqpy.store.consume_queue import ConsumeQueue
from rmqpy.store.mapped_file import StoreError
from rmqpy.store.paths import StorePathError

T = TypeVar("T")
_OPEN_ATTEMPTS = 3
_DEFAULT_COMMITLOG_SIZE = 1024 * 1024 * 1024


def first_file_size(directory: str) -> int | None:
    """Length of the first 20-digit-named file of ``directory`` (None: no such file)."""
    if not os.path.isdir(directory):
        return None
    for name in sorted(os.listdir(directory)):
        if len(name) == 20 and name.isdigit():
            try:
                return os.path.getsize(os.path.join(directory, name))
            except FileNotFoundError:  # deleted by retention meanwhile: the next one
                continue
    return None


def commitlog_dir(root: str) -> str:
    """``root/commitlog``, or ``root`` itself when it is a commit log directory."""
    d = os.path.join(root, "commitlog")
    if os.path.isdir(d):
        return d
    if os.path.basename(os.path.normpath(root)) == "commitlog" and os.path.isdir(root):
        return root
    raise StoreError(f"{root}: no commitlog/ directory (is this a RocketMQ store root?)")


def _retrying(open_once: Callable[[], T]) -> T:
    for attempt in range(_OPEN_ATTEMPTS):
        try:
            return open_once()
        except FileNotFoundError:  # a file deleted by the broker's retention while we opened
            if attempt == _OPEN_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def open_commit_log(directory: str, check_crc: bool = True) -> CommitLog:
    """The commit log of ``directory`` (a commit log directory), mapped read-only."""
    def once() -> CommitLog:
        cl = CommitLog(directory, first_file_size(directory) or _DEFAULT_COMMITLOG_SIZE, readonly=True,
                       check_crc=check_crc)
        try:
            cl.load()
        except BaseException:
            cl.close()
            raise
        return cl
    return _retrying(once)


def list_consume_queues(cq_root: str, topics: Iterable[str] | None = None,
                        queue_ids: Iterable[int] | None = None) -> list[tuple[str, int]]:
    """[(topic, queueId)] with a directory under ``cq_root`` (the store's ``consumequeue/``), sorted."""
    if not os.path.isdir(cq_root):
        return []
    want = set(topics) if topics is not None else None
    qids = set(queue_ids) if queue_ids is not None else None
    out = []
    for t in sorted(os.listdir(cq_root)):
        if want is not None and t not in want:
            continue
        td = os.path.join(cq_root, t)
        if not os.path.isdir(td):
            continue
        for q in os.listdir(td):
            if q.isdigit() and (qids is None or int(q) in qids):
                out.append((t, int(q)))
    out.sort()
    return out


def open_consume_queue(cq_root: str, topic: str, queue_id: int,
                       commitlog_min_offset: int | None = None) -> ConsumeQueue | None:
    """One consume queue mapped read-only and recovered in memory (its max offset ends at the
    last valid unit); None when it has no file. With ``commitlog_min_offset``, units pointing
    below it (records deleted by retention) are below the queue's min offset, as in the broker.
    Raises StorePathError for a directory that leads out of the store."""
    def once() -> ConsumeQueue | None:
        qdir = os.path.join(cq_root, topic, str(queue_id))
        size = first_file_size(qdir)
        if size is None or size < CQ_STORE_UNIT_SIZE:
            return None
        cq = ConsumeQueue(topic, queue_id, cq_root, size, readonly=True)
        try:
            cq.load()
            cq.recover()
            if commitlog_min_offset is not None:
                cq.correct_min_offset(commitlog_min_offset)
        except BaseException:
            cq.close()
            raise
        return cq
    return _retrying(once)


__all__ = ["StoreError", "StorePathError", "commitlog_dir", "first_file_size", "list_consume_queues",
           "open_commit_log", "open_consume_queue"]
