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
