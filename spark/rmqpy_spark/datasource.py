"""PySpark data source ``rocketmq``: a RocketMQ store (commit log + consume queues) as DataFrames.

Batch::

    spark.dataSource.register(RocketMQDataSource)
    df = spark.read.format("rocketmq").load("/path/to/store")

Streaming (offsets per topic and queue, ``{"topic": {"queueId": offset}}``)::

    spark.readStream.format("rocketmq").option("startingOffsets", "earliest").load("/path/to/store")

See spark/README.md for the options.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import sys
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

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

log = logging.getLogger(__name__)

NAME = "rocketmq"


# --------------------------------------------------------------------------- options

def _bool(v, default: bool) -> bool:
    if v is None:
        return default
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def _time_ms(v) -> int | None:
    """Epoch milliseconds, or an ISO-8601 date/time (no zone = UTC)."""
    if v is None or str(v).strip() == "":
        return None
    s = str(v).strip()
    if s.lstrip("-").isdigit():
        return int(s)
    t = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return int(t.timestamp() * 1000)


def _list(v) -> list[str] | None:
    if v is None:
        return None
    items = [x.strip() for x in str(v).split(",") if x.strip()]
    return items or None


def _get(options, key: str, default=None):
    """Options are case-insensitive in Spark; be safe with a plain dict too."""
    if key in options:
        return options[key]
    low = key.lower()
    for k, v in options.items():
        if k.lower() == low:
            return v
    return default


class _Opts:
    def __init__(self, options):
        path = _get(options, "path")
        if not path:
            raise ValueError("rocketmq: give the store directory: .load('/path/to/store') or option('path', ...)")
        self.root = R.store_root(str(path))
        topics = _list(_get(options, "topics"))
        qids = _list(_get(options, "queueIds"))
        self.topics = frozenset(topics) if topics else None
        self.queue_ids = frozenset(int(q) for q in qids) if qids else None
        self.start_ms = _time_ms(_get(options, "startTime"))
        self.end_ms = _time_ms(_get(options, "endTime"))
        self.partitioning = str(_get(options, "partitioning", "commitlog")).lower()
        if self.partitioning not in ("commitlog", "consumequeue"):
            raise ValueError(f"rocketmq: partitioning must be commitlog or consumequeue, not {self.partitioning!r}")
        self.split_bytes = int(_get(options, "splitBytes", 64 << 20))
        self.units_per_split = int(_get(options, "unitsPerSplit", 200_000))
        self.check_crc = _bool(_get(options, "checkCRC"), True)
        self.decompress = _bool(_get(options, "decompressBody"), True)
        self.batch_rows = int(_get(options, "batchRows", 65536))
        self.batch_bytes = int(_get(options, "batchBytes", 32 << 20))
        self.starting = _get(options, "startingOffsets", "earliest")
        mm = _get(options, "maxMessagesPerTrigger")
        self.max_per_trigger = int(mm) if mm not in (None, "") else None
        self.pushdown = str(_get(options, "filterPushdown", "auto")).lower()

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


# --------------------------------------------------------------------------- batch

class RocketMQBatchReader(DataSourceReader):
    """Batch reader; filters (topics, queueIds, startTime/endTime, pushed filters) are applied here."""

    def __init__(self, opts: _Opts, schema):
        self.opts = opts
        self.scan = opts.scan_options()

    def partitions(self):
        o = self.opts
        if o.partitioning == "consumequeue":
            plan = R.plan_queues(o.root, o.topics or self.scan.topics, o.queue_ids or self.scan.queue_ids,
                                 o.units_per_split, o.check_crc)
            if self.scan.topics is not None:
                plan = [p for p in plan if p[0] in self.scan.topics]
            if self.scan.queue_ids is not None:
                plan = [p for p in plan if p[1] in self.scan.queue_ids]
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

def _offsets_json(v) -> dict:
    d = json.loads(v) if isinstance(v, str) else v
    if not isinstance(d, dict):
        raise ValueError("startingOffsets JSON must be an object {\"topic\": {\"queueId\": offset}}")
    return {str(t): {str(q): int(o) for q, o in qs.items()} for t, qs in d.items()}


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
        clog = R.CommitLogFiles(o.root)
        try:
            for t, q in R.list_queues(o.root, o.topics, o.queue_ids):
                out.setdefault(t, {})[str(q)] = R.queue_bounds(o.root, t, q, clog, o.check_crc)
        finally:
            clog.close()
        return out

    def initialOffset(self) -> dict:
        b = self._bounds()
        st = self.opts.starting
        if st is None or str(st).strip().lower() == "earliest":
            return {t: {q: lo for q, (lo, _hi) in qs.items()} for t, qs in b.items()}
        if str(st).strip().lower() == "latest":
            return {t: {q: hi for q, (_lo, hi) in qs.items()} for t, qs in b.items()}
        given = _offsets_json(st)
        out: dict[str, dict[str, int]] = {}
        for t, qs in b.items():
            for q, (lo, hi) in qs.items():
                v = given.get(t, {}).get(q, -2)
                out.setdefault(t, {})[q] = lo if v == -2 else hi if v == -1 else max(lo, min(v, hi))
        for t, qs in given.items():  # queues named but not (yet) on disk: keep as given
            for q, v in qs.items():
                if q not in out.get(t, {}):
                    out.setdefault(t, {})[q] = max(0, v)
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


# --------------------------------------------------------------------------- the data source

class RocketMQDataSource(DataSource):
    """``spark.read.format("rocketmq").load(store_root)``; see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return R.SCHEMA_DDL

    def reader(self, schema) -> DataSourceReader:
        opts = _Opts(self.options)
        push = opts.pushdown
        if EqualTo is not None and (push == "true" or (push == "auto" and _from_pushdown_worker())):
            return RocketMQPushdownReader(opts, schema)
        return RocketMQBatchReader(opts, schema)

    def streamReader(self, schema) -> DataSourceStreamReader:
        return RocketMQStreamReader(_Opts(self.options), schema)


def register(spark) -> None:
    """Register the ``rocketmq`` format with a SparkSession."""
    spark.dataSource.register(RocketMQDataSource)
