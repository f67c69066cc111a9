"""RocketMQ stored message record (facts §6): schema, codecs and message objects.

The record layout is declared once with ``construct`` (:data:`RECORD`) as the
source of truth; the store and pull paths use the hand-written ``struct`` codec
(:func:`encode_record`, :func:`encode_record_into`, :func:`decode_record`,
:func:`check_record`), which the unit tests verify against the construct schema.

All integers are big-endian.  The store always *writes* MAGIC V1 (4.9 clients
cannot read V2 records) and reads both V1 and V2.
"""

from __future__ import annotations

import operator
import os
import socket
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import construct as cs

from rmqpy.speedups import native as _native

if TYPE_CHECKING:
    import mmap
    from typing import TypeAlias

    #: what the record codecs read from and write into: bytes, a bytearray, a memoryview or a mapped file
    RecordBuffer: TypeAlias = bytes | bytearray | memoryview | mmap.mmap
    WritableBuffer: TypeAlias = bytearray | memoryview | mmap.mmap

from rmqpy.protocol import sysflag as SF
from rmqpy.protocol.sysflag import (  # re-exported for convenience
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    INNER_BATCH_FLAG,
    MULTI_TAGS_FLAG,
    NEED_UNWRAP_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)

__all__ = [
    "MESSAGE_MAGIC_CODE_V1", "MESSAGE_MAGIC_CODE_V2", "BLANK_MAGIC_CODE", "RECORD", "BATCH_ITEM",
    "RecordError", "MessageExt", "MessageExtBrokerInner", "MessageExtBatch", "BatchItem",
    "encode_record", "encode_record_into", "encode_record_at", "encode_batch_records", "decode_record",
    "decode_records", "check_record", "DispatchInfo",
    "record_size", "properties_to_string", "string_to_properties", "java_string_hash", "tags_string_to_tags_code",
    "encode_batch_body", "decode_batch_body", "decode_batch_items", "create_offset_msg_id", "decode_offset_msg_id",
    "create_uniq_id", "decode_uniq_id", "body_crc", "BORNHOST_V6_FLAG", "COMPRESSED_FLAG", "INNER_BATCH_FLAG",
    "MULTI_TAGS_FLAG", "NEED_UNWRAP_FLAG", "STOREHOSTADDRESS_V6_FLAG", "TRANSACTION_COMMIT_TYPE",
    "TRANSACTION_NOT_TYPE", "TRANSACTION_PREPARED_TYPE", "TRANSACTION_ROLLBACK_TYPE",
]

# --------------------------------------------------------------------------- constants

MESSAGE_MAGIC_CODE_V1 = 0xDAA320A7  # -626843481 as Java int
MESSAGE_MAGIC_CODE_V2 = 0xDAA320AB  # -626843477 (5.x, int16 topic length)
BLANK_MAGIC_CODE = 0xCBD43194  # -875286124: end-of-file filler
MAX_PROPERTIES_LENGTH = 32767
MAX_TOPIC_LENGTH_V1 = 127

NAME_VALUE_SEPARATOR = "\u0001"
PROPERTY_SEPARATOR = "\u0002"

# well known property names (MessageConst)
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
PROPERTY_INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
KEY_SEPARATOR = " "

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


class RecordError(ValueError):
    """A stored record could not be decoded (bad magic, size, CRC, truncation)."""


# --------------------------------------------------------------------------- construct schema

def _host(v6_bit: int) -> Any:
    return cs.Struct(
        "ip" / cs.IfThenElse(lambda ctx: ctx._.sysFlag & v6_bit, cs.Bytes(16), cs.Bytes(4)),
        "port" / cs.Int32sb,
    )


#: Declarative layout of one stored record (facts §6.1). ``totalSize`` is checked
#: against the parsed length by the tests; construct does not enforce it.
RECORD = cs.Struct(
    "totalSize" / cs.Int32sb,
    "magicCode" / cs.OneOf(cs.Int32ub, [MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2]),
    "bodyCRC" / cs.Int32sb,
    "queueId" / cs.Int32sb,
    "flag" / cs.Int32sb,
    "queueOffset" / cs.Int64sb,
    "physicalOffset" / cs.Int64sb,
    "sysFlag" / cs.Int32sb,
    "bornTimestamp" / cs.Int64sb,
    "bornHost" / _host(SF.BORNHOST_V6_FLAG),
    "storeTimestamp" / cs.Int64sb,
    "storeHost" / _host(SF.STOREHOSTADDRESS_V6_FLAG),
    "reconsumeTimes" / cs.Int32sb,
    "preparedTransactionOffset" / cs.Int64sb,
    "body" / cs.Prefixed(cs.Int32sb, cs.GreedyBytes),
    "topic" / cs.IfThenElse(
        lambda ctx: ctx.magicCode == MESSAGE_MAGIC_CODE_V2,
        cs.PascalString(cs.Int16sb, "utf8"),
        cs.PascalString(cs.Int8sb, "utf8"),
    ),
    "properties" / cs.PascalString(cs.Int16sb, "utf8"),
)

