"""Issue 31, case 6: who may be a replica on the HA port. The allow-list, its refusal over real TCP
on 127.0.0.1 (both services), and the connections that never count as a replica: one refused, one
that said nothing, one that acknowledges more than the master has, one that reports before its
handshake."""
from __future__ import annotations

import ipaddress
import logging
from typing import Any

import pytest
from twisted.internet import defer, protocol
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from rmqpy.store.config import MessageStoreConfig
from rmqpy.store.ha.autoswitch.api import AutoSwitchSettings
from rmqpy.store.ha.autoswitch.service import AutoSwitchHAService
from rmqpy.store.ha.connection import HATimings, MasterLog
from rmqpy.store.ha.gate import ReplicaGate, impossible_report, parse_allowed, peer_ip
from rmqpy.store.ha.service import HAService
from rmqpy.store.ha.wire import HEADER, REPORT
from tests.fresh_reactor import run_in_fresh_reactor

END = 5000  # the fake master's commit log end


def _master_log() -> MasterLog:
    return MasterLog(lambda: END, lambda off, n: b"r" * min(n, END - off) if off < END else None, 4096)


def _classic(clock: Any, allowed: str = "") -> HAService[str]:
    return HAService(clock, _master_log(), HATimings(), fallbehind_max=1 << 28, slave_timeout_ms=3000,
                     ok="OK", not_available="NOT_AVAILABLE", timeout="TIMEOUT",
                     gate=ReplicaGate(clock, parse_allowed(allowed)))


def _v4(host: str) -> IPv4Address:
    return IPv4Address("TCP", host, 4242)


# ------------------------------------------------------------------ the list
def test_allow_list_parses_addresses_and_blocks():
    nets = parse_allowed(" 10.0.0.7, 192.168.0.0/16;fd00::/8  127.0.0.1 ")
    assert nets == (ipaddress.ip_network("10.0.0.7/32"), ipaddress.ip_network("192.168.0.0/16"),
                    ipaddress.ip_network("fd00::/8"), ipaddress.ip_network("127.0.0.1/32"))
    assert parse_allowed("") == parse_allowed(None) == ()
    assert parse_allowed("10.1.2.3/8") == (ipaddress.ip_network("10.0.0.0/8"),)  # host bits: the block
    with pytest.raises(ValueError, match="haAllowedReplicaAddresses: 'slave.example' is not an IP"):
        parse_allowed("10.0.0.1,slave.example")


def test_store_config_refuses_a_bad_list_and_listen_address():
    assert MessageStoreConfig.from_properties({"haAllowedReplicaAddresses": "10.0.0.0/8",
                                               "haListenAddress": "127.0.0.1"}).haListenAddress == "127.0.0.1"
    with pytest.raises(ValueError, match="haAllowedReplicaAddresses"):
        MessageStoreConfig.from_properties({"haAllowedReplicaAddresses": "10.0.0.0/33"})
    with pytest.raises(ValueError, match="haListenAddress"):
        MessageStoreConfig.from_properties({"haListenAddress": "master.example"})


def test_gate_allows_listed_peers_only():
    open_gate = ReplicaGate(Clock())
    assert open_gate.allows(_v4("203.0.113.9")) and open_gate.allows(object())  # default: everyone, as Java
    gate = ReplicaGate(Clock(), parse_allowed("10.0.0.7,192.168.0.0/16,fd00::/8"))
    assert gate.allows(_v4("10.0.0.7")) and gate.allows(_v4("192.168.44.1"))
    assert not gate.allows(_v4("10.0.0.8")) and not gate.allows(_v4("127.0.0.1"))
    assert gate.allows(IPv6Address("TCP", "fd00::1", 1)) and not gate.allows(IPv6Address("TCP", "fe80::1", 1))
    assert gate.allows(IPv6Address("TCP", "::ffff:10.0.0.7", 1))  # a v4 peer of a port bound to ::
    assert peer_ip(IPv6Address("TCP", "fe80::1%eth0", 1)) == ipaddress.ip_address("fe80::1")
    assert not gate.allows(object())  # no IP (a UNIX socket): not on any list


