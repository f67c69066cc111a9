"""Typed custom headers (RemotingCommand.extFields), declared as dataclasses.

Java's ``CommandCustomHeader`` classes become dataclasses whose attribute names are the
extFields keys. Values travel as strings: integers in decimal, booleans as ``true``/
``false``, as ``RemotingCommand.makeCustomHeaderToNet`` writes them. A field declared with
:func:`required` must be present on decode (Java's ``@CFNotNull``); it is always sent.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, ClassVar, Mapping, TypeVar

from rmqpy.protocol.command import HeaderError

T = TypeVar("T", bound="CommandHeader")


def required(default: Any = None) -> Any:
    """A field Java marks ``@CFNotNull``: decode fails without it."""
    return dataclasses.field(default=default, metadata={"required": True})


def optional(default: Any = None) -> Any:
    return dataclasses.field(default=default)


def _base_type(hint: Any) -> type:
    """int | None -> int; plain types pass through."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args:
        return args[0]
    return hint


def _parse(kind: type, key: str, raw: str) -> Any:
    if kind is bool:
        return raw.strip().lower() == "true"
    if kind is int:
        try:
            return int(raw.strip())
        except ValueError:
            raise HeaderError(f"header field {key}={raw!r} is not an integer") from None
    if kind is float:
        try:
            return float(raw)
        except ValueError:
            raise HeaderError(f"header field {key}={raw!r} is not a number") from None
    return raw


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "name") and not isinstance(value, int):  # enums write their name
        return str(value.name)
    return str(int(value)) if isinstance(value, int) else str(value)


class CommandHeader:
    """Base of every header dataclass; subclasses must be decorated with ``@header``."""

    _fields: ClassVar[tuple[tuple[str, type, bool], ...]] = ()

    @classmethod
    def decode(cls: type[T], ext: Mapping[str, str]) -> T:
        values: dict[str, Any] = {}
        for name, kind, is_required in cls._fields:
            raw = ext.get(name)
            if raw is None:
                if is_required:
                    raise HeaderError(f"the custom field <{name}> is null")
                continue
            values[name] = _parse(kind, name, raw)
        return cls(**values)  # type: ignore[call-arg]

    def encode(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, _kind, _req in self._fields:
            value = getattr(self, name)
            if value is not None:
                out[name] = _format(value)
        return out


def header(cls: type[T]) -> type[T]:
    """Class decorator: make ``cls`` a dataclass header and precompute its field table."""
    cls = dataclasses.dataclass(cls)
    hints = typing.get_type_hints(cls)
    cls._fields = tuple(
        (f.name, _base_type(hints[f.name]), bool(f.metadata.get("required")))
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
    )
    return cls


@header
class EmptyHeader(CommandHeader):
    """Requests and responses without custom fields."""
