"""Stored message record codec: struct hot path == construct schema, ids, properties, batch body."""

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqpy.protocol import message as M
from rmqpy.protocol.message import (
    BATCH_ITEM,
    RECORD,
    MessageExt,
    MessageExtBrokerInner,
    RecordError,
    check_record,
    create_offset_msg_id,
    create_uniq_id,
    decode_batch_body,
    decode_offset_msg_id,
    decode_record,
    decode_records,
    decode_uniq_id,
    encode_batch_body,
    encode_record,
    java_string_hash,
    properties_to_string,
    string_to_properties,
)

# ---------------------------------------------------------------- Java String.hashCode

@pytest.mark.parametrize("s,h", [
    ("", 0),
    ("a", 97),
    ("ab", 3105),
    ("hello", 99162322),
    ("hello world", 1794106052),
    ("polygenelubricants", -2147483648),  # Integer.MIN_VALUE: abs() overflows
    ("\u00e9", 233),
    ("\U0001F600", 0xD83D * 31 + 0xDE00),  # surrogate pair: two UTF-16 units
])
def test_java_string_hash(s, h):
    assert java_string_hash(s) == h


def test_index_key_hash_abs_overflow_is_zero():
    from rmqpy.store.index import index_key_hash
    assert index_key_hash("polygenelubricants") == 0
    assert index_key_hash("hello") == 99162322


# ---------------------------------------------------------------- properties

def test_properties_string_format():
    s = properties_to_string({"TAGS": "a", "KEYS": "k1 k2", "N": None})
    assert s == "TAGS\u0001a\u0002KEYS\u0001k1 k2\u0002"
    assert string_to_properties(s) == {"TAGS": "a", "KEYS": "k1 k2"}
    # tolerant parser: missing trailing separator, short / malformed items skipped
    assert string_to_properties("A\u0001b\u0002x\u0002C\u0001dd") == {"A": "b", "C": "dd"}
    assert string_to_properties("") == {}


# ---------------------------------------------------------------- record codec

hosts4 = st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 65535))
hosts6 = st.tuples(st.ip_addresses(v=6).map(str), st.integers(0, 65535))
prop_text = st.text(alphabet=st.characters(blacklist_characters="\u0001\u0002", blacklist_categories=("Cs",)),
                    min_size=1, max_size=12)

message_st = st.builds(
    MessageExtBrokerInner,
    topic=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC_%-0123456789", min_size=1, max_size=127),
    queue_id=st.integers(0, 2**31 - 1),
    body=st.binary(max_size=300),
    flag=st.integers(-2**31, 2**31 - 1),
    properties=st.dictionaries(prop_text, prop_text, max_size=5),
    sys_flag=st.sampled_from([0, 1, 2, 4, 8, 12, 0x40, 0x80, 0x301]),
    born_timestamp=st.integers(0, 2**62),
    born_host=st.one_of(hosts4, hosts6),
    store_host=st.one_of(hosts4, hosts6),
    reconsume_times=st.integers(0, 100),
    prepared_transaction_offset=st.integers(0, 2**62),
)


def _norm(ip):
    import socket
    fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
    return socket.inet_ntop(fam, socket.inet_pton(fam, ip))


@settings(max_examples=200, deadline=None)
@given(msg=message_st, qoff=st.integers(0, 2**62), phy=st.integers(0, 2**62), sts=st.integers(0, 2**62))
def test_struct_codec_matches_construct_schema(msg, qoff, phy, sts):
    rec = encode_record(msg, qoff, phy, sts)
    parsed = RECORD.parse(rec)
    assert parsed.totalSize == len(rec)
    assert parsed.magicCode == M.MESSAGE_MAGIC_CODE_V1
    assert parsed.bodyCRC == zlib.crc32(msg.body) & 0x7FFFFFFF
    assert parsed.queueOffset == qoff and parsed.physicalOffset == phy and parsed.storeTimestamp == sts
    assert parsed.topic == msg.topic and parsed.body == msg.body
    assert parsed.properties == properties_to_string(msg.properties)
    # build via construct gives the same bytes
    rebuilt = RECORD.build(parsed)
    assert rebuilt == rec
    # decode
    m = decode_record(rec)
    assert m.topic == msg.topic and m.body == msg.body and m.properties == msg.properties
    assert m.queue_id == msg.queue_id and m.flag == msg.flag and m.queue_offset == qoff
    assert m.commit_log_offset == phy and m.store_timestamp == sts and m.born_timestamp == msg.born_timestamp
    assert m.born_host == (_norm(msg.born_host[0]), msg.born_host[1])
    assert m.store_host == (_norm(msg.store_host[0]), msg.store_host[1])
    assert m.reconsume_times == msg.reconsume_times
    assert m.prepared_transaction_offset == msg.prepared_transaction_offset
    assert m.sys_flag & ~0x30 == msg.sys_flag & ~0x30
    assert bool(m.sys_flag & 0x10) == (":" in msg.born_host[0])
    assert bool(m.sys_flag & 0x20) == (":" in msg.store_host[0])
    d = check_record(rec)
    assert d.success and d.size == len(rec) and d.topic == msg.topic
    assert d.tags_code == (java_string_hash(msg.properties["TAGS"]) if msg.properties.get("TAGS") else 0)