#: Blank end-of-file record.
BLANK_RECORD = cs.Struct("totalSize" / cs.Int32sb, "magicCode" / cs.Const(BLANK_MAGIC_CODE, cs.Int32ub))

#: One message inside a SEND_BATCH_MESSAGE body (``MessageDecoder.encodeMessage``).
BATCH_ITEM = cs.Struct(
    "totalSize" / cs.Int32sb,
    "magicCode" / cs.Int32sb,
    "bodyCRC" / cs.Int32sb,
    "flag" / cs.Int32sb,
    "body" / cs.Prefixed(cs.Int32sb, cs.GreedyBytes),
    "properties" / cs.PascalString(cs.Int16sb, "utf8"),
)

# --------------------------------------------------------------------------- struct codec

_I = struct.Struct(">i")
_IU = struct.Struct(">I")
_Q = struct.Struct(">q")
_H = struct.Struct(">h")
_B = struct.Struct(">b")
# totalSize magic bodyCRC queueId flag queueOffset physOffset sysFlag bornTs
_HEAD = struct.Struct(">iIiiiqqiq")  # 48 bytes
# IPv4 fast path: head + bornHost(4s i) + storeTs + storeHost(4s i) + reconsume + prepared + bodyLen
_FIXED_V4 = struct.Struct(">iIiiiqqiq8sq8siqi")  # 88 bytes
#: _FIXED_V4 in two: what differs between a batch's records around what they share
_BATCH_SAME = struct.Struct(">iq8sq8siq")  # sysFlag bornTs bornHost storeTs storeHost reconsume prepared
_BATCH_FIXED = struct.Struct(">iIiiiqq48si")  # totalSize magic bodyCRC queueId flag queueOffset physOffset, bodyLen
_HOST4 = struct.Struct(">4si")
_HOST6 = struct.Struct(">16si")
_TAIL = struct.Struct(">iqi")  # reconsume, prepared, bodyLen
_BATCH_ITEM_HEAD = struct.Struct(">iiiii")  # a batch body's item: totalSize magic bodyCRC flag bodyLen

assert _HEAD.size == 48 and _FIXED_V4.size == 88 and _BATCH_FIXED.size == 88 and _BATCH_SAME.size == 48


_crc32 = zlib.crc32


def body_crc(body: RecordBuffer) -> int:
    """BODYCRC as Java's UtilAll.crc32: CRC32 masked to 31 bits."""
    return zlib.crc32(body) & 0x7FFFFFFF


def record_size(sys_flag: int, body_len: int, topic_len: int, props_len: int, v2: bool = False) -> int:
    """Total record length (``CommitLog.calMsgLength``)."""
    born = 20 if sys_flag & SF.BORNHOST_V6_FLAG else 8
    store = 20 if sys_flag & SF.STOREHOSTADDRESS_V6_FLAG else 8
    return (4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born + 8 + store + 4 + 8
            + 4 + body_len + (2 if v2 else 1) + topic_len + 2 + props_len)


def _ip_bytes(ip: str | bytes | bytearray) -> bytes:
    if isinstance(ip, (bytes, bytearray)):
        return bytes(ip)
    try:
        return socket.inet_pton(socket.AF_INET, ip)
    except OSError:
        return socket.inet_pton(socket.AF_INET6, ip)


def _ip_str(b: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET if len(b) == 4 else socket.AF_INET6, bytes(b))


_HOST_CACHE: dict[tuple[str, int], bytes] = {}


def host_bytes(host: tuple[str, int]) -> bytes:
    """ip + int32 port, as stored in the record and in offsetMsgId."""
    try:
        return _HOST_CACHE[host]
    except (KeyError, TypeError):
        pass
    b = _ip_bytes(host[0]) + _I.pack(host[1])
    if len(_HOST_CACHE) > 4096:
        _HOST_CACHE.clear()
    try:
        _HOST_CACHE[host] = b
    except TypeError:
        pass
    return b


# --------------------------------------------------------------------------- properties

def properties_to_string(props: dict[str, str] | None) -> str:
    """``MessageDecoder.messageProperties2String``: name\\x01value\\x02 ... (trailing \\x02)."""
    if not props:
        return ""
    return "".join([f"{k}\u0001{v}\u0002" for k, v in props.items() if v is not None])


