"""The remoting frame and RemotingCommand: schemas and codec.

Wire layout (all big-endian)::

    int32 length             = 4 + headerLength + bodyLength (excludes itself)
    int8  serializeType      JSON = 0, ROCKETMQ = 1
    int24 headerLength
    bytes header             JSON text or the ROCKETMQ binary header
    bytes body

The construct schemas below are the declarative statement of the format; the encode and
decode functions are a hand-written ``struct`` hot path that the unit tests check against
the schemas byte for byte.
"""
from __future__ import annotations

import json as _stdjson
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, TypeVar

from construct import Bytes, GreedyRange, Int8ub, Int16sb, Int16ub, Int24ub, Int32sb, Int32ub, PascalString, Prefixed, Struct, this

from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import LanguageCode, MQVersion, ResponseCode, SerializeType
from rmqpy.protocol.errors import BadRequestError as BadRequestError
from rmqpy.protocol.errors import BodyError as BodyError
from rmqpy.protocol.errors import FrameError as FrameError
from rmqpy.protocol.errors import HeaderError as HeaderError

if TYPE_CHECKING:  # headers.base imports this module
    from rmqpy.protocol.headers.base import CommandHeader

RPC_RESPONSE = 0x1
RPC_ONEWAY = 0x2
DEFAULT_MAX_FRAME = 16 * 1024 * 1024  # com.rocketmq.remoting.frameMaxLength
#: Largest header (JSON or ROCKETMQ) decoded. Java has no limit but the frame's; no client
#: header comes near it (message properties are at most 32 KiB, Short.MAX_VALUE in the store).
MAX_HEADER_LENGTH = 1024 * 1024
#: Deepest nesting of a JSON value inside extFields that is accepted (clients send flat strings).
MAX_EXT_VALUE_DEPTH = 16

# ---------------------------------------------------------------- schemas (source of truth)

#: One whole frame as it travels, length prefix included.
FrameSchema = Struct(
    "length" / Int32ub,
    "serialize_type" / Int8ub,
    "header_length" / Int24ub,
    "header" / Bytes(this.header_length),
    "body" / Bytes(this.length - 4 - this.header_length),
)

#: The ROCKETMQ binary header; a zero length stands for null (remark) or is skipped (ext).
ExtFieldSchema = Struct(
    "key" / PascalString(Int16ub, "utf8"),
    "value" / PascalString(Int32ub, "utf8"),
)
BinaryHeaderSchema = Struct(
    "code" / Int16sb,
    "language" / Int8ub,
    "version" / Int16sb,
    "opaque" / Int32sb,
    "flag" / Int32sb,
    "remark" / PascalString(Int32ub, "utf8"),
    "ext_fields" / Prefixed(Int32ub, GreedyRange(ExtFieldSchema)),
)


H = TypeVar("H", bound="CommandHeader")


