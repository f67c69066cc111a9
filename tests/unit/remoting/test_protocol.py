"""Bad input closes only the connection that sent it; invoke times out by the clock."""
from __future__ import annotations

import pytest
from twisted.internet import task
from twisted.internet.testing import StringTransport

from rmqpy.protocol import command as codec
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.dispatch import RequestDispatcher
from rmqpy.remoting.protocol import RemotingProtocol, RemotingServerFactory, RemotingTimeoutError


class Echo:
    def process_request(self, channel, request):
        return request.response(ResponseCode.SUCCESS, remark="echo", body=request.body)


def make_pair(max_frame: int = codec.DEFAULT_MAX_FRAME):
    dispatcher = RequestDispatcher()
    dispatcher.register(RequestCode.HEART_BEAT, Echo())
    factory = RemotingServerFactory(dispatcher, task.Clock(), max_frame)
    conns = []
    for _ in range(2):
        proto = factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        conns.append((proto, transport))
    return conns


def answer(proto, transport, cmd):
    transport.clear()
    proto.dataReceived(codec.encode(cmd))
    return codec.decode(transport.value()[4:])


@pytest.mark.parametrize("garbage", [
    b"\x00\x00\x00\x02\x00\x00",                      # length below the minimum
    b"\xff\xff\xff\xff",                              # past the frame limit
    b"\x00\x00\x00\x08\x05\x00\x00\x00abcd",          # unknown serialize type
    b"\x00\x00\x00\x08\x00\x00\x00\x04{{{{",          # invalid JSON
    b"\x00\x00\x00\x08\x00\x00\x00\x09abcd",          # header past the frame
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",            # another protocol altogether
])
def test_garbage_closes_that_connection_only(garbage: bytes) -> None:
    (bad, bad_t), (good, good_t) = make_pair()
    bad.dataReceived(garbage)
    assert bad_t.disconnecting
    resp = answer(good, good_t, RemotingCommand.request(RequestCode.HEART_BEAT, body=b"x"))
    assert (resp.code, resp.body) == (ResponseCode.SUCCESS, b"x")


def test_split_and_coalesced_frames() -> None:
    (proto, transport), _ = make_pair()
    frames = b"".join(codec.encode(RemotingCommand.request(RequestCode.HEART_BEAT, body=bytes([i]))) for i in range(3))
    for i in range(len(frames)):
        proto.dataReceived(frames[i:i + 1])
    out = transport.value()
    bodies = []
    while out:
        n = int.from_bytes(out[:4], "big")
        bodies.append(codec.decode(out[4:4 + n]).body)
        out = out[4 + n:]
    assert bodies == [b"\x00", b"\x01", b"\x02"]


def test_frame_limit_is_configurable() -> None:
    (proto, transport), _ = make_pair(max_frame=1024)
    proto.dataReceived(codec.encode(RemotingCommand.request(RequestCode.HEART_BEAT, body=b"x" * 2000)))
    assert transport.disconnecting


def test_invoke_times_out_by_the_injected_clock() -> None:
    clock = task.Clock()
    proto = RemotingProtocol(None, clock)
    proto.makeConnection(StringTransport())
    d = proto.invoke(RemotingCommand.request(RequestCode.GET_KV_CONFIG), timeout=3)
    failures = []
    d.addErrback(failures.append)
    clock.advance(2.9)
    assert not failures
    clock.advance(0.2)
    assert failures and failures[0].check(RemotingTimeoutError)


def test_invoke_gets_its_response_by_opaque() -> None:
    proto = RemotingProtocol(None, task.Clock())
    transport = StringTransport()
    proto.makeConnection(transport)
    d = proto.invoke(RemotingCommand.request(RequestCode.GET_KV_CONFIG))
    sent = codec.decode(transport.value()[4:])
    results = []
    d.addCallback(results.append)
    proto.dataReceived(codec.encode(sent.response(ResponseCode.SUCCESS, "ok")))
    assert results[0].remark == "ok"
