"""rmqpy.remoting.reactor: Twisted's epoll reactor without a log context per event still serves
connections, and logs what escapes an event with the connection's prefix as its system."""
from __future__ import annotations

from typing import Any

from twisted.internet import defer, protocol
from twisted.python import log

from rmqpy.remoting.reactor import EPollReactor


def run(coro_fn: Any, timeout: float = 20.0) -> Any:
    r = EPollReactor()
    out: dict[str, Any] = {}

    def go() -> None:
        d = defer.ensureDeferred(coro_fn(r))
        d.addBoth(lambda x: (out.setdefault("result", x), r.stop()))

    r.callWhenRunning(go)
    r.callLater(timeout, lambda: (out.setdefault("result", TimeoutError("still running")), r.stop()))
    r.run(installSignalHandlers=False)
    for reader in list(r.getReaders()):
        if reader is not r.waker:
            r.removeReader(reader)
            reader.connectionLost(None)
    res = out["result"]
    if isinstance(res, BaseException):
        raise res
    return res


class Echo(protocol.Protocol):
    def dataReceived(self, data: bytes) -> None:
        self.transport.write(data)
        if data.endswith(b"bye"):
            self.transport.loseConnection()

    def connectionLost(self, reason: Any = None) -> None:
        raise RuntimeError("a connectionLost that raises")


class Client(protocol.Protocol):
    def __init__(self) -> None:
        self.got, self.closed = b"", defer.Deferred()

    def connectionMade(self) -> None:
        self.transport.write(b"hello, bye")

    def dataReceived(self, data: bytes) -> None:
        self.got += data

    def connectionLost(self, reason: Any = None) -> None:
        self.closed.callback(self.got)


def test_connections_are_served_and_escaping_errors_logged_with_their_prefix() -> None:
    errors: list[dict] = []

    def observe(event: dict) -> None:
        if event.get("isError"):
            errors.append(event)

    async def exchange(r: EPollReactor) -> bytes:
        port = r.listenTCP(0, protocol.Factory.forProtocol(Echo), interface="127.0.0.1")
        client = Client()
        r.connectTCP("127.0.0.1", port.getHost().port, protocol.ClientFactory.forProtocol(lambda: client))
        got = await client.closed
        await port.stopListening()
        return got

    log.addObserver(observe)
    try:
        assert run(exchange) == b"hello, bye"
    finally:
        log.removeObserver(observe)
    [error] = errors
    assert error["system"].startswith("Echo,") and "a connectionLost that raises" in str(error["failure"].value)
