"""The name server request path's fast paths (frame decode, JSON header, response encode)
give what the general code gives: checked against references kept here or in test_fast_paths."""
from __future__ import annotations

import pytest

from rmqpy.protocol import command as codec
from rmqpy.protocol.command import FrameError, RemotingCommand
from tests.unit.protocol.test_fast_paths import _outcome, _reference_json_header

MORE_JSON_HEADERS = [
    b'{"code":105,"extFields":{"topic":"BenchTopic"},"flag":0,"language":"JAVA","opaque":17,'
    b'"serializeTypeCurrentRPC":"JSON","version":409}',                    # a 4.9.8 route lookup
    b' {"code":105,"opaque":1}',                                           # leading whitespace
    b'{"code":105,"opaque":1} \r\n',                                       # trailing whitespace
    b'{"code":105,"opaque":1}{"code":1}',                                  # extra data
    b'{"code":105,"opaque":1',                                             # unterminated
    b'{"code":105,"language":3}',                                          # language as a number
    b'{"code":105,"language":"CPP"}', b'{"code":105,"language":null}',
    b'{"code":105.0,"opaque":2.5,"version":true}',                         # odd number types
    b'{"code":105,"remark":null,"extFields":null}',
    b'{"opaque":1}', b'{}', b'{"code":1,"code":2}',                         # no code; duplicate key
    b'{"code":105,"extFields":{"topic":"T","n":1}}',                       # one non-str value
    b'{"code":1,"remark":"\\ud800"}',                                      # lone surrogate escape
    b'\xef\xbb\xbf{"code":11}',                                            # UTF-8 BOM
    b'{\xff}',                                                             # not UTF-8
    # what the JAVA fast path hands to the general code, or takes itself
    b'{"code":null,"language":"JAVA"}', b'{"code":"x","language":"JAVA"}', b'{"language":"JAVA"}',
    b'{"code":1,"language":"JAVA","extFields":{"a":1}}', b'{"code":1,"language":"JAVA","extFields":[]}',
    b'{"code":1,"language":"JAVA","extFields":"s"}', b'{"code":1,"language":"JAVA","opaque":null}',
    b'{"code":1,"language":"JAVA","remark":5}', b'{"code":1,"language":"JAVA","version":"409"}',
    b'{"code":[1],"language":"JAVA"}', b'{"code":1e3,"flag":-1}',
]


@pytest.mark.parametrize("header", MORE_JSON_HEADERS)
def test_json_header_scanner_path_matches_fastjson(header: bytes) -> None:
    assert _outcome(codec._decode_json_header, header) == _outcome(_reference_json_header, header)


def test_unknown_language_name_is_other() -> None:
    # (test_fast_paths' reference maps it to 8, HTTP; the code has always given OTHER, 7)
    assert codec._decode_json_header(memoryview(b'{"code":105,"language":"NOPE"}')).language == 7


def _reference_decode(frame: bytes) -> RemotingCommand:
    """command.decode before its fast path."""
    frame = memoryview(frame)
    if len(frame) < 4:
        raise FrameError(f"frame of {len(frame)} bytes is shorter than its header-length word")
    word = int.from_bytes(frame[:4], "big")
    serialize_type, header_len = word >> 24, word & 0xFFFFFF
    if header_len > len(frame) - 4:
        raise FrameError(f"header length {header_len} runs past the frame end ({len(frame) - 4} bytes)")
    header = frame[4:4 + header_len]
    body = bytes(frame[4 + header_len:]) or None
    if serialize_type == 0:
        cmd = codec._decode_json_header(header)
    elif serialize_type == 1:
        cmd = codec._decode_binary_header(header)
    else:
        raise FrameError(f"unknown serialize type {serialize_type}")
    cmd.body = body
    cmd.serialize_type = serialize_type
    return cmd


def _frame_outcome(fn, frame):
    try:
        cmd = fn(frame)
    except FrameError as exc:
        return ("error", str(exc))
    return ("ok", repr(cmd), cmd.body, cmd.serialize_type, cmd.language, cmd.version)


FRAMES = [
    codec.encode(RemotingCommand(code=105, opaque=3, ext_fields={"topic": "T"}))[4:],
    codec.encode(RemotingCommand(code=105, opaque=3, ext_fields={"topic": "T"}, body=b"xyz"))[4:],
    codec.encode(RemotingCommand(code=105, opaque=3, remark="r", serialize_type=1, body=b"b"))[4:],
    codec.encode(RemotingCommand(code=105, serialize_type=1))[4:],
    b"\x00\x00\x00", b"\x00\x00\x00\x00", b"\x00\x00\x00\x05{}", b"\x05\x00\x00\x00", b"\x00\x00\x00\x0b{\"code\":1}",
    b"\x00\x00\x00\x0a{\"code\":1}body",
]


