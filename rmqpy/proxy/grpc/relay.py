"""The broker's requests to a gRPC client as the Telemetry commands the proxy writes for them, and the
client's answers as the broker's responses (5.3.3's ``GrpcClientChannel``, ``ClientActivity.report*``
and ``LocalProxyRelayService``).

GET_CONSUMER_RUNNING_INFO with jstackEnable becomes a ``PrintThreadStackTraceCommand`` and
CONSUME_MESSAGE_DIRECTLY a ``VerifyMessageCommand``, each with the nonce of :meth:`LocalChannel.invoke`;
the client's ``ThreadStackTrace`` / ``VerifyMessageResult`` answers become a ConsumerRunningInfo whose
jstack is the client's text and a ConsumeMessageDirectlyResult. :class:`rmqpy.proxy.grpc.clients.GrpcClients`
writes the commands and hands the answers to the requests waiting for them.
"""
from __future__ import annotations

from typing import Any, Callable

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies import admin as bodies
from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import GetConsumerRunningInfoRequestHeader
from rmqpy.protocol.message import decode_records
from rmqpy.proxy.grpc.convert import to_grpc_message

MAX_NONCE = 64  # characters of a nonce in a client's answer; rmqpy's nonces are counters
#: characters of a client's thread stack trace kept (a JVM of some hundred threads prints a few
#: hundred KB); the answer goes to mqadmin in one remoting frame, at most 16 MiB on its side
MAX_THREAD_STACK_TRACE = 1 << 20
#: the client's VerifyMessageResult status -> ConsumeMessageDirectlyResult.consumeResult
#: (``buildConsumeMessageDirectlyResult``; other codes leave it unset)
CONSUME_RESULTS = {pb.Code.OK: "CR_SUCCESS", pb.Code.FAILED_TO_CONSUME_MESSAGE: "CR_LATER",
                   pb.Code.MESSAGE_CORRUPTED: "CR_RETURN_NULL"}


def thread_stack_trace_command(request: RemotingCommand, nonce: str, write: Callable[[Any], None]) -> bool:
    """``processGetConsumerRunningInfo``: only a request for the client's jstack is written; the
    proxy writes nothing for the rest (no answer comes, the broker's wait ends it)."""
    if not request.decode_header(GetConsumerRunningInfoRequestHeader).jstackEnable:
        return False
    write(spb.TelemetryCommand(print_thread_stack_trace_command=spb.PrintThreadStackTraceCommand(nonce=nonce)))
    return True


def verify_message_command(request: RemotingCommand, nonce: str, write: Callable[[Any], None]) -> bool:
    """``processConsumeMessageDirectly``: the stored message the broker attached, to consume once.
    Raises when the body holds no message (the broker answers the admin tool with the error)."""
    msg = next(decode_records(request.body or b""), None)
    if msg is None:
        raise ValueError("CONSUME_MESSAGE_DIRECTLY carries no message")
    write(spb.TelemetryCommand(verify_message_command=spb.VerifyMessageCommand(
        nonce=nonce, message=to_grpc_message(msg, None))))
    return True


def bounded_answer(cmd: Any) -> Any | None:
    """A client's ThreadStackTrace or VerifyMessageResult within rmqpy's bounds: the thread stack
    trace cut to ``MAX_THREAD_STACK_TRACE`` characters; None for a nonce longer than any rmqpy sends
    (nothing waits for it). Runs on the stream's reader thread, before the answer goes to the reactor."""
    kind = cmd.WhichOneof("command")
    answer = cmd.thread_stack_trace if kind == "thread_stack_trace" else cmd.verify_message_result
    if len(answer.nonce) > MAX_NONCE:
        return None
    if kind == "thread_stack_trace" and len(answer.thread_stack_trace) > MAX_THREAD_STACK_TRACE:
        answer.thread_stack_trace = answer.thread_stack_trace[:MAX_THREAD_STACK_TRACE]
    return cmd


def running_info_response(request: RemotingCommand, code: int, jstack: str) -> RemotingCommand:
    """``reportThreadStackTrace``: the client's stack trace as the jstack of an otherwise empty
    ConsumerRunningInfo (what the proxy knows of a gRPC consumer), or the error its status names."""
    if code == pb.Code.OK:
        body = bodies.consumer_running_info(jstack)
        return request.response(ResponseCode.SUCCESS, "", body=fastjson.dumps(body).encode())
    if code == pb.Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED:
        return request.response(ResponseCode.NO_PERMISSION, "forbidden to verify message")
    return request.response(ResponseCode.SYSTEM_ERROR, "verify message failed")


def consume_directly_response(request: RemotingCommand, code: int) -> RemotingCommand:
    """``reportVerifyMessageResult``: SUCCESS whatever the status, which only sets consumeResult."""
    body = bodies.consume_message_directly_result(CONSUME_RESULTS.get(code), "from gRPC client")
    return request.response(ResponseCode.SUCCESS, "", body=fastjson.dumps(body).encode())