def test_record_size_v1_ipv4():
    msg = MessageExtBrokerInner(topic="TopicTest", body=b"Hello", properties={"TAGS": "TagA"})
    rec = encode_record(msg, 0, 0, 0)
    assert len(rec) == 91 + 5 + 9 + len("TAGS\u0001TagA\u0002")
    assert struct.unpack_from(">i", rec, 4)[0] == -626843481


def test_read_v2_record():
    msg = MessageExtBrokerInner(topic="T" * 10, body=b"b", properties={"A": "1"})
    rec = bytearray(encode_record(msg, 1, 2, 3))
    # convert to V2: 2-byte topic length
    tl_pos = 88 + 1
    v2 = rec[:tl_pos] + struct.pack(">h", 10) + rec[tl_pos + 1:]
    struct.pack_into(">iI", v2, 0, len(v2), M.MESSAGE_MAGIC_CODE_V2)
    m = decode_record(bytes(v2))
    assert m.topic == "T" * 10 and m.properties == {"A": "1"} and m.magic_code == M.MESSAGE_MAGIC_CODE_V2
    assert RECORD.parse(bytes(v2)).topic == "T" * 10
    assert check_record(bytes(v2)).success


def test_decode_errors():
    rec = encode_record(MessageExtBrokerInner(topic="T", body=b"hello"), 0, 0, 0)
    with pytest.raises(RecordError):
        decode_record(rec[:50])
    bad = bytearray(rec)
    bad[-8] ^= 0xFF  # inside body? flip a body byte
    bad[90] ^= 0x01
    with pytest.raises(RecordError, match="CRC"):
        decode_record(bytes(bad))
    assert not check_record(bytes(bad)).success
    assert check_record(bytes(bad), check_crc=False).success
    blank = struct.pack(">iI", 100, M.BLANK_MAGIC_CODE)
    d = check_record(blank + bytes(92))
    assert d.success and d.size == 0
    assert not check_record(bytes(100)).success
    with pytest.raises(ValueError):
        encode_record(MessageExtBrokerInner(topic="x" * 128), 0, 0, 0)


def test_decode_records_concatenation():
    recs = [encode_record(MessageExtBrokerInner(topic="T", body=bytes([i]) * i, queue_id=i), i, i * 1000, 5)
            for i in range(5)]
    out = list(decode_records(b"".join(recs)))
    assert [m.queue_id for m in out] == list(range(5))
    assert [m.body for m in out] == [bytes([i]) * i for i in range(5)]


# ---------------------------------------------------------------- batch

@given(st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), st.binary(max_size=100),
                          st.dictionaries(prop_text, prop_text, max_size=3)), min_size=1, max_size=10))
def test_batch_body_round_trip(items):
    body = encode_batch_body(items)
    out = decode_batch_body(body)
    assert [(o.flag, o.body, string_to_properties(o.properties_string)) for o in out] == items
    # matches the construct schema
    parsed = (BATCH_ITEM[len(items)]).parse(body)
    assert [p.body for p in parsed] == [i[1] for i in items]
    assert all(p.magicCode == 0 and p.bodyCRC == 0 for p in parsed)


def test_batch_body_truncated():
    body = encode_batch_body([(0, b"abc", {"A": "b"})])
    with pytest.raises(ValueError):
        decode_batch_body(body[:-1])


# ---------------------------------------------------------------- ids

def test_offset_msg_id():
    mid = create_offset_msg_id(("127.0.0.1", 10911), 0x1234)
    assert mid == "7F00000100002A9F0000000000001234"
    assert decode_offset_msg_id(mid) == (("127.0.0.1", 10911), 0x1234)
    mid6 = create_offset_msg_id(("::1", 10911), 5)
    assert len(mid6) == 56
    assert decode_offset_msg_id(mid6) == (("::1", 10911), 5)
    m = MessageExt(store_host=("10.0.0.2", 10911), commit_log_offset=99)
    assert decode_offset_msg_id(m.msg_id)[1] == 99


def test_uniq_id():
    u = create_uniq_id("192.168.1.2")
    assert len(u) == 32 and u == u.upper()
    info = decode_uniq_id(u)
    assert info["ip"] == "192.168.1.2"


def test_properties_parse_skips_empty_names_and_values_as_java_does() -> None:
    from rmqpy.protocol.message import string_to_properties
    assert string_to_properties("ab\x01\x02a\x01b\x02\x01xy\x02k\x01v") == {"a": "b", "k": "v"}
