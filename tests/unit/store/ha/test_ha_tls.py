"""haUseTLS (issue 31, case 6): the HA port over TLS on 127.0.0.1, mutual TLS with the existing
``tls.*`` keys. A plaintext peer and a TLS peer without a client certificate of the trusted CA
read nothing and are no slave; an rmqpy slave (the real HAClient) with one replicates; the
allow-list is asked before any handshake."""
from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import defer, protocol, task
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol

from rmqpy.remoting.tls import TlsConfigError
from rmqpy.remoting.tls_testcerts import issue, make_ca
from rmqpy.store.ha.client import HAClient
from rmqpy.store.ha.connection import HATimings
from rmqpy.store.ha.tls import ha_tls
from rmqpy.store.ha.wire import REPORT
from tests.fresh_reactor import run_in_fresh_reactor

from .test_gate import END, _classic

NO_FILE = "/nonexistent/tls.properties"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("ha-pki")
    ca, other = make_ca("HA CA"), make_ca("stranger CA")
    (d / "ca.pem").write_bytes(ca.cert_pem)
    out = {"ca": str(d / "ca.pem")}
    out["server_cert"], out["server_key"] = map(str, issue(ca, "master").write(d, "master"))
    out["good_cert"], out["good_key"] = map(str, issue(ca, "slave", server=False).write(d, "slave"))
    out["bad_cert"], out["bad_key"] = map(str, issue(other, "stranger", server=False).write(d, "stranger"))
    return out


def _master_props(pki: dict[str, str]) -> dict[str, str]:
    """The master's tls.* keys: its certificate, client certificates of the CA required. The mode
    says permissive, as the remoting ports may: the HA port is TLS only whatever it says."""
    return {"tls.server.mode": "permissive", "tls.server.certPath": pki["server_cert"],
            "tls.server.keyPath": pki["server_key"], "tls.server.need.client.auth": "require",
            "tls.server.trustCertPath": pki["ca"], "tls.config.file": NO_FILE}


def _slave_props(pki: dict[str, str], cert: str | None) -> dict[str, str]:
    props = {"tls.client.trustCertPath": pki["ca"], "tls.config.file": NO_FILE}
    if cert:
        props["tls.client.certPath"], props["tls.client.keyPath"] = pki[f"{cert}_cert"], pki[f"{cert}_key"]
    return props


class _Slave:
    """A slave's store as HAClient sees it: its end, and what it appended."""

    def __init__(self) -> None:
        self.end = 0
        self.data = b""

    def append(self, start: int, data: bytes) -> bool:
        self.data += data
        self.end = start + len(data)
        return True


class _Raw(protocol.Protocol):
    def __init__(self) -> None:
        self.got = b""
        self.closed: defer.Deferred[None] = defer.Deferred()

    def connectionMade(self) -> None:  # noqa: N802
        self.transport.write(REPORT.pack(0))  # plaintext: a Java slave's first report

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self.got += data

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self.closed.callback(None)


async def _wait(r: Any, cond: Any, seconds: float = 3.0) -> bool:
    for _ in range(int(seconds / 0.02)):
        if cond():
            return True
        await task.deferLater(r, 0.02, lambda: None)
    return cond()


