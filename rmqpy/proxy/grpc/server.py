"""The broker's gRPC endpoint: ``apache.rocketmq.v2.MessagingService`` on ``grpcServerPort``.

How grpcio shares the process with Twisted: grpcio's asyncio server (``grpc.aio``) runs on an asyncio
loop of its own thread (:mod:`rmqpy.proxy.grpc.aioloop`), each call a coroutine that hands its work to
the reactor and awaits the Deferred's result (:mod:`rmqpy.proxy.grpc.servicer`); the activities
(:mod:`rmqpy.proxy.grpc.activities`) return Deferreds and touch broker state only on the reactor
thread. ``twistd`` keeps its default reactor.

Why not grpcio's synchronous server, which rmqpy ran before (issue 31 case 2): it holds a thread for a
call's whole length, and every RocketMQ 5 client keeps a Telemetry stream open (with a second thread
reading it) and long-polling receives besides, so the threads were the bound on clients: 1,024 open
streams refused every other client's calls. As the proxy's asynchronous calls, an open stream here
costs a coroutine, not a thread. ``grpcThreadPoolQueueCapacity`` (the proxy's bound on work waiting
for its executor, 100,000) bounds the calls in progress at once; beyond it grpcio answers
RESOURCE_EXHAUSTED at once, and the connection caps of the port (``grpcMaxConnections``,
``grpcMaxConnectionsPerAddress``) and ``grpc.max_concurrent_streams`` per connection bound what one
source can hold. A request larger than ``grpcMaxInboundMessageSize`` is refused by grpcio
(RESOURCE_EXHAUSTED), and a malformed protobuf by grpcio too (INTERNAL). A SendMessage body over
1 MiB is left out of the protobuf decode: one over ``maxMessageSize`` is refused by its size, one
within it is sliced from the request (:mod:`rmqpy.proxy.grpc.large`).

TLS: the ``tls.*`` keys of the remoting ports, with certificate reload (:mod:`rmqpy.proxy.grpc.tls`).
In ``permissive`` mode (the default, with a self-signed certificate as Java's test mode) TLS and plain
text share the port through :mod:`rmqpy.proxy.grpc.front`, since grpcio serves one kind per port.
"""
from __future__ import annotations

import logging
from typing import Any

import grpc
from twisted.application import service
from twisted.internet import threads

from rmqpy.proxy.grpc.activities import MessagingActivities
from rmqpy.proxy.grpc.aioloop import AioThread
from rmqpy.proxy.grpc.auth import GrpcAuth
from rmqpy.proxy.grpc.front import DEFAULT_MAX_PENDING, LOOPBACK, GrpcFront
from rmqpy.proxy.grpc.handlers import Malformed, service_handler
from rmqpy.proxy.grpc.large import Trimmer, send_request
from rmqpy.proxy.grpc.servicer import MessagingServicer
from rmqpy.remoting.connection_limits import ConnectionCap
from rmqpy.remoting.ratelimit import RateLimitedLogger

#: where grpcio logs a request it cannot serve: its synchronous server's modules and the asyncio
#: server's (in its Cython core)
GRPCIO_LOGGERS = ("grpc._common", "grpc._server", "grpc._cython.cygrpc", "grpc.aio._server")


class _GrpcioLines(logging.Filter):
    """grpcio logs a request it cannot decode (a malformed protobuf) with a traceback on its own
    threads; a client could write one per request. This turns each into one rate-limited line,
    logged on the reactor, and drops the traceback."""

    log = RateLimitedLogger()

    def __init__(self, reactor: Any) -> None:
        super().__init__()
        self.reactor = reactor

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage().splitlines()[0][:200] if record.getMessage() else record.name
        reason = f"{type(record.exc_info[1]).__name__}: {str(record.exc_info[1])[:200]}" if record.exc_info else ""
        self.reactor.callFromThread(lambda: self.log.warn("grpcio: {t} {r}", t=text, r=reason))
        return False


#: streams one connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): an official
#: client has its Telemetry stream and a few receives in flight on a connection
MAX_STREAMS_PER_CONNECTION = 1024


def grpc_server(max_calls: int, max_inbound: int, idle_ms: int = 120_000) -> grpc.aio.Server:
    """A ``grpc.aio`` server that admits ``max_calls`` calls at once; more are refused with
    RESOURCE_EXHAUSTED (and as many may wait in grpc core for the loop). Made on the loop that will
    run it.

    ``idle_ms`` (``grpcClientIdleTimeMills``) is the proxy's ``maxConnectionIdle``: a connection without
    a call in progress for that long gets a GOAWAY and is closed (grpc-java's ``MaxConnectionIdleManager``
    counts from the last call's end; grpc core's ``grpc.max_connection_idle_ms`` is the same rule).
    <= 0: never."""
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", max_inbound),
        ("grpc.max_send_message_length", -1),
        ("grpc.so_reuseport", 0),
        ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
        # A call that arrives before grpcio's asyncio server has asked grpc core for the next one
        # waits in core's own queue, which by default cancels (CANCELLED) what is beyond 1,000 there:
        # a client acking one receive round of 4 x 8 x 32 messages sends about 1,000 AckMessage calls
        # at once, and those cancelled came back only after their invisible time (receive+ack 6x
        # slower, bench/report/grpc/README.md). That queue is bounded as the admitted calls are.
        ("grpc.server.max_pending_requests", max_calls),
        ("grpc.server.max_pending_requests_hard_limit", max_calls),
    ]
    if idle_ms > 0:
        options.append(("grpc.max_connection_idle_ms", idle_ms))
    return grpc.aio.server(maximum_concurrent_rpcs=max_calls, options=options)


