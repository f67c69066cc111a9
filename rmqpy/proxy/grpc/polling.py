"""How long an empty receive is held: the proxy's rule, so the empty answer has the proxy's margin.

``ReceiveMessageActivity.receiveMessage`` (the same in 5.3.3 and on develop after 5.3.3):

* the client's ``long_polling_timeout`` when the request has one, else the remaining gRPC deadline
  less half the request timeout of the client's settings (a 5.0.x Java client sends no
  long-polling timeout and waits ``awaitDuration + requestTimeout``: the answer comes with half a
  request timeout to spare, time enough to cross a loaded network and be decoded);
* clamped to [``grpcClientConsumerMinLongPollingTimeoutMillis``,
  ``grpcClientConsumerMaxLongPollingTimeoutMillis``] (5 s, 20 s): out of range is clamped, not refused;
* then no longer than the remaining deadline; with less than the minimum left the call is refused,
  ILLEGAL_POLLING_TIME, or BAD_REQUEST for a client older than 5.0.3 (the Code came with 5.0.3:
  Java's ``"5.0.3".compareTo(version) > 0``, a string comparison, a missing version counting as older).

``longPollingReserveTimeInMillis`` (100) is in ProxyConfig but nothing in the proxy reads it; rmqpy
used it as the margin before the deadline, which put the empty answer on the wire ~100 ms before
the client gave up.
"""
from __future__ import annotations

from rmqpy.proxy.grpc.convert import Code

MIN_POLLING_MS = 5 * 1000  # grpcClientConsumerMinLongPollingTimeoutMillis
MAX_POLLING_MS = 20 * 1000  # grpcClientConsumerMaxLongPollingTimeoutMillis
ILLEGAL_POLLING_TIME_SINCE = "5.0.3"  # ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION
NOT_ENOUGH_TIME = "The deadline time remaining is not enough for polling, please check network condition"


class PollingRefused(Exception):
    """Less than the minimum polling time is left before the client's deadline."""

    def __init__(self, code: int) -> None:
        super().__init__(NOT_ENOUGH_TIME)
        self.code, self.message = code, NOT_ENOUGH_TIME


def polling_ms(long_polling_ms: int | None, remaining_ms: int, request_timeout_ms: int,
               client_version: str = "", min_ms: int = MIN_POLLING_MS, max_ms: int = MAX_POLLING_MS) -> int:
    """The pop's poll time for a receive (``long_polling_ms`` None: the request has none)."""
    if long_polling_ms is not None:
        polling = long_polling_ms
    else:
        polling = remaining_ms - int(request_timeout_ms / 2)  # truncated toward zero, as Java's long division
    polling = min(max(polling, min_ms), max_ms)
    if polling > remaining_ms:
        if remaining_ms < min_ms:
            older = not client_version or ILLEGAL_POLLING_TIME_SINCE > client_version
            raise PollingRefused(Code.BAD_REQUEST if older else Code.ILLEGAL_POLLING_TIME)
        polling = remaining_ms
    return polling
