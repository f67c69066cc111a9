"""Frame and header codec: the struct hot path agrees with the construct schemas."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqpy.protocol import command as codec
from rmqpy.protocol.codes import LanguageCode, RequestCode, SerializeType
from rmqpy.protocol.command import BinaryHeaderSchema, FrameError, FrameSchema, RemotingCommand

text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)
commands = st.builds(
    RemotingCommand,
    code=st.integers(-32768, 32767),
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(0, 32767),
    opaque=st.integers(-2**31, 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.none() | text,
    ext_fields=st.none() | st.dictionaries(text, text, min_size=1, max_size=5),
    body=st.none() | st.binary(min_size=1, max_size=64),
    serialize_type=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
)


def _same(a: RemotingCommand, b: RemotingCommand) -> None:
    assert (a.code, int(a.language), a.version, a.opaque, a.flag, a.remark, a.ext_fields, a.body,
            a.serialize_type) == (b.code, int(b.language), b.version, b.opaque, b.flag, b.remark,
                                  b.ext_fields, b.body, b.serialize_type)


@given(commands)
@settings(max_examples=300, deadline=None)
def test_round_trip_both_serialize_types(cmd: RemotingCommand) -> None:
    frame = codec.encode(cmd)
    decoded = codec.decode(frame[4:])
    _same(decoded, cmd)
    # the bytes re-encode identically (decode then encode is the identity on our output)
    assert codec.encode(decoded) == frame


@given(commands)
@settings(max_examples=200, deadline=None)
def test_hot_path_matches_construct_schema(cmd: RemotingCommand) -> None:
    frame = codec.encode(cmd)
    parsed = FrameSchema.parse(frame)
    assert parsed.length == len(frame) - 4
    assert parsed.serialize_type == cmd.serialize_type
    assert parsed.body == (cmd.body or b"")
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        hdr = BinaryHeaderSchema.parse(parsed.header)
        assert (hdr.code, hdr.language, hdr.version, hdr.opaque, hdr.flag) == (
            cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag)
        assert (hdr.remark or None) == cmd.remark
        assert {e.key: e.value for e in hdr.ext_fields} == (cmd.ext_fields or {})
        rebuilt = BinaryHeaderSchema.build(dict(
            code=cmd.code, language=cmd.language, version=cmd.version, opaque=cmd.opaque, flag=cmd.flag,
            remark=cmd.remark or "", ext_fields=[dict(key=k, value=v) for k, v in (cmd.ext_fields or {}).items()]))
        assert rebuilt == parsed.header


def test_json_header_is_what_fastjson_writes() -> None:
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "T"})
    cmd.opaque, cmd.version = 7, 479
    header = codec.encode(cmd)[8:]
    assert header == (b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":7,'
                      b'"serializeTypeCurrentRPC":"JSON","version":479}')


def test_java_json_header_with_numbers_in_ext_fields_is_read_as_strings() -> None:
    header = b'{"code":34,"extFields":{"n":1,"b":true},"flag":0,"language":"GO","opaque":1,"version":317}'
    frame = (len(header) + 4).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header
    cmd = codec.decode(frame[4:])
    assert cmd.ext_fields == {"n": "1", "b": "true"}
    assert cmd.language == LanguageCode.GO


@pytest.mark.parametrize("frame, why", [
    (b"\x00\x00", "shorter"),
    (b"\x00\x00\x00\xff", "runs past"),
    (b"\x07\x00\x00\x00", "unknown serialize type"),
    (b"\x00\x00\x00\x03{x}", "invalid JSON"),
    (b"\x00\x00\x00\x02[]", "not an object"),
    (b"\x01\x00\x00\x03abc", "truncated"),
])
def test_bad_frames_raise_frame_error(frame: bytes, why: str) -> None:
    with pytest.raises(FrameError, match=why):
        codec.decode(frame)


@given(st.binary(max_size=200))
@settings(max_examples=2000, deadline=None)
def test_fuzz_decoder_raises_only_frame_error(data: bytes) -> None:
    try:
        codec.decode(data)
    except FrameError:
        pass


@given(st.integers(0, 1), st.binary(min_size=0, max_size=120))
@settings(max_examples=2000, deadline=None)
def test_fuzz_header_bodies_of_both_types(kind: int, header: bytes) -> None:
    frame = ((kind << 24) | len(header)).to_bytes(4, "big") + header
    try:
        codec.decode(frame)
    except FrameError:
        pass
