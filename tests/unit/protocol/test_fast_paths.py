"""The send path's fast paths give what the general (slow) code gives, byte for byte.

Each fast path is checked against a reference: the general code it stands in for, kept here
or still used in the module for everything the fast path does not take.
"""
from __future__ import annotations

import random

import pytest
from twisted.internet import task
from twisted.internet.testing import StringTransport

from rmqpy.protocol import command as codec
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import LanguageCode, RequestCode, ResponseCode
from rmqpy.protocol.command import FrameError, RemotingCommand
from rmqpy.remoting.dispatch import RequestDispatcher
from rmqpy.remoting.protocol import RemotingProtocol

# ---------------------------------------------------------------- JSON header decode

def _reference_json_header(header: bytes) -> RemotingCommand:
    """command._decode_json_header before its fast path: fastjson.loads + _ext_str on every field."""
    try:
        doc = fastjson.loads(bytes(header))
    except ValueError as exc:
        raise FrameError(f"invalid JSON header: {exc}") from None
    if not isinstance(doc, dict) or "code" not in doc:
        raise FrameError("JSON header is not an object with a code")
    language = doc.get("language", "JAVA")
    if isinstance(language, str):
        language = codec._LANGUAGE_BY_NAME.get(language, int(LanguageCode.OTHER))  # as the codec: OTHER (7)
    ext = doc.get("extFields")
    if ext is not None and not isinstance(ext, dict):
        raise FrameError("extFields is not an object")
    remark = doc.get("remark")
    if remark is not None and not isinstance(remark, str):  # (issue 11: a wrong type is a bad frame)
        raise FrameError(f"remark is a {type(remark).__name__}, not a string")
    remark = codec._java_text(remark) if remark is not None else None
    try:
        cmd = RemotingCommand(
            code=int(doc["code"]), language=int(language), version=int(doc.get("version") or 0),
            opaque=int(doc.get("opaque") or 0), flag=int(doc.get("flag") or 0), remark=remark,
            ext_fields={str(k): codec._ext_str(v) for k, v in ext.items()} if ext is not None else None)
    except (TypeError, ValueError, OverflowError) as exc:
        raise FrameError(f"bad field in JSON header: {exc}") from None
    return cmd


JSON_HEADERS = [
    b'{"code":310,"extFields":{"a":"pg","b":"T","i":"UNIQ_KEY\\u0001AB\\u0002WAIT\\u0001true\\u0002"},'
    b'"flag":0,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":409}',
    b'{"code":10,"extFields":{"n":5,"b":true,"f":1.5,"d":{"x":[1,2]},"z":null},"opaque":1}',  # non-str values
    b'{"code":10,"extFields":{0:"int key"},"opaque":1}',                  # fastjson-only syntax
    b"{'code':10,'remark':'single quotes'}",                               # fastjson-only syntax
    '\ufeff{"code":11,"remark":"bom"}'.encode(),                           # BOM
    b'{"code":12,"language":"GO","remark":"caf\xc3\xa9"}',
    b'{"code":12,"extFields":{}}',
    b'{"code":"13","opaque":"7","flag":null}',
    b'{"code":NaN}',                                                       # rejected constant
    b'{"code":1,"extFields":[1]}',                                          # extFields not an object
    b'{"code":1,"opaque":"x"}',                                             # bad int
    b'["code"]', b"null", b"", b"{", b'{"code":1}xx', b'{"code":1,"remark":"\xff"}',  # invalid
]


def _outcome(fn, header: bytes):
    try:
        cmd = fn(memoryview(header))
    except FrameError as exc:
        return ("error", str(exc))
    return ("ok", cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark, cmd.ext_fields,
            None if cmd.ext_fields is None else [(type(k), type(v)) for k, v in cmd.ext_fields.items()])


@pytest.mark.parametrize("header", JSON_HEADERS)
def test_json_header_fast_path_matches_fastjson(header: bytes) -> None:
    assert _outcome(codec._decode_json_header, header) == _outcome(_reference_json_header, header)


def test_json_header_fast_path_on_random_ext_fields() -> None:
    rng = random.Random(4)
    alphabet = ["a", "Z", "0", " ", "\u0001", "\u0002", '"', "\\", "/", "\u00e9", "\u4e2d", "\U0001F600", "\n"]
    for _ in range(300):
        ext = {"".join(rng.choices(alphabet, k=rng.randrange(1, 5))): "".join(rng.choices(alphabet, k=rng.randrange(8)))
               for _ in range(rng.randrange(6))}
        cmd = RemotingCommand(code=310, opaque=rng.randrange(1 << 31), ext_fields=ext or None,
                              remark=rng.choice([None, "r\u0001"]))
        frame = codec.encode(cmd)
        header = frame[8:8 + (int.from_bytes(frame[4:8], "big") & 0xFFFFFF)]
        assert _outcome(codec._decode_json_header, header) == _outcome(_reference_json_header, header)


# ---------------------------------------------------------------- framing

