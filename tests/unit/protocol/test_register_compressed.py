"""The compressed RegisterBrokerBody (``compressedRegister``) against bytes laid out by hand from
Java's code, not only a round trip through rmqpy.

Java 5.3.3 ``RegisterBrokerBody.encode(true)`` writes, into a ``DeflaterOutputStream`` with
``new Deflater(Deflater.BEST_COMPRESSION)`` (a zlib stream: header 0x78 0xDA), big-endian ints
(``ByteBuffer.putInt``) and UTF-8 bytes:

    int len, DataVersion JSON        dataVersion.encode(): fastjson, {"counter","stateVersion","timestamp"}
    int n, then n times:
        int len, TopicConfig.encode()    "name read write perm filterType " + attributes JSON if not null
    int len, JSON of filterServerList
    int m, then m times: int len, TopicQueueMappingInfo JSON

``decode(data, true, version)`` reads the same, the mapping section only from a >= V5_0_0 broker.
4.9.7 writes no mapping section and ``TopicConfig.encode()`` without the trailing separator and
attributes; its ``decode`` wants exactly five fields.
"""
from __future__ import annotations

import json
import struct
import zlib

from rmqpy.protocol.bodies.topic import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from rmqpy.protocol.codes import MQVersion


def _int(n: int) -> bytes:
    return struct.pack(">i", n)


def _chunk(text: str) -> bytes:
    data = text.encode("utf-8")
    return _int(len(data)) + data


def test_rmqpy_writes_what_java_reads() -> None:
    wrapper = TopicConfigSerializeWrapper(
        {"TopicA": TopicConfig("TopicA", 8, 8, 6),
         "TopicB": TopicConfig("TopicB", 4, 2, 2, "MULTI_TAG", attributes={"message.type": "FIFO"})},
        DataVersion(timestamp=1700000000123, counter=42, stateVersion=3))
    body = RegisterBrokerBody(wrapper, []).encode(compressed=True)
    assert body[:2] == b"\x78\xda"  # zlib, Deflater.BEST_COMPRESSION
    expected = (_chunk('{"counter":42,"stateVersion":3,"timestamp":1700000000123}')
                + _int(2)
                # 4.9's TopicConfig.encode(): five fields (5.x's sixth, the attributes, is left out: a
                # 4.9 name server's decode refuses six)
                + _chunk("TopicA 8 8 6 SINGLE_TAG") + _chunk("TopicB 4 2 2 MULTI_TAG")
                + _chunk("[]")
                + _int(0))  # 5.x: no static-topic mappings
    assert zlib.decompress(body) == expected
    # a 4.9.7 name server's decode: reads up to the filter server list, exactly five fields a topic
    raw, pos, topics = zlib.decompress(body), 0, []

    def take() -> bytes:
        nonlocal pos
        (n,) = struct.unpack_from(">i", raw, pos)
        pos += 4 + n
        return raw[pos - n:pos]

    assert json.loads(take())["counter"] == 42
    (count,) = struct.unpack_from(">i", raw, pos)
    pos += 4
    for _ in range(count):
        fields = take().decode().split(" ")
        assert len(fields) == 5
        topics.append(fields[0])
    assert topics == ["TopicA", "TopicB"] and json.loads(take()) == []


def _java5_body(topics: list[str], mappings: list[str]) -> bytes:
    """A body as a 5.3.3 broker's ``encode(true)`` lays it out (attributes ``{}`` when empty)."""
    raw = (_chunk('{"counter":7,"stateVersion":2,"timestamp":1700000000000}') + _int(len(topics))
           + b"".join(_chunk(t) for t in topics) + _chunk('["10.0.0.9:40000"]') + _int(len(mappings))
           + b"".join(_chunk(m) for m in mappings))
    return zlib.compress(raw, 9)


