"""The broker's gRPC endpoint: ``apache.rocketmq.v2.MessagingService`` on ``grpcServerPort``.

How grpcio shares the process with Twisted: grpcio's own server runs its calls on a bounded
thread pool, and each call hands its work to the reactor (``callFromThread``, then waits for the
Deferred's result, as ``blockingCallFromThread`` does); the activities
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
malformed protobuf by grpcio too (INTERNAL).

TLS: the ``tls.*`` keys of the remoting ports, with certificate reload (:mod:`rmqpy.proxy.grpc.tls`).
In ``permissive`` mode (the default, with a self-signed certificate as Java's test mode) TLS and plain
text share the port through :mod:`rmqpy.proxy.grpc.front`, since grpcio serves one kind per port.
"""
from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
from typing import Any, Callable, Iterator

import grpc
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc
from twisted.application import service
from twisted.internet import defer, threads
from twisted.python.failure import Failure

from rmqpy.proxy.grpc.activities import MessagingActivities
from rmqpy.proxy.grpc.auth import GrpcAuth
from rmqpy.proxy.grpc.clients import bounded_answer
from rmqpy.proxy.grpc.convert import Code, status
from rmqpy.proxy.grpc.front import LOOPBACK, GrpcFront
from rmqpy.proxy.grpc.validate import Refused
from rmqpy.remoting.ratelimit import RateLimitedLogger

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"  # ReceiveMessageActivity picks its Code by it
# per stream: a client sends its settings once, then every 5 minutes, and answers what an admin tool asks
MAX_TELEMETRY_COMMANDS = 10_000
MAX_TELEMETRY_PENDING = 1024  # commands waiting to be written to one client's stream; more are dropped
_END = object()
ANSWERS = ("thread_stack_trace", "verify_message_result")  # a client's answers to the broker's commands


