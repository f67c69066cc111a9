"""Broker mode: read topics through the brokers of a cluster with :mod:`rmqpy.client` (no pyspark here).

A partition is a range [start, end) of queue offsets of one message queue (topic, broker name,
queue id); a large range is split into several. The driver plans ranges from the queues' min and
max offsets (GET_MIN_OFFSET / GET_MAX_OFFSET to the broker that owns each queue); an executor
pulls its range with PULL_MESSAGE and nothing else, so a range gives the same rows every time it
is read (what a restarted streaming query relies on to neither lose nor repeat a message).

Offsets are rocketmq-spark's: ``{"topic": {"brokerName": {"queueId": offset}}}``, an offset being
the next one to read; -2 = earliest, -1 = latest where a user gives them.
"""

from __future__ import annotations

import collections
import logging
import struct
from dataclasses import dataclass
from typing import Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmqpy.client import ClientError, MessageQueue, PullConsumer, PullStatus
from rmqpy.client.requests import decode_pull_body, subscription
from rmqpy.protocol import sysflag as SF
from rmqpy.protocol.bodies.heartbeat import SubscriptionData
from rmqpy.protocol.message import MESSAGE_MAGIC_CODE_V1

from . import reader as R
from .options import EARLIEST, BrokerOptions, OptionError
from .reader import ARROW_SCHEMA, SCHEMA_DDL

log = logging.getLogger(__name__)

#: broker mode's rows: the store mode's columns and the name of the broker that stores the message
BROKER_ARROW_SCHEMA = ARROW_SCHEMA.append(pa.field("brokerName", pa.string()))
BROKER_SCHEMA_DDL = SCHEMA_DDL + ", brokerName STRING"

#: properties the consumer adds to each pulled message (the queue's offsets at pull time): not the
#: message's, and different at each read, so not in the rows
_PULL_PROPERTIES = frozenset({"MIN_OFFSET", "MAX_OFFSET"})
_PULL_PROPERTY_NAMES = pa.array(sorted(_PULL_PROPERTIES), pa.string())
Key = tuple[str, str, int]  # (topic, broker name, queue id)
#: the group a query pulls with when it has none of its own (pulling commits nothing)
DEFAULT_GROUP = "rmqpy_spark_reader"


class DataLossError(RuntimeError):
    """Messages the query should read are gone (retention, or offsets past a queue's end)."""


@dataclass(frozen=True)
class QueueRange:
    """Queue offsets [start, end) of one message queue: what one partition reads."""
    topic: str
    broker: str
    queue_id: int
    start: int
    end: int

    @property
    def mq(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker, self.queue_id)


def consumer(opts: BrokerOptions) -> PullConsumer:
    return PullConsumer(name_server=opts.name_server, group=opts.group or DEFAULT_GROUP,
                        credentials=opts.credentials)


def queue_bounds(c: PullConsumer, topics: list[str]) -> dict[Key, tuple[int, int]]:
    """{(topic, broker, queueId): (min offset, max offset)} of every readable queue of ``topics``."""
    out: dict[Key, tuple[int, int]] = {}
    for t in topics:
        try:
            qs = c.fetch_queues(t)
        except ClientError as e:
            raise OptionError(f"rocketmq: topic {t!r}: no route from the name server ({e})") from e
        for mq in qs:
            out[(mq.topic, mq.broker_name, mq.queue_id)] = (c.min_offset(mq), c.max_offset(mq))
    return out


def resolve(spec: str | Mapping[Key, int], bounds: Mapping[Key, tuple[int, int]], default: str) -> dict[Key, int]:
    """Offsets for every queue of ``bounds`` from a startingOffsets/endingOffsets value; a queue the
    JSON does not name takes ``default`` (earliest or latest). Queues the JSON names but the route
    does not have are refused (a misspelt broker name would read nothing)."""
    if isinstance(spec, str):
        return {k: (lo if spec == EARLIEST else hi) for k, (lo, hi) in bounds.items()}
    unknown = sorted(k for k in spec if k not in bounds)
    if unknown:
        t, b, q = unknown[0]
        raise OptionError(f"rocketmq: offsets name queue {q} of broker {b!r} of topic {t!r}, which the route of "
                          f"the topic does not have ({len(bounds)} queues: {sorted(bounds)[:8]})")
    out = {}
    for k, (lo, hi) in bounds.items():
        v = spec.get(k, -2 if default == EARLIEST else -1)
        out[k] = lo if v == -2 else hi if v == -1 else v
    return out