def _py_string_to_properties(s: str | bytes | None) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties``: pairs split at the first \\x01; Java skips
    items shorter than 3 characters and pairs with an empty name or an empty value (a pair
    without \\x01 has an empty value); the last of a repeated name wins."""
    if not s:
        return {}
    if not isinstance(s, str):
        s = bytes(s).decode("utf-8", "replace")
    out = {}
    for item in s.split("\u0002"):
        name, _, value = item.partition("\u0001")
        if name and value:
            out[name] = value
    return out


#: :func:`_py_string_to_properties`, compiled where ``rmqpy._speedups`` is built (rmqpy.speedups)
string_to_properties: Callable[[str | bytes | None], dict[str, str]] = (
    _native.string_to_properties if _native is not None else _py_string_to_properties)


# --------------------------------------------------------------------------- java hash

_mul = operator.mul
_POW31 = [1]
for _i in range(1, 4097):
    _POW31.append((_POW31[-1] * 31) & 0xFFFFFFFF)


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()`` (over UTF-16 code units), as a signed int32."""
    if s.isascii():
        units: bytes | list[int] = s.encode("ascii")
    else:
        u = s.encode("utf-16-be", "surrogatepass")
        units = [(u[i] << 8) | u[i + 1] for i in range(0, len(u), 2)]
    n = len(units)
    if n <= 4096:
        # sum(u[i] * 31^(n-1-i)): the units reversed against 31^0, 31^1, ...
        h: int = sum(map(_mul, units[::-1], _POW31)) & 0xFFFFFFFF
    else:
        h = 0
        for c in units:
            h = (31 * h + c) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def tags_string_to_tags_code(tags: str | None) -> int:
    """tagsCode stored in the consume queue: hashCode of the TAGS value (0 if none)."""
    if not tags:
        return 0
    return java_string_hash(tags)


# --------------------------------------------------------------------------- message objects