class _Servicer(sgrpc.MessagingServiceServicer):
    log = RateLimitedLogger()

    def __init__(self, activities: MessagingActivities, reactor: Any, auth: GrpcAuth | None = None) -> None:
        self.a = activities
        self.reactor = reactor
        self.auth = auth  # 5.x authentication and authorization of each call, when the broker has them on
        self.stopping = False
        self.peers: dict[int, str] = {}  # GrpcFront.peers when a front relays the connections

    # ------------------------------------------------------------------ the bridge
    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn`` on the reactor and wait for its result (a Deferred's, if it returns one).

        As ``blockingCallFromThread``, but a call still waiting when the service stops gives up
        (the reactor may never answer it), so that no grpcio thread outlives the reactor."""
        answer: queue.Queue[Any] = queue.Queue(1)
        self.reactor.callFromThread(lambda: defer.maybeDeferred(fn, *args).addBoth(answer.put))
        while True:
            try:
                result = answer.get(timeout=0.5)
            except queue.Empty:
                if self.stopping:
                    raise Refused(Code.INTERNAL_SERVER_ERROR, "the broker is shutting down") from None
                continue
            if isinstance(result, Failure):
                result.raiseException()
            return result

    def _answer(self, make: Callable[[Any], Any], fn: Callable[..., Any], *args: Any) -> Any:
        """``fn``'s response, or the error response built by ``make(status)`` (the proxy answers
        a refused request with an OK gRPC call carrying the Code)."""
        try:
            return self._call(fn, *args)
        except Refused as exc:  # bad input: one rate-limited line, then the proxy's Code
            # logged on the reactor: the logger's buckets and summary timers live there
            name, code, message = fn.__name__, Code.Name(exc.code), exc.message
            self.reactor.callFromThread(lambda: self.log.warn("gRPC {f} refused: {c} {m}", f=name, c=code,
                                                              m=message))
            return make(status(exc.code, exc.message))
        except Exception as exc:  # a bug: one line, and the proxy's INTERNAL_SERVER_ERROR
            self.reactor.callFromThread(self.log.failure, "grpc call failed", Failure())
            return make(status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {str(exc)[:200]}"))

    def _refused(self, request: Any, context: Any) -> Any:
        """None when the call passes authentication and authorization (if on), else the
        UNAUTHORIZED Status the proxy answers (``AuthenticationPipeline`` / ``AuthorizationPipeline``
        run before anything else, the client id check included)."""
        if self.auth is None:
            return None
        metadata = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        address = self._address(context)
        host = address.rpartition(":")[0].strip("[]") or address
        reason = self._call(self.auth.check, metadata, request, address, host)
        return None if reason is None else status(Code.UNAUTHORIZED, reason)

    def _channel(self, context: Any) -> Any:
        metadata = dict(context.invocation_metadata())
        client_id = metadata.get(CLIENT_ID, "")
        if not client_id or len(client_id) > 256:
            return None
        try:
            return self._call(self.a.channel_of, client_id, self._address(context),
                              str(metadata.get(LANGUAGE, ""))[:32])
        except Exception as exc:  # TooManyClients
            self.log.warn("gRPC client {c} refused: {e}", c=client_id[:64], e=exc)
            return None

    def _address(self, context: Any) -> str:
        """The client's "ip:port": grpcio's peer, or for a connection the front relayed
        (rmqpy.proxy.grpc.front), the client's address the front saw."""
        peer = context.peer()[:128]  # "ipv4:10.0.0.1:5678", "ipv6:[::1]:5678"
        address = peer.split(":", 1)[1] if peer.startswith("ipv") else peer
        if self.peers:
            port = address.rpartition(":")[2]
            return self.peers.get(int(port), address) if port.isdigit() else address
        return address

    @staticmethod
    def _remaining_ms(context: Any) -> int:
        left = context.time_remaining()
        return int(left * 1000) if left is not None else 30_000

    def _answer_as_client(self, make: Callable[[Any], Any], fn: Callable[..., Any], request: Any,
                          context: Any, *args: Any) -> Any:
        """``_answer`` for calls made as a client: ``fn(request, channel, *args)``, or
        CLIENT_ID_REQUIRED when the call names no (valid) client id."""
        refused = self._refused(request, context)
        if refused is not None:
            return make(refused)
        ch = self._channel(context)
        if ch is None:
            return make(status(Code.CLIENT_ID_REQUIRED, "x-mq-client-id is required"))
        return self._answer(make, fn, request, ch, *args)

    # ------------------------------------------------------------------ unary calls
    def QueryRoute(self, request: Any, context: Any) -> Any:  # noqa: N802 (the service's names)
        make = lambda s: spb.QueryRouteResponse(status=s)  # noqa: E731
        refused = self._refused(request, context)
        return make(refused) if refused is not None else self._answer(make, self.a.query_route, request)

    def Heartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.HeartbeatResponse(status=s)  # noqa: E731
        return self._answer_as_client(make, self.a.heartbeat, request, context)

    def QueryAssignment(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.QueryAssignmentResponse(status=s)  # noqa: E731
        refused = self._refused(request, context)
        return make(refused) if refused is not None else self._answer(make, self.a.query_assignment, request)

    def SendMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.SendMessageResponse(status=s)  # noqa: E731
        return self._answer_as_client(make, self.a.send_message, request, context)

    def AckMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.AckMessageResponse(status=s)  # noqa: E731
        return self._answer_as_client(make, self.a.ack_message, request, context)

    def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.ChangeInvisibleDurationResponse(status=s)  # noqa: E731
        return self._answer_as_client(make, self.a.change_invisible_duration, request, context)

    def NotifyClientTermination(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.NotifyClientTerminationResponse(status=s)  # noqa: E731
        return self._answer_as_client(make, self.a.notify_client_termination, request, context)

    def EndTransaction(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.EndTransactionResponse(status=s)  # noqa: E731
        return self._answer_as_client(make, self.a.end_transaction, request, context)

    def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.ForwardMessageToDeadLetterQueueResponse(status=s)  # noqa: E731
        return self._answer_as_client(make, self.a.forward_message_to_dead_letter_queue, request, context)

    # ------------------------------------------------------------------ streams
    def ReceiveMessage(self, request: Any, context: Any) -> Iterator[Any]:  # noqa: N802
        make = lambda s: [spb.ReceiveMessageResponse(status=s)]  # noqa: E731
        version = str(dict(context.invocation_metadata()).get(CLIENT_VERSION, ""))[:32]
        yield from self._answer_as_client(make, self.a.receive_message, request, context,
                                          self._remaining_ms(context), version)
        now = self.a.broker.now_ms()
        done = spb.ReceiveMessageResponse()
        done.delivery_timestamp.seconds, done.delivery_timestamp.nanos = now // 1000, (now % 1000) * 1_000_000
        yield done

    def _report(self, ch: Any, cmd: Any) -> None:
        """A client's answer to a command of the broker, from the stream's reader thread to the
        reactor, where the requests waiting for it are (``GrpcClients.report``); one beyond rmqpy's
        bounds is dropped here."""
        answer = bounded_answer(cmd)
        if answer is None:
            self.reactor.callFromThread(lambda: self.log.warn("telemetry of {c}: an answer with an oversized nonce "
                                                              "dropped", c=ch.client_id[:64]))
            return
        self.reactor.callFromThread(self.a.clients.report, ch, answer)

    def Telemetry(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:  # noqa: N802
        """The client's settings and its answers to the broker's commands in, the merged settings
        and the broker's commands (transaction check-backs, thread stack trace and verify requests)
        out. A thread reads the client's commands while this one writes what ``out`` holds; the
        answers go to the reactor (``_report``). A settings command that fails validation ends the
        stream with INVALID_ARGUMENT, as ``ClientActivity.processTelemetryException`` does."""
        ch = self._channel(context)
        if ch is None:
            yield spb.TelemetryCommand(status=status(Code.CLIENT_ID_REQUIRED, "x-mq-client-id is required"))
            return
        out: queue.Queue[Any] = queue.Queue(MAX_TELEMETRY_PENDING)

        def write(cmd: Any) -> None:  # on the reactor: never blocks it
            try:
                out.put_nowait(cmd)
            except queue.Full:
                self.log.warn("telemetry of {c}: {n} commands not written, dropping one", c=ch.client_id[:64],
                              n=MAX_TELEMETRY_PENDING)

        def read() -> None:
            try:
                for n, cmd in enumerate(request_iterator):
                    if n >= MAX_TELEMETRY_COMMANDS:
                        break
                    kind = cmd.WhichOneof("command")
                    if kind not in ("settings", *ANSWERS):
                        continue
                    refused = self._refused(cmd, context)
                    if refused is not None:  # the proxy answers the command and keeps the stream
                        out.put(spb.TelemetryCommand(status=refused))
                        continue
                    if kind in ANSWERS:
                        self._report(ch, cmd)
                        continue
                    try:
                        out.put(self._call(self.a.settings, cmd, ch, write))
                    except Refused as exc:
                        code = grpc.StatusCode.INVALID_ARGUMENT if Code.BAD_REQUEST <= exc.code < Code.INTERNAL_ERROR \
                            else grpc.StatusCode.INTERNAL
                        out.put((code, f"process client telemetryCommand failed. {exc.message}"[:300]))
                        return
                    except Exception as exc:
                        self.log.failure("telemetry settings failed", Failure())
                        out.put((grpc.StatusCode.INTERNAL, f"process client telemetryCommand failed. {exc}"[:300]))
                        return
            except Exception:  # the client went away: grpc.RpcError from the iterator
                pass
            finally:
                out.put(_END)

        threading.Thread(target=read, name="grpc-telemetry", daemon=True).start()
        try:
            while True:
                try:
                    item = out.get(timeout=0.5)
                except queue.Empty:
                    if self.stopping or not context.is_active():
                        return
                    continue
                if item is _END:
                    return
                if isinstance(item, tuple):
                    context.abort(*item)
                yield item
        finally:
            self.reactor.callFromThread(self.a.clients.detach, ch, write)


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


def grpc_server(max_calls: int, max_inbound: int) -> grpc.Server:
    """A grpcio server that admits ``max_calls`` calls at once and has a pool thread for each.

    grpcio's synchronous server runs a call on a pool thread for the call's whole length. With fewer
    threads than admitted calls, the long ones (a client's Telemetry stream lasts as long as the client
    runs) took every thread, and every later call, unary ones included, waited in the pool's queue
    for good: 64 connected clients stopped an endpoint of 64 threads and 1024 calls. Here a call over
    the limit is refused with RESOURCE_EXHAUSTED instead. The pool starts threads only as calls need
    them."""
    pool = concurrent.futures.ThreadPoolExecutor(max_calls, thread_name_prefix="grpc")
    return grpc.server(pool, maximum_concurrent_rpcs=max_calls, options=[
        ("grpc.max_receive_message_length", max_inbound),
        ("grpc.max_send_message_length", -1),
        ("grpc.so_reuseport", 0),
    ])


class GrpcServerService(service.Service):
    """Serves the endpoint while the broker runs; ``bound_port`` once started (0: an ephemeral port)."""

    log = RateLimitedLogger()

    def __init__(self, activities: MessagingActivities, reactor: Any, host: str, port: int,
                 max_calls: int = 1024, max_inbound: int = 130 * 1024 * 1024, tls: Any = None,
                 auth: GrpcAuth | None = None) -> None:
        self.activities, self.reactor, self.host, self.port = activities, reactor, host, port
        self.tls = tls  # rmqpy.proxy.grpc.tls.GrpcTls, or None for plain text
        self.auth = auth  # rmqpy.proxy.grpc.auth.GrpcAuth when the broker authenticates or authorizes
        self.max_calls, self.max_inbound = max_calls, max_inbound
        self.server: Any = None
        self.front: GrpcFront | None = None
        self.listening: Any = None  # the front's port
        self.bound_port = 0

    def startService(self) -> None:  # noqa: N802 (Twisted's name)
        super().startService()
        server = grpc_server(self.max_calls, self.max_inbound)
        self.servicer = _Servicer(self.activities, self.reactor, self.auth)
        self._grpcio_lines = _GrpcioLines(self.reactor)
        for name in ("grpc._common", "grpc._server"):
            logging.getLogger(name).addFilter(self._grpcio_lines)
        sgrpc.add_MessagingServiceServicer_to_server(self.servicer, server)
        host = f"[{self.host}]" if ":" in self.host else self.host
        kind = "plain text"
        if self.tls is not None and self.tls.settings.server_mode == "permissive":
            # TLS and plain text on one port: grpcio serves each on loopback, the front picks per connection
            plain = server.add_insecure_port(f"{LOOPBACK}:0")
            secure = server.add_secure_port(f"{LOOPBACK}:0", self.tls.credentials())
            self.front = GrpcFront(self.reactor, plain, secure, self.tls.settings.handshake_timeout)
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
        for name in ("grpc._common", "grpc._server"):
            logging.getLogger(name).removeFilter(self._grpcio_lines)
        # calls in progress wait on the reactor: it runs until this Deferred fires
        return threads.deferToThread(lambda: server.stop(grace=1.0).wait(5))