class _Echo:
    def process_request(self, channel, request):
        return request.response(ResponseCode.SUCCESS, remark=str(request.opaque), body=request.body)


def _connection(max_frame: int = codec.DEFAULT_MAX_FRAME):
    dispatcher = RequestDispatcher()
    dispatcher.register(RequestCode.HEART_BEAT, _Echo())
    proto = RemotingProtocol(dispatcher, task.Clock(), max_frame)
    transport = StringTransport()
    proto.makeConnection(transport)
    return proto, transport


def _responses(data: bytes) -> list[tuple[int, bytes | None]]:
    out = []
    while data:
        n = int.from_bytes(data[:4], "big")
        cmd = codec.decode(data[4:4 + n])
        out.append((int(cmd.remark), cmd.body))
        data = data[4 + n:]
    return out


@pytest.mark.parametrize("seed", range(20))
def test_frames_in_any_chunking_are_answered_in_order(seed: int) -> None:
    rng = random.Random(seed)
    expected = []
    stream = b""
    for i in range(rng.randrange(1, 12)):
        body = bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 7, 300, 5000])))
        cmd = RemotingCommand.request(RequestCode.HEART_BEAT, body=body,
                                      serialize_type=rng.choice([0, 1]))
        cmd.opaque = i
        stream += codec.encode(cmd)
        expected.append((i, body or None))
    proto, transport = _connection()
    pos = 0
    while pos < len(stream):
        step = rng.choice([1, 2, 3, 4, 5, 100, 4096, len(stream)])
        proto.dataReceived(stream[pos:pos + step])
        pos += step
    assert _responses(transport.value()) == expected
    assert not proto._buffer and not transport.disconnecting


def test_oversized_frame_closes_even_when_its_length_arrives_in_pieces() -> None:
    proto, transport = _connection(max_frame=1024)
    frame = codec.encode(RemotingCommand.request(RequestCode.HEART_BEAT, body=b"x" * 2000))
    proto.dataReceived(frame[:2])
    proto.dataReceived(frame[2:6])
    assert transport.disconnecting and not transport.value()


def test_good_frames_before_a_bad_one_are_answered() -> None:
    proto, transport = _connection()
    good = RemotingCommand.request(RequestCode.HEART_BEAT, body=b"ok")
    good.opaque = 5
    proto.dataReceived(codec.encode(good) + b"\x00\x00\x00\x08\x05\x00\x00\x00abcd" + codec.encode(good))
    assert _responses(transport.value()) == [(5, b"ok")]
    assert transport.disconnecting


# ---------------------------------------------------------------- JSON header encode

def _reference_encode_json_header(cmd: RemotingCommand) -> bytes:
    """command._encode_json_header before its fast path."""
    esc = fastjson._escape
    parts = ['{"code":', str(int(cmd.code))]
    if cmd.ext_fields is not None:
        fields = ",".join(f"{esc(k, False)}:{esc(str(v), False)}" for k, v in cmd.ext_fields.items() if v is not None)
        parts += [',"extFields":{', fields, "}"]
    parts += [',"flag":', str(int(cmd.flag)), ',"language":"', codec._LANGUAGE_NAMES.get(int(cmd.language), "OTHER"),
              '","opaque":', str(int(cmd.opaque))]
    if cmd.remark is not None:
        parts += [',"remark":', esc(cmd.remark, False)]
    parts += [',"serializeTypeCurrentRPC":"JSON","version":', str(int(cmd.version)), "}"]
    return "".join(parts).encode("utf-8")


def test_json_header_encode_matches_reference() -> None:
    rng = random.Random(7)
    alphabet = ["a", "Z", "0", " ", "\u0001", "\u0002", '"', "\\", "/", "\u00e9", "\u4e2d", "\U0001F600", "\n", "\x7f"]
    values = [lambda: "".join(rng.choices(alphabet, k=rng.randrange(8))), lambda: None, lambda: rng.randrange(-5, 10**12),
              lambda: True, lambda: ResponseCode.SUCCESS]
    for _ in range(400):
        ext = {"".join(rng.choices(alphabet, k=rng.randrange(1, 5))): rng.choice(values)() for _ in range(rng.randrange(7))}
        cmd = RemotingCommand(code=rng.choice([0, 1, 310, ResponseCode.SYSTEM_ERROR]), language=rng.choice([0, 9, 99]),
                              version=rng.randrange(500), opaque=rng.randrange(-5, 1 << 31), flag=rng.choice([0, 1, 2, 3]),
                              remark=rng.choice([None, "", "ok", "a\"b\\c\u0001\U0001F600"]),
                              ext_fields=rng.choice([None, ext]))
        assert codec._encode_json_header(cmd) == _reference_encode_json_header(cmd)


# ---------------------------------------------------------------- properties, hash, record

from rmqpy.protocol import message as M  # noqa: E402


