"""One remoting connection, usable from either end.

Frames are length-prefixed (the ``LengthFieldBasedFrameDecoder`` of NettyDecoder). Requests
are handed to a :class:`RequestDispatcher`; responses complete the Deferred of the
``invoke`` that sent the request. A frame that cannot be decoded closes this connection
with a log line and nothing else: every other connection keeps being served.
"""
from __future__ import annotations

import itertools
import struct
from typing import Any, Protocol

from twisted.internet import defer, protocol
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IDelayedCall, IPushProducer, IReactorTime, ITCPTransport
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from rmqpy.protocol import command as codec
from rmqpy.protocol.command import RPC_ONEWAY, RPC_RESPONSE, FrameError, RemotingCommand
from rmqpy.remoting.connection_limits import ConnectionCap, ConnectionLimits
from rmqpy.remoting.replay import ReplayMemo

_LENGTH = struct.Struct(">I")
# partial frames counted against the budget of all connections: smaller ones cost little
# more than a read chunk, and not counting them keeps split small frames fast
_RESERVE_FROM = 64 * 1024
_opaques = itertools.count(0)  # one counter per process, as Java's RemotingCommand.requestId


class RemotingError(Exception):
    """Base of failures of ``invoke``."""


class RemotingTimeoutError(RemotingError):
    pass


class RemotingConnectionError(RemotingError):
    pass


def next_opaque() -> int:
    return next(_opaques) & 0x7FFFFFFF


class Dispatcher(Protocol):
    """What a connection tells of itself and hands its requests to
    (:class:`rmqpy.remoting.dispatch.RequestDispatcher`, which sits above this module)."""

    def channel_connected(self, channel: RemotingProtocol) -> None: ...

    def channel_closed(self, channel: RemotingProtocol) -> None: ...

    def dispatch(self, channel: RemotingProtocol, request: RemotingCommand) -> object: ...


class _Unbounded:
    """The partial-frame budget of connections no ChannelSweeper watches (client side)."""

    partial_bytes = 0
    max_partial_bytes = 1 << 62  # an int: compared on the slow path

    def over_budget(self) -> None:
        pass


def _no_delay(transport: Any) -> None:
    """TCP_NODELAY on the TCP connection (under TLS: the one below it), as Netty's remoting
    client and server set it (``NettyRemotingServer``: ``TCP_NODELAY, true``): several requests
    in flight on one connection (a producer's threads share it) are answered back to back, and
    Nagle's algorithm would hold each small answer until the peer acknowledged the last one."""
    while transport is not None and not ITCPTransport.providedBy(transport):
        transport = getattr(transport, "transport", None)
    if transport is not None:
        transport.setTcpNoDelay(True)


