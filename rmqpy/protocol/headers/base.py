"""Typed custom headers (RemotingCommand.extFields), declared as dataclasses.

Java's ``CommandCustomHeader`` classes become dataclasses whose attribute names are the
extFields keys. Values travel as strings: integers in decimal, booleans as ``true``/
``false``, as ``RemotingCommand.makeCustomHeaderToNet`` writes them. A field declared with
:func:`required` must be present on decode (Java's ``@CFNotNull``); it is always sent.

Decoding checks what Java's ``decodeCommandCustomHeader`` checks and more: an ``int`` field
must hold a Java int (32 bits), a :data:`Long` field a Java long, and anything wrong raises
:class:`HeaderError` naming the field, never another exception, so that a bad value is
refused before a processor (or the store) sees it.
"""
from __future__ import annotations

import dataclasses
import enum
import typing
from operator import itemgetter
from typing import Annotated, Any, Callable, ClassVar, Generic, Mapping, TypeVar

from rmqpy.protocol.errors import HeaderError

T = TypeVar("T", bound="CommandHeader")
S = TypeVar("S", bound="CommandHeader")

#: A field Java declares ``long``/``Long``; a plain ``int`` field is a Java ``int``/``Integer``.
Long = Annotated[int, "java.lang.Long"]

INT_RANGE = (-0x80000000, 0x7FFFFFFF)
LONG_RANGE = (-0x8000000000000000, 0x7FFFFFFFFFFFFFFF)
_MAX_INT_TEXT = 24  # longer than any long in decimal, even with a sign and padding


def required(default: Any = None) -> Any:
    """A field Java marks ``@CFNotNull``: decode fails without it."""
    return dataclasses.field(default=default, metadata={"required": True})


def optional(default: Any = None) -> Any:
    return dataclasses.field(default=default)


def _strip_optional(hint: Any) -> Any:
    """int | None -> int, Long | None -> Long; plain types pass through."""
    if typing.get_origin(hint) is Annotated:
        return hint
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args:
        return args[0]
    return hint


def _base_type(hint: Any) -> type:
    """int | None -> int; Long -> int; plain types pass through."""
    hint = _strip_optional(hint)
    if typing.get_origin(hint) is Annotated:
        return typing.cast(type, typing.get_args(hint)[0])
    return typing.cast(type, hint)


def _int_range(hint: Any) -> tuple[int, int]:
    hint = _strip_optional(hint)
    if typing.get_origin(hint) is Annotated and "java.lang.Long" in typing.get_args(hint)[1:]:
        return LONG_RANGE
    return INT_RANGE


def _parse(kind: type, key: str, raw: Any, bounds: tuple[int, int] = LONG_RANGE) -> Any:
    if not isinstance(raw, str):
        raise HeaderError(f"header field {key} is a {type(raw).__name__}, not a string")
    if kind is bool:
        return raw.strip().lower() == "true"
    if kind is int:
        if len(raw) > _MAX_INT_TEXT:
            raise HeaderError(f"header field {key}={raw[:_MAX_INT_TEXT]!r}... is not a Java "
                              f"{'int' if bounds == INT_RANGE else 'long'}")
        try:
            if not _java_int_text(raw):
                raise ValueError(raw)
            value = int(raw)
        except ValueError:
            raise HeaderError(f"header field {key}={raw!r} is not an integer") from None
        low, high = bounds
        if not low <= value <= high:
            raise HeaderError(f"header field {key}={raw!r} is outside the Java "
                              f"{'int' if bounds == INT_RANGE else 'long'} range")
        return value
    if kind is float:
        try:
            return float(raw)
        except ValueError:
            raise HeaderError(f"header field {key}={raw!r} is not a number") from None
    return raw


def _java_int_text(raw: str) -> bool:
    """Whether Java's ``Integer.parseInt``/``Long.parseLong`` could read ``raw`` as far as Python's
    ``int`` is more lenient: no whitespace around it and no ``_`` between digits (Java refuses both,
    with a NumberFormatException; found by tests/interop/remoting_diff.py)."""
    return "_" not in raw and raw.strip() == raw


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum) and not isinstance(value, int):  # enums write their name
        return str(value.name)
    return str(int(value)) if isinstance(value, int) else str(value)


