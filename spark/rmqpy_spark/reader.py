"""Read-only scanning of a RocketMQ store into Arrow record batches (no pyspark needed here).

Two ways in:

* the commit log (:func:`scan_commitlog`): every record physically stored, walked
  file by file; a range that starts inside a file re-synchronises on the first
  record whose PHYSICALOFFSET field equals its own position (a record names its
  own offset, so a copy of a record inside some body never matches);
* the consume queues (:func:`read_queue_range`): the 20-byte units of one
  topic/queue between two queue offsets, each record fetched from the commit log
  at the unit's offset and checked against the unit (size, offset, queue id and
  queue offset).

The reader never writes, locks or creates anything.  A record counts only when
its TOTALSIZE bytes are inside the file, its magic is a message magic, its
PHYSICALOFFSET is its own offset, its body CRC agrees and its lengths add up to
TOTALSIZE; the walk stops at the first record that is not so (a broker may be
appending) and at the end-of-file blank record.

Decoding is vectorised: a short Python loop finds and checks the records, numpy
gathers the fixed header fields, Arrow compute splits the properties strings.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
import zlib
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmqpy.protocol import sysflag as SF
from rmqpy.protocol.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    RecordError,
    create_offset_msg_id,
    decode_record,
    properties_to_string,
)
from rmqpy.store import readonly
from rmqpy.store.commitlog import CommitLog
from rmqpy.store.consume_queue import ConsumeQueue

log = logging.getLogger(__name__)

try:  # ISA-L's CRC32 (the same polynomial as zlib's) is about 3x faster: it is the per-byte cost
    from isal.isal_zlib import crc32 as _crc32
except ImportError:  # pragma: no cover - optional
    _crc32 = zlib.crc32

CQ_UNIT = 20
INT_MAX = 0x7FFFFFFF

# --------------------------------------------------------------------------- schema

#: Arrow schema of the rows; equal to pyspark's ``to_arrow_schema(SPARK_SCHEMA, "UTC")``.
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("queueId", pa.int32()),
    ("queueOffset", pa.int64()),
    ("commitLogOffset", pa.int64()),
    ("size", pa.int32()),
    ("bodyCRC", pa.int32()),
    ("flag", pa.int32()),
    ("sysFlag", pa.int32()),
    ("bornTimestamp", pa.timestamp("us", tz="UTC")),
    ("bornHost", pa.string()),
    ("storeTimestamp", pa.timestamp("us", tz="UTC")),
    ("storeHost", pa.string()),
    ("reconsumeTimes", pa.int32()),
    ("preparedTransactionOffset", pa.int64()),
    ("tags", pa.string()),
    ("keys", pa.string()),
    ("msgId", pa.string()),
    ("uniqKey", pa.string()),
    ("properties", pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string()))),
    ("body", pa.binary()),
])

#: Spark DDL of the same schema.
SCHEMA_DDL = (
    "topic STRING, queueId INT, queueOffset BIGINT, commitLogOffset BIGINT, size INT, bodyCRC INT, flag INT, "
    "sysFlag INT, bornTimestamp TIMESTAMP, bornHost STRING, storeTimestamp TIMESTAMP, storeHost STRING, "
    "reconsumeTimes INT, preparedTransactionOffset BIGINT, tags STRING, keys STRING, msgId STRING, "
    "uniqKey STRING, properties MAP<STRING, STRING>, body BINARY"
)

# --------------------------------------------------------------------------- options


@dataclass
class ScanOptions:
    """Row filters and decoding switches, applied inside the reader."""
    topics: frozenset | None = None  # None = all
    queue_ids: frozenset | None = None
    min_store_ms: int | None = None  # storeTimestamp >= (ms)
    max_store_ms: int | None = None  # storeTimestamp < (ms, exclusive)
    min_store_us: int | None = None  # exact bounds from pushed filters (us): lower inclusive/exclusive
    min_store_us_incl: bool = True
    max_store_us: int | None = None
    max_store_us_incl: bool = False
    check_crc: bool = True
    decompress: bool = True
    batch_rows: int = 65536
    batch_bytes: int = 32 << 20  # larger batches: less per-batch cost in the JVM (measured, bench/README.md)

    def time_mask_needed(self) -> bool:
        return any(x is not None for x in (self.min_store_ms, self.max_store_ms, self.min_store_us, self.max_store_us))


# --------------------------------------------------------------------------- store layout


def store_root(path: str) -> str:
    """The store root for ``path`` (the root itself or its commitlog/ directory)."""
    if os.path.basename(os.path.normpath(path)) == "commitlog" and not os.path.isdir(os.path.join(path, "commitlog")):
        return os.path.dirname(os.path.normpath(path))
    return path


def open_commit_log(root: str, check_crc: bool = True) -> CommitLog:
    """The store's commit log, read-only (rmqpy.store's CommitLog: the class the broker writes with)."""
    return readonly.open_commit_log(readonly.commitlog_dir(root), check_crc)


def list_commitlog(root: str) -> list[tuple[int, str, int]]:
    """[(base offset, path, length on disk)] of the commit log files, sorted by offset."""
    cl = open_commit_log(root)
    try:
        return [(mf.file_from_offset, mf.path, mf.mapped_len) for mf in cl.queue.files]
    finally:
        cl.close()


def list_queues(root: str, topics: Iterable[str] | None = None,
                queue_ids: Iterable[int] | None = None) -> list[tuple[str, int]]:
    """[(topic, queueId)] that have a consume queue directory."""
    return readonly.list_consume_queues(os.path.join(root, "consumequeue"), topics or None, queue_ids or None)


# --------------------------------------------------------------------------- record walk

_WALK4 = struct.Struct(">iIi16xqi44xi")  # total, magic, bodyCRC, physicalOffset, sysFlag, bodyLen (IPv4)
_I = struct.Struct(">i")
_HM = struct.Struct(">iI")
_Q = struct.Struct(">q")
_MAGICS = (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2)
_MAGIC_V1_B = struct.pack(">I", MESSAGE_MAGIC_CODE_V1)
_MAGIC_V2_B = struct.pack(">I", MESSAGE_MAGIC_CODE_V2)

STOP_BLANK = "blank"  # end-of-file blank record
STOP_INVALID = "invalid"  # not a complete valid record: end of the written data
STOP_MORE = "more"  # record runs past the buffer: read on
STOP_RANGE = "range"  # reached the end of the asked range


def _body_pos(mv, pos: int, sys_flag: int) -> tuple[int, int]:
    """(body position, body length) of the record at pos, for any host layout."""
    p = pos + 48 + (20 if sys_flag & SF.BORNHOST_V6_FLAG else 8) + 8
    p += 20 if sys_flag & SF.STOREHOSTADDRESS_V6_FLAG else 8
    p += 12
    blen, = _I.unpack_from(mv, p)
    return p + 4, blen


def check_one(mv, pos: int, limit: int, expect_phy: int, check_crc: bool) -> tuple[str | None, int]:
    """Validate the record at ``mv[pos]`` (whose commit log offset should be ``expect_phy``).

    Returns (None, total) when valid, else (STOP_*, 0)."""
    if pos + 8 > limit:
        return STOP_MORE, 0
    total, magic = _HM.unpack_from(mv, pos)
    if magic == BLANK_MAGIC_CODE:
        return STOP_BLANK, 0
    if magic not in _MAGICS or total < 91:
        return STOP_INVALID, 0
    if pos + total > limit:
        return STOP_MORE, total
    phy, = _Q.unpack_from(mv, pos + 28)
    if phy != expect_phy:
        return STOP_INVALID, 0
    sys_flag, = _I.unpack_from(mv, pos + 36)
    bpos, blen = _body_pos(mv, pos, sys_flag)
    if blen < 0 or bpos + blen > pos + total:
        return STOP_INVALID, 0
    if check_crc and blen and (_crc32(mv[bpos:bpos + blen]) & 0x7FFFFFFF) != _I.unpack_from(mv, pos + 8)[0]:
        return STOP_INVALID, 0
    # lengths must add up exactly
    p = bpos + blen
    if magic == MESSAGE_MAGIC_CODE_V2:
        tlen = (mv[p] << 8) | mv[p + 1]
        p += 2
    else:
        tlen = mv[p]
        p += 1
    p += tlen
    if p + 2 > pos + total:
        return STOP_INVALID, 0
    plen = (mv[p] << 8) | mv[p + 1]
    if tlen > 0x7FFF or plen > 0x7FFF or p + 2 + plen != pos + total:
        return STOP_INVALID, 0
    return None, total


def walk(mv, pos: int, range_end: int, limit: int, base: int, check_crc: bool = True
         ) -> tuple[list[int], str, int]:
    """Walk consecutive records from ``mv[pos]``, collecting starts of records that start before
    ``range_end`` and end within ``limit``.  ``base`` is the commit log offset of ``mv[0]``.

    Returns (starts, stop reason, position where the walk stopped).

    Runs of V1/IPv4 records are found by hopping over TOTALSIZE alone (a short Python loop), then
    checked all at once with numpy (self-naming offset, lengths adding up) and their CRCs in one
    list comprehension; the first record that fails any of that, and every other kind of record,
    goes through :func:`_walk_records`, which gives the same answer record by record."""
    starts: list[int] = []
    arr = np.frombuffer(mv, dtype=np.uint8)
    hm = _HM.unpack_from
    v1 = MESSAGE_MAGIC_CODE_V1
    view = memoryview(mv)
    crc32 = _crc32
    while pos < range_end:
        # hop over plausible V1 records (sizes chain the records; everything else is checked below)
        run: list[int] = []
        append = run.append
        p = pos
        stop = min(range_end, limit - 88)
        while p < stop:
            total, magic = hm(mv, p)
            if magic != v1 or total < 91 or p + total > limit:
                break
            append(p)
            p += total
        if len(run) >= 8:
            st = np.asarray(run, dtype=np.int64)
            hdr = arr[st[:, None] + _AR88].view(_HDR).reshape(-1)
            total = hdr["total"].astype(np.int64)
            blen = hdr["blen"].astype(np.int64)
            ok = (hdr["phy"] == st + base) & ((hdr["sysflag"] & 0x30) == 0) & (blen >= 0) & (blen <= total - 91)
            bad = np.nonzero(~ok)[0]
            k = int(bad[0]) if len(bad) else len(run)
            if k:
                st, total, blen, hdr = st[:k], total[:k], blen[:k], hdr[:k]
                tpos = st + 88 + blen
                ppos = tpos + 1 + arr[tpos]
                inrec = ppos + 2 <= st + total
                ppos = np.where(inrec, ppos, st)
                okl = inrec & (ppos + 2 + ((arr[ppos].astype(np.int64) << 8) | arr[ppos + 1]) == st + total)
                bad = np.nonzero(~okl)[0]
                if len(bad):
                    k = int(bad[0])
            if k and check_crc:
                bs = (st[:k] + 88).tolist()
                bl = blen[:k].tolist()
                crcs = [crc32(view[a:a + n]) & 0x7FFFFFFF if n else c
                        for a, n, c in zip(bs, bl, hdr["crc"][:k].tolist())]
                bad = np.nonzero(np.asarray(crcs, dtype=np.int64) != hdr["crc"][:k].astype(np.int64))[0]
                if len(bad):
                    k = int(bad[0])
            if k:
                starts.extend(run[:k])
                pos = run[k - 1] + int(total[k - 1])
                if k == len(run):
                    continue
        # one record (or a short run) the careful way
        n_slow = 1 if len(run) >= 8 else len(run) + 1 if run else 64
        more, reason, pos = _walk_records(mv, pos, range_end, limit, base, check_crc, n_slow)
        starts.extend(more)
        if reason is not None:
            return starts, reason, pos
    return starts, STOP_RANGE, pos


def _walk_records(mv, pos: int, range_end: int, limit: int, base: int, check_crc: bool, max_records: int
                  ) -> tuple[list[int], str | None, int]:
    """Record-by-record walk of at most ``max_records`` records; reason None = may go on."""
    starts: list[int] = []
    append = starts.append
    view = memoryview(mv)
    unpack = _WALK4.unpack_from
    crc32 = _crc32
    v1 = MESSAGE_MAGIC_CODE_V1
    while pos < range_end:
        if len(starts) >= max_records:
            return starts, None, pos
        if pos + 88 > limit:
            reason, _ = check_one(mv, pos, limit, base + pos, check_crc)
            if reason is None:  # a short record can't exist (>= 91 bytes)
                reason = STOP_INVALID
            return starts, reason, pos
        total, magic, crc, phy, sys_flag, blen = unpack(mv, pos)
        if magic == v1 and not (sys_flag & 0x30) and total >= 91 and pos + total <= limit and phy == base + pos \
                and 0 <= blen <= total - 91:
            # fast path: V1 record, IPv4 hosts
            if check_crc and blen and (crc32(view[pos + 88:pos + 88 + blen]) & 0x7FFFFFFF) != crc:
                return starts, STOP_INVALID, pos
            p = pos + 88 + blen
            p += 1 + mv[p]
            if p + 2 + ((mv[p] << 8) | mv[p + 1]) != pos + total:
                return starts, STOP_INVALID, pos
            append(pos)
            pos += total
            continue
        reason, total = check_one(mv, pos, limit, base + pos, check_crc)
        if reason is not None:
            return starts, reason, pos
        append(pos)
        pos += total
    return starts, STOP_RANGE, pos


def resync(mv, pos: int, last: int, base: int) -> int | None:
    """First position p in [pos, last] where a message magic sits at p+4 and the PHYSICALOFFSET field
    at p+28 equals ``base + p`` (a record naming its own offset), or None.  ``mv`` must hold at
    least ``last + 36`` bytes."""
    while pos <= last:
        cands = [i for i in (mv.find(_MAGIC_V1_B, pos + 4, last + 8), mv.find(_MAGIC_V2_B, pos + 4, last + 8))
                 if i >= 0]
        if not cands:
            return None
        p = min(cands) - 4
        if _Q.unpack_from(mv, p + 28)[0] == base + p:
            return p
        pos = p + 1
    return None


# --------------------------------------------------------------------------- vectorised decode

_HDR = np.dtype([("total", ">i4"), ("magic", ">u4"), ("crc", ">i4"), ("qid", ">i4"), ("flag", ">i4"),
                 ("qoff", ">i8"), ("phy", ">i8"), ("sysflag", ">i4"), ("born", ">i8"), ("bip", "S4"),
                 ("bport", ">i4"), ("sts", ">i8"), ("sip", "S4"), ("sport", ">i4"), ("rt", ">i4"),
                 ("pto", ">i8"), ("blen", ">i4")])
assert _HDR.itemsize == 88
_AR88 = np.arange(88, dtype=np.int64)
_HEX = np.frombuffer(b"".join(b"%02X" % i for i in range(256)), dtype=np.uint16)


def _gather(buf, starts: np.ndarray, lens: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Concatenate buf[s:s+l] for each (s, l): (data, int32 offsets); one copy of the bytes."""
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    mv = memoryview(buf)
    data = b"".join([mv[a:a + n] for a, n in zip(starts.tolist(), lens.tolist())])
    return data, offsets.astype(np.int32)


