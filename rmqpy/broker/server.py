"""The broker's listening side: one remoting factory per port, all sharing one dispatcher.

Java's server pipeline closes a connection idle for ``serverChannelMaxIdleTimeSeconds``
(120 s); here the broker's :class:`~rmqpy.remoting.limits.ChannelSweeper` does it for both
ports, as the name server's does for its one.
"""
from __future__ import annotations

from typing import Any, Callable

from rmqpy.remoting.protocol import RemotingServerFactory


class BrokerServerFactory(RemotingServerFactory):
    def __init__(self, dispatcher: Any, clock: Any, now_ms: Callable[[], int], **kwargs: Any) -> None:
        super().__init__(dispatcher, clock, **kwargs)
        self.now_ms = now_ms
