"""The dispatcher answers synchronous processors without Deferreds, and Deferred ones as before."""
from __future__ import annotations

import pytest
from twisted.internet import defer, task
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from rmqpy.protocol import command as codec
from rmqpy.protocol.codes import ResponseCode, SerializeType
from rmqpy.protocol.command import HeaderError, RemotingCommand
from rmqpy.remoting.dispatch import RequestDispatcher
from rmqpy.remoting.protocol import RemotingServerFactory

CODE = 4242


class Processor:
    def __init__(self, fn) -> None:
        self.fn = fn
        self.calls = 0

    def process_request(self, channel, request):
        self.calls += 1
        return self.fn(channel, request)


def serve(fn):
    dispatcher = RequestDispatcher()
    processor = Processor(fn)
    dispatcher.register(CODE, processor)
    proto = RemotingServerFactory(dispatcher, task.Clock()).buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    return proto, transport, processor


def answers(transport) -> list[RemotingCommand]:
    data, out = transport.value(), []
    while data:
        length = int.from_bytes(data[:4], "big")
        out.append(codec.decode(data[4:4 + length]))
        data = data[4 + length:]
    return out


def request(opaque: int = 7, oneway: bool = False, serialize_type: int = SerializeType.JSON) -> bytes:
    cmd = RemotingCommand.request(CODE, oneway=oneway, serialize_type=serialize_type)
    cmd.opaque = opaque
    return codec.encode(cmd)


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_synchronous_answer_gets_opaque_flag_and_serialize_type(serialize_type) -> None:
    proto, transport, _ = serve(lambda ch, req: RemotingCommand(code=ResponseCode.SUCCESS, remark="ok",
                                                                 body=b"b"))
    proto.dataReceived(request(opaque=31, serialize_type=serialize_type))
    [resp] = answers(transport)
    assert (resp.code, resp.opaque, resp.is_response, resp.remark, resp.body, resp.serialize_type) == (
        ResponseCode.SUCCESS, 31, True, "ok", b"b", serialize_type)


def test_synchronous_processor_that_raises_gets_system_error(logged) -> None:
    def boom(ch, req):
        raise KeyError("nope")
    proto, transport, _ = serve(boom)
    proto.dataReceived(request(opaque=9))
    [resp] = answers(transport)
    assert (resp.code, resp.opaque, resp.remark) == (ResponseCode.SYSTEM_ERROR, 9, "KeyError: 'nope'")
    assert proto.connected_
    failures = [e for e in logged if e.get("log_failure") is not None]
    assert len(failures) == 1 and failures[0]["log_failure"].check(KeyError)
    # the connection keeps serving
    proto.dataReceived(request(opaque=10))
    assert [r.opaque for r in answers(transport)] == [9, 10]


def test_header_error_is_a_warning_and_system_error(logged) -> None:
    def missing(ch, req):
        raise HeaderError("the custom field <topic> is null")
    proto, transport, _ = serve(missing)
    proto.dataReceived(request())
    [resp] = answers(transport)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "HeaderError: the custom field <topic> is null")
    assert not [e for e in logged if e.get("log_failure") is not None]
    assert any("the custom field <topic> is null" in str(e.get("err")) for e in logged)


def test_none_is_no_answer() -> None:
    proto, transport, processor = serve(lambda ch, req: None)
    proto.dataReceived(request())
    assert transport.value() == b"" and processor.calls == 1


@pytest.mark.parametrize("fn", [
    lambda ch, req: req.response(),
    lambda ch, req: defer.succeed(req.response()),
])
def test_oneway_request_gets_no_answer(fn) -> None:
    proto, transport, processor = serve(fn)
    proto.dataReceived(request(oneway=True))
    assert transport.value() == b"" and processor.calls == 1


def test_oneway_request_whose_processor_raises_gets_no_answer(logged) -> None:
    def boom(ch, req):
        raise RuntimeError("x")
    proto, transport, _ = serve(boom)
    proto.dataReceived(request(oneway=True))
    assert transport.value() == b"" and proto.connected_


