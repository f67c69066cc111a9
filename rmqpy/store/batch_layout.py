"""Where each message of a batch put goes: its record's properties and size, its offset in the batch,
its tags code and parsed properties (issue 29 item 1: the loop the batch put runs per message,
compiled in ``rmqpy._speedups`` where that is built; the pure function here is the reference)."""
from __future__ import annotations

from typing import Any

from rmqpy.protocol.message import (
    MAX_PROPERTIES_LENGTH,
    PROPERTY_TAGS,
    _py_string_to_properties,
    java_string_hash,
)
from rmqpy.speedups import native as _native

#: a refusal of :func:`batch_layout`: a message's properties (with the batch's) past 32767 bytes
PROPERTIES_TOO_LONG = 1
#: a refusal of :func:`batch_layout`: a message's body past maxMessageSize
BODY_TOO_LONG = 2

#: (flag, body, properties bytes, record size) per message, as CommitLog.append_batch takes them
Records = list[tuple[int, bytes, bytes, int]]
#: (offset in the batch, record size, tags code, properties) per message
Parsed = list[tuple[int, int, int, dict[str, str]]]


def _py_batch_layout(items: list[tuple[int, bytes, bytes, str]], batch_props_b: bytes,
                     batch_props: dict[str, str] | None, fixed: int, max_body: int
                     ) -> tuple[Records, Parsed, int] | int:
    """The records, their layout and the batch's size in bytes, or a refusal (PROPERTIES_TOO_LONG,
    BODY_TOO_LONG) at the first message that has one. ``items`` as ``decode_batch_items`` gives them;
    each message's properties: its own, then the batch's (``batch_props_b`` after a \\x02, as 4.9's
    broker stores them; ``batch_props`` parsed); a record is ``fixed`` bytes + body + properties."""
    records: Records = []
    parsed: Parsed = []
    total = 0
    after_sep = b"\x02" + batch_props_b
    for flag, body, pb, ps in items:
        if batch_props_b:
            pb = pb + after_sep if pb and pb[-1] != 2 else pb + batch_props_b
        if len(pb) > MAX_PROPERTIES_LENGTH:
            return PROPERTIES_TOO_LONG
        if len(body) > max_body:
            return BODY_TOO_LONG
        size = fixed + len(body) + len(pb)
        records.append((flag, body, pb, size))
        props = _py_string_to_properties(ps)
        if batch_props is not None:
            props.update(batch_props)
        tags = props.get(PROPERTY_TAGS)
        parsed.append((total, size, java_string_hash(tags) if tags else 0, props))
        total += size
    return records, parsed, total


def batch_layout(items: list[tuple[int, bytes, bytes, str]], batch_props_b: bytes,
                 batch_props: dict[str, str] | None, fixed: int, max_body: int) -> tuple[Records, Parsed, int] | int:
    """:func:`_py_batch_layout`, compiled where ``rmqpy._speedups`` is built (the pure function for
    inputs of other types than ``decode_batch_items`` gives, which the C function declines)."""
    if _native is not None:
        out: Any = _native.batch_layout(items, batch_props_b, batch_props, fixed, max_body)
        if out is not NotImplemented:
            return out
    return _py_batch_layout(items, batch_props_b, batch_props, fixed, max_body)
