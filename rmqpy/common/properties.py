"""Java ``.properties`` files and RocketMQ-style config objects.

Both taps read RocketMQ's own keys (``brokerClusterName``, ``listenPort``, ...) from a
properties file, as ``MixAll.properties2Object`` does: each key that names an attribute
of the config object sets it, converted to the attribute's type. Unknown keys are
reported, not fatal; a malformed file is an error that names the line.
"""
from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any, Callable, Iterable


class PropertiesError(ValueError):
    """A properties file or value that cannot be used; the message names the place."""


_WS = " \t\f"          # what java.util.Properties skips around keys and separators
_EOL = "\r\n"
_NEWLINE = re.compile(r"\r\n|\r|\n")


def _logical_lines(text: str) -> list[str]:
    """The logical lines of ``text``, as ``Properties.LineReader.readLine`` returns them.

    A port of the JDK 17 state machine, so that edge cases (a continuation line that starts
    with ``#``, a blank line after a trailing backslash, ``\\r\\n``) split where Java splits.
    """
    if "\\" not in text:   # no continuation or escape: the same split, without a loop per character
        stripped = (line.lstrip(_WS) for line in _NEWLINE.split(text))
        return [line for line in stripped if line and line[0] not in "#!"]
    lines: list[str] = []
    buf: list[str] = []
    skip_ws, appended, backslash, skip_lf = True, False, False, False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        i += 1
        if skip_lf:
            skip_lf = False
            if c == "\n":
                continue
        if skip_ws:
            if c in _WS or (not appended and c in _EOL):
                continue
            skip_ws = appended = False
        if not buf and c in "#!":          # a comment: the rest of the natural line
            while i < n and text[i] not in _EOL:
                i += 1
            skip_ws = True
            continue
        if c not in _EOL:
            buf.append(c)
            backslash = (not backslash) if c == "\\" else False
            continue
        if not buf:
            skip_ws = True
            continue
        if i >= n:                            # EOL then EOF
            break
        if backslash:                         # the backslash joins the next line
            buf.pop()
            skip_ws = appended = True
            backslash = False
            skip_lf = c == "\r"
        else:
            lines.append("".join(buf))
            buf = []
            skip_ws = True
    if buf:
        if backslash:                         # a backslash at EOF is dropped
            buf.pop()
        lines.append("".join(buf))
    return lines


def _split_key(line: str) -> tuple[str, str]:
    """``Properties.load0``: the raw key and raw value of one logical line."""
    key_len, value_start, has_sep, backslash = 0, len(line), False, False
    while key_len < len(line):
        c = line[key_len]
        if c in "=:" and not backslash:
            value_start, has_sep = key_len + 1, True
            break
        if c in _WS and not backslash:
            value_start = key_len + 1
            break
        backslash = (not backslash) if c == "\\" else False
        key_len += 1
    while value_start < len(line):
        c = line[value_start]
        if c not in _WS:
            if not has_sep and c in "=:":
                has_sep = True
            else:
                break
        value_start += 1
    return line[:key_len], line[value_start:]


def _unescape(text: str) -> str:
    """``Properties.loadConvert``; ``\\uXXXX`` pairs that form a surrogate pair become one character."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        i += 1
        if ch != "\\":
            out.append(ch)
            continue
        if i >= n:                            # cannot happen after _logical_lines; be safe
            break
        ch = text[i]
        i += 1
        if ch == "u":
            digits = text[i:i + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append({"t": "\t", "r": "\r", "n": "\n", "f": "\f"}.get(ch, ch))
    joined = "".join(out)
    # Java strings are UTF-16: \ud83d\ude00 is one character; lone surrogates stay as they are
    return joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parse ``text`` exactly as ``java.util.Properties.load`` does.

    ``key=value``, ``key: value``, ``key value``; ``#``/``!`` comments; a line ending in an
    odd number of backslashes continues on the next; ``\\t \\n \\r \\f \\uXXXX`` escapes, any
    other escaped character stands for itself. A malformed ``\\u`` escape is an error (Java
    throws IllegalArgumentException). Later keys win, as in Java.
    """
    result: dict[str, str] = {}
    for number, line in enumerate(_logical_lines(text), 1):
        raw_key, raw_value = _split_key(line)
        try:
            result[_unescape(raw_key)] = _unescape(raw_value)
        except ValueError as exc:
            raise PropertiesError(f"{source}: logical line {number}: {exc} in {line[:80]!r}") from None
    return result


