"""The one exception of :mod:`rmqpy.client`."""
from __future__ import annotations


class ClientError(Exception):
    """Every failure of the client: ``code`` is the broker's or name server's ResponseCode, or
    None when no answer came (connection refused or lost, timeout, bad argument, no route)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message if code is None else f"CODE: {code}  DESC: {message}")
        self.code = code
        self.message = message


class TransportError(ClientError):
    """No answer: the connection could not be made, broke, or the answer did not come in time.
    The producer retries these on another broker, as Java does with a RemotingException."""
