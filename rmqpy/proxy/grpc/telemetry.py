"""A client's Telemetry stream (the proxy's ``ClientActivity.telemetry``), a coroutine of grpcio's loop.

The client's settings and its answers to the broker's commands come in; the merged settings and the
broker's commands (transaction check-backs, thread stack trace and verify requests) go out. A task
reads the client's commands while the call's coroutine writes what the stream holds; the settings go
to the client activity and the answers to the client table, each on the reactor through the
servicer's bridge (:class:`rmqpy.proxy.grpc.servicer.MessagingServicer`). An open stream costs no
thread (issue 31 case 2).
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, AsyncIterator

import grpc
from rocketmq.grpc_protocol import service_pb2 as spb
from twisted.python.failure import Failure

from rmqpy.proxy.grpc.convert import Code, status
from rmqpy.proxy.grpc.relay import bounded_answer
from rmqpy.proxy.grpc.validate import Refused

if TYPE_CHECKING:
    from rmqpy.proxy.grpc.servicer import MessagingServicer

# per stream: a client sends its settings once, then every 5 minutes, and answers what an admin tool asks
MAX_TELEMETRY_COMMANDS = 10_000
MAX_TELEMETRY_PENDING = 1024  # commands waiting to be written to one client's stream; more are dropped
#: streams that were refused authentication and never passed it, kept open (the proxy keeps them);
#: past this many, a refused stream is ended after its refusal, so that streams without valid
#: credentials cannot hold what authenticated clients need (issue 31 case 2)
MAX_UNAUTHENTICATED_STREAMS = 1024
_END = object()
ANSWERS = ("thread_stack_trace", "verify_message_result")  # a client's answers to the broker's commands


def report_answer(servicer: "MessagingServicer", ch: Any, cmd: Any) -> None:
    """A client's answer to a command of the broker, from the stream's reader to the
    reactor, where the requests waiting for it are (``GrpcClients.report``); one beyond rmqpy's
    bounds is dropped here."""
    answer = bounded_answer(cmd)
    if answer is None:
        servicer.reactor.callFromThread(lambda: servicer.log.warn("telemetry of {c}: an answer with an oversized nonce "
                                                          "dropped", c=ch.client_id[:64]))
        return
    servicer.reactor.callFromThread(servicer.a.clients.report, ch, answer)


def keep_refused(servicer: "MessagingServicer", stream: object, client_id: str) -> bool:
    """Whether a stream whose command was just refused authentication stays open (on the loop): it
    does, as the proxy's, unless it never authenticated and ``MAX_UNAUTHENTICATED_STREAMS`` such
    streams are open already."""
    unauthenticated = servicer.unauthenticated
    if stream in unauthenticated:
        return True
    if len(unauthenticated) >= MAX_UNAUTHENTICATED_STREAMS:
        servicer.reactor.callFromThread(servicer.log.warn, "telemetry of {c}: refused, and {n} streams that never "
                                        "authenticated are open: ending it", c=client_id[:64],
                                        n=MAX_UNAUTHENTICATED_STREAMS)
        return False
    unauthenticated.add(stream)
    return True


async def telemetry_stream(servicer: "MessagingServicer", request_iterator: AsyncIterator[Any],
                           context: Any) -> AsyncIterator[Any]:
    """The client's settings and its answers to the broker's commands in, the merged settings
    and the broker's commands (transaction check-backs, thread stack trace and verify requests)
    out. A task reads the client's commands while this coroutine writes what ``out`` holds; the
    answers go to the reactor (:func:`report_answer`). A settings command that fails validation ends the
    stream with INVALID_ARGUMENT, as ``ClientActivity.processTelemetryException`` does."""
    ch = await servicer.channel(context)
    if ch is None:
        yield spb.TelemetryCommand(status=status(Code.CLIENT_ID_REQUIRED, "x-mq-client-id is required"))
        return
    loop = asyncio.get_running_loop()
    # what goes to the client: the broker's commands (dropped when full) and the answers to the
    # client's commands (whose reading waits when full)
    out: asyncio.Queue[Any] = asyncio.Queue(MAX_TELEMETRY_PENDING)
    # the broker's commands handed to the loop and taken by it: each written by one thread only, so
    # their difference (those on their way) needs no lock
    handed, taken = [0], [0]

    def take(cmd: Any) -> None:  # on the loop
        taken[0] += 1
        try:
            out.put_nowait(cmd)
        except asyncio.QueueFull:
            servicer.reactor.callFromThread(servicer.log.warn, "telemetry of {c}: {n} commands not written, "
                                            "dropping one", c=ch.client_id[:64], n=MAX_TELEMETRY_PENDING)

    def write(cmd: Any) -> None:  # on the reactor: never blocks it
        if handed[0] - taken[0] >= MAX_TELEMETRY_PENDING:
            servicer.log.warn("telemetry of {c}: {n} commands not written, dropping one", c=ch.client_id[:64],
                              n=MAX_TELEMETRY_PENDING)
            return
        handed[0] += 1
        try:
            loop.call_soon_threadsafe(take, cmd)
        except RuntimeError:  # the loop is closed: the endpoint stopped
            pass

    stream = object()  # this stream, in servicer.unauthenticated while refused and never authenticated

    async def read() -> None:
        try:
            n = 0
            async for cmd in request_iterator:
                if n >= MAX_TELEMETRY_COMMANDS:
                    break
                n += 1
                kind = cmd.WhichOneof("command")
                if kind not in ("settings", *ANSWERS):
                    continue
                refused = await servicer.refused(cmd, context)
                if refused is not None:  # the proxy answers the command and keeps the stream
                    await out.put(spb.TelemetryCommand(status=refused))
                    if not keep_refused(servicer, stream, ch.client_id):
                        return
                    continue
                servicer.unauthenticated.discard(stream)
                if kind in ANSWERS:
                    report_answer(servicer, ch, cmd)
                    continue
                try:
                    await out.put(await servicer.call(servicer.a.settings, cmd, ch, write))
                except Refused as exc:
                    code = grpc.StatusCode.INVALID_ARGUMENT if Code.BAD_REQUEST <= exc.code < Code.INTERNAL_ERROR \
                        else grpc.StatusCode.INTERNAL
                    await out.put((code, f"process client telemetryCommand failed. {exc.message}"[:300]))
                    return
                except Exception as exc:
                    servicer.reactor.callFromThread(servicer.log.failure, "telemetry settings failed", Failure())
                    await out.put((grpc.StatusCode.INTERNAL, f"process client telemetryCommand failed. {exc}"[:300]))
                    return
        except Exception:  # the client went away: grpc's error from the iterator
            pass
        finally:  # the end must be queued: a command of the broker makes room for it
            if out.full():
                out.get_nowait()
            out.put_nowait(_END)

    reader = asyncio.ensure_future(read())
    try:
        while True:
            item = await out.get()
            if item is _END:
                return
            if isinstance(item, tuple):
                await context.abort(*item)
            yield item
    finally:
        reader.cancel()
        servicer.unauthenticated.discard(stream)
        servicer.reactor.callFromThread(servicer.a.clients.detach, ch, write)
