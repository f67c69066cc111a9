"""A TCP port whose connections send a write at once when nothing is queued before it.

Twisted's ``FileDescriptor.write`` only queues: it registers the socket for writability
(one ``epoll_ctl``), a later reactor turn sends, and with the queue empty unregisters it
(a second ``epoll_ctl``). A server that answers each request with one small frame pays
that, and a reactor dispatch of the write event, on every request. Netty, which the Java
servers use, writes to the socket in the flush call itself and only then falls back to
waiting for writability; these connections do the same. Whatever the socket does not
take at once (a full send buffer, an error) goes through Twisted's queue as before, so
ordering, flow control (producers), half-close and error handling stay Twisted's.
"""
from __future__ import annotations

from typing import Any

from twisted.internet import posixbase, tcp
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Factory


class EagerWriteServer(tcp.Server):
    """A server-side TCP connection that sends a write right away when its queue is empty."""

    def write(self, data: bytes) -> None:
        if (type(data) is bytes and data and self.connected and not self.disconnecting
                and not self._writeDisconnected and not self.TLS
                and not self._tempDataBuffer and not self.dataBuffer):
            try:
                sent = self.socket.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:  # queued instead: Twisted's own write attempt reports the error
                sent = 0
            if sent == len(data):
                return
            data = data[sent:]
        super().write(data)  # type: ignore[no-untyped-call]  # Twisted: unannotated


class EagerWritePort(tcp.Port):
    transport = EagerWriteServer


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