def _reference_string_to_properties(s):
    """message.string_to_properties before its fast path (find/slice per item)."""
    if not s:
        return {}
    if isinstance(s, (bytes, bytearray, memoryview)):
        s = bytes(s).decode("utf-8", "replace")
    out = {}
    for item in s.split("\u0002"):
        if len(item) < 3:
            continue
        i = item.find("\u0001")
        if i <= 0 or i >= len(item) - 1:
            continue
        out[item[:i]] = item[i + 1:]
    return out


def test_string_to_properties_matches_reference() -> None:
    rng = random.Random(11)
    alphabet = ["a", "B", "\u0001", "\u0002", "\u0001\u0001", "\u0002\u0002", "=", "\u00e9", "\U0001F600", ""]
    cases = ["", "a", "\u0001", "a\u0001", "\u0001b", "a\u0001b", "ab\u0001\u0002", "a\u0001b\u0001c\u0002",
             "x\u00011\u0002x\u00012\u0002", "WAIT\u0001true\u0002TAGS\u0001T\u0002"]
    cases += ["".join(rng.choices(alphabet, k=rng.randrange(30))) for _ in range(3000)]
    for s in cases:
        want = _reference_string_to_properties(s)
        got = M.string_to_properties(s)
        assert got == want and list(got) == list(want), repr(s)
        assert M.string_to_properties(s.encode("utf-8", "surrogatepass")) == _reference_string_to_properties(
            s.encode("utf-8", "surrogatepass"))
    assert M.string_to_properties(b"a\x01\xff\x02") == _reference_string_to_properties(b"a\x01\xff\x02")
    assert M.string_to_properties(None) == {}


def _java_hash_loop(s: str) -> int:
    u = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(u), 2):
        h = (31 * h + ((u[i] << 8) | u[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def test_java_string_hash_matches_the_loop() -> None:
    rng = random.Random(12)
    alphabet = "aZ09#_-%|\u00e9\u4e2d\U0001F600\x00\x7f"
    cases = ["", "a", "TagA", "BenchTopic#7F00000100002A9F0000000000000001", "x" * 4096, "y" * 4097, "\ud800"]
    cases += ["".join(rng.choices(alphabet, k=rng.randrange(60))) for _ in range(2000)]
    cases += ["".join(rng.choices("abc", k=rng.randrange(4090, 4100))) for _ in range(20)]
    for s in cases:
        assert M.java_string_hash(s) == _java_hash_loop(s), repr(s[:40])
    assert M.java_string_hash("hello") == 99162322  # Java "hello".hashCode()


@pytest.mark.parametrize("born,store", [(("10.1.2.3", 5555), ("127.0.0.1", 10911)),
                                        (("::1", 5555), ("127.0.0.1", 10911)),
                                        (("10.1.2.3", 5555), ("fe80::1", 10911)),
                                        (("::1", 1), ("::2", 2))])
def test_encode_record_at_matches_encode_record_into(born, store) -> None:
    rng = random.Random(13)
    for body_len in (0, 1, 128, 1024, 5000):
        body = bytes(rng.randrange(256) for _ in range(body_len))
        topic_b = rng.choice([b"T", b"BenchTopic", b"t" * 127])
        props_b = rng.choice([b"", b"UNIQ_KEY\x01ABC\x02CLUSTER\x01DefaultCluster\x02", "\u00e9\x01x\x02".encode()])
        bh, sh = M.host_bytes(born), M.host_bytes(store)
        sys_flag = rng.choice([0, 1, 4, 8])
        sys_flag = (sys_flag | M.BORNHOST_V6_FLAG) if len(bh) == 20 else (sys_flag & ~M.BORNHOST_V6_FLAG)
        sys_flag = (sys_flag | M.STOREHOSTADDRESS_V6_FLAG) if len(sh) == 20 else (sys_flag & ~M.STOREHOSTADDRESS_V6_FLAG)
        total = M.record_size(sys_flag, len(body), len(topic_b), len(props_b))
        args = dict(queue_id=rng.randrange(8), flag=rng.randrange(-3, 3), sys_flag=sys_flag, born_timestamp=rng.randrange(1 << 45),
                    store_timestamp=rng.randrange(1 << 45), reconsume_times=rng.randrange(20),
                    prepared_transaction_offset=rng.randrange(1 << 40), queue_offset=rng.randrange(1 << 40),
                    physical_offset=rng.randrange(1 << 50))
        want = bytearray(b"\xee" * (total + 20))
        assert M.encode_record_into(want, 7, topic_bytes=topic_b, body=body, props_bytes=props_b, born_host=bh,
                                    store_host=sh, **args) == total
        got = bytearray(b"\xee" * (total + 20))
        M.encode_record_at(got, 7, total, topic_b, args["queue_id"], args["flag"], body, props_b, sys_flag,
                           args["born_timestamp"], bh, args["store_timestamp"], sh, args["reconsume_times"],
                           args["prepared_transaction_offset"], args["queue_offset"], args["physical_offset"])
        assert got == want
        parsed = M.RECORD.parse(bytes(got[7:7 + total]))
        assert parsed.totalSize == total and parsed.body == body and parsed.topic == topic_b.decode()
