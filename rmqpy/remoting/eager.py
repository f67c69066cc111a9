"""A TCP port whose connections send their writes themselves, once per reactor turn.

Twisted's ``FileDescriptor.write`` only queues: it registers the socket for writability
(one ``epoll_ctl``), a later reactor turn sends, and with the queue empty unregisters it
(a second ``epoll_ctl``). A server that answers each request with one small frame pays
that, and a reactor dispatch of the write event, on every request. Netty, which the Java
servers use, writes to the socket in the flush call itself and only then falls back to
waiting for writability.

These connections hold what is written while nothing is queued before it and send it at
the end of the reactor turn that wrote it (after every event of one ``epoll_wait``), one
``send`` per connection: answers to the frames of one read go out together, and a client
woken by the first answer of a turn is still awake for the others instead of being woken
(an inter-processor interrupt on another core) once per answer. Whatever the socket does not
take at once (a full send buffer, an error) goes through Twisted's queue as before, and so
does a held write when anything else happens to the connection first (``writeSequence``, a
close): ordering, flow control (producers), half-close and error handling stay Twisted's.
"""
from __future__ import annotations

from typing import Any, Iterable

from twisted.internet import posixbase, tcp
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Factory


class EagerWriteServer(tcp.Server):
    """A server-side TCP connection that sends its writes at the end of the reactor turn."""

    _held: list[bytes] | None = None  # written this turn, not yet sent or queued
    server: EagerWritePort

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            if type(data) is bytes:
                if data:
                    held.append(data)
                return
            self._release()
        elif (type(data) is bytes and data and self.connected and not self.disconnecting
                and not self._writeDisconnected and not self.TLS
                and not self._tempDataBuffer and not self.dataBuffer):
            self._held = [data]
            self.server.hold(self)
            return
        super().write(data)  # type: ignore[no-untyped-call]  # Twisted: unannotated

    def send_held(self) -> None:
        """Send what this turn wrote (the port calls it at the end of the turn)."""
        held = self._held
        if held is None:
            return
        self._held = None
        data = held[0] if len(held) == 1 else b"".join(held)
        if not self.connected or self.disconnecting or self._writeDisconnected:
            super().write(data)  # type: ignore[no-untyped-call]  # Twisted decides (drops when closed)
            return
        try:
            sent = self.socket.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:  # queued instead: Twisted's own write attempt reports the error
            sent = 0
        if sent != len(data):
            super().write(data[sent:])  # type: ignore[no-untyped-call]

    def _release(self) -> None:
        """Queue a held write in Twisted's buffer, ahead of whatever comes next."""
        held = self._held
        if held is not None:
            self._held = None
            super().write(b"".join(held))  # type: ignore[no-untyped-call]

    def writeSequence(self, iovec: Iterable[bytes]) -> None:  # noqa: N802
        self._release()
        super().writeSequence(iovec)  # type: ignore[no-untyped-call]

    def loseConnection(self, *args: Any) -> None:  # noqa: N802
        self._release()
        super().loseConnection(*args)  # type: ignore[no-untyped-call]

    def loseWriteConnection(self) -> None:  # noqa: N802
        self._release()
        super().loseWriteConnection()  # type: ignore[no-untyped-call]

    def abortConnection(self) -> None:  # noqa: N802
        self._held = None  # dropped with everything else unsent
        super().abortConnection()  # type: ignore[no-untyped-call]


class EagerWritePort(tcp.Port):
    transport = EagerWriteServer
    _holding: list[EagerWriteServer] | None = None  # connections with held writes this turn

    def hold(self, conn: EagerWriteServer) -> None:
        """Have ``conn``'s held write sent at the end of this reactor turn."""
        holding = self._holding
        if holding is None:
            self._holding = [conn]
            self.reactor.callLater(0, self._send_held)  # type: ignore[attr-defined]  # a PosixReactorBase
        else:
            holding.append(conn)

    def _send_held(self) -> None:
        holding, self._holding = self._holding, None
        for conn in holding or ():
            conn.send_held()


def listen_tcp(reactor: Any, port: int, factory: Factory, interface: str = "") -> IListeningPort:
    """``reactor.listenTCP`` with eager-writing connections on a file-descriptor reactor
    (epoll, poll, select, asyncio); any other reactor (a test's MemoryReactor) is asked
    to listen as usual."""
    if not isinstance(reactor, posixbase.PosixReactorBase):
        listening: IListeningPort = reactor.listenTCP(port, factory, interface=interface)
        return listening
    p = EagerWritePort(port, factory, interface=interface, reactor=reactor)
    p.startListening()
    return p
