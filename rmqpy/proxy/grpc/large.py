"""Large SendMessage requests (issue 31 case 7): bodies not decoded by protobuf, freed memory returned.

The proxy takes requests up to ``grpcMaxInboundMessageSize`` (130 MiB) but refuses a body over
``maxMessageSize`` (4 MiB by default, ProxyConfig and MessageStoreConfig alike) with
MESSAGE_BODY_TOO_LARGE. grpcio hands the request to its deserializer as one ``bytes`` (after its
own copy of the received slices); decoding that into a protobuf message copies each body again
(0.23 s for 129 MiB, holding the GIL), and ``Message.body`` copies it once more (as long again) on
the reactor. :func:`send_request` reads the request's wire format first and leaves the bodies over
``LARGE_BODY`` out of what it decodes: a body over the limit by its size only, which the activity
refuses in its usual order of checks (so the answer is the proxy's), one within the limit as a
``bytes`` sliced from the request on grpcio's loop thread, which the activity sends as it is. The reactor
then copies no large body, and nothing of a refused one is copied at all.

The memory grpcio itself takes for such a request (its slices, and the ``bytes`` of it) is freed
after the call, but glibc keeps freed heap memory in its arenas (grpcio's slices are small
allocations of its own threads): 12 refused 129 MiB requests left 2.3 GB of anonymous memory
held (bench/grpc_large_send_probe.py). :class:`Trimmer` calls ``malloc_trim(0)`` on a thread of its
own (ctypes releases the GIL) shortly after large requests, at most once per ``interval``.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from typing import Any, Callable

from rocketmq.grpc_protocol import service_pb2 as spb

#: a request at least this large makes :class:`Trimmer` return freed memory after it
TRIM_FROM = 16 * 1024 * 1024
#: fields read at one level of a request before the cut gives up and the request is decoded whole
#: (as before): a request of many tiny fields costs a Python loop per field, upb's decode does not
MAX_FIELDS = 4096
#: bodies larger than this are left out of the protobuf decode (those over the limit too)
LARGE_BODY = 1024 * 1024


class CutSendRequest:
    """A large SendMessageRequest (``TRIM_FROM`` bytes or more, or one with a body left out),
    decoded without its large bodies: ``bodies`` maps the index of each message whose body was left
    out to the body (``bytes``) or, for one over the limit, to its size (``int``)."""

    __slots__ = ("request", "bodies")

    def __init__(self, request: Any, bodies: dict[int, int | bytes]) -> None:
        self.request, self.bodies = request, bodies


def _varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fields(buf: memoryview, pos: int, end: int) -> list[tuple[int, int, int, int, int]]:
    """The fields of the message in ``buf[pos:end]``: (number, wire type, start, value start, end)
    each; groups (wire types 3 and 4, never in these messages) and more than ``MAX_FIELDS`` fields
    raise ValueError."""
    out: list[tuple[int, int, int, int, int]] = []
    while pos < end:
        if len(out) >= MAX_FIELDS:
            raise ValueError("too many fields")
        start = pos
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(buf, pos, end)
            value = pos
        elif wire == 1:
            value, pos = pos, pos + 8
        elif wire == 5:
            value, pos = pos, pos + 4
        elif wire == 2:
            length, value = _varint(buf, pos, end)
            pos = value + length
        else:
            raise ValueError(f"wire type {wire}")
        if pos > end:
            raise ValueError("truncated field")
        out.append((number, wire, start, value, pos))
    return out


def _cut(raw: bytes, limit: int, large: int) -> tuple[bytes, dict[int, int | bytes]] | None:
    """``raw`` without the bodies (field 4 of each Message, field 1 of the request) over ``large``
    bytes, and what was left out of each message: its body (a message's last body is its body),
    or the body's size when it is over ``limit`` (<= 0: none); None when no body is over ``large``."""
    buf = memoryview(raw)
    parts: list[bytes | memoryview] = []
    out: dict[int, int | bytes] = {}
    index = 0
    changed = False
    for number, wire, start, value, end in _fields(buf, 0, len(buf)):
        if number != 1 or wire != 2:
            parts.append(buf[start:end])
            continue
        inner = _fields(buf, value, end)
        bodies = [f for f in inner if f[0] == 4 and f[1] == 2]
        if any(f[4] - f[3] > large for f in bodies):
            kept = [buf[f[2]:f[4]] for f in inner if not (f[0] == 4 and f[1] == 2 and f[4] - f[3] > large)]
            last = bodies[-1]
            if last[4] - last[3] > large:
                out[index] = last[4] - last[3] if 0 < limit < last[4] - last[3] else bytes(buf[last[3]:last[4]])
            length = sum(len(k) for k in kept)
            parts.append(b"\x0a" + _encode_varint(length))
            parts.extend(kept)
            changed = True
        else:
            parts.append(buf[start:end])
        index += 1
    return (b"".join(parts), out) if changed else None


def send_request(limit: Callable[[], int], trimmer: "Trimmer | None" = None) -> Callable[[bytes], Any]:
    """grpcio's request deserializer of SendMessage: the decoded request, or a :class:`CutSendRequest`
    for one with a body over ``LARGE_BODY`` or ``limit()`` (the broker's ``maxMessageSize``, read at
    each request; <= 0: no limit), or of ``TRIM_FROM`` bytes or more. A request the cut cannot read
    is decoded as a whole (its error is grpcio's answer)."""
    def deserialize(raw: bytes) -> Any:
        max_body = limit()
        large = min(max_body, LARGE_BODY) if max_body > 0 else LARGE_BODY
        cut = None
        if len(raw) > large:
            try:
                cut = _cut(raw, max_body, large)
            except ValueError:
                cut = None
        if cut is not None:
            request, bodies = spb.SendMessageRequest.FromString(cut[0]), cut[1]
        else:
            request, bodies = spb.SendMessageRequest.FromString(raw), {}
        if cut is None and len(raw) < TRIM_FROM:
            return request
        if trimmer is not None:
            trimmer.soon()
        return CutSendRequest(request, bodies)
    return deserialize


def _malloc_trim() -> Callable[[], Any] | None:
    name = ctypes.util.find_library("c")
    try:
        fn = ctypes.CDLL(name or "libc.so.6").malloc_trim  # a CDLL call releases the GIL
    except (OSError, AttributeError):  # not glibc
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: fn(0)


class Trimmer:
    """Returns the heap memory freed after large requests to the system: ``soon()`` asks for a
    ``malloc_trim(0)`` ``delay`` seconds later (time for the request's buffers to be freed), on a
    daemon thread, at most one per ``interval`` seconds; a ``soon()`` after a trim asks for the
    next, so one comes after the last large request (the servicer asks again when it has answered
    one). Does nothing where malloc_trim is missing (not glibc)."""

    def __init__(self, delay: float = 0.5, interval: float = 1.0,
                 trim: Callable[[], Any] | None = None) -> None:
        self.delay, self.interval = delay, interval
        self.trim = trim if trim is not None else _malloc_trim()
        self.trims = 0
        self._due = 0.0
        self._last = 0.0
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def soon(self) -> None:
        if self.trim is None:
            return
        with self._wake:
            if not self._due:
                self._due = time.monotonic() + self.delay
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(target=self._run, name="grpc-malloc-trim", daemon=True)
                self._thread.start()
            self._wake.notify()

    def stop(self) -> None:
        with self._wake:
            self._stopped = True
            self._wake.notify()

    def _run(self) -> None:
        assert self.trim is not None
        while True:
            with self._wake:
                while not self._stopped and not self._due:
                    self._wake.wait()
                if self._stopped:
                    return
                wait = max(self._due, self._last + self.interval) - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue  # a later soon() may have moved the time
                self._due = 0.0
            self.trim()
            self.trims += 1
            self._last = time.monotonic()
