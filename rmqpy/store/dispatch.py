"""From a written record to its consume queue, its index keys and the waiting pulls.

Java's ``ReputMessageService`` with the ``CommitLogDispatcherBuildConsumeQueue`` and
``CommitLogDispatcherBuildIndex`` dispatchers, and the consume queue table of
``DefaultMessageStore``. Where Java's reput thread reads the commit log behind the writer,
rmqpy dispatches a put's record synchronously right after the append (there is one thread), so
a pull sees a message as soon as its put is answered; :meth:`CommitLogDispatcher.reput` is the
catch-up at load, from where the consume queues end to where the commit log ends.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, Literal, Sequence, overload

from twisted.internet.interfaces import IReactorTime

from rmqpy.protocol import sysflag as SF
from rmqpy.protocol.message import PROPERTY_KEYS, DispatchInfo
from rmqpy.protocol.message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX as PROPERTY_UNIQ_KEY
from rmqpy.remoting.ratelimit import clip, limiter_for
from rmqpy.store.api import ArriveListener, BatchArriveListener
from rmqpy.store.commitlog import CommitLog
from rmqpy.store.config import MessageStoreConfig
from rmqpy.store.consume_queue import ConsumeQueue
from rmqpy.store.index import IndexService
from rmqpy.store.paths import StorePathError

log = logging.getLogger(__name__)

#: a record of a batch put as :meth:`CommitLogDispatcher.dispatch_batch` takes it:
#: ``(phy, size, tags_code, queue_offset, properties)``
BatchDispatch = tuple[int, int, int, int, dict[str, str]]

#: ``(what, path, bytes needed, error)``: a file could not be created (the disk-space guard).
AllocError = Callable[[str, str, int, OSError], None]

_TRANSACTION_MASK = SF.TRANSACTION_MASK
_TRANSACTION_NOT_TYPE = SF.TRANSACTION_NOT_TYPE
_TRANSACTION_COMMIT_TYPE = SF.TRANSACTION_COMMIT_TYPE


class CommitLogDispatcher:
    """The consume queues (by topic and queue id), the index, and the arrive listeners."""

    def __init__(self, config: MessageStoreConfig, index_service: IndexService, alloc_error: AllocError,
                 clock: IReactorTime | None = None):
        self.config = config
        #: the clock of the rate limit on failing arrive listeners (None: the global reactor)
        self.clock = clock
        self.index_service = index_service
        self.alloc_error = alloc_error
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self.arrive_listeners: list[ArriveListener] = []
        #: the batch forms some of them were registered with (MessageStore.add_arrive_listener)
        self.arrive_batch: dict[ArriveListener, BatchArriveListener] = {}
        #: store timestamp of the last record put in a consume queue (the checkpoint's logics time)
        self.last_logics_ts = 0

    # ------------------------------------------------------------------ consume queues
    def load(self) -> None:
        """Open the consume queues under the store's ``consumequeue`` directory."""
        root = self.config.consume_queue_dir
        if not os.path.isdir(root):
            return
        for topic in sorted(os.listdir(root)):
            tdir = os.path.join(root, topic)
            if not os.path.isdir(tdir):
                log.warning("ignoring foreign file %s in consumequeue", tdir)
                continue
            for q in sorted(os.listdir(tdir)):
                try:
                    qid = int(q)
                except ValueError:
                    log.warning("ignoring foreign entry %s", os.path.join(tdir, q))
                    continue
                try:
                    cq = ConsumeQueue(topic, qid, root, self.config.mappedFileSizeConsumeQueue,
                                      readonly=self.config.readOnly)
                except StorePathError as e:
                    log.warning("ignoring consume queue: %s", e)
                    continue
                cq.load()
                self.consume_queue_table.setdefault(topic, {})[qid] = cq

    @overload
    def find_consume_queue(self, topic: str, queue_id: int, create: Literal[True] = ...) -> ConsumeQueue: ...
    @overload
    def find_consume_queue(self, topic: str, queue_id: int, create: bool) -> ConsumeQueue | None: ...

    def find_consume_queue(self, topic: str, queue_id: int, create: bool = True) -> ConsumeQueue | None:
        qs = self.consume_queue_table.get(topic)
        if qs is None and not create:
            return None
        cq = qs.get(queue_id) if qs is not None else None
        if cq is None and create:
            # StorePathError for a topic/queue with no directory under the root: raised before the
            # table gains an entry for it
            cq = ConsumeQueue(topic, queue_id, self.config.consume_queue_dir, self.config.mappedFileSizeConsumeQueue,
                              readonly=self.config.readOnly)
            self.consume_queue_table.setdefault(topic, {})[queue_id] = cq
        return cq

    def flush_blocking(self) -> int:
        """fsync the consume queues and the index; the index's last flushed store time."""
        for qs in list(self.consume_queue_table.values()):
            for cq in list(qs.values()):
                cq.flush_sync()
        return self.index_service.flush_sync() if self.config.messageIndexEnable else 0

    def close(self) -> None:
        for qs in self.consume_queue_table.values():
            for cq in qs.values():
                cq.close()

    # ------------------------------------------------------------------ dispatch
    def dispatch(self, d: DispatchInfo, notify: bool = True) -> None:
        """One record read back from the commit log (recovery, reput, a batch's records)."""
        cfg = self.config
        if cfg.readOnly:
            return
        tran = d.sys_flag & _TRANSACTION_MASK
        normal = tran == _TRANSACTION_NOT_TYPE or tran == _TRANSACTION_COMMIT_TYPE
        if normal:
            qs = self.consume_queue_table.get(d.topic)
            cq = qs.get(d.queue_id) if qs is not None else None
            if cq is None:
                try:
                    cq = self.find_consume_queue(d.topic, d.queue_id)
                except StorePathError as e:  # a record from before names were checked
                    log.warning("record at %d not dispatched: %s", d.commit_log_offset, e)
                    return
            cq.put(d.commit_log_offset, d.size, d.tags_code, d.queue_offset)
            self.last_logics_ts = d.store_timestamp
        if cfg.messageIndexEnable:
            self.index_service.build_index(d)
        if notify and normal and self.arrive_listeners:
            self._notify(d.topic, d.queue_id, d.queue_offset + 1, d.tags_code, d.store_timestamp, d.properties)

    def dispatch_put(self, topic: str, queue_id: int, phy: int, size: int, tags_code: int, queue_offset: int,
                     store_timestamp: int, props: dict[str, str], sys_flag: int, normal: bool) -> None:
        """:meth:`dispatch` of the record a put just wrote, from what the put already has (no
        ``DispatchInfo`` to build). OSError when its consume queue's next file cannot be made:
        the caller takes the record back. The store is not read-only here."""
        if normal:
            qs = self.consume_queue_table.get(topic)
            cq = qs.get(queue_id) if qs is not None else None
            if cq is None:
                cq = self.find_consume_queue(topic, queue_id)
            cq.put(phy, size, tags_code, queue_offset)
            self.last_logics_ts = store_timestamp
        if self.config.messageIndexEnable:
            try:
                self.index_service.build_index_keys(topic, phy, store_timestamp, props.get(PROPERTY_UNIQ_KEY),
                                                    props.get(PROPERTY_KEYS), sys_flag)
            except OSError as e:  # the record is stored; only its key lookup is lost
                self.alloc_error("index file", self.config.index_dir, self.index_service.file_size(), e)
        if normal and self.arrive_listeners:
            self._notify(topic, queue_id, queue_offset + 1, tags_code, store_timestamp, props)

    def dispatch_batch(self, topic: str, queue_id: int, store_timestamp: int, sys_flag: int,
                       records: Sequence[BatchDispatch]) -> None:
        """:meth:`dispatch` of the records a batch put just wrote, ``(phy, size, tags_code,
        queue_offset, properties)`` each, all of one consume queue, store time and sys flag (a batch
        has no transaction type), from what the put already has. The index gets every record's keys
        first, in order (nothing reads it in between); then the consume queue all its units
        (:meth:`ConsumeQueue.put_batch`); then each arrive listener the records, in order: its
        batch form once when it has one, else a call per record (as Java's reput thread, which
        wakes held pulls record by record while the pulls it wakes run on other threads and may
        see more of the batch, a pull woken here sees the whole batch). OSError when a consume queue
        file cannot be made: the caller takes the batch back. An index file that cannot be made
        loses only the key lookup of the records it would have taken, as in :meth:`dispatch_put`
        (Java's reput thread indexes each record after it is stored: ``IndexService.buildIndex``
        logs, flags the index error that refuses the next puts, and the batch stays). The store is
        not read-only here."""
        if self.config.messageIndexEnable:
            try:
                self.index_service.build_index_batch(
                    topic, store_timestamp, sys_flag,
                    [(r[0], r[4].get(PROPERTY_UNIQ_KEY), r[4].get(PROPERTY_KEYS) or "") for r in records])
            except OSError as e:  # the records are stored; only their key lookup is lost
                self.alloc_error("index file", self.config.index_dir, self.index_service.file_size(), e)
        self.find_consume_queue(topic, queue_id).put_batch(records)
        self.last_logics_ts = store_timestamp
        batch_forms = self.arrive_batch
        for cb in self.arrive_listeners:
            batch_cb = batch_forms.get(cb)
            if batch_cb is not None:
                try:
                    batch_cb(topic, queue_id, store_timestamp, records)
                except Exception:  # noqa: BLE001
                    if limiter_for(self.clock).allow("store-arrive-listener"):
                        log.exception("arrive listener %s failed", clip(getattr(cb, "__qualname__", cb)))
                continue
            for _phy, _size, tags_code, queue_offset, props in records:  # _notify, inline
                try:
                    cb(topic, queue_id, queue_offset + 1, tags_code, store_timestamp, props)
                except Exception:  # noqa: BLE001
                    if limiter_for(self.clock).allow("store-arrive-listener"):
                        log.exception("arrive listener %s failed", clip(getattr(cb, "__qualname__", cb)))

    def _notify(self, topic: str, queue_id: int, max_offset: int, tags_code: int, store_timestamp: int,
                props: dict[str, str] | None) -> None:
        """Every arrive listener, each on its own: one that raises is logged (with its
        traceback, rate-limited: it may fail on every message) and the others still run."""
        for cb in self.arrive_listeners:
            try:
                cb(topic, queue_id, max_offset, tags_code, store_timestamp, props)
            except Exception:  # noqa: BLE001
                if limiter_for(self.clock).allow("store-arrive-listener"):
                    log.exception("arrive listener %s failed", clip(getattr(cb, "__qualname__", cb)))

    def reput(self, commit_log: CommitLog, topic_queue_table: dict[tuple[str, int], int]) -> None:
        """Dispatch the records the consume queues do not have yet (written after their last
        flush), and raise ``topic_queue_table``'s next offsets past them."""
        if self.config.readOnly:
            return
        start = commit_log.get_min_offset()
        for qs in self.consume_queue_table.values():
            for cq in qs.values():
                start = max(start, cq.get_max_physic_offset())
        end = commit_log.get_max_offset()
        n = 0
        for off, d in commit_log.iter_records(start, end, check_crc=False):
            if not d.success:
                log.warning("reput stopped at %d: %s", off, d.reason)
                break
            self.dispatch(d, notify=False)
            n += 1
            key = (d.topic, d.queue_id)
            tran = d.sys_flag & _TRANSACTION_MASK
            if tran in (_TRANSACTION_NOT_TYPE, _TRANSACTION_COMMIT_TYPE):
                if topic_queue_table.get(key, 0) < d.queue_offset + 1:
                    topic_queue_table[key] = d.queue_offset + 1
        if n:
            log.info("re-dispatched %d records from commit log offset %d", n, start)

    def reput_replicated(self, commit_log: CommitLog, topic_queue_table: dict[tuple[str, int], int],
                         start: int, limit: int | None = None) -> int:
        """A slave: dispatch the records the master's bytes completed, from ``start``, none that
        ends after ``limit`` (a controller-mode replica's confirm offset); where the next one
        starts (a record the next block completes, or the confirm offset passes, is left for then)."""
        end = commit_log.get_max_offset()
        start = max(start, commit_log.get_min_offset())
        stop = end
        for off, d in commit_log.iter_records(start, end, check_crc=False):
            if not d.success or (limit is not None and off + d.size > limit):  # left for later
                stop = off
                break
            self.dispatch(d)
            commit_log.last_store_timestamp = d.store_timestamp
            tran = d.sys_flag & _TRANSACTION_MASK
            if tran in (_TRANSACTION_NOT_TYPE, _TRANSACTION_COMMIT_TYPE):
                key = (d.topic, d.queue_id)
                if topic_queue_table.get(key, 0) < d.queue_offset + 1:
                    topic_queue_table[key] = d.queue_offset + 1
        return stop
