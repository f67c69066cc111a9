"""PullStream: the request frames are those pull_request encodes; answers come back in the order
the pulls were sent whatever order the server answers in; a silent server times a pull out."""
from __future__ import annotations

import socket
import struct
import threading

import pytest

from rmqpy.client import PullStatus
from rmqpy.client import requests as R
from rmqpy.client.errors import TransportError
from rmqpy.client.model import MessageQueue
from rmqpy.client.pullstream import PullStream, PullTemplate
from rmqpy.protocol import command as codec
from rmqpy.protocol.command import RemotingCommand

MQ = MessageQueue("T", "broker-a", 3)


@pytest.mark.parametrize("topic, group, expr", [("T", "g", "*"), ('a"7%d\\', "gr7%s\u00e9", "x || y7"),
                                                ("TopicTest", "7777777777771", "7777777772")])
def test_template_frames_are_the_bytes_pull_request_encodes(topic: str, group: str, expr: str) -> None:
    mq = MessageQueue(topic, "broker-7", 7)
    sub = R.subscription(topic, expr)
    template = PullTemplate.build(group, mq, sub)
    assert template is not None
    for offset, count, opaque in [(0, 1, 0), (12345, 32, 77), (2**63 - 1, 1024, 2**31 - 1)]:
        req = R.pull_request(group, mq, offset, count, sub)
        req.opaque = opaque
        assert template.frame(offset, count, opaque) == codec.encode(req)


def serve(server: socket.socket, n: int, order: list[int], seen: list[RemotingCommand]) -> None:
    """Read ``n`` requests, then answer them in ``order`` (indexes), each answer FOUND with the
    request's offset as its nextBeginOffset + 1 and a one-byte body; a request from the server first."""
    conn, _ = server.accept()
    with conn:
        for _ in range(n):
            (length,) = struct.unpack(">I", conn.recv(4, socket.MSG_WAITALL))
            seen.append(codec.decode(conn.recv(length, socket.MSG_WAITALL)))
        out = [codec.encode(RemotingCommand.request(40, ext_fields={"x": "y"}))]  # NOTIFY_CONSUMER_IDS_CHANGED
        for i in order:
            h = seen[i].ext_fields or {}
            nxt = int(h["queueOffset"]) + 1
            out.append(codec.encode(seen[i].response(0, ext_fields={
                "suggestWhichBrokerId": "0", "nextBeginOffset": str(nxt), "minOffset": "0",
                "maxOffset": "99"}, body=b"%d" % i)))
        conn.sendall(b"".join(out))
        conn.recv(1)  # until the client closes


def test_answers_in_send_order_whatever_order_the_server_answers_in() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        seen: list[RemotingCommand] = []
        thread = threading.Thread(target=serve, args=(server, 4, [2, 0, 3, 1], seen), daemon=True)
        thread.start()
        addr = "127.0.0.1:%d" % server.getsockname()[1]
        suggested: list[int] = []
        with PullStream(addr, "g", MQ, R.subscription("T", "*"), 5000, on_suggest=suggested.append) as s:
            s.send([(10, 32), (42, 32)])
            s.send([(74, 32), (106, 5)])
            assert s.pending == 4
            got = [s.receive() for _ in range(4)]
            assert s.pending == 0
        thread.join(5)
    assert [(r.status, r.next_begin_offset, r.body) for r in got] == [
        (PullStatus.FOUND, 11, b"0"), (PullStatus.FOUND, 43, b"1"), (PullStatus.FOUND, 75, b"2"),
        (PullStatus.FOUND, 107, b"3")]
    assert [(c.ext_fields or {})["maxMsgNums"] for c in seen] == ["32", "32", "32", "5"]
    assert suggested == [0, 0, 0, 0]


def test_a_pull_not_answered_in_time_closes_the_stream() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        addr = "127.0.0.1:%d" % server.getsockname()[1]
        s = PullStream(addr, "g", MQ, R.subscription("T", "*"), 200)
        s.send([(0, 32)])
        with pytest.raises(TransportError, match="timed out"):
            s.receive()
        assert s.pending == 0 and s.sock.fileno() == -1
