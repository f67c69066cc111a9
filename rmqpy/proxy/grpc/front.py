"""TLS and plain text on one gRPC port, as the proxy's ``ProxyAndTlsProtocolNegotiator`` serves them.

grpcio takes one kind of credentials per port and hands Python no connection to look at, so in
``permissive`` mode grpcio listens twice on loopback (TLS with its certificate reload, and plain
text) and this Twisted front holds the public port: it reads a connection's first byte, ``0x16``
(a TLS handshake record, what Netty's ``SslHandler.isEncrypted`` sees) to the TLS port, anything
else (the HTTP/2 preface) to the plain one, then relays bytes both ways with flow control
(each side pauses the other's reads while its writes back up). ``enforcing`` and ``disabled``
need no front: grpcio serves the public port itself.

grpcio then sees every client as a loopback connection; :attr:`GrpcFront.peers` maps the local port
of each relayed connection to the client's address, for the activities and the auth rules that use
the client's address (:meth:`rmqpy.proxy.grpc.servicer.MessagingServicer.address`).

What a connection may cost here, since each relayed one holds three of the process's file descriptors
(the client's socket, the loopback one and grpcio's end of it): a connection that sends nothing is
closed at the first-byte timeout; one with no byte in either direction for ``idle_timeout``
(``grpcClientIdleTimeMills``) is closed. The front measures bytes, not calls: grpcio itself closes a
connection without calls for that long with a GOAWAY, as grpc-java's ``maxConnectionIdle`` does for
the proxy (:func:`rmqpy.proxy.grpc.server.grpc_server`), and the front's timer catches what grpcio
never counts as idle (a half-open peer holding a stream, a TLS handshake stopped half way). A
:class:`~rmqpy.remoting.connection_limits.ConnectionCap` bounds the connections of the port and of
each address, and the bytes held while the loopback connection is made are bounded too.
"""
from __future__ import annotations

from typing import Any

from twisted.internet import protocol

from rmqpy.remoting.channel import address_text
from rmqpy.remoting.connection_limits import ConnectionCap
from rmqpy.remoting.ratelimit import RateLimitedLogger

LOOPBACK = "127.0.0.1"
#: bytes a client may send before its loopback connection exists (its reads are paused after the
#: first chunk, so a Twisted TCP transport holds one read, 64 KiB, at most)
DEFAULT_MAX_PENDING = 256 * 1024


class GrpcFront(protocol.Factory):
    """The public gRPC port; ``plain_port`` and ``tls_port`` are grpcio's loopback ports."""

    noisy = False
    log = RateLimitedLogger(namespace="rmqpy.proxy.grpc.front")

    def __init__(self, reactor: Any, plain_port: int, tls_port: int, first_byte_timeout: float,
                 idle_timeout: float = 120.0, cap: ConnectionCap | None = None,
                 max_pending: int = DEFAULT_MAX_PENDING) -> None:
        self.reactor = reactor  # also the clock of the timers (a MemoryReactorClock in tests)
        self.log = self.log.on(reactor)
        self.plain_port, self.tls_port = plain_port, tls_port
        self.first_byte_timeout = first_byte_timeout
        self.idle_timeout = idle_timeout  # <= 0: never
        self.cap = cap
        self.max_pending = max_pending
        self.peers: dict[int, str] = {}  # loopback port of a relayed connection -> "client ip:port"
        self.relayed = {"tls": 0, "plain": 0}
        self.timeouts = 0  # closed at the first-byte timeout
        self.idle_closed = 0  # closed after idle_timeout without a byte
        self.pending_closed = 0  # closed for sending more than max_pending before the backend existed

    def buildProtocol(self, addr: Any) -> "_Front | None":  # noqa: N802 (Twisted's name)
        host = getattr(addr, "host", "?")
        if self.cap is not None and not self.cap.admit(host):
            return None  # Twisted closes the socket at once
        return _Front(self, addr)


