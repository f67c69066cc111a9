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
from rmqpy.protocol.codes import RequestCode, ResponseCode
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
        language = codec._LANGUAGE_BY_NAME.get(language, 8)
    ext = doc.get("extFields")
    if ext is not None and not isinstance(ext, dict):
        raise FrameError("extFields is not an object")
    try:
        return RemotingCommand(
            code=int(doc["code"]), language=int(language), version=int(doc.get("version") or 0),
            opaque=int(doc.get("opaque") or 0), flag=int(doc.get("flag") or 0), remark=doc.get("remark"),
            ext_fields={str(k): codec._ext_str(v) for k, v in ext.items()} if ext is not None else None)
    except (TypeError, ValueError) as exc:
        raise FrameError(f"bad field in JSON header: {exc}") from None


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