def test_deferred_answer_is_sent_when_it_fires() -> None:
    pending: list[defer.Deferred] = []

    def later(ch, req):
        d = defer.Deferred()
        pending.append(d)
        return d.addCallback(lambda _: req.response(ResponseCode.SUCCESS, "late"))
    proto, transport, _ = serve(later)
    proto.dataReceived(request(opaque=5))
    proto.dataReceived(request(opaque=6))
    assert transport.value() == b"" and len(pending) == 2
    pending[1].callback(None)
    pending[0].callback(None)
    assert [(r.opaque, r.remark, r.is_response) for r in answers(transport)] == [(6, "late", True), (5, "late", True)]


def test_deferred_that_fails_gets_system_error(logged) -> None:
    d = defer.Deferred()
    proto, transport, _ = serve(lambda ch, req: d)
    proto.dataReceived(request(opaque=3))
    d.errback(ValueError("bad"))
    [resp] = answers(transport)
    assert (resp.code, resp.opaque, resp.remark) == (ResponseCode.SYSTEM_ERROR, 3, "ValueError: bad")


def test_returned_failure_and_coroutine_as_maybe_deferred() -> None:
    proto, transport, _ = serve(lambda ch, req: Failure(ValueError("f")))
    proto.dataReceived(request(opaque=1))
    assert [(r.code, r.remark) for r in answers(transport)] == [(ResponseCode.SYSTEM_ERROR, "ValueError: f")]

    async def coro(req):
        return req.response(ResponseCode.SUCCESS, "coro")
    proto, transport, _ = serve(lambda ch, req: coro(req))
    proto.dataReceived(request(opaque=2))
    assert [(r.code, r.remark, r.opaque) for r in answers(transport)] == [(ResponseCode.SUCCESS, "coro", 2)]


def test_a_failing_reply_is_logged_not_raised(logged) -> None:
    class Odd:  # not a RemotingCommand: goes the Deferred way and fails in _reply
        pass
    proto, transport, _ = serve(lambda ch, req: Odd())
    proto.dataReceived(request())
    assert transport.value() == b""
    assert any(e.get("log_format", "").startswith("reply to") for e in logged)

    def broken_send(cmd):
        raise OSError("gone")
    proto, transport, _ = serve(lambda ch, req: req.response())
    proto.send_command = broken_send
    logged.clear()
    proto.dataReceived(request())  # a synchronous answer that cannot be sent: logged the same way
    assert any(e.get("log_format", "").startswith("reply to") for e in logged)


# ---------------------------------------------------------------- one whole frame per chunk

def _echo_conn(max_frame: int):
    dispatcher = RequestDispatcher()
    dispatcher.register(CODE, Processor(lambda ch, req: req.response(body=req.body)))
    proto = RemotingServerFactory(dispatcher, task.Clock(), max_frame).buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    return proto, transport


def test_single_frame_chunk_at_the_frame_limit() -> None:
    frame = request()
    proto, transport = _echo_conn(max_frame=len(frame))
    proto.dataReceived(frame)  # exactly max_frame bytes, prefix included: served
    assert len(answers(transport)) == 1 and not transport.disconnecting
    proto, transport = _echo_conn(max_frame=len(frame) - 1)
    proto.dataReceived(frame)  # one byte more than allowed: closed, no answer
    assert transport.disconnecting and transport.value() == b""


def test_single_frame_chunk_after_a_partial_one_and_a_bare_length_word() -> None:
    proto, transport = _echo_conn(max_frame=1 << 20)
    a, b = request(opaque=1), request(opaque=2)
    proto.dataReceived(a[:5])
    proto.dataReceived(a[5:])
    proto.dataReceived(b)
    assert [r.opaque for r in answers(transport)] == [1, 2]
    proto.dataReceived(b"\x00\x00\x00\x04\x00\x00\x00\x00")  # a frame of only its header-length word
    assert transport.disconnecting  # an empty JSON header is no command: closed as before