class RemotingProtocol(protocol.Protocol):
    log = Logger()
    # set by makeConnection before any method below runs (a TCP transport, or TLS over one)
    transport: ITCPTransport
    # the declared sizes of the partial frames of all connections sharing it (ChannelSweeper)
    _budget: Any = _Unbounded()
    _aborted = False

    def __init__(self, dispatcher: "Dispatcher | None", clock: IReactorTime,
                 max_frame: int = codec.DEFAULT_MAX_FRAME) -> None:
        self.dispatcher = dispatcher
        # answers kept by the dispatcher (rmqpy.remoting.replay), asked before a frame is decoded
        self._memo: ReplayMemo | None = getattr(dispatcher, "memo", None)
        self.clock = clock
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._pending: dict[int, tuple[defer.Deferred[RemotingCommand], IDelayedCall]] = {}
        self.connected_ = False
        self.remote_address = "?"
        self.remote_host = ""
        self.remote_port = 0
        self.attributes: dict[str, object] = {}  # per-connection state kept by processors
        self.read_at: float | None = None  # when the last bytes were read: a request's wait starts there
        # for the ChannelSweeper (rmqpy/remoting/limits.py): set here, read and stamped there
        self._active = True  # read or written since the last sweep
        self._last_active = 0.0
        self._partial_since: float | None = None  # None: a partial frame begun after the last sweep
        self._paused = False  # not read while the peer does not read its replies (server side)
        self._reserved = 0  # bytes of the partial frame counted in _budget

    # -------------------------------------------------------------- connection events
    def connectionMade(self) -> None:
        self.connected_ = True
        _no_delay(self.transport)
        peer = self.transport.getPeer()
        if isinstance(peer, (IPv4Address, IPv6Address)):
            self.remote_host, self.remote_port = peer.host, peer.port
        self.remote_address = f"{self.remote_host}:{self.remote_port}"
        if self.dispatcher is not None:
            self.dispatcher.channel_connected(self)

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.connected_ = False
        pending, self._pending = self._pending, {}
        for d, timer in pending.values():
            if timer.active():
                timer.cancel()
            d.errback(RemotingConnectionError(f"connection to {self.remote_address} closed"))
        if self.dispatcher is not None:
            self.dispatcher.channel_closed(self)

    def dataReceived(self, data: bytes) -> None:
        self._active = True
        self.read_at = self.clock.seconds()
        buf = self._buffer
        if not buf:
            # the usual chunk: exactly one whole frame (a client with one request in flight)
            n = len(data)
            if n >= 8 and self.connected_:
                (length,) = _LENGTH.unpack_from(data, 0)
                if length + 4 == n and n <= self.max_frame:  # so 4 <= length: n >= 8
                    memo = self._memo
                    miss = None
                    if memo is not None and memo.active:
                        found = memo.answer(self, data)
                        if found is True:
                            return
                        if found:
                            miss = found
                    try:
                        cmd = codec.decode(memoryview(data)[4:])
                    except FrameError as exc:
                        self._drop(str(exc))
                        return
                    if miss is not None:
                        miss.request = cmd
                        memo.pending = miss  # type: ignore[union-attr]  # set with miss
                    self._command_received(cmd)
                    return
        else:
            buf += data
            if len(buf) < 4:
                return
            (length,) = _LENGTH.unpack_from(buf, 0)
            if 4 <= length <= self.max_frame - 4 and len(buf) < length + 4:
                if length > _RESERVE_FROM and not self._reserved:  # it began with less than its length
                    self._reserve(length + 4)
                return  # the rest of a frame is still to come: nothing copied but this chunk
            data = bytes(buf)
            buf.clear()
            if self._reserved:
                self._budget.partial_bytes -= self._reserved
                self._reserved = 0
        # Frames are decoded from views of ``data``: no copy of the frame before decode
        # (the header is parsed from the view; the body is copied once, into its own bytes).
        n = len(data)
        pos = 0
        view = None
        while n - pos >= 4 and self.connected_ and not self._paused:
            (length,) = _LENGTH.unpack_from(data, pos)
            if length + 4 > self.max_frame or length < 4:
                self._drop(f"frame length {length} outside 4..{self.max_frame - 4}")
                return
            end = pos + 4 + length
            if end > n:
                break
            if view is None:
                view = memoryview(data)
            try:
                cmd = codec.decode(view[pos + 4:end])
            except FrameError as exc:
                self._drop(str(exc))
                return
            pos = end
            self._command_received(cmd)
        if pos < n and self.connected_:
            buf += data[pos:] if pos else data
            self._partial_since = None
            if n - pos >= 4:
                (length,) = _LENGTH.unpack_from(data, pos)
                if length > _RESERVE_FROM:
                    self._reserve(min(length, self.max_frame) + 4)

    def _reserve(self, nbytes: int) -> None:
        """Count a partial frame's declared size against the budget of all connections,
        before its bytes are buffered; past the budget the biggest holders are closed."""
        budget = self._budget
        self._reserved = nbytes
        budget.partial_bytes += nbytes
        if budget.partial_bytes > budget.max_partial_bytes:
            budget.over_budget()  # may close this connection

    def _release(self) -> None:
        self._budget.partial_bytes -= self._reserved
        self._reserved = 0

    def _drop(self, why: str) -> None:
        """Close a connection that sent an undecodable frame: one warning line, rate-limited
        per process (a peer can send such frames as fast as it can connect)."""
        from rmqpy.remoting.ratelimit import limiter_for
        limiter_for(self.clock).warn("bad-frame", self.log, "closing connection from {peer}: {why}",
                                     peer=self.remote_address, why=why[:200])
        self._buffer.clear()
        self.connected_ = False
        self.transport.loseConnection()

    def _command_received(self, cmd: RemotingCommand) -> None:
        if cmd.flag & RPC_RESPONSE:
            entry = self._pending.pop(cmd.opaque, None)
            if entry is None:
                from rmqpy.remoting.ratelimit import limiter_for
                limiter_for(self.clock).warn("unknown-opaque", self.log, "{peer}: response for unknown opaque {opaque}",
                                             peer=self.remote_address, opaque=cmd.opaque)
                return
            d, timer = entry
            if timer.active():
                timer.cancel()
            d.callback(cmd)
        elif self.dispatcher is not None:
            self.dispatcher.dispatch(self, cmd)
        else:
            self.log.warn("{peer}: request {cmd!r} on a connection without processors",
                          peer=self.remote_address, cmd=cmd)

    # -------------------------------------------------------------- sending
    def send_command(self, cmd: RemotingCommand) -> None:
        if self.connected_:
            self._active = True
            if cmd.body_parts is None:
                self.transport.write(codec.encode(cmd))
            else:
                self.transport.writeSequence(codec.encode_parts(cmd))

    def invoke(self, request: RemotingCommand, timeout: float = 3.0) -> defer.Deferred[RemotingCommand]:
        """Send a request; the Deferred fires with the response or fails on timeout/close."""
        if not self.connected_:
            return defer.fail(RemotingConnectionError(f"connection to {self.remote_address} is closed"))
        request.opaque = next_opaque()
        d: defer.Deferred[RemotingCommand] = defer.Deferred()

        def expire() -> None:
            entry = self._pending.pop(request.opaque, None)
            if entry is not None:
                entry[0].errback(RemotingTimeoutError(
                    f"wait response on {self.remote_address} timeout {timeout * 1000:.0f}(ms)"))

        self._pending[request.opaque] = (d, self.clock.callLater(timeout, expire))
        self.send_command(request)
        return d

    def invoke_oneway(self, request: RemotingCommand) -> None:
        request.opaque = next_opaque()
        request.flag |= RPC_ONEWAY
        self.send_command(request)

    def close(self) -> None:
        if self.transport is not None:
            self._stop_flow_control()  # a registered producer would hold a graceful close open
            self.transport.loseConnection()

    def abort(self) -> None:
        """Close now, dropping unsent replies: a peer that does not read its replies would
        keep a graceful close waiting for ever."""
        self.connected_ = False
        self._aborted = True
        self._release()
        self._buffer.clear()
        if self.transport is not None:
            self.transport.abortConnection()

    def _stop_flow_control(self) -> None:
        pass