@dataclass
class MessageExt:
    """A decoded stored record."""
    topic: str = ""
    queue_id: int = 0
    flag: int = 0
    body: bytes | None = b""
    properties: dict[str, str] = field(default_factory=dict)
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("0.0.0.0", 0)
    store_timestamp: int = 0
    store_host: tuple[str, int] = ("0.0.0.0", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    store_size: int = 0
    body_crc: int = 0
    magic_code: int = MESSAGE_MAGIC_CODE_V1

    @property
    def msg_id(self) -> str:
        """offsetMsgId = store ip + port + commitlog offset (uppercase hex)."""
        return create_offset_msg_id(self.store_host, self.commit_log_offset)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    @property
    def key_list(self) -> list[str]:
        k = self.keys
        return [x for x in k.split(KEY_SEPARATOR) if x] if k else []

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def delay_level(self) -> int:
        try:
            return int(self.properties.get(PROPERTY_DELAY_TIME_LEVEL, "0"))
        except ValueError:
            return 0


@dataclass
class MessageExtBrokerInner:
    """What the broker hands to the store for one message."""
    topic: str
    queue_id: int = 0
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] | None = None
    properties_string: str | None = None
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_host: tuple[str, int] | None = None
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int | None = None
    store_timestamp: int = 0  # set by the store

    def get_properties(self) -> dict[str, str]:
        if self.properties is None:
            self.properties = string_to_properties(self.properties_string)
        return self.properties

    def get_properties_string(self) -> str:
        if self.properties_string is None:
            self.properties_string = properties_to_string(self.properties)
        return self.properties_string

    def set_property(self, name: str, value: str) -> None:
        self.get_properties()[name] = value
        self.properties_string = None

    def clear_property(self, name: str) -> None:
        self.get_properties().pop(name, None)
        self.properties_string = None

    @property
    def tags(self) -> str | None:
        return self.get_properties().get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.get_properties().get(PROPERTY_KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.get_properties().get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def get_tags_code(self) -> int:
        if self.tags_code is None:
            self.tags_code = tags_string_to_tags_code(self.tags)
        return self.tags_code


@dataclass
class BatchItem:
    flag: int
    body: bytes
    properties_string: str


@dataclass
class MessageExtBatch:
    """A SEND_BATCH_MESSAGE request: one topic/queue, body = :func:`encode_batch_body` blocks.

    ``properties_string`` holds the batch-level properties (header ``i``); the
    4.9 broker appends them to every inner message's properties when storing.
    """
    topic: str
    queue_id: int
    body: bytes
    flag: int = 0
    properties_string: str = ""
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_host: tuple[str, int] | None = None
    reconsume_times: int = 0

    def items(self) -> list[BatchItem]:
        return decode_batch_body(self.body)


# --------------------------------------------------------------------------- encode

def encode_record_into(buf: WritableBuffer, pos: int, *, topic_bytes: bytes, queue_id: int, flag: int, body: bytes,
                       props_bytes: bytes, sys_flag: int, born_timestamp: int, born_host: bytes,
                       store_timestamp: int, store_host: bytes, reconsume_times: int,
                       prepared_transaction_offset: int, queue_offset: int, physical_offset: int,
                       crc: int | None = None) -> int:
    """Write one V1 record at ``buf[pos:]``; ``born_host``/``store_host`` are ip+port bytes
    (:func:`host_bytes`).  Returns the record length."""
    blen = len(body)
    tlen = len(topic_bytes)
    plen = len(props_bytes)
    if tlen > MAX_TOPIC_LENGTH_V1:
        raise ValueError(f"topic too long for a V1 record: {tlen} bytes")
    if plen > MAX_PROPERTIES_LENGTH:
        raise ValueError(f"properties too long: {plen} bytes")
    if crc is None:
        crc = zlib.crc32(body) & 0x7FFFFFFF
    # every header field is packed before ``buf`` is touched: a value out of its Java range
    # raises struct.error with the buffer unchanged (pack_into zeroes, then fails half-way)
    if len(born_host) == 8 and len(store_host) == 8:
        total = 91 + blen + tlen + plen
        head = _FIXED_V4.pack(total, MESSAGE_MAGIC_CODE_V1, crc, queue_id, flag, queue_offset,
                              physical_offset, sys_flag, born_timestamp, born_host,
                              store_timestamp, store_host, reconsume_times, prepared_transaction_offset, blen)
    else:
        if len(born_host) == 20:
            sys_flag |= SF.BORNHOST_V6_FLAG
        if len(store_host) == 20:
            sys_flag |= SF.STOREHOSTADDRESS_V6_FLAG
        total = record_size(sys_flag, blen, tlen, plen)
        head = b"".join((_HEAD.pack(total, MESSAGE_MAGIC_CODE_V1, crc, queue_id, flag, queue_offset,
                                    physical_offset, sys_flag, born_timestamp),
                         born_host, _Q.pack(store_timestamp), store_host,
                         _TAIL.pack(reconsume_times, prepared_transaction_offset, blen)))
    if pos < 0 or pos + total > len(buf):
        raise ValueError(f"a {total}-byte record does not fit at {pos} in a {len(buf)}-byte buffer")
    p = pos + len(head)
    buf[pos:p] = head
    buf[p:p + blen] = body
    p += blen
    buf[p] = tlen
    buf[p + 1:p + 1 + tlen] = topic_bytes
    p += 1 + tlen
    _H.pack_into(buf, p, plen)
    buf[p + 2:p + 2 + plen] = props_bytes
    return total


#: Java ``int`` and ``long`` bounds of the record's header fields
INT_MIN, INT_MAX_VALUE = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


def record_fields_error(queue_id: int, flag: int, sys_flag: int, born_timestamp: int, reconsume_times: int,
                        prepared_transaction_offset: int) -> str | None:
    """None when the client-supplied header fields of a record fit their Java types (int or
    long), else which one does not: checked before the store is touched, so a refused put
    writes nothing (a field out of range used to fail half-way through the header)."""
    if not (INT_MIN <= queue_id <= INT_MAX_VALUE and INT_MIN <= flag <= INT_MAX_VALUE
            and INT_MIN <= sys_flag <= INT_MAX_VALUE and INT_MIN <= reconsume_times <= INT_MAX_VALUE):
        return (f"queueId {queue_id}, flag {flag}, sysFlag {sys_flag} and reconsumeTimes {reconsume_times} "
                "must each fit a Java int")
    if not (LONG_MIN <= born_timestamp <= LONG_MAX and LONG_MIN <= prepared_transaction_offset <= LONG_MAX):
        return (f"bornTimestamp {born_timestamp} and preparedTransactionOffset {prepared_transaction_offset} "
                "must each fit a Java long")
    return None


def encode_record_at(buf: WritableBuffer, pos: int, total: int, topic_bytes: bytes, queue_id: int, flag: int, body: bytes,
                     props_bytes: bytes, sys_flag: int, born_timestamp: int, born_host: bytes, store_timestamp: int,
                     store_host: bytes, reconsume_times: int, prepared_transaction_offset: int, queue_offset: int,
                     physical_offset: int) -> None:
    """:func:`encode_record_into` for the store's put path, which has already checked the
    lengths, set the host flags of ``sys_flag`` and computed ``total`` (:func:`record_size`):
    positional arguments, the IPv4 layout packed in one call. Same bytes (unit-tested)."""
    if len(born_host) != 8 or len(store_host) != 8:
        encode_record_into(buf, pos, topic_bytes=topic_bytes, queue_id=queue_id, flag=flag, body=body,
                           props_bytes=props_bytes, sys_flag=sys_flag, born_timestamp=born_timestamp,
                           born_host=born_host, store_timestamp=store_timestamp, store_host=store_host,
                           reconsume_times=reconsume_times, prepared_transaction_offset=prepared_transaction_offset,
                           queue_offset=queue_offset, physical_offset=physical_offset)
        return
    blen = len(body)
    tlen = len(topic_bytes)
    if tlen > MAX_TOPIC_LENGTH_V1 or len(props_bytes) > MAX_PROPERTIES_LENGTH or pos < 0 \
            or total != 91 + blen + tlen + len(props_bytes) or pos + total > len(buf):
        raise ValueError(f"record of {total} bytes does not match its parts or fit at {pos}")
    # packed apart first: a field out of its Java range raises struct.error with ``buf`` untouched
    head = _FIXED_V4.pack(total, MESSAGE_MAGIC_CODE_V1, _crc32(body) & 0x7FFFFFFF, queue_id, flag,
                          queue_offset, physical_offset, sys_flag, born_timestamp, born_host, store_timestamp,
                          store_host, reconsume_times, prepared_transaction_offset, blen)
    p = pos + 88
    buf[pos:p] = head
    q = p + blen
    buf[p:q] = body
    buf[q] = tlen
    q += 1
    buf[q:q + tlen] = topic_bytes
    q += tlen
    _H.pack_into(buf, q, len(props_bytes))
    buf[q + 2:pos + total] = props_bytes


def encode_batch_records(records: Sequence[tuple[int, bytes, bytes, int]], total: int, topic_bytes: bytes,
                         queue_id: int, sys_flag: int, born_timestamp: int, born_host: bytes, store_timestamp: int,
                         store_host: bytes, reconsume_times: int, queue_offset: int, physical_offset: int) -> bytes:
    """:func:`_py_encode_batch_records`, compiled for IPv4 hosts where ``rmqpy._speedups`` is built."""
    if _native is not None and len(born_host) == 8 and len(store_host) == 8:
        out: bytes = _native.encode_batch_records(records, total, topic_bytes, queue_id, sys_flag, born_timestamp,
                                                  born_host, store_timestamp, store_host, reconsume_times,
                                                  queue_offset, physical_offset)
        return out
    return _py_encode_batch_records(records, total, topic_bytes, queue_id, sys_flag, born_timestamp, born_host,
                                    store_timestamp, store_host, reconsume_times, queue_offset, physical_offset)


def _py_encode_batch_records(records: Iterable[tuple[int, bytes, bytes, int]], total: int, topic_bytes: bytes,
                             queue_id: int, sys_flag: int, born_timestamp: int, born_host: bytes,
                             store_timestamp: int, store_host: bytes, reconsume_times: int, queue_offset: int,
                             physical_offset: int) -> bytes:
    """The V1 records of a batch, back to back: ``(flag, body, properties bytes, size)`` each, the
    first at ``physical_offset`` and ``queue_offset``, the next ones after it; ``total`` bytes in
    all. The same bytes as :func:`encode_record_into` of each in turn (unit-tested), built apart
    from the file: a field out of range or a size that does not add up raises before anything
    is written. The store has checked the lengths and set the host flags of ``sys_flag``."""
    if len(born_host) != 8 or len(store_host) != 8:
        out = bytearray(total)
        pos = 0
        for flag, body, props, size in records:
            encode_record_into(out, pos, topic_bytes=topic_bytes, queue_id=queue_id, flag=flag, body=body,
                               props_bytes=props, sys_flag=sys_flag, born_timestamp=born_timestamp,
                               born_host=born_host, store_timestamp=store_timestamp, store_host=store_host,
                               reconsume_times=reconsume_times, prepared_transaction_offset=0,
                               queue_offset=queue_offset, physical_offset=physical_offset + pos)
            pos += size
            queue_offset += 1
        if pos != total:
            raise ValueError(f"batch records of {pos} bytes, {total} expected")
        return bytes(out)
    tlen = len(topic_bytes)
    if tlen > MAX_TOPIC_LENGTH_V1:
        raise ValueError(f"topic too long for a V1 record: {tlen} bytes")
    topic_part = bytes((tlen,)) + topic_bytes  # the same after every body
    # the 88-byte fixed part (_FIXED_V4) with the fields every record of the batch shares packed once
    same = _BATCH_SAME.pack(sys_flag, born_timestamp, born_host, store_timestamp, store_host, reconsume_times, 0)
    parts: list[bytes] = []
    append = parts.append
    pack_fixed = _BATCH_FIXED.pack
    pack_h = _H.pack
    crc32 = _crc32
    phy = physical_offset
    for flag, body, props, size in records:
        blen = len(body)
        if size != 91 + blen + tlen + len(props):
            raise ValueError(f"record of {size} bytes does not match its parts")
        append(pack_fixed(size, MESSAGE_MAGIC_CODE_V1, crc32(body) & 0x7FFFFFFF, queue_id, flag, queue_offset,
                          phy, same, blen))
        append(body)
        append(topic_part)
        append(pack_h(len(props)))  # struct.error past 32767
        append(props)
        phy += size
        queue_offset += 1
    if phy - physical_offset != total:
        raise ValueError(f"batch records of {phy - physical_offset} bytes, {total} expected")
    return b"".join(parts)


def encode_record(msg: MessageExtBrokerInner | MessageExt, queue_offset: int | None = None,
                  physical_offset: int | None = None, store_timestamp: int | None = None) -> bytes:
    """Encode a message as a V1 stored record (bytes)."""
    topic_b = msg.topic.encode("utf-8")
    if isinstance(msg, MessageExtBrokerInner):
        props_b = msg.get_properties_string().encode("utf-8")
        store_host = msg.store_host or ("0.0.0.0", 0)
    else:
        props_b = properties_to_string(msg.properties).encode("utf-8")
        store_host = msg.store_host
        queue_offset = msg.queue_offset if queue_offset is None else queue_offset
        physical_offset = msg.commit_log_offset if physical_offset is None else physical_offset
    if store_timestamp is None:
        store_timestamp = msg.store_timestamp
    body = msg.body or b""
    bh = host_bytes(msg.born_host)
    sh = host_bytes(store_host)
    sys_flag = msg.sys_flag
    sys_flag = (sys_flag | SF.BORNHOST_V6_FLAG) if len(bh) == 20 else (sys_flag & ~SF.BORNHOST_V6_FLAG)
    sys_flag = (sys_flag | SF.STOREHOSTADDRESS_V6_FLAG) if len(sh) == 20 else (sys_flag & ~SF.STOREHOSTADDRESS_V6_FLAG)
    size = record_size(sys_flag, len(body), len(topic_b), len(props_b))
    out = bytearray(size)
    encode_record_into(out, 0, topic_bytes=topic_b, queue_id=msg.queue_id, flag=msg.flag, body=body,
                       props_bytes=props_b, sys_flag=sys_flag, born_timestamp=msg.born_timestamp, born_host=bh,
                       store_timestamp=store_timestamp, store_host=sh, reconsume_times=msg.reconsume_times,
                       prepared_transaction_offset=msg.prepared_transaction_offset,
                       queue_offset=queue_offset or 0, physical_offset=physical_offset or 0)
    return bytes(out)


# --------------------------------------------------------------------------- decode

def _read_hosts(buf: RecordBuffer, pos: int, sys_flag: int) -> tuple[Any, ...]:
    """Return (born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared, body_len, next_pos)."""
    if sys_flag & SF.BORNHOST_V6_FLAG:
        bip, bport = _HOST6.unpack_from(buf, pos)
        pos += 20
    else:
        bip, bport = _HOST4.unpack_from(buf, pos)
        pos += 8
    sts, = _Q.unpack_from(buf, pos)
    pos += 8
    if sys_flag & SF.STOREHOSTADDRESS_V6_FLAG:
        sip, sport = _HOST6.unpack_from(buf, pos)
        pos += 20
    else:
        sip, sport = _HOST4.unpack_from(buf, pos)
        pos += 8
    rt, pto, blen = _TAIL.unpack_from(buf, pos)
    return bip, bport, sts, sip, sport, rt, pto, blen, pos + 16


def decode_record(buf: RecordBuffer, offset: int = 0, check_crc: bool = True, read_body: bool = True) -> MessageExt:
    """Decode the record starting at ``buf[offset]``; raises :class:`RecordError`."""
    n = len(buf)
    if offset + 8 > n:
        raise RecordError(f"truncated record header at {offset}")
    try:
        (total, magic, crc, qid, flag, qoff, phy, sys_flag, born_ts) = _HEAD.unpack_from(buf, offset)
        if magic == BLANK_MAGIC_CODE:
            raise RecordError(f"blank (end of file) record at {offset}")
        if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
            raise RecordError(f"bad magic 0x{magic:08X} at {offset}")
        if total < 91 or offset + total > n:
            raise RecordError(f"bad total size {total} at {offset} (buffer {n})")
        bip, bport, sts, sip, sport, rt, pto, blen, p = _read_hosts(buf, offset + 48, sys_flag)
        if blen < 0 or p + blen > offset + total:
            raise RecordError(f"bad body length {blen} at {offset}")
        body = None
        if read_body:
            body = bytes(buf[p:p + blen])
            if check_crc and blen > 0 and (zlib.crc32(body) & 0x7FFFFFFF) != crc:
                raise RecordError(f"body CRC mismatch at {offset}")
        p += blen
        if magic == MESSAGE_MAGIC_CODE_V2:
            tlen, = _H.unpack_from(buf, p)
            p += 2
        else:
            tlen, = _B.unpack_from(buf, p)
            p += 1
        if tlen < 0:
            raise RecordError(f"bad topic length {tlen} at {offset}")
        topic = bytes(buf[p:p + tlen]).decode("utf-8")
        p += tlen
        plen, = _H.unpack_from(buf, p)
        p += 2
        if plen < 0:
            raise RecordError(f"bad properties length {plen} at {offset}")
        props = string_to_properties(bytes(buf[p:p + plen])) if plen > 0 else {}
        p += plen
    except struct.error as e:
        raise RecordError(f"truncated record at {offset}: {e}") from None
    except UnicodeDecodeError as e:
        raise RecordError(f"bad UTF-8 at {offset}: {e}") from None
    if p - offset != total:
        raise RecordError(f"total size {total} != parsed size {p - offset} at {offset}")
    return MessageExt(topic=topic, queue_id=qid, flag=flag, body=body, properties=props, sys_flag=sys_flag,
                      born_timestamp=born_ts, born_host=(_ip_str(bip), bport), store_timestamp=sts,
                      store_host=(_ip_str(sip), sport), reconsume_times=rt, prepared_transaction_offset=pto,
                      queue_offset=qoff, commit_log_offset=phy, store_size=total, body_crc=crc, magic_code=magic)


def decode_records(buf: RecordBuffer, check_crc: bool = False, read_body: bool = True) -> Iterator[MessageExt]:
    """Iterate over a concatenation of records (e.g. a pull response body)."""
    pos = 0
    n = len(buf)
    while pos < n:
        m = decode_record(buf, pos, check_crc=check_crc, read_body=read_body)
        yield m
        pos += m.store_size


@dataclass(slots=True)
class DispatchInfo:
    """What recovery / reput needs from a record (Java's DispatchRequest)."""
    size: int  # total size; 0 for blank; -1 for invalid
    success: bool
    topic: str = ""
    queue_id: int = 0
    commit_log_offset: int = 0
    tags_code: int = 0
    store_timestamp: int = 0
    queue_offset: int = 0
    keys: str = ""
    uniq_key: str | None = None
    sys_flag: int = 0
    prepared_transaction_offset: int = 0
    properties: dict[str, str] | None = None
    reason: str = ""


_BLANK = DispatchInfo(0, True)


def check_record(buf: RecordBuffer, offset: int = 0, check_crc: bool = True, read_body: bool = True,
                 delay_tags_code: Callable[[int, int], int] | None = None) -> DispatchInfo:
    """Validate the record at ``buf[offset]`` like ``CommitLog.checkMessageAndReturnSize``.

    Returns size 0/success for a blank record, size -1 (or the claimed size) and
    success False for an invalid record.  ``delay_tags_code(level, store_ts)``
    computes the tagsCode of SCHEDULE_TOPIC_XXXX records (delivery timestamp).
    """
    n = len(buf)
    if offset + 8 > n:
        return DispatchInfo(-1, False, reason="truncated header")
    total, magic = struct.unpack_from(">iI", buf, offset)
    if magic == BLANK_MAGIC_CODE:
        return _BLANK
    if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
        return DispatchInfo(-1, False, reason=f"bad magic 0x{magic:08X}")
    if total < 91 or offset + total > n:
        return DispatchInfo(-1, False, reason=f"bad total size {total}")
    try:
        (_t, _m, crc, qid, _flag, qoff, phy, sys_flag, _bts) = _HEAD.unpack_from(buf, offset)
        _bip, _bp, sts, _sip, _sp, _rt, pto, blen, p = _read_hosts(buf, offset + 48, sys_flag)
        if blen < 0 or p + blen > offset + total:
            return DispatchInfo(-1, False, reason=f"bad body length {blen}")
        if blen > 0 and read_body and check_crc:
            if (zlib.crc32(buf[p:p + blen]) & 0x7FFFFFFF) != crc:
                return DispatchInfo(-1, False, reason="body CRC mismatch")
        p += blen
        if magic == MESSAGE_MAGIC_CODE_V2:
            tlen, = _H.unpack_from(buf, p)
            p += 2
        else:
            tlen, = _B.unpack_from(buf, p)
            p += 1
        if tlen < 0 or p + tlen > offset + total:
            return DispatchInfo(-1, False, reason=f"bad topic length {tlen}")
        topic = bytes(buf[p:p + tlen]).decode("utf-8")
        p += tlen
        plen, = _H.unpack_from(buf, p)
        p += 2
        if plen < 0 or p + plen - offset != total:
            return DispatchInfo(total, False, reason="total size does not match contents")
        tags_code = 0
        keys = ""
        uniq = None
        props = None
        if plen > 0:
            props = string_to_properties(bytes(buf[p:p + plen]))
            keys = props.get(PROPERTY_KEYS) or ""
            uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            tags = props.get(PROPERTY_TAGS)
            if tags:
                tags_code = java_string_hash(tags)
            if delay_tags_code is not None and topic == SCHEDULE_TOPIC:
                t = props.get(PROPERTY_DELAY_TIME_LEVEL)
                if t is not None:
                    tags_code = delay_tags_code(int(t), sts)
    except (struct.error, UnicodeDecodeError, ValueError) as e:
        return DispatchInfo(-1, False, reason=f"undecodable record: {e}")
    return DispatchInfo(total, True, topic, qid, phy, tags_code, sts, qoff, keys, uniq, sys_flag, pto, props)


def peek_record_header(buf: RecordBuffer, offset: int = 0) -> tuple[int, int, int]:
    """(total_size, magic, store_timestamp) of the record at offset, without validation."""
    total, magic = struct.unpack_from(">iI", buf, offset)
    if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
        return total, magic, 0
    sys_flag, = _I.unpack_from(buf, offset + 36)
    p = offset + 48 + (20 if sys_flag & SF.BORNHOST_V6_FLAG else 8)
    sts, = _Q.unpack_from(buf, p)
    return total, magic, sts


# --------------------------------------------------------------------------- batch body

def encode_batch_body(items: Iterable[tuple[int, bytes, dict[str, str] | str]]) -> bytes:
    """Encode messages for SEND_BATCH_MESSAGE (``MessageDecoder.encodeMessages``).

    ``items``: iterables of (flag, body, properties dict or string)."""
    out = []
    for flag, body, props in items:
        ps = props if isinstance(props, str) else properties_to_string(props)
        pb = ps.encode("utf-8")
        total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(pb)
        out.append(struct.pack(">iiiii", total, 0, 0, flag, len(body)))
        out.append(bytes(body))
        out.append(_H.pack(len(pb)))
        out.append(pb)
    return b"".join(out)


def _py_decode_batch_items(body: bytes) -> list[tuple[int, bytes, bytes, str]]:
    """A SEND_BATCH_MESSAGE body as ``(flag, body, properties bytes, properties string)`` per
    message, what the store's batch put needs: no :class:`BatchItem` per message, the
    properties' bytes kept beside their text (valid UTF-8: encoding the text gives them back).
    Raises ValueError on malformed input."""
    items = []
    pos = 0
    n = len(body)
    unpack_item = _BATCH_ITEM_HEAD.unpack_from
    unpack_h = _H.unpack_from
    while pos < n:
        if pos + 20 > n:
            raise ValueError(f"truncated batch item at {pos}")
        total, _magic, _crc, flag, blen = unpack_item(body, pos)
        p = pos + 20 + blen
        if blen < 0 or p + 2 > n:
            raise ValueError(f"bad batch item body length {blen} at {pos}")
        plen, = unpack_h(body, p)
        p += 2
        if plen < 0 or p + plen > n:
            raise ValueError(f"bad batch item properties length {plen} at {pos}")
        pb = body[p:p + plen]
        ps = pb.decode("utf-8")
        p += plen
        if total != p - pos:
            raise ValueError(f"batch item size {total} != {p - pos} at {pos}")
        items.append((flag, body[pos + 20:pos + 20 + blen], pb, ps))
        pos = p
    return items


#: :func:`_py_decode_batch_items`, compiled where ``rmqpy._speedups`` is built
decode_batch_items: Callable[[bytes], list[tuple[int, bytes, bytes, str]]] = (
    _native.decode_batch_items if _native is not None else _py_decode_batch_items)


def decode_batch_body(body: RecordBuffer) -> list[BatchItem]:
    """Decode a SEND_BATCH_MESSAGE body; raises ValueError on malformed input."""
    return [BatchItem(flag, b, ps) for flag, b, _pb, ps in decode_batch_items(bytes(body))]


# --------------------------------------------------------------------------- message ids

def create_offset_msg_id(store_host: tuple[str, int] | bytes, commit_log_offset: int) -> str:
    """offsetMsgId: store ip + int32 port + int64 offset as uppercase hex (32 or 56 chars)."""
    hb = store_host if isinstance(store_host, (bytes, bytearray)) else host_bytes(store_host)
    return (bytes(hb) + _Q.pack(commit_log_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[tuple[str, int], int]:
    """Inverse of :func:`create_offset_msg_id`: ((ip, port), commitlog offset)."""
    b = bytes.fromhex(msg_id)
    if len(msg_id) == 32:
        iplen = 4
    elif len(msg_id) == 56:
        iplen = 16
    else:
        raise ValueError(f"bad offsetMsgId length {len(msg_id)}: {msg_id!r}")
    ip = _ip_str(b[:iplen])
    port, = _I.unpack_from(b, iplen)
    off, = _Q.unpack_from(b, iplen + 4)
    return (ip, port), off


_uniq_counter = 0
_uniq_prefix: bytes | None = None


def _month_start_ms(now_ms: int) -> int:
    t = time.localtime(now_ms / 1000)
    return int(time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1)) * 1000)


def create_uniq_id(ip: str = "127.0.0.1", now_ms: int | None = None) -> str:
    """A client-style UNIQ_KEY: ip + int16 pid + int32 id + int32 ms since month start + int16 counter."""
    global _uniq_counter, _uniq_prefix
    if _uniq_prefix is None:
        _uniq_prefix = struct.pack(">hi", os.getpid() & 0x7FFF, id(_month_start_ms) & 0x7FFFFFFF)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    diff = (now_ms - _month_start_ms(now_ms)) & 0xFFFFFFFF
    _uniq_counter = (_uniq_counter + 1) & 0xFFFF
    return (_ip_bytes(ip) + _uniq_prefix + struct.pack(">IH", diff, _uniq_counter)).hex().upper()


def decode_uniq_id(uniq: str) -> dict[str, Any]:
    """Split a UNIQ_KEY into ip, pid, classloader hash, ms since month start, counter."""
    b = bytes.fromhex(uniq)
    iplen = 16 if len(b) == 28 else 4
    if len(b) != iplen + 12:
        raise ValueError(f"bad UNIQ_KEY length {len(uniq)}: {uniq!r}")
    pid, clh, diff, counter = struct.unpack_from(">HiIH", b, iplen)
    return {"ip": _ip_str(b[:iplen]), "pid": pid, "class_loader_hash": clh, "ms_in_month": diff,
            "counter": counter}
