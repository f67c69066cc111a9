"""Each RPC of ``apache.rocketmq.v2.MessagingService``, as a coroutine of grpcio's asyncio server.

grpcio's asyncio server runs each call as a coroutine on its loop's thread (:mod:`rmqpy.proxy.grpc.aioloop`);
:class:`MessagingServicer` hands the call's work to the reactor and awaits the Deferred's result
(:class:`~rmqpy.proxy.grpc.aioloop.ReactorHop`; the client's channel and the work go in one hop), then
answers what the activity (:mod:`rmqpy.proxy.grpc.activities`, which routes each RPC to its activity)
gave, or the proxy's answer of a refusal (an OK gRPC call carrying the ``Code``). Authentication and
authorization (:mod:`rmqpy.proxy.grpc.auth`) come first, and every call but the route queries runs as
the client its ``x-mq-client-id`` names, on the client's :class:`~rmqpy.proxy.grpc.local.LocalChannel`.
The Telemetry stream: :mod:`rmqpy.proxy.grpc.telemetry`.
"""
from __future__ import annotations

from typing import Any, AsyncIterator, Callable

from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc
from twisted.python.failure import Failure

from rmqpy.proxy.grpc.activities import MessagingActivities
from rmqpy.proxy.grpc.activity import invisible
from rmqpy.proxy.grpc.aioloop import ReactorHop
from rmqpy.proxy.grpc.auth import GrpcAuth
from rmqpy.proxy.grpc.convert import Code, status
from rmqpy.proxy.grpc.large import CutSendRequest, Trimmer
from rmqpy.proxy.grpc.telemetry import telemetry_stream
from rmqpy.proxy.grpc.validate import Refused
from rmqpy.remoting.ratelimit import RateLimitedLogger

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"  # ReceiveMessageActivity picks its Code by it
NO_CLIENT_ID = "x-mq-client-id is required"
_NO_CHANNEL = object()  # _as_client's answer when the client is refused a channel


