"""Replayed answers (rmqpy/remoting/replay.py) are the bytes the processor's answer encodes to,
and a frame is replayed only when its opaque digits are its opaque and nothing else."""
from __future__ import annotations

import struct

import pytest
from twisted.internet import defer, task
from twisted.internet.testing import StringTransport

from rmqpy.protocol import command as codec
from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.dispatch import RequestDispatcher
from rmqpy.remoting.protocol import RemotingServerFactory

CODE = 4242


class World:
    """A dispatcher whose one processor answers from ``state``, kept by the memo under ``stamp``."""

    def __init__(self, replay: bool = True) -> None:
        self.state = "a"
        self.calls = 0
        self.dispatcher = RequestDispatcher()
        self.dispatcher.register(CODE, self)
        if replay:
            self.dispatcher.replay_answers([CODE], lambda: self.state)
        self.proto = RemotingServerFactory(self.dispatcher, task.Clock()).buildProtocol(None)
        self.transport = StringTransport()
        self.proto.makeConnection(self.transport)

    def process_request(self, channel, request):
        self.calls += 1
        ext = request.ext_fields or {}
        return request.response(remark=f"{self.state}:{sorted(ext.items())}", body=(request.body or b"") + b"!")

    def send(self, frame: bytes) -> bytes:
        self.transport.clear()
        self.proto.dataReceived(frame)
        return self.transport.value()


