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
from typing import Annotated, Any, ClassVar, Mapping, TypeVar

from rmqpy.protocol.errors import HeaderError

T = TypeVar("T", bound="CommandHeader")

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
            value = int(raw.strip())
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
