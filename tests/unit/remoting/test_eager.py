"""remoting.eager: connections that send a write at once when nothing is queued before it.

Each test runs real sockets on its own (non-global) select reactor."""
from __future__ import annotations

from typing import Any

from twisted.internet import defer, protocol
from twisted.internet.testing import MemoryReactor

from rmqpy.remoting import eager
from tests.fresh_reactor import run_in_fresh_reactor

run = run_in_fresh_reactor


class Replier(protocol.Protocol):
    """Answers each chunk with the replies the test asks for, and records whether the
    transport had to wait for writability (was registered as a writer) after writing."""

    replies: list[bytes] = []
    registered: list[bool] = []

    def dataReceived(self, data: bytes) -> None:
        for reply in self.replies:
            self.transport.write(reply)
        self.registered.append(self.transport in self.factory.reactor.getWriters())


class Collector(protocol.Protocol):
    def __init__(self, want: int) -> None:
        self.want, self.got, self.done = want, bytearray(), defer.Deferred()

    def dataReceived(self, data: bytes) -> None:
        self.got += data
        if len(self.got) >= self.want and not self.done.called:
            self.done.callback(bytes(self.got))


async def exchange(r, replies: list[bytes]) -> tuple[bytes, list[bool], Any]:
    factory = protocol.Factory.forProtocol(Replier)
    factory.reactor = r
    Replier.replies, Replier.registered = replies, []
    port = eager.listen_tcp(r, 0, factory, "127.0.0.1")
    want = sum(map(len, replies))
    client = Collector(want)
    r.connectTCP("127.0.0.1", port.getHost().port, protocol.ClientFactory.forProtocol(lambda: client))
    while client.transport is None or not client.transport.connected:
        await _tick(r)
    client.transport.write(b"go")
    got = await client.done
    client.transport.loseConnection()
    await port.stopListening()
    return got, Replier.registered, port


def _tick(r) -> defer.Deferred:
    d: defer.Deferred = defer.Deferred()
    r.callLater(0.001, d.callback, None)
    return d


def test_small_reply_is_sent_without_waiting_for_writability() -> None:
    got, registered, port = run(lambda r: exchange(r, [b"one small answer", b" and another"]))
    assert got == b"one small answer and another"
    assert registered == [False]  # both went out in the write calls: no epoll/select registration
    assert isinstance(port, eager.EagerWritePort)


def test_what_the_socket_does_not_take_is_queued_and_order_kept() -> None:
    big = bytes(range(256)) * (64 * 1024)  # 16 MiB: more than loopback's send buffer takes at once
    got, registered, _ = run(lambda r: exchange(r, [big, b"tail after the big one"]))
    assert got == big + b"tail after the big one"
    assert registered == [True]  # the rest of the big write waited for writability, the tail behind it


def test_a_reactor_without_file_descriptors_listens_as_usual() -> None:
    r = MemoryReactor()
    eager.listen_tcp(r, 9876, protocol.Factory(), "127.0.0.1")
    assert [(p, i) for p, _, _, i in r.tcpServers] == [(9876, "127.0.0.1")]