@dataclass(eq=False)
class RemotingCommand:
    """A request or response of the RocketMQ remoting protocol."""

    code: int
    language: int = LanguageCode.JAVA
    version: int = MQVersion.CURRENT
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes | None = None
    serialize_type: int = SerializeType.JSON
    #: a body sent as these pieces in turn instead of ``body`` (a pull's records as read from the
    #: commit log): :func:`encode_parts` frames them without joining them first
    body_parts: list[bytes] | None = None
    #: in-process only, never encoded: a processor's answer as a typed value beside the header fields
    #: it was formatted into (POP_MESSAGE: its ``PopResult``), for a caller in the same process (the
    #: gRPC layer's local channel), which then need not parse the header texts again
    typed_result: Any = None
    #: in-process only, never encoded: a request's body as the typed value it decodes to (HEART_BEAT:
    #: its ``HeartbeatData``), from a caller in the process that keeps it (the gRPC layer's clients,
    #: which heartbeat with the same body every 10 s), so that the processor need not decode it again
    typed_body: Any = None

    # ------------------------------------------------------------------ constructors
    @classmethod
    def request(cls, code: int, header: Any = None, body: bytes | None = None, *,
                oneway: bool = False, serialize_type: int = SerializeType.JSON,
                ext_fields: Mapping[str, str] | None = None, version: int = MQVersion.CLIENT) -> RemotingCommand:
        """A request announcing ``version``: a client's by default (``MQVersion.CLIENT``); a server
        speaking for itself (broker registration) passes ``MQVersion.CURRENT``."""
        fields = dict(ext_fields or {})
        if header is not None:
            fields.update(header.encode())
        cmd = cls(code=int(code), version=version, ext_fields=fields or None, body=body,
                  serialize_type=serialize_type)
        if oneway:
            cmd.flag |= RPC_ONEWAY
        return cmd

    def response(self, code: int = ResponseCode.SUCCESS, remark: str | None = None, header: Any = None,
                 body: bytes | None = None, ext_fields: Mapping[str, str] | None = None) -> RemotingCommand:
        """The response to this request: same opaque and serialize type, RESPONSE flag set."""
        fields = dict(ext_fields or {})
        if header is not None:
            fields.update(header.encode())
        return RemotingCommand(code=int(code), opaque=self.opaque, flag=RPC_RESPONSE, remark=remark,
                               ext_fields=fields or None, body=body, serialize_type=self.serialize_type)

    # ------------------------------------------------------------------ accessors
    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def decode_header(self, header_cls: type[H]) -> H:
        """Typed view of extFields; raises :class:`HeaderError` naming a missing field."""
        return header_cls.decode(self.ext_fields or {})

    def ext(self, key: str, default: str | None = None) -> str | None:
        return (self.ext_fields or {}).get(key, default)

    def __repr__(self) -> str:
        from rmqpy.protocol.codes import RequestCode, code_name
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        name = code_name(self.code, ResponseCode if self.is_response else RequestCode)
        return (f"<RemotingCommand {kind} {name} opaque={self.opaque} ext={self.ext_fields} "
                f"remark={self.remark!r} body={len(self.body or b'')}B>")


# ---------------------------------------------------------------- hot-path codec

_FRAME_PREFIX = struct.Struct(">II")
_BIN_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")

_LANGUAGE_BY_NAME = {lang.name: int(lang) for lang in LanguageCode}


def encode_header(cmd: RemotingCommand) -> bytes:
    try:
        if cmd.serialize_type == SerializeType.ROCKETMQ:
            return _encode_binary_header(cmd)
        return _encode_json_header(cmd)
    except UnicodeEncodeError:
        return encode_header(_java_strings(cmd))


def encode(cmd: RemotingCommand) -> bytes:
    """The whole frame, length prefix included."""
    serialize_type = cmd.serialize_type
    try:
        header = _encode_binary_header(cmd) if serialize_type == 1 else _encode_json_header(cmd)
    except UnicodeEncodeError:  # a lone surrogate, e.g. a request's own text quoted in a remark
        header = encode_header(_java_strings(cmd))
    body = cmd.body if cmd.body_parts is None else b"".join(cmd.body_parts)
    n = len(header)
    if body:
        return _FRAME_PREFIX.pack(4 + n + len(body), (int(serialize_type) << 24) | n) + header + body
    return _FRAME_PREFIX.pack(4 + n, (int(serialize_type) << 24) | n) + header


def encode_parts(cmd: RemotingCommand) -> list[bytes]:
    """The whole frame as a list of pieces for ``transport.writeSequence``: length prefix and
    header, then ``cmd.body_parts`` (or ``cmd.body``) as they are. Twisted takes only bytes and
    joins what is queued once when it writes, so a pull's records are copied once on their way
    out instead of three times (the body join and the frame concatenation are skipped)."""
    parts = cmd.body_parts
    if parts is None:
        return [encode(cmd)]
    serialize_type = cmd.serialize_type
    try:
        header = _encode_binary_header(cmd) if serialize_type == 1 else _encode_json_header(cmd)
    except UnicodeEncodeError:
        header = encode_header(_java_strings(cmd))
    n = len(header)
    size = 0
    for p in parts:
        size += len(p)
    return [_FRAME_PREFIX.pack(4 + n + size, (int(serialize_type) << 24) | n) + header, *parts]


