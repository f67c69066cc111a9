"""The Deferred and asyncio runners drive the same plans as the blocking one: answers go in,
transport failures are thrown in (and retried by the plan), other failures come out as they are."""
from __future__ import annotations

import asyncio

import pytest
from twisted.internet import defer, task

from rmqpy.client import ClientError, Message, aio, deferred
from rmqpy.client.core import Call, ProducerCore
from rmqpy.client.errors import TransportError
from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RemotingCommand
from tests.unit.client.test_client_plans import A, B, routes_then, send_ok


def broker_a_down(call: Call) -> RemotingCommand | None:
    if call.addr == A:
        raise TransportError("refused")
    return send_ok(2)


class DeferredNet:
    def __init__(self, clock: task.Clock) -> None:
        self.clock = clock
        self.calls: list[Call] = []
        self.handler = routes_then(broker_a_down)

    def invoke(self, call: Call) -> defer.Deferred:
        self.calls.append(call)
        d: defer.Deferred = defer.Deferred()
        try:
            answer = self.handler(call)
        except TransportError as exc:
            self.clock.callLater(0.01, d.errback, exc)
        else:
            self.clock.callLater(0.01, d.callback, answer)
        return d


def test_deferred_runner_retries_on_the_other_broker() -> None:
    clock = task.Clock()
    net = DeferredNet(clock)
    core = ProducerCore("10.0.0.1:9876", "PG", 3000, 2, None, clock.seconds)
    results = [deferred.run(net, core.send_plan(Message("T", b"x"))) for _ in range(4)]   # type: ignore[arg-type]
    clock.pump([0.01] * 40)
    values = [r.result for r in results]
    assert {v.queue.broker_name for v in values} == {"broker-b"}
    assert any(c.addr == A for c in net.calls)
    bad = deferred.run(net, core.send_plan(Message("T", b"")))   # type: ignore[arg-type]
    assert isinstance(bad.result.value, ClientError)
    bad.addErrback(lambda f: None)


class AsyncNet:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.handler = routes_then(broker_a_down)

    async def invoke(self, call: Call) -> RemotingCommand | None:
        self.calls.append(call)
        await asyncio.sleep(0)
        return self.handler(call)


def test_asyncio_runner_retries_on_the_other_broker() -> None:
    async def main() -> None:
        net = AsyncNet()
        core = ProducerCore("10.0.0.1:9876", "PG", 3000, 2, None, asyncio.get_running_loop().time)
        results = await asyncio.gather(*[aio.run(net, core.send_plan(Message("T", b"x")))   # type: ignore[arg-type]
                                         for _ in range(4)])
        assert {r.queue.broker_name for r in results if r} == {"broker-b"}
        assert any(c.addr == A for c in net.calls) and any(c.addr == B for c in net.calls)
        assert len([c for c in net.calls if c.request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC]) >= 1
        with pytest.raises(ClientError, match="length is zero"):
            await aio.run(net, core.send_plan(Message("T", b"")))   # type: ignore[arg-type]
    asyncio.run(main())


def test_asyncio_transport_bounds_the_wait_for_an_answer() -> None:
    """A server that accepts and never answers: ClientError after the call's timeout."""
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport = aio.AsyncTransport()
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "T"})
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TransportError, match="timed out"):
            await transport.invoke(Call(f"127.0.0.1:{port}", request, 0.2))
        assert loop.time() - started >= 0.2
        await transport.close()
        server.close()
        await server.wait_closed()
    asyncio.run(main())


def test_blocking_transport_bounds_the_wait_and_drops_the_connection() -> None:
    import socket

    from rmqpy.client.blocking import BlockingTransport
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        addr = "127.0.0.1:%d" % server.getsockname()[1]
        transport = BlockingTransport()
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "T"})
        with pytest.raises(TransportError, match="timed out"):
            transport.invoke(Call(addr, request, 0.2))
        assert transport._conns == {}     # a late answer must not be read as the next call's
        transport.close()
        with pytest.raises(ClientError, match="shut down"):
            transport.invoke(Call(addr, request, 0.2))


def test_blocking_transport_reconnects_when_the_server_closed_an_idle_connection() -> None:
    """Brokers close idle connections: the next request goes on a new one instead of failing."""
    import socket
    import struct
    import threading

    from rmqpy.client.blocking import BlockingTransport
    from rmqpy.protocol import command as codec

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[int] = []
    closed = threading.Event()

    def serve() -> None:
        for _ in range(2):     # answer one request per connection, then close it
            conn, _ = server.accept()
            accepted.append(1)
            (length,) = struct.unpack(">I", conn.recv(4, socket.MSG_WAITALL))
            request = codec.decode(conn.recv(length, socket.MSG_WAITALL))
            conn.sendall(codec.encode(request.response(0)))
            conn.close()
            closed.set()
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    addr = "127.0.0.1:%d" % server.getsockname()[1]
    transport = BlockingTransport()
    for _ in range(2):
        request = RemotingCommand.request(RequestCode.HEART_BEAT, body=b"{}")
        answer = transport.invoke(Call(addr, request, 5.0))
        assert answer is not None and answer.code == 0 and answer.opaque == request.opaque
        assert closed.wait(5)      # the server closed that connection (on loopback the FIN is there now)
        closed.clear()
    thread.join(5)
    assert len(accepted) == 2
    transport.close()
    server.close()
