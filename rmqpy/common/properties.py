"""Java ``.properties`` files and RocketMQ-style config objects.

Both taps read RocketMQ's own keys (``brokerClusterName``, ``listenPort``, ...) from a
properties file, as ``MixAll.properties2Object`` does: each key that names an attribute
of the config object sets it, converted to the attribute's type. Unknown keys are
reported, not fatal; a malformed file is an error that names the line.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable, Iterable


class PropertiesError(ValueError):
    """A properties file or value that cannot be used; the message names the place."""


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parse the subset of the Java properties syntax RocketMQ files use.

    Supports ``key=value``, ``key: value``, ``key value``, ``#``/``!`` comments, line
    continuations with a trailing backslash and the usual escapes.
    """
    result: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        lineno = i + 1
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split(line)
        if not key:
            raise PropertiesError(f"{source}:{lineno}: no key in line {lines[lineno - 1]!r}")
        try:
            result[_unescape(key)] = _unescape(value)
        except ValueError as exc:
            raise PropertiesError(f"{source}:{lineno}: {exc}") from None
    return result


def _continues(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _split(line: str) -> tuple[str, str]:
    escaped = False
    for pos, ch in enumerate(line):
        if escaped:
            escaped = False
            continue
        if ch == "\\":
            escaped = True
            continue
        if ch in "=: \t":
            key = line[:pos]
            rest = line[pos:].lstrip(" \t")
            if rest[:1] in ("=", ":") and ch in " \t":
                rest = rest[1:].lstrip(" \t")
            elif ch in "=:":
                rest = line[pos + 1:].lstrip(" \t")
            return key, rest.rstrip()
    return line.rstrip(), ""


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1:i + 2]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4:
                raise ValueError(f"bad \\u escape in {text!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        i += 2
    return "".join(out)


def load_properties(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise PropertiesError(f"cannot read config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise PropertiesError(f"config file {path} is not UTF-8 text: {exc.reason}") from None
    return parse_properties(text, path)


def _convert(hint: Any, raw: str, key: str) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    kind = args[0] if args else hint
    value = raw.strip()
    if kind is bool:
        if value.lower() not in ("true", "false"):
            raise PropertiesError(f"{key}={raw!r}: expected true or false")
        return value.lower() == "true"
    if kind is int:
        try:
            return int(value)
        except ValueError:
            raise PropertiesError(f"{key}={raw!r}: expected an integer") from None
    if kind is float:
        try:
            return float(value)
        except ValueError:
            raise PropertiesError(f"{key}={raw!r}: expected a number") from None
    return raw


def apply_properties(configs: Iterable[Any], props: dict[str, str],
                     warn: Callable[[str], None] | None = None) -> list[str]:
    """Set every key that one of the dataclass ``configs`` has; return the unknown keys.

    As in Java, one properties file feeds several config objects (BrokerConfig,
    MessageStoreConfig, NettyServerConfig...), so a key is unknown only if none has it.
    """
    configs = list(configs)
    unknown = []
    for key, raw in props.items():
        matched = False
        for cfg in configs:
            hints = typing.get_type_hints(type(cfg))
            if key in hints and key in {f.name for f in dataclasses.fields(cfg)}:
                setattr(cfg, key, _convert(hints[key], raw, key))
                matched = True
        if not matched and not key.startswith("tls."):
            unknown.append(key)
            if warn is not None:
                warn(f"unknown config key {key!r} ignored")
    return unknown


def config_items(config: Any) -> list[tuple[str, Any]]:
    """(key, value) of a config dataclass in declaration order, for ``-p`` and GET_*_CONFIG."""
    return [(f.name, getattr(config, f.name)) for f in dataclasses.fields(config)]


def format_properties(items: Iterable[tuple[str, Any]]) -> str:
    """``key=value`` lines as Java's ``MixAll.properties2String`` writes them."""
    lines = []
    for key, value in items:
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"