class RemotingServerFactory(protocol.Factory):
    """Builds server-side connections that all share one dispatcher."""

    def __init__(self, dispatcher: "Dispatcher", clock: IReactorTime,
                 max_frame: int = codec.DEFAULT_MAX_FRAME, limits: ConnectionLimits | None = None,
                 cap: ConnectionCap | None = None) -> None:
        self.dispatcher = dispatcher
        # the port's connection cap (shared by the ports of one server); counted here at the accept,
        # or by the TLS detector in front (which then sets admits_at_build False: it counts at the accept)
        self.cap = cap
        self.admits_at_build = True
        self.clock = clock
        self.max_frame = max_frame
        self.limits = limits if limits is not None else ConnectionLimits()
        self.channels: set[RemotingProtocol] = set()
        self.closed_unsent = 0  # connections closed for serverChannelMaxUnsentBytes
        self.partial_budget: Any = None  # the ChannelSweeper watching this factory, if any

    def buildProtocol(self, addr: object) -> RemotingProtocol | None:
        host = str(getattr(addr, "host", "?"))
        counted = self.cap is not None and self.admits_at_build
        if counted and not self.cap.admit(host):  # type: ignore[union-attr]
            return None  # Twisted closes the socket at once
        proto = _TrackedProtocol(self.dispatcher, self.clock, self.max_frame)
        proto.factory = self
        proto.capped_host = host if counted else None
        if self.partial_budget is not None:
            proto._budget = self.partial_budget
        return proto