def _escape(text: str, is_key: bool, separators: bool = True) -> str:
    """``Properties.saveConvert(text, escapeSpace=is_key, escapeUnicode=true)``; ``separators=False``
    leaves ``= : # !`` of a value as they are (harmless after ``key=``, as Java prints them)."""
    out: list[str] = []
    for pos, ch in enumerate(text):
        code = ord(ch)
        if 61 < code < 127:
            out.append("\\\\" if ch == "\\" else ch)
        elif ch == " ":
            out.append("\\ " if pos == 0 or is_key else " ")
        elif ch in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[ch])
        elif ch in "=:#!":
            out.append("\\" + ch if separators else ch)
        elif code < 0x20 or code > 0x7E:
            # UTF-16 code units, as Java writes a supplementary character
            units = ch.encode("utf-16-be", "surrogatepass")
            for k in range(0, len(units), 2):
                out.append("\\u%04X" % int.from_bytes(units[k:k + 2], "big"))
        else:
            out.append(ch)
    return "".join(out)


def escape_key(key: str) -> str:
    return _escape(key, True)


def escape_value(value: str) -> str:
    return _escape(value, False)


def store_properties(items: Iterable[tuple[str, str]]) -> str:
    """``key=value`` lines escaped as ``java.util.Properties.store(OutputStream)`` escapes them.

    Pure ASCII, one line per key whatever the key or value holds, so neither a Java broker
    (which loads conf files as ISO-8859-1) nor we can read back a key that was not written.
    Java's own ``Configuration.persist`` does not escape; this is where we differ on purpose.
    """
    return "".join(f"{escape_key(k)}={escape_value(v)}\n" for k, v in items)


def load_properties(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise PropertiesError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise PropertiesError(f"config file {path} is not UTF-8 text: {exc.reason}") from None
    return parse_properties(text, path)


_INT = re.compile(r"[+-]?[0-9]+")
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


def java_trim(text: str) -> str:
    """``String.trim``: strips every character up to U+0020 (control characters too)."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _convert(hint: Any, raw: str, key: str) -> Any:
    """``raw`` as the attribute's type; PropertiesError names the key when it is not one."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    kind = args[0] if args else hint
    value = java_trim(raw)
    if kind is bool:
        if value.lower() not in ("true", "false"):
            raise PropertiesError(f"{key}={raw[:64]!r}: expected true or false")
        return value.lower() == "true"
    if kind is int:
        # ASCII digits only and within a Java long: int() would take "1_000" and "١٢"
        if not _INT.fullmatch(value) or not _LONG_MIN <= int(value) <= _LONG_MAX:
            raise PropertiesError(f"{key}={raw[:64]!r}: expected an integer")
        return int(value)
    if kind is float:
        try:
            return float(value)
        except ValueError:
            raise PropertiesError(f"{key}={raw[:64]!r}: expected a number") from None
    return value   # Java's properties2Object trims String values


def convert_properties(configs: Iterable[Any], props: dict[str, str]) -> tuple[list[tuple[Any, str, Any]], list[str]]:
    """Every (config object, key, typed value) that ``props`` sets, and the unknown keys.

    Raises PropertiesError before anything is set, so that a bad value refuses the whole
    update instead of leaving it half applied.
    """
    configs = list(configs)
    changes: list[tuple[Any, str, Any]] = []
    unknown: list[str] = []
    for key, raw in props.items():
        matched = False
        for cfg in configs:
            hints = typing.get_type_hints(type(cfg))
            if key in hints and key in {f.name for f in dataclasses.fields(cfg)}:
                changes.append((cfg, key, _convert(hints[key], raw, key)))
                matched = True
        if not matched and not key.startswith("tls."):
            unknown.append(key)
    return changes, unknown


def apply_properties(configs: Iterable[Any], props: dict[str, str],
                     warn: Callable[[str], None] | None = None) -> list[str]:
    """Set every key that one of the dataclass ``configs`` has; return the unknown keys.

    As in Java, one properties file feeds several config objects (BrokerConfig,
    MessageStoreConfig, NettyServerConfig...), so a key is unknown only if none has it.
    Nothing is set if one value has the wrong type.
    """
    changes, unknown = convert_properties(configs, props)
    for cfg, key, value in changes:
        setattr(cfg, key, value)
    if warn is not None:
        for key in unknown:
            warn(f"unknown config key {key!r} ignored")
    return unknown


def config_items(config: Any) -> list[tuple[str, Any]]:
    """(key, value) of a config dataclass in declaration order, for ``-p`` and GET_*_CONFIG."""
    return [(f.name, getattr(config, f.name)) for f in dataclasses.fields(config)]


def format_properties(items: Iterable[tuple[str, Any]]) -> str:
    """``key=value`` lines as Java's ``MixAll.properties2String`` writes them (``-p``, GET_*_CONFIG).

    Java does not escape; mqadmin reads the text with ``Properties.load``, so a value with a
    backslash, a control character, a leading blank or non-ASCII would come back different
    (or as another key). Those are escaped; ``= : # !`` stay as Java prints them.
    """
    lines = []
    for key, value in items:
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        lines.append(f"{escape_key(str(key))}={_escape(str(value), False, separators=False)}")
    return "\n".join(lines) + "\n"