@pytest.mark.parametrize("frame", FRAMES)
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_decode_matches_reference(frame: bytes, kind) -> None:
    assert _frame_outcome(codec.decode, kind(frame)) == _frame_outcome(_reference_decode, kind(frame))


# ---------------------------------------------------------------- encode

def _reference_header_encode(cmd: RemotingCommand) -> bytes:
    """command._encode_json_header before its bytes template."""
    ext = cmd.ext_fields
    if ext is None:
        ext_part = ""
    else:
        ext_part = ',"extFields":{' + ",".join([f"{codec._encode_utf(k)}:{codec._encode_utf(str(v))}"
                                                for k, v in ext.items() if v is not None]) + "}"
    remark = cmd.remark
    return ('{"code":%d%s,"flag":%d,"language":"%s","opaque":%d%s,"serializeTypeCurrentRPC":"JSON","version":%d}' % (
        int(cmd.code), ext_part, int(cmd.flag), codec._LANGUAGE_NAMES.get(int(cmd.language), "OTHER"),
        int(cmd.opaque), "" if remark is None else ',"remark":' + codec._encode_utf(remark),
        int(cmd.version))).encode("utf-8")


def _reference_encode(cmd: RemotingCommand) -> bytes:
    try:
        header = (codec._encode_binary_header(cmd) if cmd.serialize_type == 1 else _reference_header_encode(cmd))
    except UnicodeEncodeError:  # a lone surrogate is written as "?", as Java's getBytes(UTF_8) does
        cmd = codec._java_strings(cmd)
        header = (codec._encode_binary_header(cmd) if cmd.serialize_type == 1 else _reference_header_encode(cmd))
    body = cmd.body or b""
    return codec._FRAME_PREFIX.pack(4 + len(header) + len(body),
                                    (int(cmd.serialize_type) << 24) | len(header)) + header + body


def _encoded(fn, cmd):
    try:
        return ("ok", fn(cmd))
    except Exception as exc:  # the same kind of failure either way
        return ("error", type(exc))


def _commands():
    import random

    from rmqpy.protocol.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
    yield RemotingCommand(code=0, opaque=7, flag=1, body=b"x" * 300)  # a route answer
    yield RemotingCommand(code=ResponseCode.SYSTEM_ERROR, opaque=1, flag=1, remark="KeyError: 'x'")
    yield RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, language=LanguageCode.GO, ext_fields={"topic": "T"})
    yield RemotingCommand(code=1, language=99, remark="caf\u00e9 \u4e2d \U0001F600", body=b"")
    yield RemotingCommand(code=True, flag=2.9, opaque=-5, version=0, language=3.0, body=bytearray(b"ba"))
    yield RemotingCommand(code="17", opaque="9", language="2")  # strings as int() reads them
    yield RemotingCommand(code="x")                             # fails either way
    yield RemotingCommand(code=1, remark="\ud800")             # lone surrogate: "?" either way
    yield RemotingCommand(code=1, ext_fields={"a": None, "b": 5, "c": "\u0001\"\\"}, serialize_type=SerializeType.ROCKETMQ)
    yield RemotingCommand(code=1, ext_fields={}, remark="", serialize_type=1, body=b"b")
    rng = random.Random(7)
    alphabet = ["a", "Z", "0", " ", "\u0001", '"', "\\", "/", "\u00e9", "\u4e2d", "\U0001F600", "\n"]
    for _ in range(200):
        ext = {"".join(rng.choices(alphabet, k=rng.randrange(1, 5))): "".join(rng.choices(alphabet, k=rng.randrange(6)))
               for _ in range(rng.randrange(4))}
        yield RemotingCommand(code=rng.randrange(400), opaque=rng.randrange(1 << 31), flag=rng.randrange(4),
                              language=rng.randrange(16), version=rng.randrange(500),
                              ext_fields=rng.choice([None, ext]), remark=rng.choice([None, "", "r\u00e9"]),
                              body=rng.choice([None, b"", b"body"]), serialize_type=rng.choice([0, 1]))


def test_encode_matches_reference() -> None:
    for cmd in _commands():
        assert _encoded(codec.encode, cmd) == _encoded(_reference_encode, cmd), cmd
