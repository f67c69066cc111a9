"""The client side: one cached connection per address, as NettyRemotingClient keeps them.

Used by the broker to talk to name servers and to clients, and by tests and tools.
"""
from __future__ import annotations

from typing import Callable

from twisted.internet import defer, protocol
from twisted.internet.endpoints import HostnameEndpoint
from twisted.logger import Logger

from rmqpy.protocol import command as codec
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.dispatch import RequestDispatcher
from rmqpy.remoting.protocol import RemotingConnectionError, RemotingProtocol


def split_address(addr: str) -> tuple[str, int]:
    host, _, port = addr.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"not a host:port address: {addr!r}")
    return host.strip("[]"), int(port)


class _ClientFactory(protocol.Factory):
    def __init__(self, make: Callable[[], RemotingProtocol]) -> None:
        self._make = make

    def buildProtocol(self, addr: object) -> RemotingProtocol:
        return self._make()


class RemotingClient:
    log = Logger()

    def __init__(self, reactor: object, dispatcher: RequestDispatcher | None = None,
                 connect_timeout: float = 3.0, max_frame: int = codec.DEFAULT_MAX_FRAME,
                 endpoint_factory: Callable[[object, str, int], object] | None = None) -> None:
        self.reactor = reactor
        self.dispatcher = dispatcher
        self.connect_timeout = connect_timeout
        self.max_frame = max_frame
        # Builds the client endpoint for host, port; TLS swaps in a wrapping endpoint.
        self.endpoint_factory = endpoint_factory or (
            lambda r, h, p: HostnameEndpoint(r, h, p, timeout=self.connect_timeout))
        # Java's client RPCHook.doBeforeRequest (e.g. AclClientRPCHook): called with the address and
        # each request this client sends, before it is encoded
        self.request_hooks: list[Callable[[str, RemotingCommand], None]] = []
        self._connections: dict[str, RemotingProtocol] = {}
        self._connecting: dict[str, list[defer.Deferred[RemotingProtocol]]] = {}

    def connection(self, addr: str) -> defer.Deferred[RemotingProtocol]:
        """A connected RemotingProtocol for ``addr`` (cached while it stays open)."""
        proto = self._connections.get(addr)
        if proto is not None and proto.connected_:
            return defer.succeed(proto)
        waiting = self._connecting.get(addr)
        d: defer.Deferred[RemotingProtocol] = defer.Deferred()
        if waiting is not None:
            waiting.append(d)
            return d
        self._connecting[addr] = [d]
        try:
            host, port = split_address(addr)
        except ValueError as exc:
            self._finish(addr, failure=exc)
            return d
        endpoint = self.endpoint_factory(self.reactor, host, port)
        factory = _ClientFactory(lambda: _ClientProtocol(self, addr))
        connecting = endpoint.connect(factory)  # type: ignore[attr-defined]
        connecting.addCallbacks(lambda p: self._finish(addr, proto=p),
                                lambda f: self._finish(addr, failure=RemotingConnectionError(
                                    f"connect to {addr} failed: {f.getErrorMessage()}")))
        return d

    def open_connection(self, addr: str) -> RemotingProtocol | None:
        """The open connection to ``addr``, if any (a new one after a reconnect: its identity
        tells whether the peer may have restarted since)."""
        proto = self._connections.get(addr)
        return proto if proto is not None and proto.connected_ else None

    def _finish(self, addr: str, proto: RemotingProtocol | None = None,
                failure: Exception | None = None) -> None:
        waiters = self._connecting.pop(addr, [])
        if proto is not None:
            self._connections[addr] = proto
        for w in waiters:
            if proto is not None:
                w.callback(proto)
            else:
                w.errback(failure)

    def _lost(self, addr: str, proto: RemotingProtocol) -> None:
        if self._connections.get(addr) is proto:
            del self._connections[addr]

    def _before(self, addr: str, request: RemotingCommand) -> None:
        for hook in self.request_hooks:
            hook(addr, request)

    def invoke(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> defer.Deferred[RemotingCommand]:
        self._before(addr, request)
        return self.connection(addr).addCallback(lambda p: p.invoke(request, timeout))

    def invoke_oneway(self, addr: str, request: RemotingCommand) -> defer.Deferred[None]:
        self._before(addr, request)
        return self.connection(addr).addCallback(lambda p: p.invoke_oneway(request))

    def close(self) -> None:
        for proto in list(self._connections.values()):
            proto.close()
        self._connections.clear()


class _ClientProtocol(RemotingProtocol):
    def __init__(self, client: RemotingClient, addr: str) -> None:
        super().__init__(client.dispatcher, client.reactor, client.max_frame)  # type: ignore[arg-type]
        self._client = client
        self._addr = addr

    def connectionLost(self, reason: object = protocol.connectionDone) -> None:
        self._client._lost(self._addr, self)
        super().connectionLost(reason)  # type: ignore[arg-type]
