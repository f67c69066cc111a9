"""Remoting requests run in-process, as the 5.x proxy's local mode runs them on its broker.

The gRPC activities turn each call into the broker's own remoting request and hand it to the
broker's :class:`~rmqpy.remoting.dispatch.RequestDispatcher` through a :class:`LocalChannel`: the
processor, the request hooks (ACL), the metrics and the error answers are the ones a remoting
client gets, and the answer comes back as a Deferred instead of a frame. Runs on the reactor.

A LocalChannel is also what the broker's producer and consumer tables hold for a gRPC client (as
5.3.3's ``GrpcClientChannel``): a request the broker sends to the client goes to ``push``, which
the activities set to write the client's Telemetry stream while one is open. One that waits for an
answer (``invoke``: GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY) goes out with a nonce,
and the client's answer on the stream, carrying the nonce, comes back through ``answer`` (as the
proxy's ``GrpcChannelManager`` keeps the relay futures by nonce).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable

from twisted.internet import defer

from rmqpy.protocol.codes import LanguageCode, MQVersion, ResponseCode
from rmqpy.protocol.command import RemotingCommand

RELAY_TIMEOUT_S = 5.0  # ProxyConfig.grpcProxyRelayRequestTimeoutInSeconds
MAX_RELAYED = 64  # requests waiting for one client's answer; Java's table has no bound but its expiry

#: ``push(request, nonce)`` writes the request to the client's stream; True when it went out as a
#: command the client answers with ``nonce`` (False: nothing the client answers was written)
Push = Callable[[RemotingCommand, str], bool]


class NoTelemetryStream(ConnectionError):
    """The client has no Telemetry stream open: the broker cannot reach it."""


@dataclass
class _Relayed:
    """A request of the broker written to the client, waiting for the answer with its nonce."""

    request: RemotingCommand
    answered: defer.Deferred[RemotingCommand]
    timer: Any  # IDelayedCall


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
        # (settings, group, (body, its HeartbeatData)): the HEART_BEAT body last built from them
        # (GrpcClients.register)
        self.heartbeat_body: tuple[Any, str | None, tuple[bytes, Any] | None] | None = None
        self.push: Push | None = None  # set while a Telemetry stream is open
        self.last_used = clock.seconds()
        self.read_at: float | None = None
        self._opaque = itertools.count(1)
        self._waiting: dict[int, defer.Deferred[RemotingCommand]] = {}
        self._nonces = itertools.count()
        self._relayed: dict[str, _Relayed] = {}  # nonce -> the broker's request waiting for the client

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
        consumerStatus and queryMsgById/consumeMessage send through the broker).

        It goes to the client's Telemetry stream with a new nonce (``push``); the Deferred fires
        with the broker's response built from the client's answer (``answer``). Unanswered, the
        request ends as it does behind the proxy: after ``grpcProxyRelayRequestTimeoutInSeconds``
        the relay answers SYSTEM_BUSY "call remote timeout", unless the broker's own wait
        (``timeout``) is shorter, or nothing the client answers was written (a consumerStatus
        without jstack): then the Deferred fails with ``defer.TimeoutError`` after ``timeout``, as
        the broker's ``invokeSync`` does. Without an open stream it fails at once: nothing could
        answer (the proxy writes nowhere and waits out its relay timeout instead)."""
        if self.push is None:
            return defer.fail(NoTelemetryStream(f"gRPC client {self.client_id} has no Telemetry stream open"))
        if len(self._relayed) >= MAX_RELAYED:  # a client that does not answer holds at most this many
            return defer.fail(ConnectionError(
                f"{MAX_RELAYED} requests to gRPC client {self.client_id} are waiting for its answer"))
        nonce = str(next(self._nonces))
        answered: defer.Deferred[RemotingCommand] = defer.Deferred()
        relayed = self._relayed[nonce] = _Relayed(request, answered, None)
        try:
            written = self.push(request, nonce)
        except Exception:  # the request cannot become a command (a body that is no message)
            del self._relayed[nonce]
            return defer.fail()
        relay = written and RELAY_TIMEOUT_S <= timeout
        relayed.timer = self.clock.callLater(RELAY_TIMEOUT_S if relay else timeout, self._expire, nonce, relay)
        return answered

    def answer(self, nonce: str, code: int, respond: Callable[[RemotingCommand], RemotingCommand]) -> bool:
        """The client answered the command sent with ``nonce``: the request's Deferred fires with
        ``respond(request)``. False (nothing happens) when no request of ``code`` waits for that
        nonce: an answer that came too late, twice, or for a command never sent."""
        relayed = self._relayed.get(nonce)
        if relayed is None or relayed.request.code != code:
            return False
        del self._relayed[nonce]
        relayed.timer.cancel()
        relayed.answered.callback(respond(relayed.request))
        return True

    def _expire(self, nonce: str, relay: bool) -> None:
        relayed = self._relayed.pop(nonce)
        if relay:  # GrpcChannelManager.scanExpireResultFuture
            relayed.answered.callback(relayed.request.response(ResponseCode.SYSTEM_BUSY, "call remote timeout"))
        else:
            relayed.answered.errback(defer.TimeoutError(f"no answer from gRPC client {self.client_id}"))

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """A request of the broker to this client: to its Telemetry stream, if one is open (as
        ``GrpcClientChannel.writeTelemetryCommand``, which drops it otherwise)."""
        if self.push is not None:
            self.push(request, "")

    def close(self) -> None:
        """The broker closes an expired client's channel: the calls and the broker's requests still
        waiting fail (no answer can come any more)."""
        waiting, self._waiting = self._waiting, {}
        for d in waiting.values():
            d.errback(ConnectionError("client channel closed"))
        relayed, self._relayed = self._relayed, {}
        for r in relayed.values():
            r.timer.cancel()
            r.answered.errback(ConnectionError("client channel closed"))