def _gather_small(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """As :func:`_gather` for short values (topics, properties): one numpy fancy-index, no per-row
    Python; ``arr`` is the buffer as uint8."""
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    idx = np.repeat(starts - offsets[:-1], lens) + np.arange(offsets[-1], dtype=np.int64)
    return arr[idx], offsets.astype(np.int32)


def _binary(data, offsets: np.ndarray, typ=pa.binary()) -> pa.Array:  # noqa: B008 (an immutable type)
    return pa.Array.from_buffers(typ, len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _host_strings(ip: np.ndarray, port: np.ndarray) -> pa.Array:
    """'a.b.c.d:port' per row (few distinct hosts: format the unique ones)."""
    key = (np.ascontiguousarray(ip).view(">u4").astype(np.uint64) << np.uint64(32)) | (port.astype(np.int64) & 0xFFFFFFFF).astype(np.uint64)
    uniq, inv = np.unique(key, return_inverse=True)
    names = []
    for k in uniq.tolist():
        a = k >> 32
        p = k & 0xFFFFFFFF
        if p & 0x80000000:
            p -= 1 << 32
        names.append(f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}:{p}")
    return pa.array(names, pa.string()).take(pa.array(inv.reshape(-1).astype(np.int32)))


def _offset_msg_ids(sip: np.ndarray, sport: np.ndarray, phy: np.ndarray) -> pa.Array:
    n = len(phy)
    raw = np.empty((n, 16), dtype=np.uint8)
    raw[:, 0:4] = np.ascontiguousarray(sip).view(np.uint8).reshape(n, 4)
    raw[:, 4:8] = sport.astype(">i4").view(np.uint8).reshape(n, 4)
    raw[:, 8:16] = phy.astype(">i8").view(np.uint8).reshape(n, 8)
    hexed = _HEX[raw]  # (n, 16) uint16 = 2 ascii chars each
    data = np.ascontiguousarray(hexed).view(np.uint8).reshape(-1)
    offsets = (np.arange(n + 1, dtype=np.int32) * 32)
    return _binary(data, offsets, pa.string())


def _properties(props: pa.Array, n: int, first_position: bool = False):
    """(map array, tags, keys, uniqKey) from the raw properties strings (Java parsing rules); a name
    given twice is at its last place in the map, or its first with ``first_position`` (a Python dict's
    order, as rmqpy.client's messages have it); its value is the last either way."""
    items = pc.split_pattern(props, "\u0002")
    parents = np.asarray(pc.list_parent_indices(items))
    pieces = pc.list_flatten(items)
    # Java (MessageDecoder.string2messageProperties): a pair needs a non-empty name before the
    # first \u0001 and a non-empty value after it; anything else is skipped
    ok = pc.match_substring(pieces, "\u0001")
    sel = np.nonzero(np.asarray(ok.fill_null(False)))[0]
    pieces = pieces.take(pa.array(sel))
    parents = parents[sel]
    kv = pc.split_pattern(pieces, "\u0001", max_splits=1)
    keys = pc.list_element(kv, 0)
    vals = pc.list_element(kv, 1)
    ok = pc.and_(pc.greater(pc.binary_length(keys), 0), pc.greater(pc.binary_length(vals), 0))
    okn = np.asarray(ok.fill_null(False))
    if not okn.all():
        sel = np.nonzero(okn)[0]
        keys, vals, parents = keys.take(pa.array(sel)), vals.take(pa.array(sel)), parents[sel]
    kidx, names = np.zeros(0, np.int64), None  # each pair's name as a number in names
    if len(keys):
        # a name given twice (5.x batches append the batch's properties to each message's): the
        # last one counts, as in Java's parser (HashMap.put); the map keeps one entry per name
        enc = pc.dictionary_encode(keys)
        kidx = np.asarray(enc.indices, dtype=np.int64)
        nk = len(enc.dictionary)
        pair = parents * nk + kidx  # (row, name)
        if np.bincount(pair, minlength=n * nk).max() > 1:
            # each (row, name)'s first and last place: a stable sort puts each pair's places together
            order = np.argsort(pair, kind="stable")
            sp = pair[order]
            edge = sp[1:] != sp[:-1]
            first = order[np.concatenate(([True], edge))]
            last = order[np.concatenate((edge, [True]))]
            if first_position:
                order = np.argsort(first)
                first, last = first[order], last[order]
                keys, vals, parents = keys.take(pa.array(first)), vals.take(pa.array(last)), parents[first]
                kidx = kidx[first]
            else:
                keep = np.sort(last)
                keys, vals, parents = keys.take(pa.array(keep)), vals.take(pa.array(keep)), parents[keep]
                kidx = kidx[keep]
        names = enc.dictionary
    counts = np.bincount(parents, minlength=n) if len(parents) else np.zeros(n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    m = pa.MapArray.from_arrays(pa.array(offsets), keys, vals,
                                type=ARROW_SCHEMA.field("properties").type)

    def pick(name):
        code = pc.index(names, name).as_py() if names is not None else -1
        idx = np.nonzero(kidx == code)[0] if code >= 0 else np.zeros(0, np.int64)
        pos = np.full(n, -1, dtype=np.int64)
        pos[parents[idx]] = idx
        return vals.take(pa.array(pos, mask=pos < 0))

    return m, pick("TAGS"), pick("KEYS"), pick("UNIQ_KEY")


def _decompress(body: bytes, sys_flag: int) -> bytes:
    kind = sys_flag & 0x700
    if kind in (0, 0x300):
        return zlib.decompress(body)
    if kind == 0x100:
        try:
            import lz4.frame  # optional: only RocketMQ 5 clients set to compressType LZ4 write it
        except ImportError as exc:
            raise RuntimeError("an LZ4-compressed message body: pip install lz4 to read it") from exc
        return lz4.frame.decompress(body)
    if kind == 0x200:
        try:
            import zstandard  # optional: only RocketMQ 5 clients set to compressType ZSTD write it
        except ImportError as exc:
            raise RuntimeError("a ZSTD-compressed message body: pip install zstandard to read it") from exc
        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    return body


def decode_batch(buf, starts: Sequence[int], opts: ScanOptions | None = None,
                 first_position: bool = False) -> pa.RecordBatch | None:
    """Decode the records at ``buf[starts[i]]`` (already validated) into a RecordBatch with
    :data:`ARROW_SCHEMA`, applying the row filters of ``opts``; None if no row is left.
    ``first_position``: see :func:`_properties`."""
    opts = opts or ScanOptions()
    if not len(starts):
        return None
    arr = np.frombuffer(buf, dtype=np.uint8)
    s = np.asarray(starts, dtype=np.int64)
    hdr = arr[s[:, None] + _AR88].view(_HDR).reshape(-1)
    if (hdr["magic"] != MESSAGE_MAGIC_CODE_V1).any() or (hdr["sysflag"] & 0x30).any():
        return _decode_slow(buf, starts, opts)
    blen = hdr["blen"].astype(np.int64)
    tpos = s + 88 + blen
    tlen = arr[tpos].astype(np.int64)
    ppos = tpos + 1 + tlen
    plen = (arr[ppos].astype(np.int64) << 8) | arr[ppos + 1]
    # --- filters
    keep = None
    topic_data, topic_off = _gather_small(arr, tpos + 1, tlen)
    topics = _binary(topic_data, topic_off, pa.string())
    if opts.topics is not None:
        keep = np.asarray(pc.is_in(topics, value_set=pa.array(sorted(opts.topics), pa.string())).fill_null(False))
    if opts.queue_ids is not None:
        k = np.isin(hdr["qid"].astype(np.int32), np.fromiter(opts.queue_ids, dtype=np.int32))
        keep = k if keep is None else keep & k
    sts = hdr["sts"].astype(np.int64)
    if opts.time_mask_needed():
        k = np.ones(len(s), dtype=bool)
        if opts.min_store_ms is not None:
            k &= sts >= opts.min_store_ms
        if opts.max_store_ms is not None:
            k &= sts < opts.max_store_ms
        us = sts * 1000
        if opts.min_store_us is not None:
            k &= (us >= opts.min_store_us) if opts.min_store_us_incl else (us > opts.min_store_us)
        if opts.max_store_us is not None:
            k &= (us <= opts.max_store_us) if opts.max_store_us_incl else (us < opts.max_store_us)
        keep = k if keep is None else keep & k
    if keep is not None:
        if not keep.all():
            sel = np.nonzero(keep)[0]
            if not len(sel):
                return None
            s, hdr, blen, tpos, tlen, ppos, plen, sts = (x[sel] for x in (s, hdr, blen, tpos, tlen, ppos, plen, sts))
            topics = topics.take(pa.array(sel))
    n = len(s)
    prop_data, prop_off = _gather_small(arr, ppos + 2, plen)
    props = _binary(prop_data, prop_off, pa.string())
    pmap, tags, keys, uniq = _properties(props, n, first_position)
    # body: compressed bodies are inflated one by one; otherwise one masked copy
    sysflag = hdr["sysflag"].astype(np.int32)
    if opts.decompress and (sysflag & SF.COMPRESSED_FLAG).any():
        mv = memoryview(buf)
        bstart = (s + 88).tolist()
        bl = blen.tolist()
        sfl = sysflag.tolist()
        bodies = [(_decompress(bytes(mv[a:a + b]), f) if f & 1 else mv[a:a + b]) for a, b, f in zip(bstart, bl, sfl)]
        bodies = [bytes(x) for x in bodies]
        body = pa.array(bodies, pa.binary())
    else:
        bdata, boff = _gather(buf, s + 88, blen)
        body = _binary(bdata, boff)
    ts = pa.timestamp("us", tz="UTC")
    cols = [
        topics,
        pa.array(hdr["qid"].astype(np.int32)),
        pa.array(hdr["qoff"].astype(np.int64)),
        pa.array(hdr["phy"].astype(np.int64)),
        pa.array(hdr["total"].astype(np.int32)),
        pa.array(hdr["crc"].astype(np.int32)),
        pa.array(hdr["flag"].astype(np.int32)),
        pa.array(sysflag),
        pa.array(hdr["born"].astype(np.int64) * 1000, ts),
        _host_strings(hdr["bip"], hdr["bport"]),
        pa.array(sts * 1000, ts),
        _host_strings(hdr["sip"], hdr["sport"]),
        pa.array(hdr["rt"].astype(np.int32)),
        pa.array(hdr["pto"].astype(np.int64)),
        tags, keys,
        _offset_msg_ids(hdr["sip"], hdr["sport"].astype(np.int64), hdr["phy"].astype(np.int64)),
        uniq, pmap, body,
    ]
    return pa.RecordBatch.from_arrays(cols, schema=ARROW_SCHEMA)


def _host_str(h: tuple) -> str:
    ip, port = h
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def java_properties(s: str) -> dict[str, str]:
    """Java's ``string2messageProperties``: name\\u0001value pairs split by \\u0002; a pair needs a
    non-empty name and value; a name given twice keeps the last value."""
    out: dict[str, str] = {}
    for item in s.split("\u0002"):
        i = item.find("\u0001")
        if 0 < i < len(item) - 1:
            out[item[:i]] = item[i + 1:]
    return out


def _raw_properties(buf, p: int, sys_flag: int, magic: int) -> str:
    bpos, blen = _body_pos(buf, p, sys_flag)
    q = bpos + blen
    if magic == MESSAGE_MAGIC_CODE_V2:
        tlen = (buf[q] << 8) | buf[q + 1]
        q += 2
    else:
        tlen = buf[q]
        q += 1
    q += tlen
    plen = (buf[q] << 8) | buf[q + 1]
    return bytes(buf[q + 2:q + 2 + plen]).decode("utf-8", "replace")


def _decode_slow(buf, starts, opts: ScanOptions) -> pa.RecordBatch | None:
    """Per-record decode for batches with IPv6 hosts or V2 records."""
    rows = {f.name: [] for f in ARROW_SCHEMA}
    for p in starts:
        m = decode_record(buf, p, check_crc=False)
        m.properties = java_properties(_raw_properties(buf, p, m.sys_flag, m.magic_code))
        if opts.topics is not None and m.topic not in opts.topics:
            continue
        if opts.queue_ids is not None and m.queue_id not in opts.queue_ids:
            continue
        st = m.store_timestamp
        if opts.min_store_ms is not None and st < opts.min_store_ms:
            continue
        if opts.max_store_ms is not None and st >= opts.max_store_ms:
            continue
        us = st * 1000
        if opts.min_store_us is not None and not (us >= opts.min_store_us if opts.min_store_us_incl
                                                  else us > opts.min_store_us):
            continue
        if opts.max_store_us is not None and not (us <= opts.max_store_us if opts.max_store_us_incl
                                                  else us < opts.max_store_us):
            continue
        body = m.body
        if opts.decompress and m.sys_flag & SF.COMPRESSED_FLAG:
            body = _decompress(body, m.sys_flag)
        vals = (m.topic, m.queue_id, m.queue_offset, m.commit_log_offset, m.store_size, m.body_crc, m.flag,
                m.sys_flag, m.born_timestamp * 1000, _host_str(m.born_host), st * 1000, _host_str(m.store_host),
                m.reconsume_times, m.prepared_transaction_offset, m.tags, m.keys, m.msg_id, m.uniq_key,
                list(m.properties.items()), body)
        for f, v in zip(ARROW_SCHEMA, vals):
            rows[f.name].append(v)
    if not rows["topic"]:
        return None
    return pa.RecordBatch.from_arrays([pa.array(rows[f.name], f.type) for f in ARROW_SCHEMA], schema=ARROW_SCHEMA)


# --------------------------------------------------------------------------- commit log scan

def _batch_bounds(starts: Sequence[int], max_rows: int, max_bytes: int) -> Iterator[tuple[int, int]]:
    """(i, j) index ranges of ``starts`` (ascending positions) of at most max_rows rows and about
    max_bytes bytes of records each."""
    n = len(starts)
    i = 0
    while i < n:
        j = min(n, i + max_rows)
        if j < n and starts[j] - starts[i] > max_bytes:
            j = max(i + 1, bisect.bisect_right(starts, starts[i] + max_bytes, i, j))
        yield i, j
        i = j


DEFAULT_CHUNK = 16 << 20


@dataclass
class ScanStats:
    records: int = 0
    bytes: int = 0
    stop: str = ""
    end_offset: int = 0  # commit log offset where the walk stopped


def scan_commitlog_file(path: str, base: int, start: int, end: int, opts: ScanOptions | None = None,
                        chunk: int = DEFAULT_CHUNK, stats: ScanStats | None = None) -> Iterator[pa.RecordBatch]:
    """Yield batches of the records of one commit log file that start in [start, end) (file positions).

    ``start`` > 0 re-synchronises on the first record at or after it."""
    opts = opts or ScanOptions()
    stats = stats if stats is not None else ScanStats()
    try:
        f = open(path, "rb", buffering=0)
    except FileNotFoundError:  # removed by retention since planning
        stats.stop = "gone"
        return
    with f:
        size = os.fstat(f.fileno()).st_size
        end = min(end, size)
        pos = start
        synced = start == 0
        fresh = False  # just re-synchronised: a failing first record means a false candidate
        want = chunk
        data = bytearray(0)  # reused: a fresh 16 MiB bytes per read costs more in page faults than the copy
        while pos < end:
            n = min(want, size - pos)
            f.seek(pos)
            if len(data) < n:
                data = bytearray(n)
            limit = f.readinto(memoryview(data)[:n]) if n else 0
            if not limit:
                break
            more_in_file = pos + limit < size
            if not synced:
                last = min(end - pos - 1, limit - 36)
                r = resync(data, 0, last, base + pos) if last >= 0 else None
                if r is None:
                    if more_in_file and limit > 64 and pos + limit - 40 < end:
                        pos += limit - 40
                        continue
                    stats.stop = STOP_RANGE
                    return
                synced = fresh = True
                pos += r
                continue
            starts, reason, stop = walk(data, 0, end - pos, limit, base + pos, opts.check_crc)
            if fresh and not starts and reason == STOP_INVALID:
                synced = fresh = False
                pos += 1
                continue
            fresh = False
            if starts:
                stats.records += len(starts)
                stats.bytes += stop
                for i, j in _batch_bounds(starts, opts.batch_rows, opts.batch_bytes):
                    b = decode_batch(data, starts[i:j], opts)
                    if b is not None and b.num_rows:
                        yield b
            if reason == STOP_MORE and more_in_file:
                want = want * 2 if stop == 0 else chunk  # stop == 0: a record larger than the chunk
                pos += stop
                continue
            stats.stop = reason if reason != STOP_MORE else STOP_INVALID
            pos += stop
            break
        stats.end_offset = base + pos


@dataclass
class CommitLogSplit:
    path: str
    base: int
    start: int
    end: int


def _hop_boundaries(path: str, base: int, size: int, split_bytes: int) -> list[int]:
    """Record starts about ``split_bytes`` apart in the written part of a file, found by hopping
    over record headers (magic, size and self-naming offset; no CRC) from the file start."""
    out = [0]
    pos = 0
    nxt = split_bytes
    chunk = 16 << 20
    with open(path, "rb", buffering=0) as f:
        while pos < size:
            data = os.pread(f.fileno(), min(chunk, size - pos), pos)
            if len(data) < 36:
                break
            p = 0
            limit = len(data)
            hm = _HM.unpack_from
            q = _Q.unpack_from
            while p + 36 <= limit:
                total, magic = hm(data, p)
                if magic not in _MAGICS or total < 91 or q(data, p + 28)[0] != base + pos + p:
                    return out
                if pos + p >= nxt:
                    out.append(pos + p)
                    nxt = pos + p + split_bytes
                p += total
            pos += p
    return out


def plan_commitlog(root: str, split_bytes: int = 64 << 20) -> list[CommitLogSplit]:
    """Split every commit log file into ranges of about ``split_bytes``.

    Ranges of full files start at fixed positions (the reader re-synchronises on the first record
    naming its own offset) but never in a file's last ``max(8 MiB, split_bytes / 4)``, where the
    end-of-file blank record may be followed by leftovers.  In the last file, which the broker may
    be writing (and whose tail may hold leftovers of a truncated past), ranges start at record
    boundaries found by hopping over the headers from the file start."""
    out = []
    files = list_commitlog(root)
    guard = max(8 << 20, split_bytes // 4)
    for k, (base, path, size) in enumerate(files):
        if size <= 0:
            continue
        if k == len(files) - 1 and size > split_bytes:
            try:
                bounds = _hop_boundaries(path, base, size, split_bytes)
            except FileNotFoundError:
                continue
        else:
            bounds = list(range(0, size, split_bytes))
            bounds = [b for b in bounds if b == 0 or b < size - guard]
        bounds.append(size)
        for a, e in zip(bounds, bounds[1:]):
            out.append(CommitLogSplit(path, base, a, e))
    return out


# --------------------------------------------------------------------------- consume queues

def _clog_read(clog: CommitLog, offset: int, length: int) -> bytes:
    """Up to ``length`` bytes at ``offset``, as far as the file holding it goes (b"": no such file)."""
    mf = clog.queue.find_mapped_file_by_offset(offset)
    if mf is None:
        return b""
    pos = offset - mf.file_from_offset
    return mf.read(pos, max(0, min(length, mf.readable_position() - pos))) or b""


def _open_cq(root: str, topic: str, queue_id: int, clog: CommitLog) -> ConsumeQueue | None:
    """The consume queue read-only (rmqpy.store's ConsumeQueue); units whose records retention
    deleted from the commit log are below its min offset."""
    return readonly.open_consume_queue(os.path.join(root, "consumequeue"), topic, queue_id, clog.get_min_offset())


_UNIT_DT = np.dtype([("off", ">i8"), ("size", ">i4"), ("tags", ">i8")])


def read_units(cq: ConsumeQueue, start: int, end: int) -> np.ndarray:
    """Units [start, end) (queue offsets) as a structured array (shorter where the written units end)."""
    parts = []
    o = start
    while o < end:
        raw = cq.units_bytes(o, end)
        n = len(raw) // CQ_UNIT
        if not n:
            break
        parts.append(np.frombuffer(raw[:n * CQ_UNIT], dtype=_UNIT_DT))
        o += n
    if not parts:
        return np.zeros(0, dtype=_UNIT_DT)
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def queue_bounds(root: str, topic: str, queue_id: int, clog: CommitLog | None = None,
                 check_crc: bool = True) -> tuple[int, int]:
    """(min offset, max offset) of a consume queue: the store's own (ConsumeQueue recovery and
    retention), then max stepped back over units whose record is not complete yet (a consume
    queue written ahead of a torn commit log tail) and min moved past blank filler units."""
    own = clog is None
    clog = clog or open_commit_log(root, check_crc)
    cq = None
    try:
        cq = _open_cq(root, topic, queue_id, clog)
        if cq is None:
            return 0, 0
        maxo = cq.get_max_offset_in_queue()
        mino = min(cq.get_min_offset_in_queue(), maxo)
        o = mino
        while o < maxo:  # blank fillers
            u = read_units(cq, o, min(maxo, o + 4096))
            if not len(u):
                break
            good = np.nonzero(u["size"] != INT_MAX)[0]
            if len(good):
                mino = o + int(good[0])
                break
            o += len(u)
            mino = o
        while maxo > mino:
            u = read_units(cq, maxo - 1, maxo)
            if len(u) and _unit_record_ok(clog, u[0], topic, queue_id, maxo - 1, check_crc):
                break
            maxo -= 1
        return mino, max(mino, maxo)
    finally:
        if cq is not None:
            cq.close()
        if own:
            clog.close()


def _unit_record_ok(clog: CommitLog, unit, topic: str, queue_id: int, qoff: int, check_crc: bool) -> bool:
    off, size = int(unit["off"]), int(unit["size"])
    data = _clog_read(clog, off, size)
    if len(data) < size:
        return False
    reason, total = check_one(data, 0, len(data), off, check_crc)
    if reason is not None or total != size:
        return False
    m = decode_record(data, 0, check_crc=False, read_body=False)
    return m.topic == topic and m.queue_id == queue_id and m.queue_offset == qoff


def read_queue_range(root: str, topic: str, queue_id: int, start: int, end: int, opts: ScanOptions | None = None,
                     clog: CommitLog | None = None, gap: int = 256 * 1024,
                     span_max: int = 16 << 20) -> Iterator[pa.RecordBatch]:
    """Yield the messages of queue offsets [start, end) of one consume queue.

    Units that point below the commit log's first file (deleted by retention) or that are blank
    fillers are skipped; the read stops at the first unit whose record is not valid."""
    opts = opts or ScanOptions()
    own = clog is None
    clog = clog or open_commit_log(root, opts.check_crc)
    cq = None
    try:
        cq = _open_cq(root, topic, queue_id, clog)
        if cq is None:
            return
        first = cq.get_min_offset_in_queue()
        if start < first:
            log.warning("consume queue %s/%d: offsets %d..%d were deleted by retention", topic, queue_id, start,
                        first)
            start = first
        clog_min = clog.get_min_offset()
        step = 65536
        o = start
        while o < end:
            units = read_units(cq, o, min(end, o + step))
            if not len(units):
                return
            offs = units["off"].astype(np.int64)
            sizes = units["size"].astype(np.int64)
            qoffs = np.arange(o, o + len(units), dtype=np.int64)
            live = (sizes != INT_MAX) & (offs >= clog_min) & (sizes > 0)
            stopped = False
            i = 0
            idx = np.nonzero(live)[0]
            # group consecutive live units into spans of nearby commit log bytes (same file)
            while i < len(idx):
                j = i
                a = int(offs[idx[i]])
                mf = clog.queue.find_mapped_file_by_offset(a)
                if mf is None:
                    stopped = True
                    break
                fend = mf.end_offset
                e = a + int(sizes[idx[i]])
                while j + 1 < len(idx):
                    na = int(offs[idx[j + 1]])
                    ne = na + int(sizes[idx[j + 1]])
                    if na < e or na - e > gap or ne - a > span_max or ne > fend:
                        break
                    j += 1
                    e = ne
                data = _clog_read(clog, a, e - a)
                starts = []
                for k in range(i, j + 1):
                    u = idx[k]
                    p = int(offs[u]) - a
                    reason, total = check_one(data, p, len(data), int(offs[u]), opts.check_crc)
                    if reason is not None or total != int(sizes[u]):
                        stopped = True
                        break
                    starts.append(p)
                if starts:
                    st = np.asarray(starts, dtype=np.int64)
                    arr = np.frombuffer(data, dtype=np.uint8)
                    # the record must belong to this queue at this offset
                    hdr = arr[st[:, None] + _AR88].view(_HDR).reshape(-1)
                    exp = qoffs[idx[i:i + len(starts)]]
                    bad = np.nonzero((hdr["qid"] != queue_id) | (hdr["qoff"] != exp))[0]
                    if len(bad):
                        starts = starts[:int(bad[0])]
                        stopped = True
                    for b0, b1 in _batch_bounds(starts, opts.batch_rows, opts.batch_bytes):
                        b = decode_batch(data, starts[b0:b1], opts)
                        if b is not None and b.num_rows:
                            yield b
                if stopped:
                    break
                i = j + 1
            if stopped:
                log.warning("consume queue %s/%d: stopped at an invalid unit near offset %d", topic, queue_id, o)
                return
            o += len(units)
    finally:
        if cq is not None:
            cq.close()
        if own:
            clog.close()


def plan_queues(root: str, topics=None, queue_ids=None, units_per_split: int = 200_000,
                check_crc: bool = True) -> list[tuple[str, int, int, int]]:
    """[(topic, queueId, start, end)] covering every consume queue, in ranges of at most
    ``units_per_split`` units."""
    out = []
    clog = open_commit_log(root, check_crc)
    try:
        for t, q in list_queues(root, topics, queue_ids):
            lo, hi = queue_bounds(root, t, q, clog, check_crc)
            o = lo
            while o < hi:
                e = min(hi, o + units_per_split)
                out.append((t, q, o, e))
                o = e
    finally:
        clog.close()
    return out


# --------------------------------------------------------------------------- helpers for tests and tools

def read_all(root: str, opts: ScanOptions | None = None) -> pa.Table:
    """Every record of the commit log, in offset order (single process)."""
    batches = []
    for sp in plan_commitlog(root):
        batches.extend(scan_commitlog_file(sp.path, sp.base, sp.start, sp.end, opts))
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA)


__all__ = ["ARROW_SCHEMA", "SCHEMA_DDL", "ScanOptions", "ScanStats", "CommitLogSplit", "open_commit_log",
           "list_commitlog", "list_queues", "plan_commitlog", "scan_commitlog_file", "walk", "resync",
           "check_one", "decode_batch", "read_units", "queue_bounds", "read_queue_range", "plan_queues",
           "read_all", "store_root", "create_offset_msg_id", "properties_to_string", "RecordError"]