def test_refusals_are_counted_and_logged_at_a_bounded_rate(caplog):
    clock = Clock()
    gate = ReplicaGate(clock, parse_allowed("10.0.0.7"), max_connections=2)
    with caplog.at_level(logging.WARNING, logger="rmqpy.store.ha.gate"):
        for _ in range(500):  # a scan of the port
            assert not gate.admit(_v4("203.0.113.9"), 0)
        assert not gate.admit(_v4("10.0.0.7"), 2)  # listed, but the cap is reached
        assert gate.admit(_v4("10.0.0.7"), 1)
    lines = [r.getMessage() for r in caplog.records]
    assert gate.refused == 501
    assert "HA: refusing a connection from 203.0.113.9: not in haAllowedReplicaAddresses" in lines
    assert "HA: refusing a replica from 10.0.0.7: 2 connections already" in lines
    assert len(lines) <= 25, len(lines)  # the rate limiter's burst, not one line per refusal


def test_impossible_reports():
    assert impossible_report(0, 10) is None and impossible_report(10, 10) is None
    assert impossible_report(-1, 10) == "reported a negative offset -1"
    assert impossible_report(11, 10) == "reported 11, beyond the master's end 10"


# ------------------------------------------------------------------ classic HA, in memory
def _connect(service: Any, host: str = "10.0.0.7") -> tuple[Any, StringTransport]:
    conn = service.buildProtocol(_v4(host))
    assert conn is not None
    t = StringTransport(peerAddress=_v4(host))
    conn.makeConnection(t)
    return conn, t


def test_a_silent_connection_is_no_slave():
    """Java counts every connection: one that connected and said nothing made a slave-less
    SYNC_MASTER wait slaveTimeout (FLUSH_SLAVE_TIMEOUT) instead of SLAVE_NOT_AVAILABLE."""
    svc = _classic(Clock())
    conn, _t = _connect(svc)
    assert svc.connections == [conn] and svc.replicas() == []
    assert svc.replica_wait(END) == "NOT_AVAILABLE"
    assert svc.slave_ack_offset() == -1
    conn.dataReceived(REPORT.pack(END))
    assert svc.replicas() == [conn]
    waiting = svc.replica_wait(END)
    assert isinstance(waiting, defer.Deferred) and waiting.called and waiting.result == "OK"


@pytest.mark.parametrize("first", [True, False])
def test_a_slave_acknowledging_beyond_the_masters_end_is_closed(first, caplog):
    """A fake slave reporting 10**15 answered every SYNC put until the master restarted (Java takes
    any offset, and the highest one acknowledged stays); rmqpy closes it, the first report included."""
    svc = _classic(Clock())
    conn, t = _connect(svc)
    if not first:
        conn.dataReceived(REPORT.pack(100))
        assert svc.push2slave_max_offset == 100
    before = svc.push2slave_max_offset
    with caplog.at_level(logging.WARNING, logger="rmqpy.store.ha.connection"):
        conn.dataReceived(REPORT.pack(10**15))
    assert t.disconnecting
    assert f"reported {10**15}, beyond the master's end {END}" in caplog.text
    assert svc.push2slave_max_offset == before < END
    conn.connectionLost(None)
    assert svc.connections == [] and svc.replica_wait(END) == "NOT_AVAILABLE"


# ------------------------------------------------------------------ AutoSwitch HA, in memory
def _autoswitch(tmp_path: Any, allowed: str = "") -> AutoSwitchHAService:
    store: Any = type("Store", (), {"get_max_phy_offset": lambda self: END, "get_min_phy_offset": lambda self: 0})()
    clock = Clock()
    return AutoSwitchHAService(clock, store, AutoSwitchSettings(storePathEpochFile=str(tmp_path / "epoch")),
                               lambda fn, *a: defer.maybeDeferred(fn, *a),
                               gate=ReplicaGate(clock, parse_allowed(allowed), what="AutoSwitch HA"))


