"""remoting.eager: connections that send their writes themselves at the end of the reactor turn
when nothing is queued before them.

Each test runs real sockets on its own (non-global) select reactor."""
from __future__ import annotations

from typing import Any

from twisted.internet import defer, protocol
from twisted.internet.testing import MemoryReactor

from rmqpy.remoting import eager
from tests.fresh_reactor import run_in_fresh_reactor

run = run_in_fresh_reactor


class Replier(protocol.Protocol):
    """Answers each chunk with the replies the test asks for (bytes: ``write``, a list:
    ``writeSequence``, None: ``loseConnection``), and records whether the transport had to wait
    for writability (was registered as a writer) right after writing and after the turn."""

    replies: list[Any] = []
    registered: list[bool] = []

    def dataReceived(self, data: bytes) -> None:
        for reply in self.replies:
            if reply is None:
                self.transport.loseConnection()
            elif isinstance(reply, list):
                self.transport.writeSequence(reply)
            else:
                self.transport.write(reply)
        writers = self.factory.reactor.getWriters
        self.registered.append(self.transport in writers())
        # later than the end of this turn, when the held writes were sent
        self.factory.reactor.callLater(0.0001, lambda: self.registered.append(self.transport in writers()))


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
    want = sum(len(b"".join(r)) if isinstance(r, list) else len(r or b"") for r in replies)
    client = Collector(want)
    r.connectTCP("127.0.0.1", port.getHost().port, protocol.ClientFactory.forProtocol(lambda: client))
    while client.transport is None or not client.transport.connected:
        await _tick(r)
    client.transport.write(b"go")
    got = await client.done
    client.transport.loseConnection()
    await _tick(r)
    await port.stopListening()
    return got, Replier.registered, port


def _tick(r) -> defer.Deferred:
    d: defer.Deferred = defer.Deferred()
    r.callLater(0.001, d.callback, None)
    return d


def test_small_reply_is_sent_without_waiting_for_writability() -> None:
    got, registered, port = run(lambda r: exchange(r, [b"one small answer", b" and another"]))
    assert got == b"one small answer and another"
    assert registered == [False, False]  # both went out at the end of the turn: no epoll/select registration
    assert isinstance(port, eager.EagerWritePort)


def test_what_the_socket_does_not_take_is_queued_and_order_kept() -> None:
    big = bytes(range(256)) * (64 * 1024)  # 16 MiB: more than loopback's send buffer takes at once
    got, registered, _ = run(lambda r: exchange(r, [big, b"tail after the big one"]))
    assert got == big + b"tail after the big one"
    assert registered == [False, True]  # the rest of the big write waited for writability, the tail behind it


def test_held_writes_go_before_a_write_sequence_and_a_close() -> None:
    got, registered, _ = run(lambda r: exchange(r, [b"held ", [b"then ", b"a sequence"], b" and more", None]))
    assert got == b"held then a sequence and more"
    assert registered[0] is True  # the sequence queued the held write in Twisted's buffer ahead of it


def test_a_reactor_without_file_descriptors_listens_as_usual() -> None:
    r = MemoryReactor()
    eager.listen_tcp(r, 9876, protocol.Factory(), "127.0.0.1")
    assert [(p, i) for p, _, _, i in r.tcpServers] == [(9876, "127.0.0.1")]