def decode(frame: bytes | memoryview) -> RemotingCommand:
    """Decode one frame *without* its 4-byte length prefix (as the framer hands it over)."""
    if type(frame) is not memoryview:
        frame = memoryview(frame)
    size = len(frame)
    if size < 4:
        raise FrameError(f"frame of {size} bytes is shorter than its header-length word")
    (word,) = _U32.unpack_from(frame, 0)
    serialize_type, header_len = word >> 24, word & 0xFFFFFF
    if header_len > size - 4:
        raise FrameError(f"header length {header_len} runs past the frame end ({size - 4} bytes)")
    if header_len > MAX_HEADER_LENGTH:
        raise FrameError(f"header length {header_len} is over the limit of {MAX_HEADER_LENGTH}")
    end = 4 + header_len
    try:
        if serialize_type == 0:  # SerializeType.JSON
            cmd = _decode_json_header(frame[4:end])
        elif serialize_type == 1:  # SerializeType.ROCKETMQ
            cmd = _decode_binary_header(frame[4:end])
        else:
            raise FrameError(f"unknown serialize type {serialize_type}")
    except FrameError:
        raise
    except (RecursionError, MemoryError) as exc:
        raise FrameError(f"header nested too deep or too large ({type(exc).__name__})") from None
    except Exception as exc:  # the last line of defence: the codec raises nothing but FrameError
        raise FrameError(f"undecodable header ({type(exc).__name__}: {exc})") from None
    cmd.body = bytes(frame[end:]) if end < size else None
    cmd.serialize_type = serialize_type
    return cmd


def _java_strings(cmd: RemotingCommand) -> RemotingCommand:
    """A copy whose remark and extFields encode as Java's ``String.getBytes(UTF_8)`` does:
    an unpaired surrogate becomes ``?``."""
    def fix(text: Any) -> Any:
        return text.encode("utf-8", "replace").decode("utf-8") if isinstance(text, str) else text

    return RemotingCommand(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, fix(cmd.remark),
                           None if cmd.ext_fields is None else {fix(k): fix(v) for k, v in cmd.ext_fields.items()},
                           cmd.body, cmd.serialize_type)


_LANGUAGE_NAMES = {int(lang): lang.name for lang in LanguageCode}
_escape = fastjson._escape


_encode_utf = fastjson._encode_utf  # what _escape(s, False) calls


_LANGUAGE_BYTES = {code: name.encode("ascii") for code, name in _LANGUAGE_NAMES.items()}
_JSON_HEADER = (b'{"code":%d%s,"flag":%d,"language":"%s","opaque":%d%s,'
                b'"serializeTypeCurrentRPC":"JSON","version":%d}')


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    """The header as fastjson writes RemotingCommand: keys sorted, nulls left out, the
    extFields in their own order (Java writes its HashMap's order and reads any)."""
    ext = cmd.ext_fields
    if ext is None:
        ext_part = b""
    else:
        ext_part = (',"extFields":{' + ",".join([f"{_encode_utf(k)}:{_encode_utf(str(v))}"
                                                 for k, v in ext.items() if v is not None]) + "}").encode("utf-8")
    remark = cmd.remark
    remark_part = b"" if remark is None else (',"remark":' + _encode_utf(remark)).encode("utf-8")
    language = cmd.language
    name = _LANGUAGE_BYTES.get(language)
    if name is None:
        name = _LANGUAGE_BYTES.get(int(language), b"OTHER")
    try:  # ints and IntEnums as they are; anything else through int(), as always
        return _JSON_HEADER % (cmd.code, ext_part, cmd.flag, name, cmd.opaque, remark_part, cmd.version)
    except TypeError:
        return _JSON_HEADER % (int(cmd.code), ext_part, int(cmd.flag), name, int(cmd.opaque), remark_part,
                               int(cmd.version))


_OrderedFields = fastjson.InsertionOrdered