class MessagingServicer(sgrpc.MessagingServiceServicer):
    log = RateLimitedLogger()

    def __init__(self, activities: MessagingActivities, reactor: Any, auth: GrpcAuth | None = None) -> None:
        self.a = activities
        self.reactor = reactor
        self.hop = ReactorHop(reactor)
        self.auth = auth  # 5.x authentication and authorization of each call, when the broker has them on
        self.stopping = False
        self.peers: dict[int, str] = {}  # GrpcFront.peers when a front relays the connections
        self.trimmer: Trimmer | None = None  # returns the memory of large requests (rmqpy.proxy.grpc.large)
        # Telemetry streams refused authentication that never passed it (on the loop; telemetry.keep_refused)
        self.unauthenticated: set[object] = set()

    # ------------------------------------------------------------------ the bridge
    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn`` on the reactor and await its result (a Deferred's, if it returns one)."""
        if self.stopping:
            raise Refused(Code.INTERNAL_SERVER_ERROR, "the broker is shutting down")
        return await self.hop.run(fn, *args)

    async def answer(self, make: Callable[[Any], Any], fn: Callable[..., Any], *args: Any) -> Any:
        """``fn``'s response, or the error response built by ``make(status)`` (the proxy answers
        a refused request with an OK gRPC call carrying the Code)."""
        return await self._answer(make, fn.__name__, fn, *args)

    async def _answer(self, make: Callable[[Any], Any], name: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            answer = await self.call(fn, *args)
            return make(status(Code.CLIENT_ID_REQUIRED, NO_CLIENT_ID)) if answer is _NO_CHANNEL else answer
        except Refused as exc:  # bad input: one rate-limited line, then the proxy's Code
            # logged on the reactor: the logger's buckets and summary timers live there
            code, message = Code.Name(exc.code), exc.message
            self.reactor.callFromThread(lambda: self.log.warn("gRPC {f} refused: {c} {m}", f=name, c=code,
                                                              m=message))
            return make(status(exc.code, exc.message))
        except Exception as exc:  # a bug: one line, and the proxy's INTERNAL_SERVER_ERROR
            self.reactor.callFromThread(self.log.failure, "grpc call failed", Failure())
            return make(status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {str(exc)[:200]}"))

    async def refused(self, request: Any, context: Any) -> Any:
        """None when the call passes authentication and authorization (if on), else the
        UNAUTHORIZED Status the proxy answers (``AuthenticationPipeline`` / ``AuthorizationPipeline``
        run before anything else, the client id check included)."""
        if self.auth is None:
            return None
        metadata = {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}
        address = self.address(context)
        host = address.rpartition(":")[0].strip("[]") or address
        reason = await self.call(self.auth.check, metadata, request, address, host)
        return None if reason is None else status(Code.UNAUTHORIZED, reason)

    async def channel(self, context: Any) -> Any:
        """The client's LocalChannel, or None when the call names no (valid) client id."""
        named = self.client_of(context)
        if named is None:
            return None
        try:
            return await self.call(self.a.channel_of, *named)
        except Exception as exc:  # TooManyClients
            self.reactor.callFromThread(self.log.warn, "gRPC client {c} refused: {e}", c=named[0][:64], e=exc)
            return None

    def client_of(self, context: Any) -> tuple[str, str, str] | None:
        """``channel_of``'s arguments from the call: the client id, address and language, or None when
        the call names no (valid) client id."""
        metadata = dict(context.invocation_metadata())
        client_id = metadata.get(CLIENT_ID, "")
        if not client_id or len(client_id) > 256:
            return None
        return client_id, self.address(context), str(metadata.get(LANGUAGE, ""))[:32]

    def _as_client(self, fn: Callable[..., Any], client: tuple[str, str, str], request: Any, *args: Any) -> Any:
        """On the reactor: ``fn(request, channel, *args)`` on the client's channel, in the one hop, or
        _NO_CHANNEL when the client is refused one (TooManyClients)."""
        try:
            ch = self.a.channel_of(*client)
        except Exception as exc:  # TooManyClients
            self.log.warn("gRPC client {c} refused: {e}", c=client[0][:64], e=exc)
            return _NO_CHANNEL
        return fn(request, ch, *args)

    def address(self, context: Any) -> str:
        """The client's "ip:port": grpcio's peer, or for a connection the front relayed
        (rmqpy.proxy.grpc.front), the client's address the front saw."""
        peer = context.peer()[:128]  # "ipv4:10.0.0.1:5678", "ipv6:[::1]:5678"
        address = peer.split(":", 1)[1] if peer.startswith("ipv") else peer
        if self.peers:
            port = address.rpartition(":")[2]
            return self.peers.get(int(port), address) if port.isdigit() else address
        return address

    @staticmethod
    def remaining_ms(context: Any) -> int:
        left = context.time_remaining()
        return int(left * 1000) if left is not None else 30_000

    async def answer_as_client(self, make: Callable[[Any], Any], fn: Callable[..., Any], request: Any,
                          context: Any, *args: Any) -> Any:
        """``answer`` for calls made as a client: ``fn(request, channel, *args)``, or
        CLIENT_ID_REQUIRED when the call names no (valid) client id."""
        refused = await self.refused(request, context)
        if refused is not None:
            return make(refused)
        client = self.client_of(context)
        if client is None:
            return make(status(Code.CLIENT_ID_REQUIRED, NO_CLIENT_ID))
        # the client's channel and the call's work in one hop to the reactor
        return await self._answer(make, fn.__name__, self._as_client, fn, client, request, *args)

    # ------------------------------------------------------------------ unary calls
    async def QueryRoute(self, request: Any, context: Any) -> Any:  # noqa: N802 (the service's names)
        make = lambda s: spb.QueryRouteResponse(status=s)  # noqa: E731
        refused = await self.refused(request, context)
        return make(refused) if refused is not None else await self.answer(make, self.a.query_route, request)

    async def Heartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.HeartbeatResponse(status=s)  # noqa: E731
        return await self.answer_as_client(make, self.a.heartbeat, request, context)

    async def QueryAssignment(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.QueryAssignmentResponse(status=s)  # noqa: E731
        refused = await self.refused(request, context)
        return make(refused) if refused is not None else await self.answer(make, self.a.query_assignment, request)

    async def SendMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.SendMessageResponse(status=s)  # noqa: E731
        if not isinstance(request, CutSendRequest):
            return await self.answer_as_client(make, self.a.send_message, request, context, {})
        # a large request (rmqpy.proxy.grpc.large): the bodies left out of its decode, and once
        # answered, the memory it took back to the system
        try:
            return await self.answer_as_client(make, self.a.send_message, request.request, context, request.bodies)
        finally:
            if self.trimmer is not None:
                self.trimmer.soon()

    async def AckMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.AckMessageResponse(status=s)  # noqa: E731
        return await self.answer_as_client(make, self.a.ack_message, request, context)

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: invisible.response(s, request)  # noqa: E731
        return await self.answer_as_client(make, self.a.change_invisible_duration, request, context)

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.NotifyClientTerminationResponse(status=s)  # noqa: E731
        return await self.answer_as_client(make, self.a.notify_client_termination, request, context)

    async def EndTransaction(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.EndTransactionResponse(status=s)  # noqa: E731
        return await self.answer_as_client(make, self.a.end_transaction, request, context)

    async def RecallMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.RecallMessageResponse(status=s)  # noqa: E731
        return await self.answer_as_client(make, self.a.recall_message, request, context)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:  # noqa: N802
        make = lambda s: spb.ForwardMessageToDeadLetterQueueResponse(status=s)  # noqa: E731
        return await self.answer_as_client(make, self.a.forward_message_to_dead_letter_queue, request, context)

    # ------------------------------------------------------------------ streams
    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:  # noqa: N802
        make = lambda s: [spb.ReceiveMessageResponse(status=s)]  # noqa: E731
        version = str(dict(context.invocation_metadata()).get(CLIENT_VERSION, ""))[:32]
        for response in await self.answer_as_client(make, self.a.receive_message, request, context,
                                                     self.remaining_ms(context), version):
            yield response
        now = self.a.broker.now_ms()
        done = spb.ReceiveMessageResponse()
        done.delivery_timestamp.seconds, done.delivery_timestamp.nanos = now // 1000, (now % 1000) * 1_000_000
        yield done

    async def Telemetry(self, request_iterator: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:  # noqa: N802
        """The client's settings and its answers in, the merged settings and the broker's commands out
        (:mod:`rmqpy.proxy.grpc.telemetry`)."""
        async for command in telemetry_stream(self, request_iterator, context):
            yield command
