"""Remoting requests run in-process, as the 5.x proxy's local mode runs them on its broker.

The gRPC activities turn each call into the broker's own remoting request and hand it to the
broker's :class:`~rmqpy.remoting.dispatch.RequestDispatcher` through a :class:`LocalChannel`: the
processor, the request hooks (ACL), the metrics and the error answers are the ones a remoting
client gets, and the answer comes back as a Deferred instead of a frame. Runs on the reactor.

A LocalChannel is also what the broker's producer and consumer tables hold for a gRPC client (as
5.3.3's ``GrpcClientChannel``): a request the broker sends to the client (``invoke_oneway``:
CHECK_TRANSACTION_STATE) goes to ``push``, which the activities set to write the client's
Telemetry stream while one is open.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable

from twisted.internet import defer

from rmqpy.protocol.codes import LanguageCode, MQVersion
from rmqpy.protocol.command import RemotingCommand


class LocalChannel:
    """What a processor sees of one gRPC client: its address and a way to answer."""

    connected_ = True

    def __init__(self, remote_address: str, clock: Any, client_id: str = "",
                 language: int = LanguageCode.OTHER, version: int = MQVersion.V5_3_3) -> None:
        self.remote_address = remote_address  # host:port, as a remoting connection names its peer
        host, _, port = remote_address.rpartition(":")
        self.remote_host = host.strip("[]") or remote_address
        self.remote_port = int(port) if port.isdigit() else 0
        self.local_address = "grpc"
        self.clock = clock
        self.client_id = client_id
        self.language, self.version = language, version  # what consumerConnection/producerConnection show
        self.settings: Any = None  # the client's raw Settings (apache.rocketmq.v2), from its Telemetry stream
        self.push: Callable[[RemotingCommand], None] | None = None  # set while a Telemetry stream is open
        self.last_used = clock.seconds()
        self.read_at: float | None = None
        self._opaque = itertools.count(1)
        self._waiting: dict[int, defer.Deferred[RemotingCommand]] = {}

    def call(self, dispatcher: Any, request: RemotingCommand) -> defer.Deferred[RemotingCommand]:
        """Runs ``request`` as this client's, through the broker's dispatcher; the answer comes back
        as the Deferred's result."""
        request.opaque = next(self._opaque)
        request.language, request.version = self.language, self.version
        d: defer.Deferred[RemotingCommand] = defer.Deferred()
        self._waiting[request.opaque] = d
        self.read_at = self.last_used = self.clock.seconds()
        dispatcher.dispatch(self, request)
        return d

    def send_command(self, response: RemotingCommand) -> None:
        d = self._waiting.pop(response.opaque, None)
        if d is not None:
            d.callback(response)

    def invoke(self, request: RemotingCommand, timeout: float = 3.0) -> defer.Deferred[RemotingCommand]:
        """A request of the broker to this client that waits for an answer (``Channel.invoke``: the
        admin codes GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY, which mqadmin's
        consumerStatus and consumeMessage send through the broker). The proxy turns them into the
        Telemetry commands PrintThreadStackTraceCommand and VerifyMessageCommand; rmqpy does not yet,
        so the broker answers the admin tool at once with this error instead of a wrong one."""
        return defer.fail(NotImplementedError(
            f"request code {request.code} to a gRPC client is not served by rmqpy's gRPC endpoint"))

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """A request of the broker to this client: to its Telemetry stream, if one is open (as
        ``GrpcClientChannel.writeTelemetryCommand``, which drops it otherwise)."""
        if self.push is not None:
            self.push(request)

    def close(self) -> None:
        """The broker closes an expired client's channel: the calls still waiting fail."""
        waiting, self._waiting = self._waiting, {}
        for d in waiting.values():
            d.errback(ConnectionError("client channel closed"))