#: ``fastjson.loads`` first tries the stdlib C parser with these options; one decoder built
#: once instead of one per ``json.loads(..., parse_constant=...)`` call.
_json_decoder = _stdjson.JSONDecoder(parse_constant=fastjson._reject_constant)
_json_decode = _json_decoder.decode
#: its C scanner: ``_json_decode`` without the two whitespace regex matches, for a text that
#: starts with ``{`` and ends where the object does (what every client sends)
_json_scan = _json_decoder.scan_once  # type: ignore[attr-defined]  # set by __init__, not in the stubs


def _parse_json_header(header: memoryview) -> tuple[Any, bool]:
    """``fastjson.loads(bytes(header))``, with the common case (UTF-8, no BOM, standard JSON)
    handled here the way fastjson.loads handles it, without its per-call setup; and whether
    that common case (the stdlib parser: str keys, plain dicts) made the result."""
    try:
        text = str(header, "utf-8")
    except UnicodeDecodeError:
        text = ""
    if text and text[0] != "\ufeff":
        try:
            if text[0] == "{":
                doc, end = _json_scan(text, 0)
                if end == len(text):
                    return doc, True
            return _json_decode(text), True
        except (ValueError, StopIteration, RecursionError):
            pass
    return fastjson.loads(bytes(header)), False  # everything else, errors included, exactly as before


def _str_values(ext: dict[str, Any]) -> bool:
    """Whether every value is a str that Java could write out (no lone surrogate, which a
    JSON ``\\ud800`` escape makes: it would fail every later UTF-8 encode, a persist too)."""
    try:
        text = "".join(ext.values())  # TypeError unless every value is a str
    except TypeError:
        return False
    return text.isascii() or not _has_surrogate(text)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _java_text(text: str) -> str:
    """``text`` as Java's ``getBytes(UTF_8)`` writes it: a lone surrogate becomes ``?``."""
    if text.isascii() or not _has_surrogate(text):
        return text
    return text.encode("utf-8", "replace").decode("utf-8")


_JAVA = int(LanguageCode.JAVA)
_OTHER = int(LanguageCode.OTHER)


def _decode_json_header(header: memoryview) -> RemotingCommand:
    """A JSON header: what a Java client sends (UTF-8, one object and nothing around it,
    language JAVA, extFields of strings) read at once; every other parsed object by
    :func:`_command_from_doc`, and what the C scanner cannot take (other whitespace, BOM,
    fastjson syntax, errors) by :func:`_decode_json_header_general`: the same commands
    and errors as the general code alone gives."""
    try:
        text = str(header, "utf-8")
    except UnicodeDecodeError:
        return _decode_json_header_general(header)
    if text and text[0] == "{":
        try:
            doc, end = _json_scan(text, 0)
        except (ValueError, StopIteration, RecursionError):
            return _decode_json_header_general(header)
        if end == len(text):  # what _parse_json_header returns as (doc, True)
            get = doc.get
            ext = get("extFields")
            if get("language", "JAVA") == "JAVA" and (ext is None or type(ext) is dict and _str_values(ext)):
                remark = get("remark")
                try:
                    if remark is None or type(remark) is str and remark.isascii():  # else: "?" for surrogates
                        return RemotingCommand(int(doc["code"]), _JAVA, int(get("version") or 0),
                                               int(get("opaque") or 0), int(get("flag") or 0), remark, ext)
                except (TypeError, ValueError, KeyError, OverflowError):
                    pass  # _command_from_doc raises the FrameError
            return _command_from_doc(doc, True)
    return _decode_json_header_general(header)


def _decode_json_header_general(header: memoryview) -> RemotingCommand:
    try:
        doc, standard = _parse_json_header(header)
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"invalid JSON header: {exc}") from None
    return _command_from_doc(doc, standard)


