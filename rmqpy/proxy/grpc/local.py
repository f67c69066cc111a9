"""Remoting requests run in-process, as the 5.x proxy's local mode runs them on its broker.

The gRPC activities turn each call into the broker's own remoting request and hand it to the
broker's :class:`~rmqpy.remoting.dispatch.RequestDispatcher` through a :class:`LocalChannel`: the
processor, the request hooks (ACL), the metrics and the error answers are the ones a remoting
client gets, and the answer comes back as a Deferred instead of a frame. Runs on the reactor.
"""
from __future__ import annotations

import itertools
from typing import Any

from twisted.internet import defer

from rmqpy.protocol.command import RemotingCommand


class LocalChannel:
    """What a processor sees of one gRPC client: its address and a way to answer."""

    connected_ = True

    def __init__(self, remote_address: str, clock: Any) -> None:
        self.remote_address = remote_address  # host:port, as a remoting connection names its peer
        host, _, port = remote_address.rpartition(":")
        self.remote_host = host.strip("[]") or remote_address
        self.remote_port = int(port) if port.isdigit() else 0
        self.local_address = "grpc"
        self.clock = clock
        self.read_at: float | None = None
        self._opaque = itertools.count(1)
        self._waiting: dict[int, defer.Deferred[RemotingCommand]] = {}

    def invoke(self, dispatcher: Any, request: RemotingCommand) -> defer.Deferred[RemotingCommand]:
        request.opaque = next(self._opaque)
        d: defer.Deferred[RemotingCommand] = defer.Deferred()
        self._waiting[request.opaque] = d
        self.read_at = self.clock.seconds()
        dispatcher.dispatch(self, request)
        return d

    def send_command(self, response: RemotingCommand) -> None:
        d = self._waiting.pop(response.opaque, None)
        if d is not None:
            d.callback(response)

    def close(self) -> None:
        """The broker closes an expired client's channel: nothing to close in-process."""
        self.connected_ = False
        waiting, self._waiting = self._waiting, {}
        for d in waiting.values():
            d.errback(ConnectionError("client channel closed"))
