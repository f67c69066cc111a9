"""What the servers' processors and services use of a connection: the :class:`Channel` protocol.

:class:`rmqpy.remoting.protocol.RemotingProtocol` implements it; unit tests hand processors a
stand-in with the same attributes. Typed so that nothing probes a channel for an attribute.
"""
from __future__ import annotations

from typing import Protocol

from twisted.internet import defer
from twisted.internet.interfaces import IAddress, IReactorTime

from rmqpy.protocol.command import RemotingCommand


class Channel(Protocol):
    remote_host: str
    remote_port: int
    #: ``host:port``, for log lines
    remote_address: str
    #: False once the connection is closed or closing
    connected_: bool
    #: when the last bytes were read (None: not read from a socket)
    read_at: float | None
    #: the clock of the connection's timers and rate-limited log lines
    clock: IReactorTime

    def send_command(self, cmd: RemotingCommand) -> None: ...

    def invoke(self, request: RemotingCommand, timeout: float = 3.0) -> defer.Deferred[RemotingCommand]: ...

    def invoke_oneway(self, request: RemotingCommand) -> None: ...

    def close(self) -> None: ...


def address_text(addr: IAddress | None) -> str:
    """``host:port`` of a TCP address, ``?`` for another kind (a UNIX socket, a test transport)."""
    from twisted.internet.address import IPv4Address, IPv6Address
    if isinstance(addr, (IPv4Address, IPv6Address)):
        return f"{addr.host}:{addr.port}"
    return "?"
