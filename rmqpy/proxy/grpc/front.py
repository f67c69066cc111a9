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
"""
from __future__ import annotations

from typing import Any

from twisted.internet import protocol
from twisted.logger import Logger

from rmqpy.remoting.channel import address_text

log = Logger(namespace="rmqpy.proxy.grpc.front")
LOOPBACK = "127.0.0.1"


class GrpcFront(protocol.Factory):
    """The public gRPC port; ``plain_port`` and ``tls_port`` are grpcio's loopback ports."""

    noisy = False

    def __init__(self, reactor: Any, plain_port: int, tls_port: int, first_byte_timeout: float) -> None:
        self.reactor = reactor
        self.plain_port, self.tls_port = plain_port, tls_port
        self.first_byte_timeout = first_byte_timeout
        self.peers: dict[int, str] = {}  # loopback port of a relayed connection -> "client ip:port"
        self.relayed = {"tls": 0, "plain": 0}
        self.timeouts = 0

    def buildProtocol(self, addr: Any) -> "_Front":  # noqa: N802 (Twisted's name)
        return _Front(self, addr)


class _Front(protocol.Protocol):
    """The client's side: waits for the first byte, then relays to the backend it chose."""

    transport: Any  # a TCP transport, set before connectionMade

    def __init__(self, factory: GrpcFront, addr: Any) -> None:
        self.factory, self.addr = factory, addr
        self.backend: _Back | None = None
        self.pending: list[bytes] | None = None  # bytes read while the backend connects
        self._timer: Any = None
        self.lost = False

    def connectionMade(self) -> None:  # noqa: N802
        _no_delay(self.transport)
        self._timer = self.factory.reactor.callLater(self.factory.first_byte_timeout, self._timed_out)

    def _timed_out(self) -> None:
        self._timer = None
        self.factory.timeouts += 1
        log.warn("gRPC port: closing the connection from {peer}: nothing received within {s}s "
                 "(tls.handshake.timeoutMillis)", peer=address_text(self.addr), s=self.factory.first_byte_timeout)
        self.transport.abortConnection()

    def _cancel_timer(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        if self.backend is not None:
            self.backend.transport.write(data)
        elif self.pending is not None:
            self.pending.append(data)
        elif data:
            self._cancel_timer()
            tls = data[0] == 0x16
            self.factory.relayed["tls" if tls else "plain"] += 1
            self.pending = [data]
            self.transport.pauseProducing()  # until the backend takes the bytes
            port = self.factory.tls_port if tls else self.factory.plain_port
            self.factory.reactor.connectTCP(LOOPBACK, port, _BackFactory(self), timeout=5)

    def backend_ready(self, back: "_Back") -> None:
        if self.lost:  # the client left while the backend connected
            back.transport.loseConnection()
            return
        self.backend = back
        host, port = getattr(self.addr, "host", "?"), getattr(self.addr, "port", 0)
        self.factory.peers[back.port] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"  # as grpcio's
        back.transport.write(b"".join(self.pending or ()))
        self.pending = None
        # each side stops reading while the other's writes back up (twisted.protocols.portforward)
        self.transport.registerProducer(back.transport, True)
        back.transport.registerProducer(self.transport, True)
        self.transport.resumeProducing()

    def connectionLost(self, reason: Any = protocol.connectionDone) -> None:  # noqa: N802
        self.lost = True
        self._cancel_timer()
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
        log.warn("gRPC port: grpcio's loopback port {p} refused a connection: {r}", p=connector.getDestination().port,
                 r=reason.getErrorMessage())
        self.front.transport.loseConnection()


def _no_delay(transport: Any) -> None:
    """gRPC writes small frames and waits for answers: Nagle's delay would add up to 40 ms each."""
    set_no_delay = getattr(transport, "setTcpNoDelay", None)
    if set_no_delay is not None:
        set_no_delay(True)