class GrpcServerService(service.Service):
    """Serves the endpoint while the broker runs; ``bound_port`` once started (0: an ephemeral port)."""

    log = RateLimitedLogger()

    def __init__(self, activities: MessagingActivities, reactor: Any, host: str, port: int,
                 max_calls: int = 1024, max_inbound: int = 130 * 1024 * 1024, tls: Any = None,
                 auth: GrpcAuth | None = None, idle_ms: int = 120_000, cap: ConnectionCap | None = None,
                 max_pending: int = DEFAULT_MAX_PENDING) -> None:
        self.activities, self.reactor, self.host, self.port = activities, reactor, host, port
        self.tls = tls  # rmqpy.proxy.grpc.tls.GrpcTls, or None for plain text
        self.auth = auth  # rmqpy.proxy.grpc.auth.GrpcAuth when the broker authenticates or authorizes
        self.max_calls, self.max_inbound = max_calls, max_inbound
        # the port's bounds: grpcClientIdleTimeMills, the connection caps and the front's pending bytes
        # (the last two only where the front holds the port: permissive TLS, the default)
        self.idle_ms, self.cap, self.max_pending = idle_ms, cap, max_pending
        self.server: Any = None
        self.front: GrpcFront | None = None
        self.listening: Any = None  # the front's port
        self.bound_port = 0

    def startService(self) -> None:  # noqa: N802 (Twisted's name)
        super().startService()
        self.servicer = MessagingServicer(self.activities, self.reactor, self.auth)
        self._grpcio_lines = _GrpcioLines(self.reactor)
        for name in GRPCIO_LOGGERS:
            logging.getLogger(name).addFilter(self._grpcio_lines)
        self.trimmer = self.servicer.trimmer = Trimmer()
        self.aio = AioThread()
        self.aio.start()
        # the ports are bound before this returns, as a listenTCP's: a bad port fails the start
        plain, secure = self.aio.submit(self._serve()).result(30)
        kind = "plain text"
        if plain and secure:  # TLS and plain text on one port: the front picks per connection
            assert self.tls is not None
            self.front = GrpcFront(self.reactor, plain, secure, self.tls.settings.handshake_timeout,
                                   idle_timeout=self.idle_ms / 1000.0, cap=self.cap, max_pending=self.max_pending)
            self.servicer.peers = self.front.peers
            self.listening = self.reactor.listenTCP(self.port, self.front, interface=self.host)
            self.bound_port = self.listening.getHost().port
            kind = "TLS and plain text"
        else:
            self.bound_port = plain or secure
            kind = "TLS" if secure else "plain text"
        self.activities.grpc_port = self.bound_port  # what routes name when grpcServerPort=0
        self.activities.receipts.start()
        self.log.info("gRPC endpoint (apache.rocketmq.v2.MessagingService) listening on {h}:{p} ({k})", h=self.host,
                      p=self.bound_port, k=kind)

    async def _serve(self) -> tuple[int, int]:
        """On the loop: the server made, its methods added, its ports bound and started; the
        (plain, TLS) ports grpcio listens on (0: none)."""
        server = grpc_server(self.max_calls, self.max_inbound, self.idle_ms)
        # SendMessage with its own deserializer: large bodies are left out of the protobuf decode
        # (rmqpy.proxy.grpc.large)
        store_config = self.activities.broker.store_config
        send = send_request(lambda: store_config.maxMessageSize, self.trimmer)
        server.add_generic_rpc_handlers((service_handler(self.servicer, self._malformed, {"SendMessage": send}),))
        host = f"[{self.host}]" if ":" in self.host else self.host
        plain = secure = 0
        if self.tls is not None and self.tls.settings.server_mode == "permissive":
            # grpcio serves each kind on loopback; the front (on the reactor) holds the port
            plain = server.add_insecure_port(f"{LOOPBACK}:0")
            secure = server.add_secure_port(f"{LOOPBACK}:0", self.tls.credentials())
        elif self.tls is not None:
            secure = server.add_secure_port(f"{host}:{self.port}", self.tls.credentials())
        else:
            plain = server.add_insecure_port(f"{host}:{self.port}")
        await server.start()
        self.server = server
        return plain, secure

    def _malformed(self, method: str, request: Malformed) -> None:
        """On the loop: a request that is not a valid protobuf, one rate-limited line (the call ends INTERNAL)."""
        error = f"{type(request.error).__name__}: {str(request.error)[:200]}"
        self.reactor.callFromThread(self.log.warn, "gRPC {m}: malformed request: {e}", m=method, e=error)

    def stopService(self) -> Any:  # noqa: N802
        super().stopService()
        self.activities.receipts.stop()
        server, self.server = self.server, None
        if server is None:
            return None
        if self.listening is not None:
            listening, self.listening = self.listening, None
            listening.stopListening()  # open connections end with grpcio's, below
        self.servicer.stopping = True
        self.trimmer.stop()
        for name in GRPCIO_LOGGERS:
            logging.getLogger(name).removeFilter(self._grpcio_lines)
        # calls in progress wait on the reactor: it runs until this Deferred fires
        return threads.deferToThread(self.halt, server)

    def halt(self, server: Any, grace: float | None = 1.0) -> None:
        """Blocking (a thread's): grpcio's server stopped, calls left after ``grace`` cancelled, the loop ended."""
        try:
            self.aio.submit(server.stop(grace)).result(5)
        except Exception:  # noqa: BLE001 (a timeout: the loop's stop cancels what is left)
            pass
        self.aio.stop()
