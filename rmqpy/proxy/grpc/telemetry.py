"""A client's Telemetry stream (the proxy's ``ClientActivity.telemetry``), on grpcio's threads.

The client's settings and its answers to the broker's commands come in; the merged settings and the
broker's commands (transaction check-backs, thread stack trace and verify requests) go out. A thread
reads the client's commands while the call's own thread writes what the stream holds; the settings
go to the client activity and the answers to the client table, each on the reactor through the
servicer's bridge (:class:`rmqpy.proxy.grpc.servicer.MessagingServicer`).
"""
from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Any, Iterator

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
_END = object()
ANSWERS = ("thread_stack_trace", "verify_message_result")  # a client's answers to the broker's commands


def report_answer(servicer: "MessagingServicer", ch: Any, cmd: Any) -> None:
    """A client's answer to a command of the broker, from the stream's reader thread to the
    reactor, where the requests waiting for it are (``GrpcClients.report``); one beyond rmqpy's
    bounds is dropped here."""
    answer = bounded_answer(cmd)
    if answer is None:
        servicer.reactor.callFromThread(lambda: servicer.log.warn("telemetry of {c}: an answer with an oversized nonce "
                                                          "dropped", c=ch.client_id[:64]))
        return
    servicer.reactor.callFromThread(servicer.a.clients.report, ch, answer)


def telemetry_stream(servicer: "MessagingServicer", request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:
    """The client's settings and its answers to the broker's commands in, the merged settings
    and the broker's commands (transaction check-backs, thread stack trace and verify requests)
    out. A thread reads the client's commands while this one writes what ``out`` holds; the
    answers go to the reactor (:func:`report_answer`). A settings command that fails validation ends the
    stream with INVALID_ARGUMENT, as ``ClientActivity.processTelemetryException`` does."""
    ch = servicer.channel(context)
    if ch is None:
        yield spb.TelemetryCommand(status=status(Code.CLIENT_ID_REQUIRED, "x-mq-client-id is required"))
        return
    out: queue.Queue[Any] = queue.Queue(MAX_TELEMETRY_PENDING)

    def write(cmd: Any) -> None:  # on the reactor: never blocks it
        try:
            out.put_nowait(cmd)
        except queue.Full:
            servicer.log.warn("telemetry of {c}: {n} commands not written, dropping one", c=ch.client_id[:64],
                          n=MAX_TELEMETRY_PENDING)

    def read() -> None:
        try:
            for n, cmd in enumerate(request_iterator):
                if n >= MAX_TELEMETRY_COMMANDS:
                    break
                kind = cmd.WhichOneof("command")
                if kind not in ("settings", *ANSWERS):
                    continue
                refused = servicer.refused(cmd, context)
                if refused is not None:  # the proxy answers the command and keeps the stream
                    out.put(spb.TelemetryCommand(status=refused))
                    continue
                if kind in ANSWERS:
                    report_answer(servicer, ch, cmd)
                    continue
                try:
                    out.put(servicer.call(servicer.a.settings, cmd, ch, write))
                except Refused as exc:
                    code = grpc.StatusCode.INVALID_ARGUMENT if Code.BAD_REQUEST <= exc.code < Code.INTERNAL_ERROR \
                        else grpc.StatusCode.INTERNAL
                    out.put((code, f"process client telemetryCommand failed. {exc.message}"[:300]))
                    return
                except Exception as exc:
                    servicer.log.failure("telemetry settings failed", Failure())
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
                if servicer.stopping or not context.is_active():
                    return
                continue
            if item is _END:
                return
            if isinstance(item, tuple):
                context.abort(*item)
            yield item
    finally:
        servicer.reactor.callFromThread(servicer.a.clients.detach, ch, write)