@implementer(IPushProducer)
class _TrackedProtocol(RemotingProtocol):
    """A server connection, and the push producer of its own replies.

    When the transport's write buffer passes ``writeBufferHighWaterMark`` it calls
    :meth:`pauseProducing`: the connection stops reading (Java's ``setAutoRead(false)`` in
    ``channelWritabilityChanged``), so a client that does not read its replies cannot make
    the server buffer more of them; frames already received wait unparsed. Replies that
    still come (held pulls, asynchronous answers) are counted, and past
    ``serverChannelMaxUnsentBytes`` the connection is aborted. When the buffer has drained
    the transport calls :meth:`resumeProducing`.
    """

    factory: RemotingServerFactory
    _producing = False
    _unsent = 0  # bytes written while paused
    _reader: Any = None
    _not_reading = False  # the reader was paused
    capped_host: str | None = None  # the address the factory's cap counted this connection under

    def connectionMade(self) -> None:
        self.factory.channels.add(self)
        # duck-typed on purpose: Twisted's TLS transport (TLSMemoryBIOProtocol) has registerProducer
        # and a transport below it without declaring IConsumer or IPushProducer
        transport = self.transport
        register = getattr(transport, "registerProducer", None)
        if register is not None:
            high = self.factory.limits.write_high_water
            if high > 0 and hasattr(transport, "bufferSize"):
                transport.bufferSize = high
            register(self, True)
            self._producing = True
        # what stops reading: the TCP transport, under TLS the one below the TLS protocol
        reader: Any = transport
        while reader is not None and not hasattr(reader, "pauseProducing"):
            reader = getattr(reader, "transport", None)
        self._reader = reader
        super().connectionMade()

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.factory.channels.discard(self)
        if self.capped_host is not None and self.factory.cap is not None:
            self.factory.cap.release(self.capped_host)
            self.capped_host = None
        self._release()
        self._buffer.clear()
        super().connectionLost(reason)

    def _stop_flow_control(self) -> None:
        if self._producing:
            self._producing = False
            self.transport.unregisterProducer()  # type: ignore[attr-defined]  # IConsumer too; no intersections

    # IPushProducer, called by the transport
    def pauseProducing(self) -> None:
        if self._paused or not self.connected_:
            return
        self._paused = True
        self._unsent = 0
        self.send_command = self._send_while_paused  # type: ignore[method-assign]
        # reading stops when the peer sends while paused: a client with one request in flight
        # (most of them) costs no epoll changes when a big reply passes the mark
        self.dataReceived = self._receive_while_paused  # type: ignore[method-assign]

    def resumeProducing(self) -> None:
        if not self.connected_:  # closing (a bad frame): let the graceful close finish
            self._stop_flow_control()
            return
        if not self._paused:
            return
        self._paused = False
        del self.send_command
        del self.dataReceived
        if self._not_reading:
            self._not_reading = False
            self._reader.resumeProducing()
        if self._buffer:
            self.dataReceived(b"")  # the frames that arrived while paused

    def stopProducing(self) -> None:
        self._producing = False

    def _receive_while_paused(self, data: bytes) -> None:
        """Keep what comes (at most one read: reading stops here) unparsed until resumed."""
        self._active = True
        if not self._buffer:
            self._partial_since = None
        self._buffer += data
        if not self._not_reading and self._reader is not None:
            self._not_reading = True
            self._reader.pauseProducing()

    def _send_while_paused(self, cmd: RemotingCommand) -> None:
        if not self.connected_:
            return
        pieces = codec.encode_parts(cmd)  # [the whole frame] unless the body comes in parts
        self._unsent += sum([len(p) for p in pieces])
        limit = self.factory.limits.max_unsent_bytes
        if 0 < limit < self._unsent:
            self.factory.closed_unsent += 1
            self.log.warn("closing connection from {peer}: it does not read its replies ({n} bytes unsent above "
                          "the write buffer high-water mark; serverChannelMaxUnsentBytes={limit})",
                          peer=self.remote_address, n=self._unsent, limit=limit)
            self.abort()
            return
        # not activity: as Netty, a write counts once it is flushed
        if len(pieces) == 1:
            self.transport.write(pieces[0])
        else:
            self.transport.writeSequence(pieces)
