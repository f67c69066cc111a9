"""The broker's gRPC endpoint: ``apache.rocketmq.v2.MessagingService`` on ``grpcServerPort``.

How grpcio shares the process with Twisted: grpcio's own server runs its calls on a bounded
thread pool, and each call hands its work to the reactor (``callFromThread``, then waits for the
Deferred's result, as ``blockingCallFromThread`` does: :mod:`rmqpy.proxy.grpc.servicer`); the activities
(:mod:`rmqpy.proxy.grpc.activities`) return Deferreds and touch broker state only on the reactor
thread. This needs no reactor choice: ``twistd`` keeps its default reactor, where ``grpc.aio``
would need Twisted's asyncio reactor installed before anything imports the reactor.
Measured (bench/grpc_python_demo.py, one host): the official Python client sends 300 messages
one by one in 0.31-0.37 s and receives and acks them in 0.40-0.45 s through this bridge; the
client's own round trip dominates. ``grpc.aio`` on Twisted's asyncio reactor was measured against
this bridge in ``bench/grpc_bridge_bench.py`` (bench/README.md) and not taken.

The price is a thread per call in progress: long-polling receives and each client's telemetry
stream hold one for their length. So the endpoint admits ``grpcThreadPoolNums`` calls at once and
has a thread for each (:func:`grpc_server`); beyond that grpcio answers RESOURCE_EXHAUSTED at once,
so nothing queues, and no number of open streams can leave a unary call waiting for a thread. A
request larger than ``grpcMaxInboundMessageSize`` is refused by grpcio (RESOURCE_EXHAUSTED), and a
malformed protobuf by grpcio too (INTERNAL). A SendMessage body over 1 MiB is left out of the
protobuf decode: one over ``maxMessageSize`` is refused by its size, one within it is sliced from the
request on grpcio's thread (:mod:`rmqpy.proxy.grpc.large`).

TLS: the ``tls.*`` keys of the remoting ports, with certificate reload (:mod:`rmqpy.proxy.grpc.tls`).
In ``permissive`` mode (the default, with a self-signed certificate as Java's test mode) TLS and plain
text share the port through :mod:`rmqpy.proxy.grpc.front`, since grpcio serves one kind per port.
"""
from __future__ import annotations

import concurrent.futures
import logging
from typing import Any

import grpc
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc
from twisted.application import service
from twisted.internet import threads

from rmqpy.proxy.grpc.activities import MessagingActivities
from rmqpy.proxy.grpc.auth import GrpcAuth
from rmqpy.proxy.grpc.front import DEFAULT_MAX_PENDING, LOOPBACK, GrpcFront
from rmqpy.proxy.grpc.large import Trimmer, send_request
from rmqpy.proxy.grpc.servicer import MessagingServicer
from rmqpy.remoting.connection_limits import ConnectionCap
from rmqpy.remoting.ratelimit import RateLimitedLogger

SERVICE = "apache.rocketmq.v2.MessagingService"


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


def grpc_server(max_calls: int, max_inbound: int, idle_ms: int = 120_000) -> grpc.Server:
    """A grpcio server that admits ``max_calls`` calls at once and has a pool thread for each.

    grpcio's synchronous server runs a call on a pool thread for the call's whole length. With fewer
    threads than admitted calls, the long ones (a client's Telemetry stream lasts as long as the client
    runs) took every thread, and every later call, unary ones included, waited in the pool's queue
    for good: 64 connected clients stopped an endpoint of 64 threads and 1024 calls. Here a call over
    the limit is refused with RESOURCE_EXHAUSTED instead. The pool starts threads only as calls need
    them.

    ``idle_ms`` (``grpcClientIdleTimeMills``) is the proxy's ``maxConnectionIdle``: a connection without
    a call in progress for that long gets a GOAWAY and is closed (grpc-java's ``MaxConnectionIdleManager``
    counts from the last call's end; grpc core's ``grpc.max_connection_idle_ms`` is the same rule).
    <= 0: never."""
    pool = concurrent.futures.ThreadPoolExecutor(max_calls, thread_name_prefix="grpc")
    options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", max_inbound),
        ("grpc.max_send_message_length", -1),
        ("grpc.so_reuseport", 0),
    ]
    if idle_ms > 0:
        options.append(("grpc.max_connection_idle_ms", idle_ms))
    return grpc.server(pool, maximum_concurrent_rpcs=max_calls, options=options)


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
        server = grpc_server(self.max_calls, self.max_inbound, self.idle_ms)
        self.servicer = MessagingServicer(self.activities, self.reactor, self.auth)
        self._grpcio_lines = _GrpcioLines(self.reactor)
        for name in ("grpc._common", "grpc._server"):
            logging.getLogger(name).addFilter(self._grpcio_lines)
        # SendMessage first, with its own deserializer: large bodies are left out of the protobuf decode
        # (rmqpy.proxy.grpc.large); the generated handlers answer the other methods
        self.trimmer = self.servicer.trimmer = Trimmer()
        store_config = self.activities.broker.store_config
        send = grpc.unary_unary_rpc_method_handler(
            self.servicer.SendMessage, response_serializer=spb.SendMessageResponse.SerializeToString,
            request_deserializer=send_request(lambda: store_config.maxMessageSize, self.trimmer))
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {"SendMessage": send}),))
        sgrpc.add_MessagingServiceServicer_to_server(self.servicer, server)
        host = f"[{self.host}]" if ":" in self.host else self.host
        kind = "plain text"
        if self.tls is not None and self.tls.settings.server_mode == "permissive":
            # TLS and plain text on one port: grpcio serves each on loopback, the front picks per connection
            plain = server.add_insecure_port(f"{LOOPBACK}:0")
            secure = server.add_secure_port(f"{LOOPBACK}:0", self.tls.credentials())
            self.front = GrpcFront(self.reactor, plain, secure, self.tls.settings.handshake_timeout,
                                   idle_timeout=self.idle_ms / 1000.0, cap=self.cap, max_pending=self.max_pending)
            self.servicer.peers = self.front.peers
            self.listening = self.reactor.listenTCP(self.port, self.front, interface=self.host)
            self.bound_port = self.listening.getHost().port
            kind = "TLS and plain text"
        elif self.tls is not None:
            self.bound_port = server.add_secure_port(f"{host}:{self.port}", self.tls.credentials())
            kind = "TLS"
        else:
            self.bound_port = server.add_insecure_port(f"{host}:{self.port}")
        self.activities.grpc_port = self.bound_port  # what routes name when grpcServerPort=0
        server.start()
        self.server = server
        self.activities.receipts.start()
        self.log.info("gRPC endpoint (apache.rocketmq.v2.MessagingService) listening on {h}:{p} ({k})", h=self.host,
                      p=self.bound_port, k=kind)

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
        for name in ("grpc._common", "grpc._server"):
            logging.getLogger(name).removeFilter(self._grpcio_lines)
        # calls in progress wait on the reactor: it runs until this Deferred fires
        return threads.deferToThread(lambda: server.stop(grace=1.0).wait(5))