def test_mutual_tls_lets_only_a_slave_with_a_certificate_in(pki):
    async def scenario(r: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        svc = _classic(r)
        tls = ha_tls(_master_props(pki), r, use_inotify=False)
        port = r.listenTCP(0, tls.wrap(svc), interface="127.0.0.1")
        addr = f"127.0.0.1:{port.getHost().port}"
        # a plaintext stranger: closed unread
        raw = _Raw()
        await connectProtocol(TCP4ClientEndpoint(r, "127.0.0.1", port.getHost().port), raw)
        out["plain_closed"] = await _wait(r, lambda: raw.closed.called)
        out["plain_got"] = raw.got
        # TLS slaves without a certificate, and with one of another CA: the handshake fails
        for cert in (None, "bad"):
            slave = _Slave()
            client = HAClient(r, lambda s=slave: s.end, slave.append, HATimings(), addr,
                              ha_tls(_slave_props(pki, cert), r, use_inotify=False).connect)
            client.start()
            await task.deferLater(r, 0.5, lambda: None)
            out[f"{cert}_data"] = slave.data
            out[f"{cert}_replicas"] = len(svc.replicas())
            client.stop()
        out["sync_without"] = svc.replica_wait(END)
        # the slave with a certificate of the CA replicates, and counts
        slave = _Slave()
        good = ha_tls(_slave_props(pki, "good"), r, use_inotify=False)
        client = HAClient(r, lambda: slave.end, slave.append, HATimings(), addr, good.connect)
        client.start()
        out["good_caught_up"] = await _wait(r, lambda: slave.end == END)
        out["good_replicas"] = len(svc.replicas())
        out["good_acked"] = await _wait(r, lambda: svc.slave_ack_offset() == END)
        client.stop()
        good.stop()
        await task.deferLater(r, 0.1, lambda: None)
        await port.stopListening()
        return out

    out = run_in_fresh_reactor(scenario, timeout=15)
    assert out["plain_closed"] and out["plain_got"] == b""
    assert out["None_data"] == out["bad_data"] == b"" and out["None_replicas"] == out["bad_replicas"] == 0
    assert out["sync_without"] == "NOT_AVAILABLE"
    assert out["good_caught_up"] and out["good_replicas"] == 1 and out["good_acked"]


def test_the_allow_list_is_asked_before_the_handshake(pki):
    """A peer the gate refuses is closed at the TCP accept: not even a TLS ServerHello."""

    async def scenario(r: Any) -> tuple[bool, bytes, int]:
        svc = _classic(r, "10.9.9.9")
        port = r.listenTCP(0, ha_tls(_master_props(pki), r, use_inotify=False).wrap(svc), interface="127.0.0.1")
        raw = _Raw()
        raw.connectionMade = lambda: raw.transport.write(b"\x16\x03\x01\x00\x05hello")  # type: ignore[method-assign]
        await connectProtocol(TCP4ClientEndpoint(r, "127.0.0.1", port.getHost().port), raw)
        closed = await _wait(r, lambda: raw.closed.called)
        await port.stopListening()
        return closed, raw.got, svc.gate.refused

    assert run_in_fresh_reactor(scenario, timeout=10) == (True, b"", 1)


def test_no_certificate_and_no_test_mode_refuses_to_start():
    with pytest.raises(TlsConfigError, match="enforcing needs tls.server.certPath"):
        ha_tls({"tls.test.mode.enable": "false", "tls.config.file": NO_FILE}, object())


def test_a_cap_reached_after_the_accept_closes_the_tls_connection(pki):
    """The gate in front admitted the peer, the service behind the TLS refuses it (its cap was
    reached by the first byte): the connection is closed, without a traceback from the TLS wrapper."""

    async def scenario(r: Any) -> tuple[bool, bytes, int]:
        svc = _classic(r)
        svc.gate.max_connections = 0
        port = r.listenTCP(0, ha_tls(_master_props(pki), r, use_inotify=False).server(svc), interface="127.0.0.1")
        raw = _Raw()
        raw.connectionMade = lambda: raw.transport.write(b"\x16\x03\x01\x00\x05hello")  # type: ignore[method-assign]
        await connectProtocol(TCP4ClientEndpoint(r, "127.0.0.1", port.getHost().port), raw)
        closed = await _wait(r, lambda: raw.closed.called)
        await port.stopListening()
        return closed, raw.got, svc.gate.refused

    assert run_in_fresh_reactor(scenario, timeout=10) == (True, b"", 1)


def test_autoswitch_replica_copies_its_master_over_mutual_tls(pki, tmp_path):
    """Controller mode's HA over the same TLS: the replica's dial is the service's ``connect``."""
    from rmqpy.store.ha.autoswitch.api import AutoSwitchSettings
    from rmqpy.store.ha.autoswitch.service import AutoSwitchHAService
    from rmqpy.store.message_store import MessageStore

    from ..conftest import msg, small_config

    async def scenario(r: Any) -> tuple[int, int, int]:
        stores = []
        for name in ("m", "r"):
            s = MessageStore(small_config(tmp_path / name), ("127.0.0.1", 10911), r)
            assert s.load()
            s.start()
            stores.append(s)
        m, rep = stores
        slave_tls = ha_tls(_slave_props(pki, "good"), r, use_inotify=False)
        ms = AutoSwitchHAService(r, m, AutoSwitchSettings.from_store_config(m.config), m.blocking.run)
        rs = AutoSwitchHAService(r, rep, AutoSwitchSettings.from_store_config(rep.config), rep.blocking.run,
                                 connect=slave_tls.connect)
        ms.change_to_master(1)
        await ms.role_change
        port = r.listenTCP(0, ha_tls(_master_props(pki), r, use_inotify=False).wrap(ms), interface="127.0.0.1")
        for i in range(100):
            m.put_message(msg(qid=i % 3, body=bytes([i % 251]) * 150))
        rs.change_to_slave("127.0.0.1:10911", 1, 2, master_ha_address=f"127.0.0.1:{port.getHost().port}")
        await _wait(r, lambda: rep.get_max_phy_offset() == m.get_max_phy_offset(), 5)
        got = (rep.get_max_phy_offset(), m.get_max_phy_offset(), len(ms.connections))
        rs.shutdown()
        ms.shutdown()
        slave_tls.stop()
        await port.stopListening()
        await rs.epochs.when_written()
        m.shutdown()
        rep.shutdown()
        return got

    got, want, connections = run_in_fresh_reactor(scenario, timeout=15)
    assert got == want > 0 and connections == 1