def test_autoswitch_refuses_unlisted_peers_and_reports_it_cannot_trust(tmp_path, caplog):
    svc = _autoswitch(tmp_path, "10.0.0.0/24")
    assert svc.buildProtocol(_v4("10.0.1.1")) is None and svc.connections == []
    acks: list[tuple[int, int]] = []
    svc.ack_listeners.append(lambda broker_id, offset: acks.append((broker_id, offset)))
    with caplog.at_level(logging.WARNING):
        # a report with no handshake (no broker id): Java takes it as broker -1's
        conn, t = _connect(svc)
        conn.dataReceived((2).to_bytes(4, "big") + (100).to_bytes(8, "big"))
        assert t.disconnecting and "a report before any handshake" in caplog.text
        # a handshake, then a report beyond the end
        conn, t = _connect(svc)
        conn.dataReceived((1).to_bytes(4, "big") + b"\0\0\0\0" + (7).to_bytes(8, "big"))
        assert not t.disconnecting and conn.slave_id == 7
        conn.dataReceived((2).to_bytes(4, "big") + (END + 1).to_bytes(8, "big"))
        assert t.disconnecting and f"reported {END + 1}, beyond the master's end {END}" in caplog.text
    assert acks == []
    assert "AutoSwitch HA: refusing a connection from 10.0.1.1: not in haAllowedReplicaAddresses" in caplog.text


# ------------------------------------------------------------------ real TCP on 127.0.0.1
class _Raw(protocol.Protocol):
    """A stranger on the HA port: sends ``hello`` and keeps what it receives until closed."""

    def __init__(self, hello: bytes) -> None:
        self.hello = hello
        self.got = b""
        self.closed: defer.Deferred[bytes] = defer.Deferred()

    def connectionMade(self) -> None:  # noqa: N802
        self.transport.write(self.hello)

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self.got += data

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self.closed.callback(self.got)


async def _visit(r: Any, port: int, hello: bytes, linger: float = 0.3) -> tuple[bytes, bool]:
    """What a raw client on ``port`` reads within ``linger`` seconds, and whether the server closed it."""
    from twisted.internet import task
    raw = _Raw(hello)
    await connectProtocol(TCP4ClientEndpoint(r, "127.0.0.1", port), raw)
    await task.deferLater(r, linger, lambda: None)
    closed = raw.closed.called
    if not closed:
        raw.transport.loseConnection()
        await raw.closed
    return raw.got, closed


@pytest.mark.parametrize("kind", ["classic", "autoswitch"])
def test_tcp_refused_stranger_reads_nothing_and_is_no_replica(tmp_path, kind):
    """A stranger's connection on 127.0.0.1, with only 10.9.9.9 allowed: closed at once, not a
    byte of the commit log read, never in the service's connections, and a SYNC_MASTER's put
    still SLAVE_NOT_AVAILABLE; with 127.0.0.0/8 allowed the same client reads the log."""

    async def scenario(r: Any) -> list[Any]:
        out: list[Any] = []
        for allowed in ("10.9.9.9", "127.0.0.0/8"):
            svc: Any = _classic(r, allowed) if kind == "classic" else _autoswitch(tmp_path, allowed)
            port = r.listenTCP(0, svc, interface="127.0.0.1")
            hello = REPORT.pack(1) if kind == "classic" else \
                (1).to_bytes(4, "big") + b"\0\0\0\0" + (9).to_bytes(8, "big")
            got, closed = await _visit(r, port.getHost().port, hello)
            out.append((allowed, got, closed, len(svc.connections), svc.gate.refused,
                        svc.replica_wait(END) if kind == "classic" else None))
            await port.stopListening()
            for conn in list(svc.connections):
                conn.close("test over")
        return out

    (_, got1, closed1, n1, refused1, wait1), (_, got2, closed2, _n2, refused2, _w) = \
        run_in_fresh_reactor(scenario, timeout=10)
    assert (got1, closed1, n1, refused1) == (b"", True, 0, 1)
    assert not closed2 and refused2 == 0 and got2  # the allowed peer is served
    if kind == "classic":
        assert wait1 == "NOT_AVAILABLE"
        start, size = HEADER.unpack_from(got2)
        assert start == 1 and size > 0  # the commit log from where it asked
    else:
        assert int.from_bytes(got2[:4], "big") == 1  # the master's handshake answer
