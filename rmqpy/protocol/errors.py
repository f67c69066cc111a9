"""The errors of decoding a frame, a header or a body (below :mod:`rmqpy.protocol.command` and
:mod:`rmqpy.protocol.headers.base`, which both raise them; ``command`` re-exports them)."""
from __future__ import annotations


class FrameError(ValueError):
    """A frame or header that cannot be decoded: the connection that sent it is closed."""


class BadRequestError(ValueError):
    """A request the client got wrong (header fields, body): answered with an error
    response and logged as one line, never a traceback; the connection stays open."""


class HeaderError(BadRequestError):
    """A custom header (extFields) with a missing required field or a bad value."""


class BodyError(BadRequestError):
    """A request body (JSON or binary) that does not decode to what its code expects."""
