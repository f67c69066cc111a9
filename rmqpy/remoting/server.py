"""A listening remoting port as a Twisted service."""
from __future__ import annotations

from typing import Any, Callable

from twisted.application import service
from twisted.internet import defer
from twisted.internet.protocol import Factory

from rmqpy.remoting import eager

FactoryWrapper = Callable[[Factory], Factory]


class RemotingServerService(service.Service):
    """Listens on ``interface:port`` with a remoting factory.

    ``wrap_factory`` lets TLS put its first-byte detector in front of the remoting protocol
    without the processors knowing. ``port=0`` picks a free port (see ``port_number``).
    ``eager_writes`` gives the connections the write-at-once transport of ``remoting.eager``.
    """

    def __init__(self, reactor: Any, port: int, factory: Factory, interface: str = "",
                 wrap_factory: FactoryWrapper | None = None, eager_writes: bool = False) -> None:
        self.reactor = reactor
        self.port = port
        self.interface = "" if interface in ("0.0.0.0", None) else interface
        self.factory = factory
        self.wrap_factory = wrap_factory
        self.eager_writes = eager_writes
        self._listening: Any = None

    def startService(self) -> None:
        super().startService()  # type: ignore[no-untyped-call]  # Twisted: unannotated
        factory = self.wrap_factory(self.factory) if self.wrap_factory else self.factory
        if self.eager_writes:
            self._listening = eager.listen_tcp(self.reactor, self.port, factory, self.interface)
        else:
            self._listening = self.reactor.listenTCP(self.port, factory, interface=self.interface)

    def stopService(self) -> defer.Deferred[None] | None:
        super().stopService()  # type: ignore[no-untyped-call]  # Twisted: unannotated
        port, self._listening = self._listening, None
        if port is not None:
            return defer.maybeDeferred(port.stopListening)
        return None

    @property
    def port_number(self) -> int:
        return self._listening.getHost().port if self._listening is not None else self.port
