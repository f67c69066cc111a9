"""JSON as Alibaba fastjson 1.2.x writes and reads it.

RocketMQ serialises bodies and config files with fastjson, which is not quite JSON:

* maps with non-String keys are written with the key *raw*: ``{0:"a"}`` for
  ``Map<Long,String>`` and ``{{"brokerName":"b","queueId":0,"topic":"T"}:5}`` for
  ``Map<MessageQueue,Long>``;
* bean properties and map entries are sorted by name, and ``null`` values are left out;
* ``PrettyFormat`` (config files) indents with tabs and writes ``"key":value``.

``loads`` accepts all of that (plus standard JSON and single-quoted strings), and
``dumps`` writes it, so that Java peers read what we write and we read what they write.
Object keys come back as :class:`ObjectKey`, a hashable read-only dict; integer keys come
back as ``int``.
"""
from __future__ import annotations

import base64
import json as _stdjson
import math
from typing import Any, Iterable

__all__ = ["ObjectKey", "JSONDecodeError", "loads", "dumps"]


class JSONDecodeError(ValueError):
    """Raised for text that neither JSON nor fastjson would accept; says where."""

    def __init__(self, message: str, text: str, pos: int) -> None:
        snippet = text[max(0, pos - 20): pos + 20]
        super().__init__(f"{message} at position {pos}: {snippet!r}")
        self.pos = pos