def check_loss(start: dict[Key, int], bounds: Mapping[Key, tuple[int, int]], fail: bool) -> dict[Key, int]:
    """Start offsets moved to each queue's min where retention deleted what they name, and to its
    max where they lie past it; either is data loss, an error when ``fail``."""
    out = dict(start)
    for k, s in start.items():
        lo, hi = bounds.get(k, (s, s))
        if s < lo or s > hi:
            what = (f"offsets {s}..{lo - 1} were deleted (queue min {lo})" if s < lo
                    else f"offset {s} is past the queue's end {hi}")
            msg = f"rocketmq: {k[0]} broker {k[1]} queue {k[2]}: {what}"
            if fail:
                raise DataLossError(msg + " (option failOnDataLoss=false reads on from what is there)")
            log.warning("%s; reading on from %d", msg, lo if s < lo else hi)
            out[k] = lo if s < lo else hi
    return out


def plan(start: Mapping[Key, int], end: Mapping[Key, int], max_split: int) -> list[QueueRange]:
    """Ranges of at most ``max_split`` offsets covering [start, end) of every queue, in queue order."""
    out = []
    for k in sorted(end):
        s, e = start.get(k, 0), end[k]
        o = s
        while o < e:
            n = min(e, o + max_split)
            out.append(QueueRange(k[0], k[1], k[2], o, n))
            o = n
    return out