def _command_from_doc(doc: Any, standard: bool) -> RemotingCommand:
    """The command of a parsed JSON header; ``standard``: the stdlib parser made ``doc``."""
    if not isinstance(doc, dict) or "code" not in doc:
        raise FrameError("JSON header is not an object with a code")
    get = doc.get
    language = get("language", "JAVA")
    if language == "JAVA":
        language = _JAVA
    elif isinstance(language, str):
        language = _LANGUAGE_BY_NAME.get(language, _OTHER)
    ext = get("extFields")
    if ext is not None and not isinstance(ext, dict):
        raise FrameError("extFields is not an object")
    remark = get("remark")
    if remark is not None:
        if not isinstance(remark, str):
            raise FrameError(f"remark is a {type(remark).__name__}, not a string")
        remark = _java_text(remark)
    try:
        # a plain dict of str -> str from the stdlib parser (what clients send: its keys are
        # always exact str, and so are its string values) is already what _ext_str makes
        if ext is not None and not (standard and _str_values(ext)):
            # (keys are left as they are: a key is only looked up, never stored or echoed)
            ext = {str(k): _ext_str(v) for k, v in ext.items()}
        return RemotingCommand(int(doc["code"]), int(language), int(get("version") or 0),
                               int(get("opaque") or 0), int(get("flag") or 0), remark, ext)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:  # 1e999: OverflowError
        raise FrameError(f"bad field in JSON header: {exc}") from None


def _check_depth(value: Any, depth: int) -> None:
    """Refuse extFields values nested deeper than MAX_EXT_VALUE_DEPTH (they are written
    back out as JSON text, recursively)."""
    if depth > MAX_EXT_VALUE_DEPTH:
        raise FrameError(f"an extFields value is nested deeper than {MAX_EXT_VALUE_DEPTH}")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_depth(k, depth + 1)
            _check_depth(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_depth(v, depth + 1)


def _ext_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _java_text(value)
    if isinstance(value, (dict, list)):
        _check_depth(value, 1)
        return fastjson.dumps(value)
    return str(value)


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    parts = [_BIN_FIXED.pack(int(cmd.code), int(cmd.language), int(cmd.version), int(cmd.opaque), int(cmd.flag))]
    remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    parts.append(_I32.pack(len(remark)))
    parts.append(remark)
    ext = bytearray()
    for key, value in (cmd.ext_fields or {}).items():
        if key is None or value is None:
            continue
        k = key.encode("utf-8")
        v = str(value).encode("utf-8")
        ext += _U16.pack(len(k)) + k + _I32.pack(len(v)) + v
    parts.append(_I32.pack(len(ext)))
    parts.append(bytes(ext))
    return b"".join(parts)


def _decode_binary_header(header: memoryview) -> RemotingCommand:
    try:
        code, language, version, opaque, flag = _BIN_FIXED.unpack_from(header, 0)
        pos = _BIN_FIXED.size
        (remark_len,) = _I32.unpack_from(header, pos)
        pos += 4
        if remark_len < 0 or pos + remark_len > len(header):
            raise FrameError(f"remark length {remark_len} runs past the header")
        remark = bytes(header[pos:pos + remark_len]).decode("utf-8") if remark_len else None
        pos += remark_len
        (ext_len,) = _I32.unpack_from(header, pos)
        pos += 4
        if ext_len < 0 or pos + ext_len > len(header):
            raise FrameError(f"extFields length {ext_len} runs past the header")
        end = pos + ext_len
        ext: dict[str, str] | None = {} if ext_len else None
        while pos < end:
            (klen,) = _U16.unpack_from(header, pos)
            pos += 2
            key = bytes(header[pos:pos + klen]).decode("utf-8")
            pos += klen
            (vlen,) = _I32.unpack_from(header, pos)
            pos += 4
            if vlen < 0 or pos + vlen > end:
                raise FrameError(f"extFields value of {key!r} runs past the header")
            value = bytes(header[pos:pos + vlen]).decode("utf-8")
            pos += vlen
            if klen and vlen:  # Java reads an empty key or value as null
                ext[key] = value  # type: ignore[index]
        if pos != end:
            raise FrameError("extFields entries overrun their declared length")
    except struct.error as exc:
        raise FrameError(f"truncated ROCKETMQ header: {exc}") from None
    except UnicodeDecodeError as exc:
        raise FrameError(f"ROCKETMQ header text is not UTF-8: {exc.reason}") from None
    return RemotingCommand(code=code, language=language & 0xFF, version=version, opaque=opaque, flag=flag,
                           remark=remark, ext_fields=ext)
