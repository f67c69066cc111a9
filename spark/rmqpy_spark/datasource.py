"""PySpark data source ``rocketmq``: RocketMQ topics as DataFrames, and DataFrames into topics.

Broker mode (any RocketMQ cluster, through its name server; rows carry ``brokerName`` too)::

    spark.dataSource.register(RocketMQDataSource)
    df = spark.read.format("rocketmq").option("nameServer", "ns:9876").option("topic", "T").load()
    spark.readStream.format("rocketmq").option("nameServer", "ns:9876").option("topic", "T").load()

Store mode (a store directory, the broker's files read directly)::

    df = spark.read.format("rocketmq").load("/path/to/store")

The sink::

    df.write.format("rocketmq").option("nameServer", "ns:9876").option("topic", "T").save()

Options are checked in options.py; see spark/README.md for them.
"""

from __future__ import annotations

import datetime as _dt
import logging
import sys
import uuid
from dataclasses import dataclass
from typing import Iterator

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)

try:  # 4.1+
    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual
except ImportError:  # pragma: no cover - 4.0
    EqualTo = GreaterThan = GreaterThanOrEqual = In = LessThan = LessThanOrEqual = None
try:  # 4.2+
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow  # noqa: F401
except ImportError:  # pragma: no cover - 4.0 / 4.1
    ReadAllAvailable = ReadMaxRows = None

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

from . import reader as R
from .options import EARLIEST, LATEST, BrokerOptions, OptionError, SinkOptions, StoreOptions

log = logging.getLogger(__name__)

NAME = "rocketmq"


# --------------------------------------------------------------------------- options

class _Opts(StoreOptions):
    """Store mode's checked options, with the store root and the scan switches."""

    def __init__(self, options, streaming: bool = False):
        super().__init__(options, streaming)
        self.root = R.store_root(self.path)

    def scan_options(self, **over) -> R.ScanOptions:
        o = R.ScanOptions(topics=self.topics, queue_ids=self.queue_ids, min_store_ms=self.start_ms,
                          max_store_ms=self.end_ms, check_crc=self.check_crc, decompress=self.decompress,
                          batch_rows=self.batch_rows, batch_bytes=self.batch_bytes)
        for k, v in over.items():
            setattr(o, k, v)
        return o


# --------------------------------------------------------------------------- partitions

class CommitLogPartition(InputPartition):
    """Records starting in [start, end) of one commit log file."""

    def __init__(self, path: str, base: int, start: int, end: int):
        super().__init__((base, start))
        self.path, self.base, self.start, self.end = path, base, start, end


class QueuePartition(InputPartition):
    """Queue offsets [start, end) of one consume queue."""

    def __init__(self, topic: str, queue_id: int, start: int, end: int):
        super().__init__((topic, queue_id, start))
        self.topic, self.queue_id, self.start, self.end = topic, queue_id, start, end


def _read_partition(root: str, part, scan: R.ScanOptions) -> Iterator:
    if isinstance(part, CommitLogPartition):
        yield from R.scan_commitlog_file(part.path, part.base, part.start, part.end, scan)
    elif isinstance(part, QueuePartition):
        yield from R.read_queue_range(root, part.topic, part.queue_id, part.start, part.end, scan)
    else:  # pragma: no cover
        raise TypeError(f"unexpected partition {part!r}")


def _queue_partitions(plan, units_per_split: int) -> list[QueuePartition]:
    out = []
    for t, q, lo, hi in plan:
        o = lo
        while o < hi:
            e = min(hi, o + units_per_split)
            out.append(QueuePartition(t, q, o, e))
            o = e
    return out


def _store_offset(spec, topic: str, qid: int, lo: int, hi: int, default: str) -> int:
    """A queue's offset from a store-mode startingOffsets/endingOffsets value (-2 earliest, -1 latest)."""
    if spec is None or isinstance(spec, str):
        v = spec or default
        return lo if v == EARLIEST else hi
    o = spec.get(topic, {}).get(qid, -2 if default == EARLIEST else -1)
    return lo if o == -2 else hi if o == -1 else o


