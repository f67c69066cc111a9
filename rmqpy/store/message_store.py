"""MessageStore: RocketMQ ``DefaultMessageStore`` on Twisted (facts §6, §7).

The store composes its parts as Java's does: :class:`~rmqpy.store.commitlog.CommitLog` writes
every record (and recovers the log), :class:`~rmqpy.store.dispatch.CommitLogDispatcher` puts a
written record into its consume queue and the index and tells the arrive listeners (Java's
``ReputMessageService``), :class:`~rmqpy.store.flush.FlushService` flushes (group commit,
periodic flush, checkpoint), :class:`~rmqpy.store.cleanup.CleanService` deletes expired files
and unused topics, and the :class:`~rmqpy.store.space_guard.DiskSpaceGuard` mixin refuses puts
on a full disk. This class keeps what Java's ``DefaultMessageStore`` keeps: the lifecycle
(load, recover, start, shutdown), the checks of a put before it is written, reads, and queries.

Appends happen on the reactor thread (mmap writes); fsync runs in a small thread pool when a
real reactor is used, inline with a ``twisted.internet.task.Clock`` (tests). Records are
dispatched synchronously right after the append, so a pull sees a put as soon as it is answered.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from typing import Any, Callable, Iterable, Literal, overload

from twisted.internet import defer
from twisted.python.failure import Failure

from rmqpy.protocol import sysflag as SF
from rmqpy.protocol.message import (
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH_V1,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_WAIT_STORE_MSG_OK,
    SCHEDULE_TOPIC,
    DispatchInfo,
    MessageExt,
    MessageExtBatch,
    MessageExtBrokerInner,
    RecordError,
    decode_batch_items,
    decode_record,
    host_bytes,
    java_string_hash,
    record_fields_error,
    string_to_properties,
)
from rmqpy.remoting.ratelimit import clip, limiter_for
from rmqpy.speedups import native as _native
from rmqpy.store.api import ArriveListener, BatchArriveListener, MessageFilter
from rmqpy.store.batch_layout import BODY_TOO_LONG, PROPERTIES_TOO_LONG, batch_layout
from rmqpy.store.checkpoint import StoreCheckpoint
from rmqpy.store.cleanup import CleanService
from rmqpy.store.commitlog import CommitLog
from rmqpy.store.config import CQ_STORE_UNIT_SIZE, MessageStoreConfig
from rmqpy.store.consume_queue import INT_MAX, ConsumeQueue
from rmqpy.store.dispatch import BatchDispatch, CommitLogDispatcher
from rmqpy.store.flush import BlockingRunner, FlushService
from rmqpy.store.index import IndexService
from rmqpy.store.mapped_file import StoreError
from rmqpy.store.paths import StorePathError
from rmqpy.store.prefault import Prefaulter, prefault_enabled
from rmqpy.store.resident import ResidentWindow, window_from_env
from rmqpy.store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
    put_status_name,
)
from rmqpy.store.role import is_slave
from rmqpy.store.space import disk_used_ratio
from rmqpy.store.space_guard import DiskSpaceGuard
from rmqpy.store.stats import StoreStats
from rmqpy.store.time_search import Boundary, offset_by_time

__all__ = ["AppendMessageResult", "AppendMessageStatus", "GetMessageResult", "GetMessageStatus", "MessageStore",
           "PutMessageResult", "PutMessageStatus", "QueryMessageResult", "TOTAL_PHYSICAL_MEMORY_SIZE",
           "put_status_name"]

log = logging.getLogger(__name__)
_perf_counter = time.perf_counter
_BORNHOST_V6_FLAG = SF.BORNHOST_V6_FLAG
_STOREHOST_V6_FLAG = SF.STOREHOSTADDRESS_V6_FLAG


def _total_physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 << 30


TOTAL_PHYSICAL_MEMORY_SIZE = _total_physical_memory()




def _waits(wait_prop: str | None) -> bool:
    """Java ``isWaitStoreMsgOK``: the WAIT property absent or true."""
    return wait_prop is None or wait_prop.lower() == "true"


def _delay_level(batch: MessageExtBatch) -> int:
    """Java ``Message.getDelayTimeLevel`` of a batch's own properties (not its messages'); a value that
    is no number counts as 0 here, as on the single put path (Java's ``parseInt`` would throw)."""
    value = string_to_properties(batch.properties_string or "").get(PROPERTY_DELAY_TIME_LEVEL)
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


# bound once: enum members and module attributes cost a lookup each on the put path
_PUT_OK = PutMessageStatus.PUT_OK
_APPEND_PUT_OK = AppendMessageStatus.PUT_OK
_TRANSACTION_MASK = SF.TRANSACTION_MASK
_TRANSACTION_NOT_TYPE = SF.TRANSACTION_NOT_TYPE
_TRANSACTION_COMMIT_TYPE = SF.TRANSACTION_COMMIT_TYPE

class MessageStore(DiskSpaceGuard):
    def __init__(self, config: MessageStoreConfig, store_host: tuple[str, int], reactor: Any = None):
        if reactor is None:
            from twisted.internet import reactor as _r
            reactor = _r
        config.validate()
        self.config = config
        self.reactor = reactor
        self.store_host = store_host
        self._store_host_bytes = host_bytes(store_host)
        self._msg_id_prefix = self._store_host_bytes.hex().upper()  # offsetMsgId = this + %016X of the offset
        self._delay_levels = config.delay_levels
        self.max_delay_level = max(self._delay_levels) if self._delay_levels else 0
        ro = config.readOnly
        self.commit_log = CommitLog(config.commitlog_dir, config.mappedFileSizeCommitLog, readonly=ro,
                                    check_crc=config.checkCRCOnRecover, delay_tags_code=self.compute_deliver_timestamp,
                                    roll=self._roll_commit_log)
        #: the next queue offset of each (topic, queue id) (Java ``CommitLog.topicQueueTable``)
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.index_service = IndexService(config.index_dir, config.maxHashSlotNum, config.maxIndexNum, readonly=ro,
                                          now=self.now, max_msgs_num_batch=config.maxMsgsNumBatch)
        self.dispatcher = CommitLogDispatcher(config, self.index_service, self._alloc_error, reactor)
        self.consume_queue_table = self.dispatcher.consume_queue_table  # the same dict
        self.arrive_listeners = self.dispatcher.arrive_listeners  # the same list
        self.blocking = BlockingRunner(reactor)
        self.stats = StoreStats(self.now)
        self.flush_service = FlushService(config, reactor, self.commit_log, self.dispatcher, self.blocking,
                                          self.stats, lambda: not self.shutdown_flag)
        #: the commit log's next pages faulted in by a thread (the compiled path only: it has no pure form)
        populate = getattr(_native, "populate_write", None) if not ro else None
        self.prefaulter: Prefaulter | None = Prefaulter(populate) if populate is not None else None
        #: the commit log's pages behind its newest ones dropped from the page tables (None: kept)
        window = window_from_env() if not ro else None
        self.resident: ResidentWindow | None = ResidentWindow(self.commit_log.queue, window) if window else None
        self._resident_busy = False
        # bound once: the put path calls them per message
        self._append_message = self.commit_log.append_message
        self._dispatch_put = self.dispatcher.dispatch_put
        self.clean_service = CleanService(config, self.commit_log, self.dispatcher, self.topic_queue_table,
                                          self.blocking, self._mark_ratio, self.now)
        self.checkpoint: StoreCheckpoint | None = None
        self.last_exit_ok = True
        self.shutdown_flag = True
        self.disk_full = False  # puts refused: _ratio_full or _alloc_failed
        self.fenced = False  # puts refused: controller mode before the controller named the role
        self._ratio_full = False  # used ratio over 0.90 (Java runningFlags DISK_FULL)
        self._alloc_failed = False  # a mapped file could not get its blocks (ENOSPC)
        self._space_needed = 0  # free bytes that make _alloc_failed go away
        self._space_recheck_at = 0.0
        self._tails_pending = False  # the files written next are not reserved yet
        self._next_preparing = False
        self._next_prepared_after = -1
        self._lock_fd: int | None = None
        self._timers: list[list[Any]] = []
        self._loaded = False
        #: SYNC_MASTER: given a put's end offset, PUT_OK, SLAVE_NOT_AVAILABLE or a Deferred of
        #: PUT_OK / FLUSH_SLAVE_TIMEOUT (set by rmqpy.store.ha.HAService.attach)
        self.replica_wait: Callable[[int], Any] | None = None
        #: controller mode's SYNC_MASTER with minInSyncReplicas above 1: PUT_OK or
        #: IN_SYNC_REPLICAS_NOT_ENOUGH, asked before a put that waits for the store is written
        #: (Java CommitLog.asyncPutMessage's inSyncReplicasNums check)
        self.replica_gate: Callable[[], PutMessageStatus] | None = None
        self._reput_from = 0  # a slave: where the next replicated record to dispatch starts
        self._replica_end = -1  # a slave: the commit log's end after the last replicated append
        #: a controller-mode replica: replicated records are dispatched only up to this offset
        #: (Java's confirmOffset with readUnCommitted=false); None: all at once (classic HA)
        self._dispatch_limit: int | None = None

    # ------------------------------------------------------------------ clock
    def now(self) -> int:
        return int(self.reactor.seconds() * 1000)

    def compute_deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        if level > self.max_delay_level:
            level = self.max_delay_level
        if level <= 0:
            return store_timestamp  # Java leaves the TAGS hash; callers check level>0 first
        return store_timestamp + self._delay_levels.get(level, 1000)
    # ------------------------------------------------------------------ lifecycle
    def load(self) -> bool:
        cfg = self.config
        if not cfg.readOnly:
            os.makedirs(cfg.storePathRootDir, exist_ok=True)
            # as DefaultMessageStore's constructor: the runtime info's disk ratios (clusterList's
            # #SPACE) are of these directories, -1 while one is missing
            os.makedirs(cfg.commitlog_dir, exist_ok=True)
            os.makedirs(cfg.consume_queue_dir, exist_ok=True)
            self._lock()
        self.last_exit_ok = not os.path.exists(cfg.abort_path)
        log.info("message store load: last exit %s", "OK" if self.last_exit_ok else "ABNORMAL")
        self.commit_log.load()
        self.dispatcher.load()
        self.checkpoint = self.flush_service.checkpoint = StoreCheckpoint(cfg.checkpoint_path, readonly=cfg.readOnly)
        if cfg.messageIndexEnable:
            self.index_service.load(self.last_exit_ok, self.checkpoint.index_msg_timestamp)
        self._recover()
        self.dispatcher.reput(self.commit_log, self.topic_queue_table)
        self._reput_from = self.commit_log.get_max_offset()
        if not cfg.readOnly:
            self._reserve_tails_or_mark()
        self._loaded = True
        self.shutdown_flag = False
        return True

    def _lock(self) -> None:
        path = self.config.lock_path
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError:
            os.close(fd)
            raise StoreError(f"{path}: the store is locked by another process (another broker running?)") from None
        os.pwrite(fd, b"lock", 0)
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            try:
                fcntl.lockf(self._lock_fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None
    def _recover(self) -> None:
        max_cq_phy = -1
        for qs in self.consume_queue_table.values():
            for cq in qs.values():
                cq.recover()
                max_cq_phy = max(max_cq_phy, cq.get_max_physic_offset())
        if not self.commit_log.queue.files:
            if self.consume_queue_table and not self.config.readOnly:
                log.warning("commit log is empty: destroying consume queues")
                for qs in self.consume_queue_table.values():
                    for cq in qs.values():
                        cq.destroy()
                self.consume_queue_table.clear()
            end = 0
        elif self.last_exit_ok:
            end = self.commit_log.recover_normally()
            first, walked, records = self.commit_log.recovery_scan
            log.info("recover normally: commit log of %d files, checked %d from file %d (%d records), "
                     "valid data ends at offset %d; %d consume queues", len(self.commit_log.queue.files),
                     walked, first, records, end, sum(map(len, self.consume_queue_table.values())))
        else:
            cp = self.checkpoint
            assert cp is not None  # loaded before recovery
            if self.config.messageIndexEnable and self.config.messageIndexSafe:
                limit = cp.get_min_timestamp_index()
            else:
                limit = cp.get_min_timestamp()
            end = self.commit_log.recover_abnormally(lambda magic, ts: ts <= limit, self._dispatch_recover)
            first, walked, records = self.commit_log.recovery_scan
            log.info("recover abnormally (the last exit was not clean): commit log of %d files, re-dispatched "
                     "%d records from %d files starting at file %d, valid data ends at offset %d; "
                     "%d consume queues", len(self.commit_log.queue.files), records, walked, first, end,
                     sum(map(len, self.consume_queue_table.values())))
        if self.index_service.files and not self.config.readOnly:
            last = self.index_service.files[-1]
            if last.end_phy_offset > end:
                # entries past the recovered end point at torn data; let new records be indexed
                last.end_phy_offset = end
                last._write_header()
        if max_cq_phy >= end:
            for qs in self.consume_queue_table.values():
                for cq in qs.values():
                    cq.truncate_dirty_logic_files(end)
        self._recover_topic_queue_table()

    def _dispatch_recover(self, d: DispatchInfo) -> None:
        self.dispatcher.dispatch(d, notify=False)

    def _recover_topic_queue_table(self) -> None:
        min_phy = self.commit_log.get_min_offset()
        self.topic_queue_table.clear()
        for topic, qs in self.consume_queue_table.items():
            for qid, cq in qs.items():
                self.topic_queue_table[(topic, qid)] = cq.get_max_offset_in_queue()
                cq.correct_min_offset(min_phy)
    def start(self) -> None:
        if not self._loaded:
            raise StoreError("MessageStore.start() before load()")
        cfg = self.config
        if cfg.readOnly:
            return
        with open(cfg.abort_path, "wb"):
            pass
        self.stats.start()
        self.blocking.start()
        self.flush_service.start()
        if self.blocking.threaded and prefault_enabled():  # a reactor with threads, RMQPY_PREFAULT=1
            self.start_prefault()
        last = self.commit_log.queue.last()
        if last is not None:
            self._prepare_next_commit_log(last.file_from_offset)
        self._schedule(cfg.flushIntervalCommitLog, self.flush_service.commitlog_tick)
        self._schedule(cfg.flushIntervalConsumeQueue, self.flush_service.consume_queue_tick)
        self._schedule(cfg.cleanResourceInterval, self._clean_tick)
        self._schedule(1000, self._stats_tick)
        if self.resident is not None:
            self._schedule(int(self.resident.interval * 1000), self._resident_tick)

    def start_prefault(self) -> None:
        """Start the thread that faults in the commit log's next pages (:meth:`start` does when the
        reactor has threads and ``RMQPY_PREFAULT=1``); nothing on the pure-Python path."""
        if self.prefaulter is not None:
            self.prefaulter.start()
            self.commit_log.set_prefault(self.prefaulter)

    def _schedule(self, interval_ms: int, fn: Callable[[], object]) -> None:
        def run() -> None:
            if self.shutdown_flag:
                return
            try:
                fn()
            except Exception:  # noqa: BLE001
                log.exception("store timer %s failed", fn.__qualname__)
            slot[0] = self.reactor.callLater(interval_ms / 1000.0, run)
        slot = [self.reactor.callLater(interval_ms / 1000.0, run)]
        self._timers.append(slot)

    def shutdown(self) -> None:
        if self.shutdown_flag and not self._loaded:
            return
        self.shutdown_flag = True
        for slot in self._timers:
            c = slot[0]
            if c.active():
                c.cancel()
        self._timers.clear()
        if self.prefaulter is not None:
            self.commit_log.set_prefault(None)
            self.prefaulter.stop()
        self.flush_service.stop()
        if not self.config.readOnly:
            self.flush_service.flush_at_shutdown()
            log.info("shutdown: commit log flushed to offset %d, consume queues%s and checkpoint flushed",
                     self.commit_log.get_max_offset(), " and index" if self.config.messageIndexEnable else "")
        self.blocking.stop()
        self.commit_log.close()
        self.dispatcher.close()
        self.index_service.close()
        if self.checkpoint is not None:
            self.checkpoint.close()
        if not self.config.readOnly:
            try:
                os.unlink(self.config.abort_path)
            except FileNotFoundError:
                pass
            self._unlock()
        self._loaded = False

    # ------------------------------------------------------------------ consume queues
    @overload
    def find_consume_queue(self, topic: str, queue_id: int, create: Literal[True] = ...) -> ConsumeQueue: ...
    @overload
    def find_consume_queue(self, topic: str, queue_id: int, create: bool) -> ConsumeQueue | None: ...

    def find_consume_queue(self, topic: str, queue_id: int, create: bool = True) -> ConsumeQueue | None:
        return self.dispatcher.find_consume_queue(topic, queue_id, create)

    def add_arrive_listener(self, callback: ArriveListener, batch: BatchArriveListener | None = None) -> None:
        """``callback`` for each record put in a consume queue; for a batch put's records, ``batch``
        once instead when given (:data:`rmqpy.store.api.BatchArriveListener`)."""
        self.arrive_listeners.append(callback)
        if batch is not None:
            self.dispatcher.arrive_batch[callback] = batch

    def remove_arrive_listener(self, callback: ArriveListener) -> None:
        """A role switch takes back the listener of the role it leaves; absent: nothing."""
        if callback in self.arrive_listeners:
            self.arrive_listeners.remove(callback)
            if callback not in self.arrive_listeners:
                self.dispatcher.arrive_batch.pop(callback, None)

    # ------------------------------------------------------------------ put
    def _check_store_status(self) -> PutMessageStatus:
        if self.shutdown_flag:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if is_slave(self.config) or self.config.readOnly or self.fenced:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.disk_full and self.still_full():  # as put_message_now: the disk looked at again (rate-limited)
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        return PutMessageStatus.PUT_OK

    def _failed(self, status: PutMessageStatus, append_status: AppendMessageStatus | None = None
                ) -> PutMessageResult:
        self.stats.put_failed()
        return PutMessageResult(status, AppendMessageResult(append_status) if append_status else None)

    def _fail(self, status: PutMessageStatus, append_status: AppendMessageStatus | None = None):
        return defer.succeed(self._failed(status, append_status))

    def _refuse_before_write(self, topic: str, queue_id: int, normal: bool, flag: int, sys_flag: int,
                             born_timestamp: int, reconsume_times: int, prepared_offset: int
                             ) -> PutMessageResult | None:
        """MESSAGE_ILLEGAL for a put that would fail after the commit log was written to: a
        header field outside its Java int/long range, or a topic/queue with no directory under
        the store root (its consume queue is made now, before the record exists)."""
        bad = record_fields_error(queue_id, flag, sys_flag, born_timestamp, reconsume_times, prepared_offset)
        if bad is None and normal:
            qs = self.consume_queue_table.get(topic)
            if qs is None or queue_id not in qs:
                try:
                    self.find_consume_queue(topic, queue_id)
                except StorePathError as e:
                    bad = str(e)
        if bad is None:
            return None
        if limiter_for(self.reactor).allow("store-put-refused"):  # a client's request: rate-limited
            log.warning("put refused before writing: %s", clip(bad))
        return self._failed(PutMessageStatus.MESSAGE_ILLEGAL)

    def put_message(self, msg: MessageExtBrokerInner) -> defer.Deferred:
        """Append one message; a Deferred of its :class:`PutMessageResult`."""
        r = self.put_message_now(msg)
        return r if isinstance(r, defer.Deferred) else defer.succeed(r)

    def put_message_now(self, msg: MessageExtBrokerInner) -> PutMessageResult | defer.Deferred:
        """:meth:`put_message` without a Deferred when there is nothing to wait for: the
        :class:`PutMessageResult` itself, or (SYNC_FLUSH and the message asks to wait) a
        Deferred that fires once the record is on disk."""
        cfg = self.config
        if self.shutdown_flag or is_slave(cfg) or cfg.readOnly or self.fenced or (self.disk_full and self.still_full()):
            return self._failed(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        t0 = _perf_counter()
        topic = msg.topic
        queue_id = msg.queue_id
        topic_b = topic.encode("utf-8")
        if len(topic_b) > MAX_TOPIC_LENGTH_V1:
            return self._failed(PutMessageStatus.MESSAGE_ILLEGAL)
        sys_flag = msg.sys_flag
        tran = sys_flag & _TRANSACTION_MASK
        normal = tran == _TRANSACTION_NOT_TYPE or tran == _TRANSACTION_COMMIT_TYPE
        props = msg.properties
        if props is None:
            props = msg.get_properties()
        if self.replica_gate is not None and _waits(props.get(PROPERTY_WAIT_STORE_MSG_OK)):
            gate = self.replica_gate()
            if gate is not _PUT_OK:
                return self._failed(gate)
        # delay level (4.9 CommitLog.putMessage): park in SCHEDULE_TOPIC_XXXX, queue level-1
        if normal and topic != SCHEDULE_TOPIC:
            lvl = props.get(PROPERTY_DELAY_TIME_LEVEL)
            if lvl is not None:
                try:
                    level = int(lvl)
                except ValueError:
                    level = 0
                if level > 0:
                    if level > self.max_delay_level:
                        level = self.max_delay_level
                        props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
                    props[PROPERTY_REAL_TOPIC] = topic
                    props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
                    msg.properties_string = None
                    msg.topic = topic = SCHEDULE_TOPIC
                    msg.queue_id = queue_id = level - 1
                    topic_b = topic.encode("utf-8")
        props_s = msg.properties_string
        props_b = (props_s if props_s is not None else msg.get_properties_string()).encode("utf-8")
        plen = len(props_b)
        if plen > MAX_PROPERTIES_LENGTH:
            return self._failed(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED)
        born = host_bytes(msg.born_host)
        sh = self._store_host_bytes
        born_len, sh_len = len(born), len(sh)
        sys_flag = (sys_flag | _BORNHOST_V6_FLAG) if born_len == 20 else (sys_flag & ~_BORNHOST_V6_FLAG)
        sys_flag = (sys_flag | _STOREHOST_V6_FLAG) if sh_len == 20 else (sys_flag & ~_STOREHOST_V6_FLAG)
        body = msg.body or b""
        blen = len(body)
        qs = self.consume_queue_table.get(topic)
        if (normal and (qs is None or queue_id not in qs)) or record_fields_error(
                queue_id, msg.flag, sys_flag, msg.born_timestamp, msg.reconsume_times,
                msg.prepared_transaction_offset) is not None:
            # a new consume queue, or a field out of range: _refuse_before_write decides
            refused = self._refuse_before_write(topic, queue_id, normal, msg.flag, sys_flag, msg.born_timestamp,
                                                msg.reconsume_times, msg.prepared_transaction_offset)
            if refused is not None:
                return refused
        # record_size(sys_flag, blen, len(topic_b), plen): the hosts are 8 or 20 bytes as their flags say
        size = 75 + born_len + sh_len + blen + len(topic_b) + plen
        if blen > cfg.maxMessageSize or size + 8 > cfg.mappedFileSizeCommitLog:
            return self._failed(PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
        key = (topic, queue_id)
        qoff = self.topic_queue_table.get(key, 0) if normal else 0
        now = self.now()
        phy = self._append_message(size, topic_b, queue_id, msg.flag, body, props_b, sys_flag, msg.born_timestamp,
                                   born, now, sh, msg.reconsume_times, msg.prepared_transaction_offset, qoff)
        if phy < 0:
            return self._failed(PutMessageStatus.SERVICE_NOT_AVAILABLE if self.disk_full
                                else PutMessageStatus.CREATE_MAPEDFILE_FAILED)
        msg.store_timestamp = now
        if normal:
            self.topic_queue_table[key] = qoff + 1
        tags = props.get(PROPERTY_TAGS)
        tags_code = java_string_hash(tags) if tags else 0
        if topic == SCHEDULE_TOPIC and PROPERTY_DELAY_TIME_LEVEL in props:
            try:
                lv = int(props[PROPERTY_DELAY_TIME_LEVEL])
                if lv > 0:
                    tags_code = self.compute_deliver_timestamp(lv, now)
            except ValueError:
                pass
        try:
            self._dispatch_put(topic, queue_id, phy, size, tags_code, qoff, now, props, sys_flag, normal)
        except OSError as e:  # its consume queue's next file could not be reserved: take the record back
            self._undo_append(phy, [(key, qoff)], self.find_consume_queue(topic, queue_id).store_path, e)
            return self._failed(PutMessageStatus.SERVICE_NOT_AVAILABLE if self.disk_full
                                else PutMessageStatus.CREATE_MAPEDFILE_FAILED)
        elapsed = _perf_counter() - t0
        result = AppendMessageResult(_APPEND_PUT_OK, phy, size, self._msg_id_prefix + "%016X" % phy, now,
                                     qoff, int(elapsed * 1000), 1)
        self.stats.put_ok(size, elapsed)
        if cfg.flushDiskType != "SYNC_FLUSH" and self.replica_wait is None:  # _flush_result's ASYNC answer
            return PutMessageResult(_PUT_OK, result)
        return self._flush_result(result, props.get(PROPERTY_WAIT_STORE_MSG_OK))

    def put_messages(self, batch: MessageExtBatch) -> defer.Deferred:
        """Append a batch's messages (one topic and queue) into one commit log file, then put
        them in their consume queue and the index; a Deferred of the :class:`PutMessageResult`.
        Each stored message has its own properties followed by the batch's (as 4.9's broker)."""
        r = self.put_messages_now(batch)
        return r if isinstance(r, defer.Deferred) else defer.succeed(r)

    def put_messages_now(self, batch: MessageExtBatch) -> PutMessageResult | defer.Deferred:
        """:meth:`put_messages` without a Deferred when there is nothing to wait for (as
        :meth:`put_message_now`)."""
        st = self._check_store_status()
        if st != PutMessageStatus.PUT_OK:
            return self._failed(st)
        t0 = _perf_counter()
        topic = batch.topic
        queue_id = batch.queue_id
        topic_b = topic.encode("utf-8")
        if len(topic_b) > MAX_TOPIC_LENGTH_V1:
            return self._failed(PutMessageStatus.MESSAGE_ILLEGAL)
        if batch.sys_flag & SF.TRANSACTION_MASK or topic == SCHEDULE_TOPIC:
            return self._failed(PutMessageStatus.MESSAGE_ILLEGAL)
        if PROPERTY_DELAY_TIME_LEVEL in (batch.properties_string or "") and _delay_level(batch) > 0:
            return self._failed(PutMessageStatus.MESSAGE_ILLEGAL)  # Java putMessages: a batch is never delayed
        if self.replica_gate is not None and _waits(
                string_to_properties(batch.properties_string or "").get(PROPERTY_WAIT_STORE_MSG_OK)):
            gate = self.replica_gate()
            if gate is not _PUT_OK:
                return self._failed(gate)
        try:
            items = decode_batch_items(batch.body if isinstance(batch.body, bytes) else bytes(batch.body))
        except ValueError as e:
            if limiter_for(self.reactor).allow("store-bad-batch"):  # a client's request: rate-limited
                log.warning("bad batch body of topic %s: %s", clip(topic), clip(str(e)))
            return self._failed(PutMessageStatus.MESSAGE_ILLEGAL)
        if not items:
            return self._failed(PutMessageStatus.MESSAGE_ILLEGAL)
        batch_props_s = batch.properties_string or ""
        batch_props_b = batch_props_s.encode("utf-8")
        born = host_bytes(batch.born_host)
        sh = self._store_host_bytes
        sys_flag = batch.sys_flag
        sys_flag = (sys_flag | _BORNHOST_V6_FLAG) if len(born) == 20 else (sys_flag & ~_BORNHOST_V6_FLAG)
        sys_flag = (sys_flag | _STOREHOST_V6_FLAG) if len(sh) == 20 else (sys_flag & ~_STOREHOST_V6_FLAG)
        # record_size(sys_flag, body, topic, properties) = fixed + len(body) + len(properties)
        fixed = 75 + len(born) + len(sh) + len(topic_b)
        max_body = self.config.maxMessageSize
        # each message's properties: its own, then the batch's (what parsing the stored string gives)
        batch_props = string_to_properties(batch_props_s) if batch_props_s else None
        layout = batch_layout(items, batch_props_b, batch_props, fixed, max_body)
        if layout == PROPERTIES_TOO_LONG:
            return self._failed(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
        if layout == BODY_TOO_LONG:
            return self._failed(PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
        assert not isinstance(layout, int)
        records, parsed, total = layout
        if total + 8 > self.config.mappedFileSizeCommitLog:
            return self._failed(PutMessageStatus.MESSAGE_ILLEGAL, AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
        for flag in dict.fromkeys(r[0] for r in records):  # each flag once: the rest of the fields are the batch's
            refused = self._refuse_before_write(topic, queue_id, True, flag, sys_flag, batch.born_timestamp,
                                                batch.reconsume_times, 0)
            if refused is not None:
                return refused
        key = (topic, queue_id)
        qoff0 = self.topic_queue_table.get(key, 0)
        now = self.now()
        first_phy = self.commit_log.append_batch(records, total, topic_b, queue_id, sys_flag, batch.born_timestamp,
                                                 born, now, sh, batch.reconsume_times, qoff0)
        if first_phy < 0:
            return self._failed(PutMessageStatus.SERVICE_NOT_AVAILABLE if self.disk_full
                                else PutMessageStatus.CREATE_MAPEDFILE_FAILED)
        dispatches: list[BatchDispatch] = [(first_phy + rel, size, tags_code, qoff, props)
                                           for qoff, (rel, size, tags_code, props) in enumerate(parsed, qoff0)]
        self.topic_queue_table[key] = qoff0 + len(dispatches)
        try:
            self.dispatcher.dispatch_batch(topic, queue_id, now, sys_flag, dispatches)
        except OSError as e:  # a consume queue file could not be reserved: take the batch back
            cq = self.find_consume_queue(topic, queue_id)
            cq.truncate_dirty_logic_files(first_phy)
            self._undo_append(first_phy, [(key, qoff0)], cq.store_path, e)
            return self._failed(PutMessageStatus.SERVICE_NOT_AVAILABLE if self.disk_full
                                else PutMessageStatus.CREATE_MAPEDFILE_FAILED)
        prefix = self._msg_id_prefix  # create_offset_msg_id(sh, phy) = prefix + %016X of phy
        ids = ",".join([prefix + "%016X" % d[0] for d in dispatches])
        elapsed = _perf_counter() - t0
        result = AppendMessageResult(_APPEND_PUT_OK, first_phy, total, ids, now, qoff0,
                                     int(elapsed * 1000), len(records))
        self.stats.put_ok(total, elapsed, len(records))
        wait = batch_props.get(PROPERTY_WAIT_STORE_MSG_OK) if batch_props is not None else None
        return self._flush_result(result, wait)

    def _flush_result(self, result: AppendMessageResult, wait_prop: str | None
                      ) -> PutMessageResult | defer.Deferred[PutMessageResult]:
        """The put's answer once the flush and, on a SYNC_MASTER, the slave say so (Java
        ``handleDiskFlush`` + ``handleHA``): at once, or a Deferred; a replica failure takes
        precedence over the flush's answer."""
        flushed = self.flush_service.flush_result(result, wait_prop)
        replica_wait = self.replica_wait
        if replica_wait is None or (wait_prop is not None and wait_prop.lower() != "true"):
            return flushed
        replicated = replica_wait(result.wrote_offset + result.wrote_bytes)
        if not isinstance(replicated, defer.Deferred) and not isinstance(flushed, defer.Deferred):
            if replicated is not PutMessageStatus.PUT_OK:
                flushed.put_message_status = replicated
            return flushed

        def combine(results: list[Any]) -> PutMessageResult:
            flush_result, replica_status = results
            if replica_status is not PutMessageStatus.PUT_OK:
                flush_result.put_message_status = replica_status
            return flush_result
        return defer.gatherResults([defer.maybeDeferred(lambda: flushed), defer.maybeDeferred(lambda: replicated)]
                                   ).addCallback(combine)

    # ------------------------------------------------------------------ flush
    def flush(self) -> defer.Deferred[None]:
        """Flush everything now (commit log, consume queues, index, checkpoint)."""
        return self.flush_service.flush_all()

    def flush_commitlog_now(self) -> None:
        """fsync the commit log, inline."""
        self.commit_log.flush_blocking()

    # ------------------------------------------------------------------ get
    def _is_the_batch_full(self, size_py: int, max_msg_nums: int, buffer_total: int, message_total: int,
                           in_disk: bool) -> bool:
        if buffer_total == 0 or message_total == 0:
            return False
        if max_msg_nums <= message_total:
            return True
        c = self.config
        if in_disk:
            return (buffer_total + size_py > c.maxTransferBytesOnMessageInDisk
                    or message_total > c.maxTransferCountOnMessageInDisk - 1)
        return (buffer_total + size_py > c.maxTransferBytesOnMessageInMemory
                or message_total > c.maxTransferCountOnMessageInMemory - 1)

    def _next_offset_correction(self, old: int, new: int) -> int:
        if not is_slave(self.config) or self.config.offsetCheckInSlave:
            return new
        return old

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    max_total_bytes: int | None = None,
                    message_filter: MessageFilter | None = None) -> GetMessageResult | None:
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
            max_filter = max(16000, max_msg_nums * CQ_STORE_UNIT_SIZE) // CQ_STORE_UNIT_SIZE
            units = cq.iter_units_in_file(offset, max_filter)
            if units is None:
                res.status = GetMessageStatus.OFFSET_FOUND_NULL
                res.next_begin_offset = self._next_offset_correction(offset, cq.roll_next_file(offset))
            else:
                status = GetMessageStatus.NO_MATCHED_MESSAGE
                next_phy_file_start = None
                # Java: (long) (TOTAL_PHYSICAL_MEMORY_SIZE * (ratio / 100.0))
                memory = int(TOTAL_PHYSICAL_MEMORY_SIZE * (self.config.accessMessageInMemoryMaxRatio / 100.0))
                max_phy_pulling = 0
                i = 0
                # the filter's per-message checks, skipped when it says it takes everything
                cq_match = cl_match = None
                if message_filter is not None:
                    cq_all, cl_all = message_filter.takes_all()
                    if not cq_all:
                        cq_match = message_filter.is_matched_by_consume_queue
                    if not cl_all:
                        cl_match = message_filter.is_matched_by_commit_log
                # _is_the_batch_full's limits
                c = self.config
                disk_bytes, disk_count = c.maxTransferBytesOnMessageInDisk, c.maxTransferCountOnMessageInDisk - 1
                mem_bytes, mem_count = c.maxTransferBytesOnMessageInMemory, c.maxTransferCountOnMessageInMemory - 1
                # commit_log.get_data, with the mapped file of the last record kept (nothing is
                # written while this runs, so its readable end holds too)
                find_file = self.commit_log.queue.find_mapped_file_by_offset
                mf = None
                mf_start = mf_end = mf_readable = 0
                mm = None
                message_list = res.message_list
                queue_offsets = res.message_queue_offsets
                buffer_total = 0
                for off_py, size_py, tags_code in units:
                    if i >= max_filter:
                        break
                    max_phy_pulling = off_py
                    if next_phy_file_start is not None and off_py < next_phy_file_start:
                        i += 1
                        continue
                    n = len(message_list)
                    if n:
                        if buffer_total:  # _is_the_batch_full, inline
                            if max_msg_nums <= n:
                                break
                            if (max_offset_py - off_py) > memory:  # in disk
                                if buffer_total + size_py > disk_bytes or n > disk_count:
                                    break
                            elif buffer_total + size_py > mem_bytes or n > mem_count:
                                break
                        if max_total_bytes is not None and buffer_total + size_py > max_total_bytes:
                            break
                    i += 1
                    if off_py == 0 and size_py == INT_MAX:  # blank pre-fill unit
                        continue
                    if cq_match is not None and not cq_match(tags_code):
                        continue
                    if mf is None or not mf_start <= off_py < mf_end:
                        mf = find_file(off_py)
                        if mf is not None:
                            mf_start = mf.file_from_offset
                            mf_end = mf_start + mf.file_size
                            mf_readable = mf.readable_position()
                            mm = mf.mm
                    pos = off_py - mf_start
                    if mf is None or mm is None or size_py < 0 or pos + size_py > mf_readable:
                        mf = None
                        if buffer_total == 0:
                            status = GetMessageStatus.MESSAGE_WAS_REMOVING
                        next_phy_file_start = self.commit_log.roll_next_file(off_py)
                        continue
                    data = mm[pos:pos + size_py]
                    if cl_match is not None and not cl_match(data, None):
                        if buffer_total == 0:
                            status = GetMessageStatus.NO_MATCHED_MESSAGE
                        continue
                    message_list.append(data)
                    queue_offsets.append(offset + i - 1)
                    buffer_total += size_py
                    status = GetMessageStatus.FOUND
                    next_phy_file_start = None
                res.buffer_total_size = buffer_total
                res.status = status
                res.next_begin_offset = offset + i
                res.suggest_pulling_from_slave = (max_offset_py - max_phy_pulling) > memory
        self.stats.get_done(res.status == GetMessageStatus.FOUND, len(res.message_list), time.perf_counter() - t0)
        return res

    # ------------------------------------------------------------------ queries
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        return cq.get_max_offset_in_queue() if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        return cq.get_min_offset_in_queue() if cq is not None else -1

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        u = cq.get_unit(offset) if cq is not None else None
        return u[0] if u else 0

    def _store_time_of(self, phy: int, size: int) -> int:
        """Java ``CommitLog.pickupStoreTimestamp``: -1 unless the record lies within the commit log (a
        blank unit, offset 0 and size 2^31-1, never does)."""
        cl = self.commit_log
        if size <= 0 or phy < cl.get_min_offset() or phy + size > cl.get_max_offset():
            return -1
        data = cl.get_data(phy, min(size, 128))
        if data is None or len(data) < 64:
            return -1
        from rmqpy.protocol.message import peek_record_header
        try:
            return peek_record_header(data, 0)[2]
        except Exception:  # noqa: BLE001
            return -1

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        u = cq.get_unit(offset) if cq is not None else None
        return self._store_time_of(u[0], u[1]) if u else -1

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int | None = None) -> int:
        if topic is None:
            mf = self.commit_log.queue.first()
            if mf is None or mf.mm is None:
                return -1
            size = self.commit_log.get_record_size(mf.file_from_offset)
            return self._store_time_of(mf.file_from_offset, size or 0)
        if queue_id is None:  # no such queue (as find_consume_queue answers)
            return -1
        cq = self.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            return -1
        u = cq.get_unit(cq.get_min_offset_in_queue())
        return self._store_time_of(u[0], u[1]) if u else -1

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int,
                                    boundary: Boundary = Boundary.LOWER) -> int:
        """Java 5.3.3 ``getOffsetInQueueByTime``: LOWER (Java's default) the first offset stored at or
        after ``timestamp``, UPPER the last at or before it (rmqpy/store/time_search.py)."""
        cq = self.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            return 0  # Java makes the (empty) queue and answers its offset, 0
        return offset_by_time(cq, self._store_time_of, self.commit_log.get_min_offset(), timestamp, boundary)

    def look_message_by_offset(self, phy_offset: int, size: int | None = None) -> MessageExt | None:
        data = self.select_one_message_by_offset(phy_offset, size)
        if data is None:
            return None
        try:
            return decode_record(data, 0, check_crc=False)
        except RecordError:
            return None

    def select_one_message_by_offset(self, phy_offset: int, size: int | None = None) -> bytes | None:
        if size is None:
            size = self.commit_log.get_record_size(phy_offset)
            if size is None:
                return None
        return self.commit_log.get_data(phy_offset, size)

    def get_commit_log_data(self, offset: int, max_size: int | None = None) -> bytes | None:
        """Raw commit log bytes from ``offset`` to the end of written data in its file (HA)."""
        mf = self.commit_log.queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        end = mf.readable_position()
        if max_size is not None:
            end = min(end, pos + max_size)
        if pos >= end:
            return None
        assert mf.mm is not None  # readable bytes: mapped
        return mf.mm[pos:end]

    def get_commit_log_message(self, phy_offset: int, size: int) -> bytes | None:
        return self.commit_log.get_data(phy_offset, size)

    # ------------------------------------------------------------------ HA (a slave's appends)
    def append_to_commit_log(self, start: int, data: bytes) -> bool:
        """Append bytes replicated from the master at ``start`` (the end of this commit log) and
        dispatch the records they complete (Java ``appendToCommitLog`` + the reput service)."""
        if self.shutdown_flag or self.config.readOnly:
            return False
        if not self.commit_log.append_data(start, data):
            return False
        self._dispatch_replicated()
        self._replica_end = self.commit_log.get_max_offset()
        return True

    def _dispatch_replicated(self) -> None:
        self._reput_from = self.dispatcher.reput_replicated(self.commit_log, self.topic_queue_table,
                                                            self._reput_from, self._dispatch_limit)

    def set_replica_confirm_offset(self, offset: int | None) -> None:
        """A controller-mode replica: the master's confirm offset; replicated records ending after
        it wait in the commit log, undispatched (Java's reput stops at ``getConfirmOffset()``).
        None lifts the limit and dispatches what waited (this store becomes a master). Also kept
        as the checkpoint's ``confirmPhyOffset``."""
        self._dispatch_limit = offset
        if offset is not None and self.checkpoint is not None:
            self.checkpoint.confirm_phy_offset = offset
        if not self.shutdown_flag and not self.config.readOnly:
            self._dispatch_replicated()

    # ------------------------------------------------------------------ controller mode: a replica's truncation
    def incomplete_tail_offset(self) -> int:
        """Where the replicated bytes at the commit log's end stop being whole records (a record
        the master had not finished sending), when nothing was written after them; -1 when the
        log ends with a whole record (what Java's ``AutoSwitchHAService.truncateInvalidMsg`` walks
        from ``reputFromOffset`` to find)."""
        end = self.commit_log.get_max_offset()
        if self._replica_end != end or self._reput_from >= end:
            return -1
        for off, d in self.commit_log.iter_records(self._reput_from, end, check_crc=False):
            if not d.success:  # whole records before it may only wait for the confirm offset
                return off
        return -1

    def truncate_files(self, offset: int) -> defer.Deferred[bool]:
        """Cut the store at commit log offset ``offset`` (Java ``DefaultMessageStore.truncateFiles``):
        True at once when it holds nothing past it; False when no whole record starts there;
        else the consume queues lose the units of records past it, the commit log is cut, the
        index's last file is told records from there on are new (as recovery does; Java leaves
        its index as it is), the queues' next offsets are recomputed and the confirm offset
        lowered. Positions change at once on the reactor; the files after the cut are deleted
        and the cut files' tails cleared and fsynced off the reactor. Nothing may be appended
        until the Deferred fires (True)."""
        if offset >= self.get_max_phy_offset():
            return defer.succeed(True)
        if self.config.readOnly or not self.commit_log.is_offset_aligned(offset):
            log.error("truncating the store to %d refused: no whole record starts there", offset)
            return defer.succeed(False)
        return self.truncate_dirty_files(offset)

    def truncate_dirty_files(self, offset: int) -> defer.Deferred[bool]:
        """:meth:`truncate_files` without the check that a record starts at ``offset`` (Java
        ``truncateDirtyFiles``: the cut of a half-replicated record)."""
        if offset >= self.get_max_phy_offset() or self.config.readOnly:
            return defer.succeed(True)
        old_max = self.get_max_phy_offset()
        detach: list[Any] = []
        zeros: list[tuple[Any, int, int]] = []
        for qs in self.consume_queue_table.values():
            for cq in qs.values():
                cq.truncate_dirty_logic_files(offset, detach, zeros)
        self.commit_log.truncate_to(offset, detach, zeros)
        if self.index_service.files:
            last = self.index_service.files[-1]
            if last.end_phy_offset > offset:
                last.end_phy_offset = offset
                last._write_header()
        self._recover_topic_queue_table()
        self._reput_from = min(self._reput_from, offset)
        self._replica_end = -1
        if self._dispatch_limit is not None and self._dispatch_limit > offset:
            self._dispatch_limit = offset
        if self.checkpoint is not None and self.checkpoint.confirm_phy_offset > offset:
            self.checkpoint.confirm_phy_offset = offset
        log.warning("truncated the store from %d to %d: %d files deleted", old_max, offset, len(detach))

        prefaulter = self.prefaulter

        def clear() -> None:
            for f in detach:
                if prefaulter is not None:
                    prefaulter.release(f)
                f.destroy()
            for f, start, end in zeros:
                f.zero(start, end)
            for f in {id(z[0]): z[0] for z in zeros}.values():
                if f.fd is not None:
                    os.fsync(f.fd)

        return self.blocking.run(clear).addCallback(lambda _: True)

    def query_message(self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int) -> QueryMessageResult:
        res = QueryMessageResult()
        if not self.config.messageIndexEnable:
            return res
        offsets, last_ts, last_phy = self.index_service.query_offsets(topic, key, max_num, begin_ts, end_ts)
        res.index_last_update_timestamp = last_ts
        res.index_last_update_phyoffset = last_phy
        for off in sorted(set(offsets)):
            data = self.select_one_message_by_offset(off)
            if data is None:
                continue
            res.message_list.append(data)
            res.buffer_total_size += len(data)
        return res

    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def get_master_flushed_offset(self) -> int:
        return self.checkpoint.master_flushed_offset if self.checkpoint is not None else 0

    def dispatch_behind_bytes(self) -> int:
        return 0

    def flush_behind_bytes(self) -> int:
        return max(0, self.commit_log.get_max_offset() - self.commit_log.queue.flushed_where)
    # ------------------------------------------------------------------ topics
    def delete_topics(self, names: Iterable[str]) -> int:
        return self.clean_service.delete_topics(names)

    def clean_unused_topic(self, topics: Iterable[str]) -> int:
        return self.clean_service.clean_unused_topic(topics)

    def clean_expired_consumer_queue(self) -> None:
        self.clean_service.clean_expired_consumer_queue()

    def topic_queue_offsets(self) -> dict[tuple[str, int], int]:
        return dict(self.topic_queue_table)

    # ------------------------------------------------------------------ retention
    def _resident_tick(self) -> None:
        """One pass of :class:`ResidentWindow` in the blocking-work thread, one at a time."""
        rw = self.resident
        if rw is None or self._resident_busy:
            return
        self._resident_busy = True
        limit = rw.limit(self.commit_log.queue.flushed_where, self.commit_log.get_max_offset())

        def done(_: object) -> None:
            self._resident_busy = False

        def failed(f: Failure) -> None:
            self._resident_busy = False
            if limiter_for(self.reactor).allow("store-resident-failed"):
                log.error("dropping the commit log's old pages failed: %s", f.getErrorMessage())

        self.blocking.run(rw.trim, limit).addCallbacks(done, failed)

    def _clean_tick(self) -> None:
        self.clean_service.delete_expired_files()

    def delete_expired_files(self, *, force_time: bool = False) -> defer.Deferred[int]:
        """One retention pass (CleanCommitLogService + CleanConsumeQueueService)."""
        return self.clean_service.delete_expired_files(force_time=force_time)

    # ------------------------------------------------------------------ stats
    def _stats_tick(self) -> None:
        self.stats.sample()

    def runtime_info(self) -> dict[str, str]:
        info = self.stats.runtime_info()
        cl_dir = self.config.commitlog_dir
        r = disk_used_ratio(cl_dir) if os.path.isdir(cl_dir) else -1.0
        info["commitLogDiskRatio"] = str(r)
        info[f"commitLogDiskRatio_{cl_dir}"] = str(r)
        info["consumeQueueDiskRatio"] = str(disk_used_ratio(self.config.consume_queue_dir))
        info["commitLogMinOffset"] = str(self.get_min_phy_offset())
        info["commitLogMaxOffset"] = str(self.get_max_phy_offset())
        return info
