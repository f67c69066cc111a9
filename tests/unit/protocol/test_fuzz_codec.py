"""Fuzz the decoders a remote peer reaches (issue 11, rows 5 and 6): the frame decoder, every
custom header class and every JSON body decoder raise only the codec's own errors.

FrameError closes the connection; HeaderError and BodyError are answered with an error
response. Anything else (RecursionError, OverflowError, TypeError...) would escape the
frame-error path as an "Unhandled Error" or a traceback per request. Time-bounded for CI:
each property runs a fixed number of examples with no deadline.
"""
from __future__ import annotations

import inspect
import json
import pkgutil
import struct
import zlib
from importlib import import_module
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rmqpy.protocol.bodies as bodies_pkg
import rmqpy.protocol.headers as headers_pkg
from rmqpy.protocol import command as codec
from rmqpy.protocol import fastjson
from rmqpy.protocol.command import BodyError, FrameError, HeaderError, RemotingCommand
from rmqpy.protocol.headers.base import INT_RANGE, LONG_RANGE, CommandHeader
from tests.unit.protocol.test_fast_paths import _outcome, _reference_json_header

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                derandomize=True, database=None)


def _frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A frame without its length prefix, as the framer hands it to decode."""
    return struct.pack(">I", (serialize_type << 24) | len(header)) + header + body


# ---------------------------------------------------------------- frames
HOSTILE_HEADERS = [
    b'{"code":1e999}', b'{"code":-1e999}', b'{"code":1e999,"language":"JAVA"}', b'{code:1e999}',
    b'{"code":NaN}', b'{"code":Infinity}', b'{"code":' + b"9" * 5000 + b"}", b'{"code":' + b"9" * 400 + b"}",
    b'{"code":2147483648}', b'{"code":1,"opaque":-2147483649}', b'{"code":1,"flag":1e300}',
    b"[" * 50_000 + b"]" * 50_000, b"{" * 50_000, b'{"a":' * 50_000,
    b'{"code":1,"x":' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    b'{"code":1,"extFields":{"a":' + b"[" * 50_000 + b"]" * 50_000 + b"}}",
    b'{"code":1,"extFields":{"a":' + b"[" * 100 + b"]" * 100 + b"}}",
    b'{"code":1,"extFields":{' + b"{" * 300 + b"}" * 300 + b":1}}",
    b'{"code":1,"extFields":[]}', b'{"code":1,"extFields":{"a":1e999}}', b'{"code":"1"}',
    b'{"code":[]}', b'{"code":{}}', b'{"code":true}', b'{"code":null}', b'{"code":1,"remark":[]}',
    b'{"code":1,"language":{}}', b'{"code":1,"version":"x"}', b'"code"', b"1", b"null", b"",
    b"\xff\xfe", b'{"code":1,"remark":"\\ud800"}', b"\xef\xbb\xbf" + b"[" * 50_000, b"{'code':'\\x'}",
]


@pytest.mark.parametrize("header", HOSTILE_HEADERS, ids=lambda h: repr(h[:30]))
def test_hostile_json_headers_raise_only_frame_error(header: bytes) -> None:
    try:
        cmd = codec.decode(_frame(header))
    except FrameError:
        return
    for name in ("code", "version", "opaque", "flag"):  # (a number too big for Java is answered, not refused)
        assert type(getattr(cmd, name)) is int
    assert cmd.remark is None or isinstance(cmd.remark, str)
    assert cmd.ext_fields is None or all(isinstance(v, str) for v in cmd.ext_fields.values())


def test_code_1e999_is_a_frame_error_naming_the_problem() -> None:
    with pytest.raises(FrameError, match="infinity"):
        codec.decode(_frame(b'{"code":1e999}'))


def test_50000_deep_header_is_a_frame_error() -> None:
    with pytest.raises(FrameError, match="(?i)depth|deep|recursion"):
        codec.decode(_frame(b'{"code":1,"x":' + b"[" * 50_000 + b"]" * 50_000 + b"}"))


def test_header_over_the_limit_is_refused_before_parsing() -> None:
    with pytest.raises(FrameError, match="over the limit"):
        codec.decode(_frame(b" " * (codec.MAX_HEADER_LENGTH + 1)))


@FUZZ
@given(st.binary(max_size=300))
def test_random_frames_raise_only_frame_error(data: bytes) -> None:
    try:
        codec.decode(data)
    except FrameError:
        pass


@FUZZ
@given(st.binary(max_size=200), st.integers(0, 255), st.binary(max_size=20))
def test_random_headers_of_each_serialize_type(header: bytes, serialize_type: int, body: bytes) -> None:
    try:
        codec.decode(_frame(header, body, serialize_type & 3))
    except FrameError:
        pass


_json_scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
                 | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8))
_json_values = st.recursive(_json_scalars, lambda inner: st.lists(inner, max_size=4)
                            | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)
_header_keys = st.sampled_from(["code", "opaque", "flag", "version", "language", "remark", "extFields",
                                "serializeTypeCurrentRPC"])


def _dump(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()


@FUZZ
@given(st.dictionaries(_header_keys, _json_values | _json_scalars, max_size=8))
def test_json_header_documents_raise_only_frame_error(doc: dict) -> None:
    try:
        codec.decode(_frame(_dump(doc)))
    except FrameError:
        pass


@FUZZ
@given(st.dictionaries(_header_keys, _json_values | _json_scalars, max_size=8))
def test_json_header_fast_path_matches_the_general_code(doc: dict) -> None:
    header = _dump(doc)
    fast, general = _outcome(codec._decode_json_header, header), _outcome(_reference_json_header, header)
    if fast[0] == "error" or general[0] == "error":  # (which bad field is named first may differ)
        assert fast[0] == general[0] == "error"
    else:
        assert fast == general


def _mutations(data: bytes, positions: list[int], values: list[int]) -> bytes:
    out = bytearray(data)
    for pos, value in zip(positions, values):
        if out:
            out[pos % len(out)] = value
    return bytes(out)


_VALID = [codec.encode(RemotingCommand.request(code, ext_fields=ext, body=body, serialize_type=st_))[4:]
          for code, ext, body in [(105, {"topic": "T"}, None),
                                  (310, {"a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0",
                                         "g": "1700000000000", "h": "0", "i": "KEYS\x01k\x02"}, b"hello"),
                                  (34, None, b'{"clientID":"c","consumerDataSet":[],"producerDataSet":[]}')]
          for st_ in (0, 1)]


@FUZZ
@given(st.sampled_from(_VALID), st.lists(st.integers(0, 10_000), max_size=6), st.lists(st.integers(0, 255), max_size=6))
def test_mutated_valid_frames_raise_only_frame_error(frame: bytes, positions: list[int], values: list[int]) -> None:
    try:
        codec.decode(_mutations(frame, positions, values))
    except FrameError:
        pass


# ---------------------------------------------------------------- fastjson
@FUZZ
@given(st.text(alphabet=st.sampled_from(list("{}[]:,\"'\\xu0123456789abcdefeE.-+LtrunlfsN \t")), max_size=60))
def test_fastjson_loads_raises_only_its_decode_error(text: str) -> None:
    try:
        fastjson.loads(text)
    except fastjson.JSONDecodeError:
        pass


@pytest.mark.parametrize("text", ["[" * 50_000, "{a:" * 50_000, "{" * 50_000, "{{{{" * 300 + ":1",
                                  '"\\x"', '"\\xzz"', "1" * 5000, "[" * 250 + "]" * 250])
def test_fastjson_hostile_texts(text: str) -> None:
    with pytest.raises(fastjson.JSONDecodeError):
        fastjson.loads(text)


# ---------------------------------------------------------------- every header class
def _classes(package: Any, base: type | None = None) -> list[type]:
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        module = import_module(f"{package.__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and obj.__module__ == module.__name__ and (base is None or issubclass(obj, base)):
                found.append(obj)
    return found


HEADER_CLASSES = [c for c in _classes(headers_pkg, CommandHeader) if c is not CommandHeader]
_raw_values = st.sampled_from(["", " ", "0", "-1", " 7 ", "+5", "1_0", "2147483647", "2147483648", "-2147483649",
                               "9223372036854775807", "9223372036854775808", "-9223372036854775809", "9" * 30,
                               "9" * 5000, "1e999", "1.5", "NaN", "true", "TRUE", "x", "\u0661\u0662", "\x00"]) \
    | st.text(max_size=12)


def test_header_classes_are_all_found() -> None:
    names = {c.__name__ for c in HEADER_CLASSES}
    assert {"SendMessageRequestHeaderV2", "PullMessageRequestHeader", "RegisterBrokerRequestHeader",
            "CreateTopicRequestHeader"} <= names
    assert len(HEADER_CLASSES) > 40


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_every_header_class_raises_only_header_error(cls: type, data: st.DataObject) -> None:
    names = [name for name, _kind, _req in cls._fields]
    keys = st.sampled_from(names) if names else st.text(max_size=4)
    ext = data.draw(st.dictionaries(keys | st.text(max_size=4), _raw_values, max_size=len(names) + 2))
    try:
        hdr = cls.decode(ext)
    except HeaderError as exc:
        assert str(exc)
        return
    for name, kind, _req in cls._fields:
        value = getattr(hdr, name)
        if kind is int and value is not None and name in ext:
            low, high = cls._int_bounds[name]
            assert low <= value <= high


def test_header_error_names_the_field_and_the_java_type() -> None:
    from rmqpy.protocol.headers.broker import SendMessageRequestHeaderV2
    ext = {"a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}
    with pytest.raises(HeaderError, match=r"g='9223372036854775808' is outside the Java long range"):
        SendMessageRequestHeaderV2.decode({**ext, "g": str(2**63)})
    with pytest.raises(HeaderError, match=r"e='2147483648' is outside the Java int range"):
        SendMessageRequestHeaderV2.decode({**ext, "e": str(2**31)})
    with pytest.raises(HeaderError, match=r"the custom field <b> is null"):
        SendMessageRequestHeaderV2.decode({k: v for k, v in ext.items() if k != "b"})
    with pytest.raises(HeaderError, match=r"header field d='1e999' is not an integer"):
        SendMessageRequestHeaderV2.decode({**ext, "d": "1e999"})
    assert SendMessageRequestHeaderV2.decode({**ext, "g": str(2**63 - 1)}).g == 2**63 - 1


def test_long_fields_follow_the_java_declarations() -> None:
    from rmqpy.protocol.headers.broker import PullMessageRequestHeader
    bounds = PullMessageRequestHeader._int_bounds
    assert bounds["queueOffset"] == bounds["commitOffset"] == bounds["subVersion"] == LONG_RANGE
    assert bounds["queueId"] == bounds["maxMsgNums"] == bounds["sysFlag"] == INT_RANGE


def test_send_fast_decode_refuses_what_the_general_decode_refuses() -> None:
    from rmqpy.protocol.headers.broker import SEND_HEADER_V2
    ext = {"a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}
    assert SEND_HEADER_V2.decode_or_none(ext) is not None
    for key, value in [("g", str(2**63)), ("f", str(2**31)), ("j", str(-2**31 - 1)), ("d", "1e999"),
                       ("e", "0" * 25)]:
        assert SEND_HEADER_V2.decode_or_none({**ext, key: value}) is None  # the general decode then raises
        with pytest.raises(HeaderError, match=f"header field {key}="):
            SEND_HEADER_V2.decode({**ext, key: value})


# ---------------------------------------------------------------- every JSON body decoder
def _body_decoders() -> list[tuple[str, Any]]:
    found = []
    for cls in _classes(bodies_pkg):
        for name in ("from_json", "decode", "decode_text"):
            fn = inspect.getattr_static(cls, name, None)
            if isinstance(fn, classmethod):
                found.append((f"{cls.__name__}.{name}", getattr(cls, name)))
    return found


BODY_DECODERS = _body_decoders()


def test_body_decoders_are_all_found() -> None:
    names = {n for n, _ in BODY_DECODERS}
    assert {"HeartbeatData.decode", "RegisterBrokerBody.decode", "TopicRouteData.from_json",
            "SubscriptionGroupConfig.from_json", "CheckClientRequestBody.decode", "DataVersion.from_json",
            "TopicConfigSerializeWrapper.from_json"} <= names


def _call(name: str, fn: Any, arg: Any, compressed: bool = False) -> None:
    if name == "RegisterBrokerBody.decode":
        fn(arg, compressed, 0)
    else:
        fn(arg)


@pytest.mark.parametrize("name,fn", BODY_DECODERS, ids=[n for n, _ in BODY_DECODERS])
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(value=_json_values | _json_scalars)
def test_every_body_decoder_raises_only_body_error_on_any_json(name: str, fn: Any, value: Any) -> None:
    arg: Any = value
    if name.endswith(".decode"):
        arg = json.dumps(value, allow_nan=True).encode()
    elif name.endswith(".decode_text"):
        arg = str(value)
    try:
        _call(name, fn, arg)
    except BodyError:
        pass


@pytest.mark.parametrize("name,fn", [(n, f) for n, f in BODY_DECODERS if n.endswith(".decode")],
                         ids=[n for n, _ in BODY_DECODERS if n.endswith(".decode")])
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(raw=st.binary(max_size=200), compressed=st.booleans())
def test_every_body_decoder_raises_only_body_error_on_any_bytes(name: str, fn: Any, raw: bytes,
                                                               compressed: bool) -> None:
    for data in (raw, zlib.compress(raw)):
        try:
            _call(name, fn, data, compressed)
        except BodyError:
            pass


@pytest.mark.parametrize("body", [b"[" * 50_000, b'{"clientID":' + b"[" * 50_000, b"{" * 50_000,
                                  b'{"consumerDataSet":[{"subscriptionDataSet":[{"codeSet":[1e999]}]}]}',
                                  b'{"consumerDataSet":{"a":1}}', b'[]', b"[" * 250 + b"]" * 250])
def test_hostile_heartbeat_bodies(body: bytes) -> None:
    from rmqpy.protocol.bodies.heartbeat import HeartbeatData
    with pytest.raises(BodyError):
        HeartbeatData.decode(body)


def test_a_zlib_bomb_is_refused() -> None:
    from rmqpy.protocol.bodies import safe
    from rmqpy.protocol.bodies.topic import RegisterBrokerBody
    bomb = zlib.compress(bytes(4 << 20), 9)
    with pytest.raises(BodyError, match="inflates past"):
        safe.inflate(bomb, limit=1 << 20)
    with pytest.raises(BodyError):
        RegisterBrokerBody.decode(bomb, True, 0)  # within the limit, but not a body


# ---------------------------------------------------------------- lone surrogates (found by bench/fuzz_soak.py)
def test_a_lone_surrogate_escape_reads_as_java_writes_it() -> None:
    """A ``\\ud800`` escape made a str no UTF-8 encode accepts: one PUT_KV_CONFIG with it made
    every later persist of the name server's kvConfig.json fail. It reads as "?", as Java
    writes it (String.getBytes(UTF_8)); a valid pair stays what it is."""
    header = rb'{"code":100,"extFields":{"namespace":"n","key":"k","value":"v\ud800"},"remark":"r\udfff"}'
    cmd = codec.decode(_frame(header))
    assert cmd.ext_fields["value"] == "v?" and cmd.remark == "r?"
    body = fastjson.loads(rb'{"a\ud800":["x\ud800",{"k":"\ud83d\ude00"}]}')
    assert body == {"a?": ["x?", {"k": "\U0001F600"}]}
    json.dumps(body).encode()  # encodable


@pytest.mark.parametrize("serialize_type", [0, 1])
def test_encoding_a_lone_surrogate_writes_a_question_mark(serialize_type: int) -> None:
    frame = codec.encode(RemotingCommand(1, remark="a\ud800", ext_fields={"k": "v\udc00"}, serialize_type=serialize_type))
    cmd = codec.decode(frame[4:])
    assert (cmd.remark, cmd.ext_fields) == ("a?", {"k": "v?"})