def test_rmqpy_reads_what_java_5_writes() -> None:
    body = _java5_body(
        ["TopicA 8 8 6 SINGLE_TAG {}",
         'TopicB 4 2 2 MULTI_TAG {"message.type":"FIFO","+delay":"x"}',
         "TopicC 1 1 6 SINGLE_TAG ",  # attributes null: the separator and nothing after it
         "TopicD 2 2 6 SINGLE_TAG {not json"],  # Java ignores attributes it cannot parse
        ['{"bname":"broker-a","currIdMap":{"0":0},"dirty":false,"epoch":1,"scope":"__global__",'
         '"topic":"StaticT","totalQueues":1}'])
    decoded = RegisterBrokerBody.decode(body, True, MQVersion.V5_3_3)
    wrapper = decoded.topicConfigSerializeWrapper
    assert (wrapper.dataVersion.counter, wrapper.dataVersion.stateVersion,
            wrapper.dataVersion.timestamp) == (7, 2, 1700000000000)
    table = wrapper.topicConfigTable
    assert list(table) == ["TopicA", "TopicB", "TopicC", "TopicD"]
    b = table["TopicB"]
    assert (b.readQueueNums, b.writeQueueNums, b.perm, b.topicFilterType) == (4, 2, 2, "MULTI_TAG")
    assert b.attributes == {"message.type": "FIFO", "+delay": "x"}
    assert table["TopicA"].attributes == table["TopicC"].attributes == table["TopicD"].attributes == {}
    assert decoded.filterServerList == ["10.0.0.9:40000"]


def test_rmqpy_reads_what_java_4_9_writes() -> None:
    raw = (_chunk('{"counter":1,"timestamp":1600000000000}') + _int(1) + _chunk("Old 16 16 6 SINGLE_TAG")
           + _chunk("[]"))  # no mapping section
    decoded = RegisterBrokerBody.decode(zlib.compress(raw, 6), True, MQVersion.V4_9_3)
    assert list(decoded.topicConfigSerializeWrapper.topicConfigTable) == ["Old"]
    assert decoded.topicConfigSerializeWrapper.dataVersion.counter == 1


def test_a_round_trip_keeps_what_a_name_server_uses() -> None:
    table = {f"T{i}": TopicConfig(f"T{i}", i % 16 + 1, i % 8 + 1, 6 if i % 2 else 4) for i in range(50)}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(5, 9))).encode(True)
    back = RegisterBrokerBody.decode(body, True, MQVersion.V5_3_3).topicConfigSerializeWrapper.topicConfigTable
    assert {n: (t.readQueueNums, t.writeQueueNums, t.perm) for n, t in back.items()} == \
           {n: (t.readQueueNums, t.writeQueueNums, t.perm) for n, t in table.items()}


def _bomb(inflated: int) -> bytes:
    """The start of a zlib stream of ``inflated`` zero bytes (no end: an inflater past its bound
    never reads one). After a full flush each MiB of zeros compresses to the same block, so the
    block is made once and repeated."""
    z = zlib.compressobj(9)
    mib = b"\0" * (1 << 20)
    first = z.compress(mib) + z.flush(zlib.Z_FULL_FLUSH)
    block = z.compress(mib) + z.flush(zlib.Z_FULL_FLUSH)
    return first + block * ((inflated >> 20) - 1)


def test_a_compressed_body_is_refused_past_the_inflate_bound_and_when_it_lies_about_its_counts() -> None:
    """A registration is something any connection can send: a small body that inflates past
    MAX_INFLATED_BODY, or whose counts and lengths name more than it holds, is a BodyError (one
    answer, nothing kept), never a huge buffer or a loop over a count it does not have."""
    import pytest

    from rmqpy.protocol.bodies.safe import MAX_INFLATED_BODY, BodyError

    bomb = _bomb(MAX_INFLATED_BODY + (1 << 20))
    assert len(bomb) < MAX_INFLATED_BODY // 500
    with pytest.raises(BodyError, match="inflates past"):
        RegisterBrokerBody.decode(bomb, True)
    version = _chunk(json.dumps({"counter": 1, "stateVersion": 0, "timestamp": 1}))
    for lie in (version + _int(2_000_000_000),                        # topics it does not hold
                version + _int(1) + _int(1 << 30) + b"T 4 4 6 SINGLE_TAG",  # a length past the end
                version + _int(1) + _int(-5)):                         # a negative length
        with pytest.raises(BodyError):
            RegisterBrokerBody.decode(zlib.compress(lie), True)
