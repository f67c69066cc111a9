"""The broker's listening side: remoting connections that remember when they last read.

Java's server pipeline closes a connection idle for ``serverChannelMaxIdleTimeSeconds``
(120 s); the controller's channel scan uses :attr:`last_active_ms` to do the same.
"""
from __future__ import annotations

from typing import Any, Callable

from rmqpy.remoting.protocol import RemotingProtocol, RemotingServerFactory


class BrokerServerFactory(RemotingServerFactory):
    def __init__(self, dispatcher: Any, clock: Any, now_ms: Callable[[], int], **kwargs: Any) -> None:
        super().__init__(dispatcher, clock, **kwargs)
        self.now_ms = now_ms

    def buildProtocol(self, addr: object) -> RemotingProtocol:  # noqa: N802 (Twisted's name)
        proto = super().buildProtocol(addr)
        proto.attributes["last_active_ms"] = self.now_ms()
        received = proto.dataReceived

        def data_received(data: bytes) -> None:
            proto.attributes["last_active_ms"] = self.now_ms()
            received(data)

        proto.dataReceived = data_received  # type: ignore[method-assign]
        return proto

    def idle_channels(self, max_idle_ms: int) -> list[RemotingProtocol]:
        now = self.now_ms()
        return [p for p in list(self.channels)
                if now - int(p.attributes.get("last_active_ms", now)) > max_idle_ms]