class CommandHeader:
    """Base of every header dataclass; subclasses must be decorated with ``@header``."""

    _fields: ClassVar[tuple[tuple[str, type, bool], ...]] = ()
    #: the integer range of each int field (Java int or long), by name
    _int_bounds: ClassVar[dict[str, tuple[int, int]]] = {}

    @classmethod
    def decode(cls: type[T], ext: Mapping[str, str]) -> T:
        """The header in ``ext``; :class:`HeaderError` naming the field if one is missing or bad."""
        values: dict[str, Any] = {}
        bounds = cls._int_bounds
        for name, kind, is_required in cls._fields:
            raw = ext.get(name)
            if raw is None:
                if is_required:
                    raise HeaderError(f"the custom field <{name}> is null")
                continue
            values[name] = _parse(kind, name, raw, bounds.get(name, LONG_RANGE))
        try:
            return cls(**values)
        except HeaderError:
            raise
        except (TypeError, ValueError, OverflowError) as exc:  # a __post_init__ check of the class
            raise HeaderError(f"{cls.__name__}: {exc}") from None

    def encode(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, _kind, _req in self._fields:
            value = getattr(self, name)
            if value is not None:
                out[name] = _format(value)
        return out


@typing.dataclass_transform(field_specifiers=(dataclasses.field,))
def header(cls: type[T]) -> type[T]:
    """Class decorator: make ``cls`` a dataclass header and precompute its field table."""
    cls = dataclasses.dataclass(cls)
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    cls._fields = tuple((f.name, _base_type(hints[f.name]), bool(f.metadata.get("required"))) for f in fields)
    cls._int_bounds = {f.name: _int_range(hints[f.name]) for f in fields if _base_type(hints[f.name]) is int}
    return cls


@header
class EmptyHeader(CommandHeader):
    """Requests and responses without custom fields."""


# ------------------------------------------------------------------ precompiled decode
_INT_LOW, _INT_HIGH = INT_RANGE
_LONG_LOW, _LONG_HIGH = LONG_RANGE
_TEXT, _INT, _BOOL = 0, 1, 2  # what the precompiled decode does with an optional field


class HeaderSchema(Generic[S, T]):
    """``source.decode(ext)``, renamed into a ``target`` header, precompiled for a per-message path.

    ``CommandHeader.decode`` walks the field table and builds keyword arguments for every
    request; a send pays that per message. This walks tables built once from the two
    declarations instead (no generated code): every key read at once in ``target``'s field
    order, the required ones checked present and text in one step, the integers by Java
    range, and ``target`` built from positional arguments. Whatever it would not simply
    accept (a missing or bad field, a check of ``target`` itself) is decoded again by
    ``source.decode``, so a refusal is that :class:`HeaderError`, text included.

    ``rename`` maps a ``source`` field to the ``target`` field it fills (the others keep their
    name); every ``target`` field must be filled by exactly one ``source`` field.
    """

    def __init__(self, source: type[S], target: type[T], rename: Mapping[str, str] | None = None) -> None:
        names = dict(rename or {})
        self.source, self.target = source, target
        #: (source field, target field) of each declared field
        self._rename = tuple((name, names.get(name, name)) for name, _k, _r in source._fields)
        attrs = [f.name for f in dataclasses.fields(target)]  # type: ignore[arg-type]
        by_attr = {attr: name for name, attr in self._rename}
        if sorted(by_attr) != sorted(attrs) or len(by_attr) != len(self._rename):
            raise TypeError(f"{source.__name__} -> {target.__name__}: the fields do not map one to one")
        declared = {name: (kind, req) for name, kind, req in source._fields}
        defaults = {f.name: f.default for f in dataclasses.fields(target)}  # type: ignore[arg-type]
        #: the extFields key of each positional argument of ``target``
        self._keys = tuple(by_attr[attr] for attr in attrs)
        required: list[int] = []
        ints: list[int] = []  # required, Java int
        longs: list[int] = []  # required, Java long
        optional: list[tuple[int, int, int, int]] = []  # slot, _TEXT/_INT/_BOOL, bounds
        for slot, (attr, key) in enumerate(zip(attrs, self._keys)):
            kind, req = declared[key]
            if kind not in (str, int, bool):
                raise TypeError(f"{source.__name__}.{key}: no precompiled decode for {kind.__name__}")
            bounds = source._int_bounds.get(key, LONG_RANGE)
            if req:
                required.append(slot)
                if kind is int:
                    (ints if bounds == INT_RANGE else longs).append(slot)
                elif kind is bool:
                    optional.append((slot, _BOOL, *bounds))  # present (checked above): converted there
            elif defaults[attr] is not None:  # absent, it would be the default: not what a None slot gives
                raise TypeError(f"{target.__name__}.{attr}: optional with a default other than None")
            else:
                optional.append((slot, _TEXT if kind is str else _INT if kind is int else _BOOL, *bounds))
        #: the required arguments, as a tuple (itemgetter returns a lone item as it is)
        self._required: Callable[[list[Any]], Any] = (
            itemgetter(*required) if len(required) > 1 else lambda args: tuple(args[i] for i in required))
        self._ints, self._longs, self._optional = tuple(ints), tuple(longs), tuple(optional)

    def decode(self, ext: Mapping[str, str]) -> T:
        """The ``target`` header in ``ext``; :class:`HeaderError` as ``source.decode`` raises it."""
        header = self.decode_or_none(ext)
        if header is None:
            return self._declared(ext)
        return header

    def _declared(self, ext: Mapping[str, str]) -> T:
        """The declared decode (and its refusal), renamed."""
        header = self.source.decode(ext)
        if self.target is self.source:
            return typing.cast(T, header)
        return self.target(**{attr: getattr(header, name) for name, attr in self._rename})

    def decode_or_none(self, ext: Mapping[str, str]) -> T | None:
        """The header, or None where ``source.decode`` would not simply accept ``ext``."""
        args: list[Any] = list(map(ext.get, self._keys))
        try:
            "".join(self._required(args))  # TypeError: a required field absent or not text
            for slot in self._ints:
                raw = args[slot]
                if len(raw) > _MAX_INT_TEXT or not _java_int_text(raw):
                    return None
                value = int(raw)  # ValueError
                if not _INT_LOW <= value <= _INT_HIGH:
                    return None
                args[slot] = value
            for slot in self._longs:
                raw = args[slot]
                if len(raw) > _MAX_INT_TEXT or not _java_int_text(raw):
                    return None
                value = int(raw)
                if not _LONG_LOW <= value <= _LONG_HIGH:
                    return None
                args[slot] = value
            for slot, kind, low, high in self._optional:
                raw = args[slot]
                if raw is None:
                    continue
                if type(raw) is not str:
                    return None
                if kind == _INT:
                    if len(raw) > _MAX_INT_TEXT or not _java_int_text(raw):
                        return None
                    value = int(raw)
                    if not low <= value <= high:
                        return None
                    args[slot] = value
                elif kind == _BOOL:
                    args[slot] = raw.strip().lower() == "true"
            return self.target(*args)
        except (TypeError, ValueError, OverflowError):  # the last: a check of ``target``
            return None