class ObjectKey(dict[Any, Any]):
    """A JSON object used as a map key (fastjson's MessageQueue keys); hashable, read-only."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset((k, _freeze(v)) for k, v in self.items()))

    def _readonly(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("ObjectKey is read-only")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = _readonly  # type: ignore[assignment]


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return frozenset((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


_WS = " \t\r\n"
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
            "'": "'"}
_NUMBER_CHARS = set("+-0123456789.eE")


#: Deepest nesting the fallback parser reads (it recurses in Python; Java beans nest a few levels).
MAX_DEPTH = 200


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    def fail(self, message: str) -> JSONDecodeError:
        return JSONDecodeError(message, self.text, self.pos)

    def skip_ws(self) -> None:
        text, pos, n = self.text, self.pos, len(self.text)
        while pos < n and text[pos] in _WS:
            pos += 1
        self.pos = pos

    def value(self) -> Any:
        self.skip_ws()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of input")
        ch = self.text[self.pos]
        if ch == "{" or ch == "[":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.fail(f"nested deeper than {MAX_DEPTH}")
            result: Any = self.obj() if ch == "{" else self.array()
            self.depth -= 1
            return result
        if ch == '"' or ch == "'":
            return self.string()
        if ch == "-" or ch.isdigit():
            return self.number()
        for word, result in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return result
        raise self.fail(f"unexpected character {ch!r}")

    def obj(self) -> dict[Any, Any]:
        self.pos += 1
        result: dict[Any, Any] = {}
        self.skip_ws()
        if self.peek() == "}":
            self.pos += 1
            return result
        while True:
            self.skip_ws()
            key = self.key()
            self.skip_ws()
            if self.peek() != ":":
                raise self.fail("expected ':' after object key")
            self.pos += 1
            result[key] = self.value()
            self.skip_ws()
            ch = self.peek()
            if ch == ",":
                self.pos += 1
                self.skip_ws()
                if self.peek() == "}":  # fastjson tolerates a trailing comma
                    self.pos += 1
                    return result
                continue
            if ch == "}":
                self.pos += 1
                return result
            raise self.fail("expected ',' or '}' in object")

    def key(self) -> Any:
        ch = self.peek()
        if ch == '"' or ch == "'":
            return self.string()
        if ch == "{":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise self.fail(f"nested deeper than {MAX_DEPTH}")
            result = ObjectKey(self.obj())
            self.depth -= 1
            return result
        if ch == "-" or ch.isdigit():
            return self.number()
        # fastjson also reads bare identifiers as keys (AllowUnQuotedFieldNames).
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] in "_$"):
            self.pos += 1
        if self.pos == start:
            raise self.fail("expected an object key")
        return self.text[start:self.pos]

    def array(self) -> list[Any]:
        self.pos += 1
        result: list[Any] = []
        self.skip_ws()
        if self.peek() == "]":
            self.pos += 1
            return result
        while True:
            result.append(self.value())
            self.skip_ws()
            ch = self.peek()
            if ch == ",":
                self.pos += 1
                self.skip_ws()
                if self.peek() == "]":
                    self.pos += 1
                    return result
                continue
            if ch == "]":
                self.pos += 1
                return result
            raise self.fail("expected ',' or ']' in array")

    def string(self) -> str:
        quote = self.text[self.pos]
        self.pos += 1
        text, n = self.text, len(self.text)
        parts: list[str] = []
        start = self.pos
        while True:
            end = start
            while end < n and text[end] != quote and text[end] != "\\":
                end += 1
            if end >= n:
                self.pos = end
                raise self.fail("unterminated string")
            parts.append(text[start:end])
            if text[end] == quote:
                self.pos = end + 1
                return "".join(parts)
            # backslash escape
            if end + 1 >= n:
                self.pos = end
                raise self.fail("unterminated escape")
            esc = text[end + 1]
            if esc == "u":
                hexdigits = text[end + 2:end + 6]
                if len(hexdigits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in hexdigits):
                    self.pos = end
                    raise self.fail("bad \\u escape")
                code = int(hexdigits, 16)
                start = end + 6
                low = text[start + 2:start + 6] if text.startswith("\\u", start) else ""
                if 0xD800 <= code < 0xDC00 and len(low) == 4 and all(c in "0123456789abcdefABCDEF" for c in low) \
                        and 0xDC00 <= int(low, 16) < 0xE000:  # a UTF-16 surrogate pair
                    code = 0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)
                    start += 6
                parts.append(chr(code))
            elif esc == "x":
                hexdigits = text[end + 2:end + 4]
                if len(hexdigits) != 2 or any(c not in "0123456789abcdefABCDEF" for c in hexdigits):
                    self.pos = end
                    raise self.fail("bad \\x escape")
                parts.append(chr(int(hexdigits, 16)))
                start = end + 4
            elif esc in _ESCAPES:
                parts.append(_ESCAPES[esc])
                start = end + 2
            else:
                self.pos = end
                raise self.fail(f"bad escape \\{esc}")

    def number(self) -> int | float:
        start = self.pos
        text, n = self.text, len(self.text)
        while self.pos < n and text[self.pos] in _NUMBER_CHARS:
            self.pos += 1
        raw = text[start:self.pos]
        # Java suffixes fastjson may write for typed numbers (WriteClassName): 1L, 1.0F, 1.0D
        if self.pos < n and text[self.pos] in "LSBFD":
            self.pos += 1
        try:
            if any(c in raw for c in ".eE"):
                return float(raw)
            return int(raw)
        except ValueError:
            self.pos = start
            raise self.fail(f"bad number {raw!r}") from None

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""


def loads(data: str | bytes | bytearray | memoryview) -> Any:
    """Parse JSON or fastjson text; raises :class:`JSONDecodeError` (a ValueError)."""
    if not isinstance(data, str):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONDecodeError(f"not UTF-8 ({exc.reason})", "", exc.start) from None
    if data.startswith("\ufeff"):
        data = data[1:]
    try:  # most text is standard JSON: let the C parser have it
        result = _stdjson.loads(data, parse_constant=_reject_constant)
    except ValueError:
        pass
    except RecursionError:  # the C parser counts its nesting against the interpreter's limit
        raise JSONDecodeError("nested too deep", data, 0) from None
    else:
        # the same limit as the fallback parser's; walked only when it could be exceeded
        if data.count("[") + data.count("{") > MAX_DEPTH and _depth_over(result, MAX_DEPTH):
            raise JSONDecodeError(f"nested deeper than {MAX_DEPTH}", data, 0)
        return _java_strings(result) if "\\ud" in data or "\\uD" in data else result
    parser = _Parser(data)
    try:
        result = parser.value()
    except RecursionError:  # MAX_DEPTH is far below it, unless called from deep in a stack
        raise parser.fail("nested too deep") from None
    except JSONDecodeError:
        raise
    except (ValueError, OverflowError) as exc:  # nothing but JSONDecodeError leaves loads
        raise parser.fail(str(exc)) from None
    parser.skip_ws()
    if parser.pos != len(data):
        raise parser.fail("extra data after the JSON value")
    return _java_strings(result) if "\\ud" in data or "\\uD" in data else result


def _java_strings(value: Any) -> Any:
    """``value`` with every lone surrogate (a ``\\ud800`` escape) in its strings replaced by
    ``?``, as Java writes such a string: otherwise it fails every later UTF-8 encode, the
    persist of a config file that holds it included. Iterative; keeps ObjectKey keys."""
    def fix(text: str) -> str:
        try:
            text.encode("utf-8")
            return text
        except UnicodeEncodeError:
            return text.encode("utf-8", "replace").decode("utf-8")

    def fixed_key(key: Any) -> Any:
        return fix(key) if isinstance(key, str) else key

    root = [value]
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            for i, item in enumerate(node):
                if isinstance(item, str):
                    node[i] = fix(item)
                elif isinstance(item, (list, dict)):
                    stack.append(item)
        elif isinstance(node, dict) and not isinstance(node, ObjectKey):
            items = list(node.items())
            node.clear()
            for key, item in items:
                if isinstance(item, str):
                    item = fix(item)
                elif isinstance(item, (list, dict)):
                    stack.append(item)
                node[fixed_key(key)] = item
    return root[0]


def _depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists/dicts deeper than ``limit`` (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


_encode_ascii = _stdjson.encoder.encode_basestring_ascii  # C implementations
_encode_utf = _stdjson.encoder.encode_basestring


def _escape(s: str, ascii_only: bool) -> str:
    """A JSON string literal; fastjson escapes the same characters as the stdlib encoder."""
    return _encode_ascii(s) if ascii_only else _encode_utf(s)


def _escape_slow(s: str, ascii_only: bool) -> str:
    """Reference implementation of :func:`_escape` (the tests compare the two)."""
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif ord(ch) < 0x20 or (ascii_only and ord(ch) > 0x7E):
            code = ord(ch)
            if code > 0xFFFF:
                code -= 0x10000
                out.append("\\u%04x\\u%04x" % (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)))
            else:
                out.append("\\u%04x" % code)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _key_sort(item: tuple[Any, Any]) -> tuple[int, Any]:
    key = item[0]
    if isinstance(key, bool):
        return (1, str(key))
    if isinstance(key, (int, float)):
        return (0, key)
    if isinstance(key, dict):
        return (2, dumps(key))
    return (1, str(key))


def dumps(obj: Any, *, pretty: bool = False, sort_keys: bool = True, quote_keys: bool = False,
          ascii_only: bool = False) -> str:
    """Write ``obj`` as fastjson does by default.

    ``quote_keys=True`` is BrowserCompatible/WriteNonStringKeyAsString: integer keys become
    strings (what 4.9.4+ clients ask for in routes). ``None`` values in maps are omitted.
    Objects with a ``to_json()`` method are written as what it returns.
    """
    out: list[str] = []
    _write(obj, out, pretty, sort_keys, quote_keys, ascii_only, 0)
    return "".join(out)


def dumps_nested(obj: Any, depth: int, *, pretty: bool = False, sort_keys: bool = True) -> str:
    """:func:`dumps` of ``obj`` as it appears ``depth`` levels deep in a larger document (its
    pretty-printed lines indented for that depth): a writer that caches the text of each member of
    a large map joins them into what :func:`dumps` of the whole map writes."""
    out: list[str] = []
    _write(obj, out, pretty, sort_keys, False, False, depth)
    return "".join(out)


class InsertionOrdered(dict[str, Any]):
    """A map that :func:`dumps` writes in insertion order even when it sorts keys."""


def _write(obj: Any, out: list[str], pretty: bool, sort_keys: bool, quote_keys: bool,
           ascii_only: bool, depth: int) -> None:
    if hasattr(obj, "to_json"):
        obj = obj.to_json()
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, int):
        out.append(str(int(obj)))
    elif isinstance(obj, float):
        if math.isnan(obj) or math.isinf(obj):
            out.append("null")
        else:
            out.append(repr(obj))
    elif isinstance(obj, str):
        out.append(_escape(obj, ascii_only))
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        out.append('"' + base64.b64encode(bytes(obj)).decode("ascii") + '"')
    elif isinstance(obj, dict):
        items: Iterable[tuple[Any, Any]] = [(k, v) for k, v in obj.items() if v is not None]
        if sort_keys and not isinstance(obj, InsertionOrdered):
            items = sorted(items, key=_key_sort)
        _write_container("{", "}", items, out, pretty, sort_keys, quote_keys, ascii_only, depth, True)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        values = list(obj)
        _write_container("[", "]", values, out, pretty, sort_keys, quote_keys, ascii_only, depth, False)
    else:
        raise TypeError(f"cannot write {type(obj).__name__} as JSON")


def _write_container(open_: str, close: str, items: Iterable[Any], out: list[str], pretty: bool,
                     sort_keys: bool, quote_keys: bool, ascii_only: bool, depth: int, is_map: bool) -> None:
    out.append(open_)
    first = True
    for item in items:
        if not first:
            out.append(",")
        first = False
        if pretty:
            out.append("\n" + "\t" * (depth + 1))
        if is_map:
            key, value = item
            if isinstance(key, str):
                out.append(_escape(key, ascii_only))
            elif isinstance(key, dict):
                _write(key, out, False, sort_keys, quote_keys, ascii_only, depth + 1)
            elif isinstance(key, bool) or not isinstance(key, (int, float)):
                out.append(_escape(str(key), ascii_only) if quote_keys else str(key).lower())
            else:
                out.append(_escape(str(key), ascii_only) if quote_keys else str(key))
            out.append(":")
            _write(value, out, pretty, sort_keys, quote_keys, ascii_only, depth + 1)
        else:
            _write(item, out, pretty, sort_keys, quote_keys, ascii_only, depth + 1)
    if pretty and not first:
        out.append("\n" + "\t" * depth)
    out.append(close)
