"""Pipelined pulls: several PULL_MESSAGE requests of one queue in flight on a connection of
their own (the blocking form).

A reader that knows where its next pulls will start (a suspend-free pull of N messages with no
filter ends N offsets on) need not wait a round trip per pull: it sends the next ones before
the answer to the first is in, and checks each answer against the offset it needed (see
``rmqpy_spark.broker.read_range``). The answers are matched to the requests by opaque, so a
broker that answers out of order (Java's pull thread pool may) is read correctly too.

Each request is the frame :func:`rmqpy.client.requests.pull_request` encodes, made from a
template built once per stream with the offset, count and opaque patched in (same bytes; a
stream with credentials signs and encodes each request instead, the signature covering them).
"""
from __future__ import annotations

import collections
import socket
import struct
from typing import Callable

from rmqpy.client import requests as R
from rmqpy.client.blocking import CONNECT_TIMEOUT
from rmqpy.client.core import monotonic
from rmqpy.client.errors import TransportError
from rmqpy.client.model import MessageQueue, PullResult
from rmqpy.protocol import command as codec
from rmqpy.protocol.bodies.heartbeat import SubscriptionData
from rmqpy.protocol.command import DEFAULT_MAX_FRAME, FrameError, RemotingCommand
from rmqpy.remoting.protocol import next_opaque

_FRAME_PREFIX = struct.Struct(">II")
_LENGTH = struct.Struct(">I")
#: values no real request has, to find where the offset, count and opaque go in the template
_OFFSET_MARK, _COUNT_MARK, _OPAQUE_MARK = 7_777_777_777_771, 7_777_777_772, 7_777_777_773
_READ_SIZE = 1 << 20


class PullTemplate:
    """The encoded PULL_MESSAGE frame of one queue, group and subscription (suspend-free, no
    commit offset) with the offset, count and opaque as holes; None from :meth:`build` where the
    encoded header does not hold each mark exactly once (then encode per request)."""

    __slots__ = ("pieces",)

    def __init__(self, pieces: tuple[bytes, bytes, bytes, bytes], order: tuple[int, int, int]) -> None:
        self.pieces = pieces, order

    @classmethod
    def build(cls, group: str, mq: MessageQueue, sub: SubscriptionData) -> PullTemplate | None:
        req = R.pull_request(group, mq, _OFFSET_MARK, 1, sub)
        req.ext_fields = dict(req.ext_fields or {}, maxMsgNums=str(_COUNT_MARK))
        req.opaque = _OPAQUE_MARK
        header = codec.encode(req)[8:]
        marks = [b'"queueOffset":"%d"' % _OFFSET_MARK, b'"maxMsgNums":"%d"' % _COUNT_MARK,
                 b'"opaque":%d' % _OPAQUE_MARK]
        if any(header.count(m) != 1 for m in marks):
            return None
        at = sorted((header.index(m) + m.index(b"7"), i) for i, m in enumerate(marks))
        values = (b"%d" % _OFFSET_MARK, b"%d" % _COUNT_MARK, b"%d" % _OPAQUE_MARK)
        pieces, pos = [], 0
        for p, i in at:
            pieces.append(header[pos:p])
            pos = p + len(values[i])
        pieces.append(header[pos:])
        return cls((pieces[0], pieces[1], pieces[2], pieces[3]), (at[0][1], at[1][1], at[2][1]))

    def frame(self, offset: int, count: int, opaque: int) -> bytes:
        (p0, p1, p2, p3), order = self.pieces
        v = (offset, count, opaque)
        header = b"%b%d%b%d%b%d%b" % (p0, v[order[0]], p1, v[order[1]], p2, v[order[2]], p3)
        n = len(header)
        return _FRAME_PREFIX.pack(4 + n, n) + header


