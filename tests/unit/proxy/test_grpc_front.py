"""The one-port front of the gRPC endpoint (rmqpy.proxy.grpc.front) on an in-memory reactor: the first
byte picks grpcio's TLS or plain loopback port, bytes are relayed both ways, and the client's address
is what the servicer sees."""
from __future__ import annotations

from types import SimpleNamespace

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.testing import MemoryReactorClock, StringTransport

from rmqpy.proxy.grpc.front import LOOPBACK, GrpcFront
from rmqpy.proxy.grpc.servicer import MessagingServicer

PLAIN, TLS = 40001, 40002
CLIENT = IPv4Address("TCP", "10.0.0.7", 5555)


def _connect(front: GrpcFront, reactor: MemoryReactorClock, addr=CLIENT):
    proto = front.buildProtocol(addr)
    client = StringTransport(peerAddress=addr)
    proto.makeConnection(client)
    return proto, client


def _backend(reactor: MemoryReactorClock, local_port: int = 50000):
    host, port, factory, _, _ = reactor.tcpClients[-1]
    back = factory.buildProtocol(None)
    transport = StringTransport(hostAddress=IPv4Address("TCP", LOOPBACK, local_port))
    back.makeConnection(transport)
    return (host, port), back, transport


def test_a_tls_hello_goes_to_the_tls_port_and_plain_text_to_the_plain_one() -> None:
    reactor = MemoryReactorClock()
    front = GrpcFront(reactor, PLAIN, TLS, 10.0)
    for first, port in ((b"\x16\x03\x01\x02\x00", TLS), (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", PLAIN)):
        proto, client = _connect(front, reactor)
        proto.dataReceived(first)
        proto.dataReceived(b"more")  # while the backend connects: kept, in order
        where, back, transport = _backend(reactor, 50000 + port)
        assert where == (LOOPBACK, port)
        assert transport.value() == first + b"more"
        back.dataReceived(b"answer")
        assert client.value() == b"answer"
        proto.dataReceived(b"next")
        assert transport.value().endswith(b"next")
        assert front.peers[50000 + port] == "10.0.0.7:5555"
        back.connectionLost(None)  # grpcio closed it: the client's connection goes, its address is forgotten
        assert client.disconnecting and 50000 + port not in front.peers
    assert front.relayed == {"tls": 1, "plain": 1}


def test_a_client_that_sends_nothing_is_closed_after_the_handshake_timeout() -> None:
    reactor = MemoryReactorClock()
    front = GrpcFront(reactor, PLAIN, TLS, 10.0)
    proto, client = _connect(front, reactor)
    reactor.advance(9.9)
    assert not client.disconnecting and not reactor.tcpClients
    reactor.advance(0.1)
    assert front.timeouts == 1


def test_the_servicer_sees_the_clients_address_not_the_loopback_one() -> None:
    reactor = MemoryReactorClock()
    front = GrpcFront(reactor, PLAIN, TLS, 10.0)
    proto, _ = _connect(front, reactor, IPv6Address("TCP", "fd00::9", 6000))
    proto.dataReceived(b"PRI")
    _backend(reactor, 50123)
    servicer = MessagingServicer(SimpleNamespace(), reactor)
    servicer.peers = front.peers
    assert servicer.address(SimpleNamespace(peer=lambda: "ipv4:127.0.0.1:50123")) == "[fd00::9]:6000"
    assert servicer.address(SimpleNamespace(peer=lambda: "ipv4:127.0.0.1:50124")) == "127.0.0.1:50124"


# -------------------------------------------------------------- what a connection may cost (issue 31)
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _relayed(front: GrpcFront, reactor: MemoryReactorClock, addr=CLIENT, local_port: int = 50000):
    proto, client = _connect(front, reactor, addr)
    proto.dataReceived(PREFACE)
    _, back, transport = _backend(reactor, local_port)
    return proto, client, back, transport


def _warnings(events: list, text: str) -> list:
    from twisted.logger import formatEvent
    return [formatEvent(e) for e in events if text in formatEvent(e)]


def _events():
    from twisted.logger import globalLogPublisher
    events: list = []
    globalLogPublisher.addObserver(events.append)
    return events, lambda: globalLogPublisher.removeObserver(events.append)


def test_a_silent_connection_is_closed_at_the_first_byte_timeout_and_gives_its_slot_back() -> None:
    from rmqpy.remoting.connection_limits import ConnectionCap
    reactor = MemoryReactorClock()
    cap = ConnectionCap("gRPC port", reactor, 10, 10, ("grpcMaxConnections", "grpcMaxConnectionsPerAddress"))
    front = GrpcFront(reactor, PLAIN, TLS, 10.0, idle_timeout=120.0, cap=cap)
    proto, client = _connect(front, reactor)
    assert cap.total == 1
    reactor.advance(9.9)
    assert not client.disconnecting
    reactor.advance(0.1)
    assert client.disconnected and front.timeouts == 1 and front.idle_closed == 0  # aborted, not drained
    proto.connectionLost(None)
    assert cap.total == 0 and cap.by_address == {}


def test_an_idle_relayed_connection_is_closed_at_grpcClientIdleTimeMills_and_not_before() -> None:  # noqa: N802
    reactor = MemoryReactorClock()
    front = GrpcFront(reactor, PLAIN, TLS, 10.0, idle_timeout=120.0)
    proto, client, back, transport = _relayed(front, reactor)
    back.dataReceived(b"settings")  # grpcio's SETTINGS: the last byte either way
    reactor.advance(119.9)
    assert not client.disconnecting and not transport.disconnecting
    reactor.advance(0.1)
    assert client.disconnected and transport.disconnected and front.idle_closed == 1
    assert len(reactor.getDelayedCalls()) == 0


def test_a_busy_connection_is_kept_whichever_side_talks() -> None:
    reactor = MemoryReactorClock()
    front = GrpcFront(reactor, PLAIN, TLS, 10.0, idle_timeout=120.0)
    proto, client, back, transport = _relayed(front, reactor)
    for i in range(20):  # 20 minutes: a byte every 60 s, from the client or from grpcio in turn
        reactor.advance(60.0)
        (proto if i % 2 else back).dataReceived(b"x")
    assert not client.disconnecting and front.idle_closed == 0
    assert len(reactor.getDelayedCalls()) == 1  # one timer a connection, moved on only when it fires
    reactor.advance(120.0)
    assert client.disconnected and front.idle_closed == 1


def test_the_cap_refuses_the_next_connection_with_one_log_line() -> None:
    from rmqpy.remoting.connection_limits import ConnectionCap
    reactor = MemoryReactorClock()
    cap = ConnectionCap("gRPC port", reactor, 3, 2, ("grpcMaxConnections", "grpcMaxConnectionsPerAddress"))
    front = GrpcFront(reactor, PLAIN, TLS, 10.0, cap=cap)
    events, stop = _events()
    try:
        a1, a2 = front.buildProtocol(CLIENT), front.buildProtocol(CLIENT)
        assert a1 is not None and a2 is not None
        assert [front.buildProtocol(CLIENT) for _ in range(5)] == [None] * 5  # 3rd from 10.0.0.7: per address
        other = IPv4Address("TCP", "10.0.0.8", 7000)
        b1 = front.buildProtocol(other)
        assert b1 is not None
        assert [front.buildProtocol(other) for _ in range(5)] == [None] * 5  # the 4th of the port
        assert cap.refused == 10 and cap.total == 3
        per_address = _warnings(events, "per address (grpcMaxConnectionsPerAddress=2)")
        per_port = _warnings(events, "the cap of the port (grpcMaxConnections=3)")
        assert len(per_address) == 1 and len(per_port) == 1, (per_address, per_port)
        assert "refusing connections from 10.0.0.7: 2 open" in per_address[0]
        b1.makeConnection(StringTransport(peerAddress=other))
        b1.connectionLost(None)  # a slot comes back
        assert front.buildProtocol(IPv4Address("TCP", "10.0.0.9", 1)) is not None
        reactor.advance(10.0)  # the refusals held back are counted in one summary
        assert _warnings(events, "suppressed 4 similar log lines")
    finally:
        stop()


def test_the_bytes_held_before_the_backend_exists_are_bounded() -> None:
    reactor = MemoryReactorClock()
    front = GrpcFront(reactor, PLAIN, TLS, 10.0, max_pending=1000)
    proto, client = _connect(front, reactor)
    proto.dataReceived(PREFACE)
    assert client.producerState == "paused"  # reads stop until the backend takes the bytes
    proto.dataReceived(b"x" * (1000 - len(PREFACE)))  # a transport that reads on anyway: up to the bound
    assert not client.disconnecting
    proto.dataReceived(b"y")
    assert client.disconnected and front.pending_closed == 1 and proto.pending is None
    _, back, transport = _backend(reactor)
    assert transport.disconnecting and transport.value() == b""  # nothing relayed once closed
    big, big_client = _connect(front, reactor)
    big.dataReceived(b"\x16" * 1001)  # a first read over the bound: no backend connection at all
    assert big_client.disconnected and len(reactor.tcpClients) == 1