def frame_of(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


def java_header(opaque: int | str, ext: str = '{"topic":"T"}', flag: int = 0) -> bytes:
    return (f'{{"code":{CODE},"extFields":{ext},"flag":{flag},"language":"JAVA","opaque":{opaque},'
            f'"serializeTypeCurrentRPC":"JSON","version":409}}').encode()


@pytest.fixture
def pair() -> tuple[World, World]:
    """The same requests to a world with the memo and to one without: the answers must match."""
    return World(), World(replay=False)


def same(pair: tuple[World, World], frame: bytes) -> bytes:
    ours, plain = pair
    got = ours.send(frame)
    assert got == plain.send(frame)
    return got


@pytest.mark.parametrize("opaques", [[7, 8, 9], [0, 1, 0], [9, 10, 99, 100], [2147483647, 1, 123456789]])
def test_replayed_answer_is_the_encoded_answer(pair, opaques) -> None:
    ours, _ = pair
    for opaque in opaques * 2:
        raw = same(pair, frame_of(java_header(opaque), b"body"))
        assert codec.decode(raw[4:]).opaque == opaque
    assert ours.dispatcher.memo.replayed > 0
    assert ours.calls < len(opaques) * 2


def test_a_changed_stamp_asks_the_processor_again(pair) -> None:
    ours, plain = pair
    same(pair, frame_of(java_header(1)))
    calls = ours.calls
    same(pair, frame_of(java_header(2)))
    assert ours.calls == calls  # replayed
    ours.state = plain.state = "b"
    raw = same(pair, frame_of(java_header(3)))
    assert ours.calls == calls + 1 and b"b:" in raw


@pytest.mark.parametrize("header", [
    # digits not written as %d writes them
    java_header("007"),
    # an extFields key named opaque with a number, the command's opaque missing (0)
    f'{{"code":{CODE},"extFields":{{"opaque":0,"x":"y"}},"flag":0,"language":"JAVA","version":409}}'.encode(),
    # the opaque twice: the last one counts
    f'{{"code":{CODE},"opaque":5,"flag":0,"language":"JAVA","opaque":5,"version":409}}'.encode(),
    f'{{"code":{CODE},"opaque":5,"flag":0,"language":"JAVA","opaque":6,"version":409}}'.encode(),
    # the opaque inside an object the decoder ignores
    f'{{"code":{CODE},"other":{{"opaque":0,"a":1}},"flag":0,"language":"JAVA","version":409}}'.encode(),
    # no comma after the digits, or none at all
    f'{{"code":{CODE},"flag":0,"language":"JAVA","opaque":5}}'.encode(),
    f'{{"code":{CODE},"flag":0,"language":"JAVA","version":409}}'.encode(),
])
def test_frames_whose_digits_are_not_just_the_opaque_are_answered_as_always(pair, header) -> None:
    ours, _ = pair
    for _ in range(3):
        same(pair, frame_of(header))
    for digit in b"0123456789":  # the same frame with each digit changed
        changed = header.replace(b"0", bytes([digit])) if b"0" in header else header
        same(pair, frame_of(changed))
    assert ours.dispatcher.memo.replayed == 0


def test_each_frame_is_keyed_by_all_its_bytes(pair) -> None:
    for opaque in (1, 2):
        for ext in ('{"topic":"T"}', '{"topic":"U"}', '{"topic":"T","b":"c"}'):
            for body in (b"", b"x", b"y"):
                same(pair, frame_of(java_header(opaque, ext), body))


def test_large_frames_are_not_kept(pair) -> None:
    ours, _ = pair
    for opaque in (1, 2, 3):
        same(pair, frame_of(java_header(opaque), b"b" * 5000))
    assert len(ours.dispatcher.memo) == 0 and ours.calls == 3


def test_oneway_requests_are_not_answered(pair) -> None:
    for opaque in (1, 2, 3):
        assert same(pair, frame_of(java_header(opaque, flag=2))) == b""


def test_binary_headers_are_not_kept(pair) -> None:
    ours, _ = pair
    for opaque in (1, 2, 3):
        cmd = RemotingCommand(CODE, opaque=opaque, serialize_type=1, ext_fields={"topic": "T"})
        same(pair, codec.encode(cmd))
    assert len(ours.dispatcher.memo) == 0


def test_failures_and_deferred_answers_are_not_kept() -> None:
    world = World()

    def boom(channel, request):
        world.calls += 1
        raise ValueError("no")
    world.process_request = boom
    for opaque in (1, 2):
        assert codec.decode(world.send(frame_of(java_header(opaque)))[4:]).code == ResponseCode.SYSTEM_ERROR
    world.process_request = lambda channel, request: defer.succeed(request.response())
    for opaque in (1, 2):
        assert codec.decode(world.send(frame_of(java_header(opaque)))[4:]).opaque == opaque
    assert len(world.dispatcher.memo) == 0


def test_codes_not_named_are_not_kept() -> None:
    world = World(replay=False)
    world.dispatcher.replay_answers([CODE + 1], lambda: 0)
    for opaque in (1, 2):
        world.send(frame_of(java_header(opaque)))
    assert world.calls == 2 and len(world.dispatcher.memo) == 0


def test_a_request_hook_turns_the_memo_off() -> None:
    world = World()
    world.send(frame_of(java_header(1)))
    assert len(world.dispatcher.memo) == 1

    class Hook:
        def before_request(self, channel, request):
            return None
    world.dispatcher.add_request_hook(Hook())
    world.send(frame_of(java_header(2)))
    assert world.calls == 2 and len(world.dispatcher.memo) == 0
    world.dispatcher.replay_answers([CODE], lambda: 0)  # refused while a hook runs
    assert not world.dispatcher.memo.active


def test_replays_are_told_to_the_rpc_observer() -> None:
    world = World()
    seen = []

    class Observer:
        def record(self, request, response, read_at, deferred):
            seen.append((request.code, response.code, read_at, deferred))
    world.dispatcher.rpc_observer = Observer()
    for opaque in (1, 2, 3):
        world.send(frame_of(java_header(opaque)))
    assert world.calls == 1 and seen == [(CODE, ResponseCode.SUCCESS, 0.0, False)] * 3


def test_the_memo_starts_again_past_its_byte_budget() -> None:
    world = World()
    world.dispatcher.memo.max_bytes = 1000
    for i in range(50):
        world.send(frame_of(java_header(1, f'{{"topic":"T{i}"}}')))
    assert 0 < len(world.dispatcher.memo) < 10