def cap(start: Mapping[Key, int], end: Mapping[Key, int], max_rows: int) -> dict[Key, int]:
    """``end`` cut so that at most ``max_rows`` offsets are read in all, shared evenly by the queues."""
    avail = {k: max(0, e - start.get(k, e)) for k, e in end.items()}
    take = dict.fromkeys(end, 0)
    left = max_rows
    pending = sorted(k for k, n in avail.items() if n > 0)
    while left > 0 and pending:
        share = max(1, left // len(pending))
        nxt = []
        for k in pending:
            if left <= 0:
                break
            n = min(share, avail[k] - take[k], left)
            take[k] += n
            left -= n
            if take[k] < avail[k]:
                nxt.append(k)
        pending = nxt
    return {k: (start.get(k, e) + take[k] if avail[k] else e) for k, e in end.items()}


#: pulls of one partition in flight at once (:func:`read_range`)
PULLS_IN_FLIGHT = 4
#: what a broker answers a pull with at most by default (maxTransferCountOnMessageInMemory): the
#: first guess of how far a pull goes, until an answer tells
BROKER_MAX_PULL = 32


def read_range(c: PullConsumer, r: QueueRange, opts: BrokerOptions) -> Iterator[pa.RecordBatch]:
    """The messages of [r.start, r.end) of one queue that match the tag expression, in order
    (the broker filters by tag hash, the exact tags are checked here, as the Java client does).

    The rows are those of pulling one pull at a time, each at the previous answer's
    nextBeginOffset, but up to :data:`PULLS_IN_FLIGHT` pulls are sent ahead at predicted
    offsets (``PullConsumer.pull_stream``): each one step on, the step being how far the last
    answer went (32 with the broker's default and no filter). An answer is used when it starts
    where the next pull had to (``off``), or before it and reaches past it (a filter that made
    the broker skip further than predicted: only its records from ``off`` on are kept, which
    are what a pull at ``off`` would give first); one that starts after ``off`` (an answer that
    ended early: larger messages, a broker that gives fewer), or starts before it with any other
    status, sends the pipeline back to ``off``: the answers still in flight are read and dropped,
    and one pull at a time is sent until answers go where predicted again.

    The pulls' bodies are kept undecoded until about ``batchRows`` records are in, then decoded
    together column by column (:func:`decode_bodies`)."""
    sub = subscription(r.topic, opts.sub_expression)
    off = r.start      # where the next pull one at a time would start
    ahead = r.start    # where the next pull sent ahead starts
    step = min(opts.pull_batch_size, BROKER_MAX_PULL)
    depth = PULLS_IN_FLIGHT
    sent: collections.deque[int] = collections.deque()  # offsets of the pulls in flight
    bodies: list[Body] = []
    n = 0
    with c.pull_stream(r.mq, opts.sub_expression, opts.pull_timeout_ms) as stream:
        while off < r.end:
            if ahead < off or not sent:  # nothing sent ahead can give what comes next
                ahead = off
            if len(sent) < depth and ahead < r.end:
                pulls = []
                while len(sent) < depth and ahead < r.end:
                    pulls.append((ahead, min(opts.pull_batch_size, r.end - ahead)))
                    sent.append(ahead)
                    ahead += step
                stream.send(pulls)
            low = sent.popleft()
            res = stream.receive()
            status = res.status
            moved = status is PullStatus.FOUND or status is PullStatus.NO_MATCHED_MSG
            if low != off:
                if low < off and moved and res.next_begin_offset <= off:
                    continue  # wholly before off: nothing new, the next answers may do
                if low > off or not moved:  # a gap before this answer: start again at off
                    for _ in sent:
                        stream.receive()
                    sent.clear()
                    ahead = off
                    depth = 1  # until the answers go where predicted again
                    continue
            if moved:
                if res.body:
                    b = Body(res.body, off, res.offset_delta, res.min_offset, res.max_offset)
                    bodies.append(b)
                    n += len(b.starts)
                nxt = res.next_begin_offset
                if low == off and nxt > low:
                    step = nxt - low
                    depth = min(depth + 1, PULLS_IN_FLIGHT)
            else:  # NO_NEW_MSG or OFFSET_ILLEGAL inside a planned range: the messages are gone
                msg = (f"rocketmq: {r.topic} broker {r.broker} queue {r.queue_id}: pull at offset {off} answered "
                       f"{status.name} (queue offsets {res.min_offset}..{res.max_offset}), range ends at {r.end}")
                if opts.fail_on_data_loss:
                    raise DataLossError(msg + " (option failOnDataLoss=false skips what is gone)")
                log.warning("%s; skipping", msg)
                nxt = res.next_begin_offset if res.next_begin_offset > off else r.end
            if nxt <= off:  # a broker must move on; never loop on the same offset
                raise DataLossError(f"rocketmq: {r.topic} broker {r.broker} queue {r.queue_id}: pull at offset "
                                    f"{off} gave next offset {nxt}")
            off = nxt
            if n >= opts.batch_rows:
                batch = decode_bodies(bodies, r, sub)
                if batch is not None:
                    yield batch
                bodies, n = [], 0
        for _ in sent:  # answers no longer needed: read, so that the connection closes cleanly
            stream.receive()
    if bodies:
        batch = decode_bodies(bodies, r, sub)
        if batch is not None:
            yield batch


_TOTAL = struct.Struct(">i")


class Body:
    """One FOUND pull's undecoded records: ``starts`` their positions (hopping over TOTALSIZE only;
    :func:`decode_bodies` checks the rest), ``low`` the offset pulled from."""
    __slots__ = ("data", "low", "delta", "min_offset", "max_offset", "starts", "whole")

    def __init__(self, data: bytes, low: int, delta: int | None, min_offset: int, max_offset: int) -> None:
        self.data, self.low, self.delta = data, low, delta
        self.min_offset, self.max_offset = min_offset, max_offset
        starts = []
        p, n = 0, len(data)
        unpack = _TOTAL.unpack_from
        while p + 91 <= n:
            total, = unpack(data, p)
            if total < 91 or p + total > n:
                break
            starts.append(p)
            p += total
        self.starts = starts
        self.whole = p == n  # else the per-message decode says what is wrong


def decode_bodies(bodies: list[Body], r: QueueRange, sub: SubscriptionData) -> pa.RecordBatch | None:
    """The rows of the records of ``bodies`` (in order) with offsets in [body.low, r.end) and, for a
    tag expression, an exact tag of it: the columns of :func:`to_batch` over the messages that
    ``PullConsumer.pull`` gives (``decode_pull_body``), built with numpy and Arrow from the bytes
    (:func:`rmqpy_spark.reader.decode_batch`) where every record is V1 with IPv4 hosts, uncompressed,
    with UTF-8 topic and properties and no MIN_OFFSET/MAX_OFFSET property; else message by message."""
    fast = all(b.whole for b in bodies)
    buf = bodies[0].data if len(bodies) == 1 else b"".join([b.data for b in bodies])
    batch = None
    if fast:
        counts = np.array([len(b.starts) for b in bodies], dtype=np.int64)
        bases = np.zeros(len(bodies), dtype=np.int64)
        np.cumsum([len(b.data) for b in bodies[:-1]], out=bases[1:])
        starts = np.concatenate([np.asarray(b.starts, dtype=np.int64) for b in bodies]) + np.repeat(bases, counts)
        arr = np.frombuffer(buf, dtype=np.uint8)
        hdr = arr[starts[:, None] + R._AR88].view(R._HDR).reshape(-1)
        fast = bool((hdr["magic"] == MESSAGE_MAGIC_CODE_V1).all()
                    and not (hdr["sysflag"] & (0x30 | SF.COMPRESSED_FLAG)).any())
        if fast:  # lengths add up (what decode_record checks)
            total = hdr["total"].astype(np.int64)
            blen = hdr["blen"].astype(np.int64)
            fast = bool((blen >= 0).all() and (blen <= total - 91).all())
            if fast:
                tpos = starts + 88 + blen
                ppos = tpos + 1 + arr[tpos]
                fast = bool((ppos + 2 <= starts + total).all())
                if fast:
                    plen = (arr[ppos].astype(np.int64) << 8) | arr[ppos + 1]
                    fast = bool((ppos + 2 + plen == starts + total).all())
        if fast:
            batch = R.decode_batch(buf, starts, first_position=True)
            if batch is not None:
                props = batch.column(R.ARROW_SCHEMA.get_field_index("properties"))
                try:  # decode_record reads the topic as strict UTF-8, the client the properties with 'replace'
                    batch.column(0).validate(full=True)
                    props.validate(full=True)
                except pa.ArrowInvalid:
                    fast = False
                # the client sets these (dropped from the rows), replacing any stored ones
                if fast and pc.any(pc.is_in(props.keys, value_set=_PULL_PROPERTY_NAMES)).as_py():
                    fast = False
    if not fast:
        mq = r.mq
        msgs = []
        for b in bodies:
            msgs += [m for m in decode_pull_body(b.data, mq, sub, b.min_offset, b.max_offset, b.delta)
                     if b.low <= m.queue_offset < r.end]
        return to_batch(msgs, r.broker) if msgs else None
    assert batch is not None
    qoff = batch.column(2).to_numpy()
    deltas = [b.delta for b in bodies]
    if any(deltas):
        qoff = qoff + np.repeat(np.array([d or 0 for d in deltas], dtype=np.int64), counts)
        batch = batch.set_column(2, R.ARROW_SCHEMA.field("queueOffset"), pa.array(qoff, pa.int64()))
    keep = (qoff >= np.repeat(np.array([b.low for b in bodies], dtype=np.int64), counts)) & (qoff < r.end)
    if sub.tagsSet:
        keep &= np.asarray(pc.is_in(batch.column(R.ARROW_SCHEMA.get_field_index("tags")),
                                    value_set=pa.array(sorted(sub.tagsSet), pa.string())).fill_null(False))
    if not keep.all():
        batch = batch.filter(pa.array(keep))
    if not batch.num_rows:
        return None
    cols = batch.columns + [pa.repeat(pa.scalar(r.broker, pa.string()), batch.num_rows)]
    return pa.RecordBatch.from_arrays(cols, schema=BROKER_ARROW_SCHEMA)


def _host(h) -> str:
    if isinstance(h, tuple):
        ip, port = h
        return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
    return str(h)


def to_batch(msgs: list, broker: str) -> pa.RecordBatch:
    """MessageExt list as a RecordBatch of :data:`BROKER_ARROW_SCHEMA` (column by column; the
    properties map from flat key/value arrays)."""
    props = [[(k, v) for k, v in (m.properties or {}).items() if k not in _PULL_PROPERTIES] for m in msgs]
    offsets = [0]
    keys: list[str] = []
    vals: list[str] = []
    for p in props:
        for k, v in p:
            keys.append(k)
            vals.append(v)
        offsets.append(len(keys))
    pmap = pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(keys, pa.string()),
                                   pa.array(vals, pa.string()), type=BROKER_ARROW_SCHEMA.field("properties").type)
    f = BROKER_ARROW_SCHEMA

    def col(name: str, values: list) -> pa.Array:
        return pa.array(values, f.field(name).type)

    def prop(name: str) -> list:
        return [m.properties.get(name) if m.properties else None for m in msgs]

    cols = [
        col("topic", [m.topic for m in msgs]),
        col("queueId", [m.queue_id for m in msgs]),
        col("queueOffset", [m.queue_offset for m in msgs]),
        col("commitLogOffset", [m.commit_log_offset for m in msgs]),
        col("size", [m.store_size for m in msgs]),
        col("bodyCRC", [m.body_crc for m in msgs]),
        col("flag", [m.flag for m in msgs]),
        col("sysFlag", [m.sys_flag for m in msgs]),
        col("bornTimestamp", [m.born_timestamp * 1000 for m in msgs]),
        col("bornHost", [_host(m.born_host) for m in msgs]),
        col("storeTimestamp", [m.store_timestamp * 1000 for m in msgs]),
        col("storeHost", [_host(m.store_host) for m in msgs]),
        col("reconsumeTimes", [m.reconsume_times for m in msgs]),
        col("preparedTransactionOffset", [m.prepared_transaction_offset for m in msgs]),
        col("tags", prop("TAGS")),
        col("keys", prop("KEYS")),
        col("msgId", [m.msg_id for m in msgs]),
        col("uniqKey", prop("UNIQ_KEY")),
        pmap,
        col("body", [bytes(m.body or b"") for m in msgs]),
        pa.repeat(pa.scalar(broker, pa.string()), len(msgs)),
    ]
    return pa.RecordBatch.from_arrays(cols, schema=BROKER_ARROW_SCHEMA)