def _store_queue_plan(o: "_Opts", topics, queue_ids) -> list[tuple[str, int, int, int]]:
    """[(topic, queueId, start, end)] of the consume queues, from startingOffsets to endingOffsets."""
    plan = []
    for t, q, lo, hi in R.plan_queues(o.root, topics, queue_ids, 1 << 62, o.check_crc):
        if topics is not None and t not in topics or queue_ids is not None and q not in queue_ids:
            continue
        s = max(lo, _store_offset(o.starting, t, q, lo, hi, EARLIEST))
        e = min(hi, _store_offset(o.ending, t, q, lo, hi, LATEST))
        if e > s:
            plan.append((t, q, s, e))
    return plan


# --------------------------------------------------------------------------- batch

class RocketMQBatchReader(DataSourceReader):
    """Batch reader; filters (topics, queueIds, startTime/endTime, pushed filters) are applied here."""

    def __init__(self, opts: _Opts, schema):
        self.opts = opts
        self.scan = opts.scan_options()

    def partitions(self):
        o = self.opts
        if o.partitioning == "consumequeue":
            plan = _store_queue_plan(o, self.scan.topics, self.scan.queue_ids)
            parts = _queue_partitions(plan, o.units_per_split)
        else:
            parts = [CommitLogPartition(s.path, s.base, s.start, s.end)
                     for s in R.plan_commitlog(o.root, o.split_bytes)]
        return parts or [InputPartition(None)]

    def read(self, partition):
        if getattr(partition, "value", 0) is None:
            return iter(())
        return _read_partition(self.opts.root, partition, self.scan)