class _Front(protocol.Protocol):
    """The client's side: waits for the first byte, then relays to the backend it chose."""

    transport: Any  # a TCP transport, set before connectionMade

    def __init__(self, factory: GrpcFront, addr: Any) -> None:
        self.factory, self.addr = factory, addr
        self.backend: _Back | None = None
        self.pending: list[bytes] | None = None  # bytes read while the backend connects
        self.pending_bytes = 0
        self._timer: Any = None  # the first-byte timer, then the idle one
        self.last_byte = 0.0  # when a byte last went either way (the clock's seconds)
        self.lost = False

    def connectionMade(self) -> None:  # noqa: N802
        _no_delay(self.transport)
        self._timer = self.factory.reactor.callLater(self.factory.first_byte_timeout, self._timed_out)

    def _timed_out(self) -> None:
        self._timer = None
        f = self.factory
        f.timeouts += 1
        f.log.warn("gRPC port: closing the connection from {peer}: nothing received within {s}s "
                   "(tls.handshake.timeoutMillis)", peer=address_text(self.addr), s=f.first_byte_timeout)
        self.transport.abortConnection()

    def touch(self) -> None:
        """A byte went one way or the other: the idle timer reads this when it fires (no
        rescheduling per read)."""
        self.last_byte = self.factory.reactor.seconds()

    def _idle_check(self) -> None:
        f = self.factory
        quiet = f.reactor.seconds() - self.last_byte
        if quiet < f.idle_timeout:
            self._timer = f.reactor.callLater(f.idle_timeout - quiet, self._idle_check)
            return
        self._timer = None
        f.idle_closed += 1
        f.log.warn("gRPC port: closing the connection from {peer}: no byte either way for {s:.0f}s "
                   "(grpcClientIdleTimeMills)", peer=address_text(self.addr), s=quiet)
        self._abort()

    def _abort(self) -> None:
        self.transport.abortConnection()
        if self.backend is not None:
            self.backend.transport.abortConnection()

    def _cancel_timer(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self.last_byte = self.factory.reactor.seconds()
        if self.lost:
            return
        if self.backend is not None:
            self.backend.transport.write(data)
        elif self.pending is not None:
            self._hold(data)
        elif data:
            self._cancel_timer()
            f = self.factory
            if f.idle_timeout > 0:
                self._timer = f.reactor.callLater(f.idle_timeout, self._idle_check)
            tls = data[0] == 0x16
            self.factory.relayed["tls" if tls else "plain"] += 1
            self.pending = []
            self._hold(data)
            if self.lost:
                return
            self.transport.pauseProducing()  # until the backend takes the bytes
            port = self.factory.tls_port if tls else self.factory.plain_port
            self.factory.reactor.connectTCP(LOOPBACK, port, _BackFactory(self), timeout=5)

    def _hold(self, data: bytes) -> None:
        """Keeps bytes until the backend exists, up to ``max_pending``: past it the client is closed."""
        assert self.pending is not None
        self.pending_bytes += len(data)
        f = self.factory
        if self.pending_bytes > f.max_pending > 0:
            f.pending_closed += 1
            f.log.warn("gRPC port: closing the connection from {peer}: {n} bytes sent before grpcio's loopback "
                       "connection was made (grpcFrontMaxPendingBytes={m})", peer=address_text(self.addr),
                       n=self.pending_bytes, m=f.max_pending)
            self.pending, self.lost = None, True
            self._cancel_timer()
            self.transport.abortConnection()
            return
        self.pending.append(data)

    def backend_ready(self, back: "_Back") -> None:
        if self.lost:  # the client left while the backend connected
            back.transport.loseConnection()
            return
        self.backend = back
        host, port = getattr(self.addr, "host", "?"), getattr(self.addr, "port", 0)
        self.factory.peers[back.port] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"  # as grpcio's
        back.transport.write(b"".join(self.pending or ()))
        self.pending, self.pending_bytes = None, 0
        # each side stops reading while the other's writes back up (twisted.protocols.portforward)
        self.transport.registerProducer(back.transport, True)
        back.transport.registerProducer(self.transport, True)
        self.transport.resumeProducing()

    def connectionLost(self, reason: Any = protocol.connectionDone) -> None:  # noqa: N802
        self.lost = True
        self.pending = None
        self._cancel_timer()
        if self.factory.cap is not None:
            self.factory.cap.release(getattr(self.addr, "host", "?"))
        if self.backend is not None:
            self.backend.transport.loseConnection()


class _Back(protocol.Protocol):
    """grpcio's side of a relayed connection."""

    transport: Any

    def __init__(self, front: _Front) -> None:
        self.front = front
        self.port = 0

    def connectionMade(self) -> None:  # noqa: N802
        _no_delay(self.transport)
        self.port = self.transport.getHost().port
        self.front.backend_ready(self)

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self.front.touch()
        self.front.transport.write(data)

    def connectionLost(self, reason: Any = protocol.connectionDone) -> None:  # noqa: N802
        self.front.factory.peers.pop(self.port, None)
        self.front.transport.loseConnection()


class _BackFactory(protocol.ClientFactory):
    noisy = False

    def __init__(self, front: _Front) -> None:
        self.front = front

    def buildProtocol(self, addr: Any) -> _Back:  # noqa: N802
        return _Back(self.front)

    def clientConnectionFailed(self, connector: Any, reason: Any) -> None:  # noqa: N802
        self.front.factory.log.warn("gRPC port: grpcio's loopback port {p} refused a connection: {r}",
                                    p=connector.getDestination().port, r=reason.getErrorMessage())
        self.front.transport.loseConnection()


def _no_delay(transport: Any) -> None:
    """gRPC writes small frames and waits for answers: Nagle's delay would add up to 40 ms each."""
    set_no_delay = getattr(transport, "setTcpNoDelay", None)
    if set_no_delay is not None:
        set_no_delay(True)
