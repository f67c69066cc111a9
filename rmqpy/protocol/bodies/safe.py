"""One exception for every bad request body.

A body decoder reads what a remote peer sent: JSON of the wrong shape raises TypeError,
AttributeError, KeyError... deep inside ``from_json``. :func:`body_decoder` turns all of
them into :class:`~rmqpy.protocol.command.BodyError`, which the dispatcher answers with an
error response and one (rate-limited) warning line instead of a traceback.
"""
from __future__ import annotations

import functools
import struct
import zlib
from typing import Any, Callable, TypeVar

from rmqpy.protocol.command import BodyError

F = TypeVar("F", bound=Callable[..., Any])

#: What a decoder of untrusted input may raise on its own, besides BodyError.
DECODE_ERRORS = (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError, OverflowError,
                 UnicodeError, zlib.error, struct.error)

#: Largest decompressed RegisterBrokerBody (Java has none; 1 MiB holds ~5,000 topics, so
#: this is far above any real broker, far below what a 16 MiB zlib bomb inflates to).
MAX_INFLATED_BODY = 256 * 1024 * 1024


def body_decoder(fn: F) -> F:
    """Wrap a ``from_json``/``decode`` classmethod function: only BodyError leaves it."""

    @functools.wraps(fn)
    def decode(cls: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(cls, *args, **kwargs)
        except BodyError:
            raise
        except DECODE_ERRORS as exc:
            text = str(exc)
            raise BodyError(f"bad {cls.__name__} body: {type(exc).__name__}: "
                            f"{text[:200]}{'...' if len(text) > 200 else ''}") from None

    return decode  # type: ignore[return-value]


def inflate(data: bytes, limit: int = MAX_INFLATED_BODY) -> bytes:
    """``zlib.decompress`` that refuses to produce more than ``limit`` bytes (a zlib bomb)."""
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, limit)
    if inflater.unconsumed_tail:
        raise BodyError(f"compressed body inflates past {limit} bytes")
    return out