def _ts_us(v) -> int | None:
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None:  # Spark hands session-local naive datetimes; treat as local time
            v = v.astimezone()
        d = v - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        return (d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds
    if isinstance(v, int):
        return v
    return None


class RocketMQPushdownReader(RocketMQBatchReader):
    """Batch reader that also takes Spark's filters on topic, queueId and storeTimestamp (4.1+)."""

    def pushFilters(self, filters):
        s = self.scan
        for f in filters:
            col = tuple(getattr(f, "attribute", ()) or ())
            name = col[0] if len(col) == 1 else None
            if name == "topic" and EqualTo is not None and isinstance(f, EqualTo) and isinstance(f.value, str):
                s.topics = frozenset({f.value}) & s.topics if s.topics is not None else frozenset({f.value})
                continue
            if name == "topic" and In is not None and isinstance(f, In) and all(isinstance(x, str) for x in f.value):
                vs = frozenset(f.value)
                s.topics = vs & s.topics if s.topics is not None else vs
                continue
            if name == "queueId" and EqualTo is not None and isinstance(f, EqualTo) and isinstance(f.value, int):
                vs = frozenset({f.value})
                s.queue_ids = vs & s.queue_ids if s.queue_ids is not None else vs
                continue
            if name == "queueId" and In is not None and isinstance(f, In) and all(isinstance(x, int) for x in f.value):
                vs = frozenset(f.value)
                s.queue_ids = vs & s.queue_ids if s.queue_ids is not None else vs
                continue
            if name == "storeTimestamp" and isinstance(f, (GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)):
                us = _ts_us(f.value)
                if us is None:
                    yield f
                    continue
                incl = isinstance(f, (GreaterThanOrEqual, LessThanOrEqual))
                if isinstance(f, (GreaterThan, GreaterThanOrEqual)):
                    if s.min_store_us is None or us > s.min_store_us or (us == s.min_store_us and not incl):
                        s.min_store_us, s.min_store_us_incl = us, incl
                else:
                    if s.max_store_us is None or us < s.max_store_us or (us == s.max_store_us and not incl):
                        s.max_store_us, s.max_store_us_incl = us, incl
                continue
            yield f


def _from_pushdown_worker() -> bool:
    """True when Spark builds the reader in its filter-pushdown worker (filter pushdown enabled).

    Spark (4.1+) refuses a reader that implements pushFilters when
    spark.sql.python.filterPushdown.enabled is false, and only then uses another worker; so the
    reader class is picked by the worker that asks for it."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_filename.endswith("data_source_pushdown_filters.py"):
            return True
        f = f.f_back
    return False


# --------------------------------------------------------------------------- streaming

class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of exact consume queue offset ranges ``{"topic": {"queueId": offset}}``.

    An offset is the next queue offset to read.  A queue that shows up later (new topic or queue)
    is read from its first offset; offsets below a queue's first retained unit are skipped (the
    data was deleted by retention)."""

    def __init__(self, opts: _Opts, schema):
        self.opts = opts
        self.scan = opts.scan_options(topics=None, queue_ids=None)  # queues are chosen by the offsets
        self._target: dict | None = None

    def _bounds(self) -> dict[str, dict[str, tuple[int, int]]]:
        o = self.opts
        out: dict[str, dict[str, tuple[int, int]]] = {}
        clog = R.open_commit_log(o.root, o.check_crc)
        try:
            for t, q in R.list_queues(o.root, o.topics, o.queue_ids):
                out.setdefault(t, {})[str(q)] = R.queue_bounds(o.root, t, q, clog, o.check_crc)
        finally:
            clog.close()
        return out

    def initialOffset(self) -> dict:
        b = self._bounds()
        st = self.opts.starting or EARLIEST
        out: dict[str, dict[str, int]] = {}
        for t, qs in b.items():
            for q, (lo, hi) in qs.items():
                v = _store_offset(st, t, int(q), lo, hi, EARLIEST)
                out.setdefault(t, {})[q] = max(lo, min(v, hi))
        if isinstance(st, dict):  # queues named but not (yet) on disk: keep as given
            for t, qs in st.items():
                for q, v in qs.items():
                    if str(q) not in out.get(t, {}):
                        out.setdefault(t, {})[str(q)] = max(0, v)
        return out

    def _latest(self) -> dict:
        latest = {t: {q: hi for q, (_lo, hi) in qs.items()} for t, qs in self._bounds().items()}
        if self._target is not None:
            capped: dict = {}
            for t, qs in self._target.items():
                for q, hi in qs.items():
                    capped.setdefault(t, {})[q] = min(hi, latest.get(t, {}).get(q, hi))
            latest = capped
        return latest

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {t: {q: hi for q, (_lo, hi) in qs.items()} for t, qs in self._bounds().items()}

    def getDefaultReadLimit(self):
        if self.opts.max_per_trigger and ReadMaxRows is not None:
            return ReadMaxRows(self.opts.max_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        latest = self._latest()
        start = start or {}
        end: dict[str, dict[str, int]] = {}
        for t in set(latest) | set(start):
            for q in set(latest.get(t, {})) | set(start.get(t, {})):
                s = start.get(t, {}).get(q, 0)
                end.setdefault(t, {})[q] = max(s, latest.get(t, {}).get(q, s))
        max_rows = getattr(limit, "max_rows", None) if limit is not None else None
        if max_rows is None and limit is None and self.opts.max_per_trigger and ReadMaxRows is None:
            max_rows = self.opts.max_per_trigger  # 4.0/4.1: no read limits from the engine
        if max_rows is not None:
            end = self._cap(start, end, int(max_rows))
        return {t: dict(sorted(qs.items(), key=lambda kv: int(kv[0]))) for t, qs in sorted(end.items())}

    @staticmethod
    def _cap(start: dict, end: dict, max_rows: int) -> dict:
        back = [(t, q, start.get(t, {}).get(q, 0), e) for t, qs in sorted(end.items()) for q, e in sorted(qs.items())]
        take = {(t, q): 0 for t, q, _s, _e in back}
        left = max_rows
        pending = [(t, q, e - s) for t, q, s, e in back if e > s]
        while left > 0 and pending:
            share = max(1, left // len(pending))
            nxt = []
            for t, q, avail in pending:
                if left <= 0:
                    break
                n = min(share, avail, left)
                take[(t, q)] += n
                left -= n
                if avail - n > 0:
                    nxt.append((t, q, avail - n))
            pending = nxt
        out: dict = {}
        for t, q, s, e in back:
            out.setdefault(t, {})[q] = s + take[(t, q)] if e > s else e
        return out

    def partitions(self, start: dict, end: dict):
        plan = []
        for t, qs in sorted(end.items()):
            for q, e in sorted(qs.items(), key=lambda kv: int(kv[0])):
                s = start.get(t, {}).get(q, 0) if start else 0
                if e > s:
                    plan.append((t, int(q), s, e))
        return _queue_partitions(plan, self.opts.units_per_split)

    def read(self, partition):
        return _read_partition(self.opts.root, partition, self.scan)

    def commit(self, end: dict) -> None:
        pass


# --------------------------------------------------------------------------- broker mode

class BrokerPartition(InputPartition):
    """Queue offsets [start, end) of one message queue of a broker."""

    def __init__(self, topic: str, broker: str, queue_id: int, start: int, end: int):
        super().__init__((topic, broker, queue_id, start))
        self.topic, self.broker, self.queue_id, self.start, self.end = topic, broker, queue_id, start, end


def _broker_partitions(ranges) -> list:
    return [BrokerPartition(r.topic, r.broker, r.queue_id, r.start, r.end) for r in ranges]


def _read_broker_partition(opts: BrokerOptions, part) -> Iterator:
    from . import broker as B

    if not isinstance(part, BrokerPartition):  # the empty plan's placeholder
        return
    c = B.consumer(opts)
    try:
        yield from B.read_range(c, B.QueueRange(part.topic, part.broker, part.queue_id, part.start, part.end), opts)
    finally:
        c.shutdown()


class BrokerBatchReader(DataSourceReader):
    """Batch read of the topics' queues from startingOffsets to endingOffsets, as the driver finds them."""

    def __init__(self, opts: BrokerOptions):
        self.opts = opts

    def partitions(self):
        from . import broker as B

        o = self.opts
        c = B.consumer(o)
        try:
            bounds = B.queue_bounds(c, o.topics)
        finally:
            c.shutdown()
        start = B.check_loss(B.resolve(o.starting, bounds, EARLIEST), bounds, o.fail_on_data_loss)
        end = B.resolve(o.ending, bounds, LATEST)
        for k, e in end.items():
            lo, hi = bounds[k]
            if e > hi:
                raise OptionError(f"rocketmq: endingOffsets: {k[0]} broker {k[1]} queue {k[2]}: offset {e} is past "
                                  f"the queue's end {hi}")
            if e < start[k]:
                raise OptionError(f"rocketmq: {k[0]} broker {k[1]} queue {k[2]}: endingOffsets {e} is before "
                                  f"startingOffsets {start[k]}")
        return _broker_partitions(B.plan(start, end, o.max_queue_split)) or [InputPartition(None)]

    def read(self, partition):
        return _read_broker_partition(self.opts, partition)


class BrokerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of exact queue offset ranges ``{"topic": {"brokerName": {"queueId": offset}}}``.

    A queue that appears later (a new broker, more queues) joins at its min offset, read from the
    next micro-batch on. A queue missing from the route (its broker down) keeps its offset and is
    read on once it is back. With option ``group``, each finished micro-batch's end offsets are
    committed for the group (UPDATE_CONSUMER_OFFSET), so that mqadmin consumerProgress shows the
    query's lag; the query itself resumes from its checkpoint, never from the group's offsets."""

    def __init__(self, opts: BrokerOptions):
        self.opts = opts
        self._consumer = None
        self._target: dict | None = None

    def _c(self):
        from . import broker as B

        if self._consumer is None:
            self._consumer = B.consumer(self.opts)
        return self._consumer

    def _bounds(self) -> dict:
        from . import broker as B

        return B.queue_bounds(self._c(), self.opts.topics)

    def initialOffset(self) -> dict:
        from . import broker as B
        from .options import offsets_json

        bounds = self._bounds()
        start = B.check_loss(B.resolve(self.opts.starting, bounds, EARLIEST), bounds, self.opts.fail_on_data_loss)
        return offsets_json(start)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {k: hi for k, (_lo, hi) in self._bounds().items()}

    def getDefaultReadLimit(self):
        if self.opts.max_per_trigger and ReadMaxRows is not None:
            return ReadMaxRows(self.opts.max_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        from . import broker as B
        from .options import offsets_json, parse_offsets_json

        s = parse_offsets_json(start or {})
        bounds = self._bounds()
        end = dict(s)
        for k, (lo, hi) in bounds.items():
            if k not in s:
                end[k] = lo  # a new queue: it joins here, read from the next micro-batch
                continue
            top = hi if self._target is None else min(hi, self._target.get(k, s[k]))
            end[k] = max(s[k], top)
        max_rows = getattr(limit, "max_rows", None) if limit is not None else None
        if max_rows is None and limit is None and self.opts.max_per_trigger and ReadMaxRows is None:
            max_rows = self.opts.max_per_trigger  # 4.0/4.1: no read limits from the engine
        if max_rows is not None:
            end = B.cap(s, end, int(max_rows))
        return offsets_json(end)

    def partitions(self, start: dict, end: dict):
        from . import broker as B
        from .options import parse_offsets_json

        s, e = parse_offsets_json(start or {}), parse_offsets_json(end)
        s = {k: s.get(k, v) for k, v in e.items()}  # a queue absent from start joined at its end offset
        return _broker_partitions(B.plan(s, e, self.opts.max_queue_split))

    def read(self, partition):
        return _read_broker_partition(self.opts, partition)

    def commit(self, end: dict) -> None:
        if self.opts.group is None:
            return
        from rmqpy.client import ClientError, MessageQueue

        from .options import parse_offsets_json

        c = self._c()
        for (t, b, q), off in sorted(parse_offsets_json(end).items()):
            try:
                c.commit_offset(MessageQueue(t, b, q), off)
            except ClientError as e:  # reporting only: the checkpoint holds the query's offsets
                log.warning("rocketmq: committing offset %d of %s/%s/%d for group %s failed: %s", off, t, b, q,
                            self.opts.group, e)

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.shutdown()
            self._consumer = None


# --------------------------------------------------------------------------- sink

def _simple_fields(schema) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


@dataclass
class SentMessage(WriterCommitMessage):
    rows: int


def _task_identity() -> tuple[int, str | None, str | None]:
    """(partition id, streaming query id, micro-batch id) of the running Spark task."""
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:
        return 0, None, None
    return tc.partitionId(), tc.getLocalProperty("sql.streaming.queryId"), tc.getLocalProperty("streaming.sql.batchId")


class RocketMQWriter(DataSourceArrowWriter):
    """``df.write.format("rocketmq")``: each task sends its rows (at-least-once, see sink.py)."""

    def __init__(self, opts: SinkOptions):
        self.opts = opts
        self.write_id = uuid.uuid4().hex  # made on the driver: the same in every task and task retry

    def write(self, iterator):
        from .sink import Sender

        part, _q, _b = _task_identity()
        sender = Sender(self.opts)
        try:
            return SentMessage(sender.write(iterator, self.write_id, part))
        finally:
            sender.close()


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("rocketmq")``: a micro-batch's rows; a micro-batch run again after a
    restart sends its rows with the message ids of the first run (query id + batch id)."""

    def __init__(self, opts: SinkOptions):
        self.opts = opts
        self.fallback_id = uuid.uuid4().hex

    def write(self, iterator):
        from .sink import Sender

        part, query, batch = _task_identity()
        write_id = f"{query}/{batch}" if query is not None and batch is not None else self.fallback_id
        sender = Sender(self.opts)
        try:
            return SentMessage(sender.write(iterator, write_id, part))
        finally:
            sender.close()

    def commit(self, messages, batchId) -> None:
        pass

    def abort(self, messages, batchId) -> None:
        pass


# --------------------------------------------------------------------------- the data source

class RocketMQDataSource(DataSource):
    """``spark.read.format("rocketmq").load(store_root)`` or ``.option("nameServer", ...)``, and the sink;
    see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def _broker_mode(self) -> bool:
        return any(k.lower() == "nameserver" for k in self.options)

    def schema(self) -> str:
        if self._broker_mode():
            from .broker import BROKER_SCHEMA_DDL
            return BROKER_SCHEMA_DDL
        return R.SCHEMA_DDL

    def reader(self, schema) -> DataSourceReader:
        if self._broker_mode():
            return BrokerBatchReader(BrokerOptions(self.options))
        opts = _Opts(self.options)
        push = opts.pushdown
        if EqualTo is not None and (push == "true" or (push == "auto" and _from_pushdown_worker())):
            return RocketMQPushdownReader(opts, schema)
        return RocketMQBatchReader(opts, schema)

    def streamReader(self, schema) -> DataSourceStreamReader:
        if self._broker_mode():
            return BrokerStreamReader(BrokerOptions(self.options, streaming=True))
        return RocketMQStreamReader(_Opts(self.options, streaming=True), schema)

    def _sink(self, schema, overwrite: bool) -> SinkOptions:
        from .sink import check_schema

        if overwrite:
            raise OptionError("rocketmq sink: a topic cannot be overwritten; use mode append")
        opts = SinkOptions(self.options)
        check_schema(_simple_fields(schema), opts)
        return opts

    def writer(self, schema, overwrite: bool):
        return RocketMQWriter(self._sink(schema, overwrite))

    def streamWriter(self, schema, overwrite: bool):
        return RocketMQStreamWriter(self._sink(schema, overwrite))


def register(spark) -> None:
    """Register the ``rocketmq`` format with a SparkSession."""
    spark.dataSource.register(RocketMQDataSource)