class PullStream:
    """Pulls of ``mq`` at offsets the caller chooses, several in flight; :meth:`receive` gives
    the answers in the order the pulls were sent, undecoded as ``PullConsumer.pull_raw`` gives
    them. Each pull must be answered within ``timeout_ms`` of its sending; a late, broken or
    undecodable answer closes the stream (TransportError), as the blocking transport drops
    such a connection."""

    def __init__(self, addr: str, group: str, mq: MessageQueue, sub: SubscriptionData, timeout_ms: int,
                 sign: Callable[[str, RemotingCommand], None] | None = None,
                 on_suggest: Callable[[int], None] | None = None, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        host, _, port = addr.rpartition(":")
        self.addr, self.group, self.mq, self.sub = addr, group, mq, sub
        self.timeout = timeout_ms / 1000.0
        self.max_frame = max_frame
        self._sign = sign
        self._on_suggest = on_suggest
        self._template = None if sign is not None else PullTemplate.build(group, mq, sub)
        self._sent: collections.deque[tuple[int, float]] = collections.deque()  # (opaque, deadline)
        self._early: dict[int, RemotingCommand] = {}
        self._buf = bytearray()
        self._pos = 0
        try:
            self.sock = socket.create_connection((host.strip("[]"), int(port)),
                                                 timeout=min(self.timeout, CONNECT_TIMEOUT))
        except OSError as exc:
            raise TransportError(f"connect to {addr} failed: {exc}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @property
    def pending(self) -> int:
        """Pulls sent and not yet received."""
        return len(self._sent)

    def send(self, pulls: list[tuple[int, int]]) -> None:
        """Send a pull of ``count`` messages at ``offset`` for each (offset, count), in one write."""
        frames = []
        deadline = monotonic() + self.timeout
        for offset, count in pulls:
            opaque = next_opaque()
            if self._template is not None:
                frames.append(self._template.frame(offset, count, opaque))
            else:
                req = R.pull_request(self.group, self.mq, offset, count, self.sub)
                req.opaque = opaque
                if self._sign is not None:
                    self._sign(self.addr, req)
                frames.append(codec.encode(req))
            self._sent.append((opaque, deadline))
        try:
            self.sock.settimeout(self.timeout)
            self.sock.sendall(frames[0] if len(frames) == 1 else b"".join(frames))
        except OSError as exc:
            self.close()
            raise TransportError(f"connection to {self.addr} failed: {exc}") from None

    def receive(self) -> PullResult:
        """The answer to the oldest pull sent and not yet received."""
        opaque, deadline = self._sent.popleft()
        resp = self._early.pop(opaque, None)
        try:
            while resp is None:
                got = self._frame(deadline)
                if not got.is_response:
                    continue  # a request from the broker: this connection has no client to answer it
                if got.opaque == opaque:
                    resp = got
                elif any(o == got.opaque for o, _ in self._sent):
                    self._early[got.opaque] = got
        except TransportError:
            self.close()
            raise
        result, suggested = R.parse_pull_response(resp, self.mq, self.sub, decode=False)
        if self._on_suggest is not None:
            self._on_suggest(suggested)
        return result

    def _frame(self, deadline: float) -> RemotingCommand:
        buf = self._buf
        while True:
            avail = len(buf) - self._pos
            if avail >= 4:
                (length,) = _LENGTH.unpack_from(buf, self._pos)
                if length > self.max_frame:
                    raise TransportError(f"{self.addr} sent a frame of {length} bytes, over {self.max_frame}")
                if avail >= 4 + length:
                    start = self._pos + 4
                    self._pos = start + length
                    with memoryview(buf) as mv:
                        try:
                            return codec.decode(mv[start:start + length])
                        except FrameError as exc:
                            raise TransportError(f"undecodable answer from {self.addr}: {exc}") from None
            self._fill(deadline)

    def _fill(self, deadline: float) -> None:
        if self._pos:
            del self._buf[:self._pos]
            self._pos = 0
        remaining = deadline - monotonic()
        if remaining <= 0:
            raise TransportError(f"wait response on {self.addr} timed out after {self.timeout * 1000:.0f} ms")
        try:
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(_READ_SIZE)
        except socket.timeout:
            raise TransportError(f"wait response on {self.addr} timed out after {self.timeout * 1000:.0f} ms") \
                from None
        except OSError as exc:
            raise TransportError(f"connection to {self.addr} failed: {exc}") from None
        if not chunk:
            raise TransportError(f"connection to {self.addr} closed by the server")
        self._buf += chunk

    def close(self) -> None:
        """Close the connection (answers still in flight are not read)."""
        self._sent.clear()
        self._early.clear()
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> PullStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
