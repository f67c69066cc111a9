"""TLS on a remoting port over real loopback connections.

Each test runs its own (non-global) select reactor until its coroutine finishes, so the
tests are independent and need no pytest plugin. Certificates are made in the test by
``rmqpy.remoting.tls_testcerts``: a CA, a server certificate (its key as encrypted PKCS#8),
client certificates from that CA and from another CA.
"""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from OpenSSL import SSL
from twisted.internet import defer, protocol, task, threads

from rmqpy.protocol import command as codec
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting import tls
from rmqpy.remoting.client import RemotingClient
from rmqpy.remoting.connection_limits import ConnectionCap
from rmqpy.remoting.dispatch import RequestDispatcher
from rmqpy.remoting.protocol import RemotingConnectionError, RemotingServerFactory, RemotingTimeoutError
from rmqpy.remoting.tls_testcerts import issue, make_ca
from tests.fresh_reactor import run_in_fresh_reactor

PING = 4242
PASSWORD = "s3cret pw"


# ------------------------------------------------------------------ fixtures and helpers

@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("pki")
    ca, other = make_ca("test CA"), make_ca("other CA")
    server = issue(ca, "server")
    server2 = issue(ca, "server renewed", fresh_key=True)
    good, bad = issue(ca, "good client", server=False), issue(other, "bad client", server=False)
    (d / "ca.pem").write_bytes(ca.cert_pem)
    (d / "other-ca.pem").write_bytes(other.cert_pem)
    paths = {"dir": d, "ca_path": d / "ca.pem", "other_ca": d / "other-ca.pem"}
    paths["server_cert"], paths["server_key"] = server.write(d, "server", PASSWORD)
    paths["good_cert"], paths["good_key"] = good.write(d, "good")
    paths["bad_cert"], paths["bad_key"] = bad.write(d, "bad")
    return {"ca": ca, "other": other, "server": server, "server2": server2, "good": good, "bad": bad, **paths}


run = run_in_fresh_reactor


def sleep(r, seconds: float) -> defer.Deferred:
    return task.deferLater(r, seconds, lambda: None)


class Server:
    """A remoting port answering PING, wrapped by the TLS wrapper of ``props``."""

    def __init__(self, r, props: dict[str, str], use_inotify: bool = False, cap: ConnectionCap | None = None) -> None:
        self.dispatched: list[RemotingCommand] = []
        dispatcher = RequestDispatcher()
        dispatcher.register(PING, self)
        self.factory = RemotingServerFactory(dispatcher, r, cap=cap)
        self.wrapper = tls.server_factory_wrapper(props, reactor=r, use_inotify=use_inotify)
        outer = self.wrapper(self.factory) if self.wrapper else self.factory
        self.outer = outer
        self.port = r.listenTCP(0, outer, interface="127.0.0.1")
        self.addr = f"127.0.0.1:{self.port.getHost().port}"

    def process_request(self, channel, request: RemotingCommand) -> RemotingCommand:
        self.dispatched.append(request)
        return request.response(remark="pong")

    async def close(self) -> None:
        for ch in list(self.factory.channels):
            ch.close()
        await self.port.stopListening()


def server_props(pki, **extra: str) -> dict[str, str]:
    return {"tls.server.mode": "enforcing", "tls.server.certPath": str(pki["server_cert"]),
            "tls.server.keyPath": str(pki["server_key"]), "tls.server.keyPassword": PASSWORD,
            "tls.config.file": "/nonexistent/tls.properties", **extra}


def tls_client(r, pki, cert: str | None = None, trust: bool = True) -> RemotingClient:
    props = {"tls.enable": "true", "tls.config.file": "/nonexistent/tls.properties"}
    if trust:
        props["tls.client.trustCertPath"] = str(pki["ca_path"])
    if cert:
        props["tls.client.certPath"], props["tls.client.keyPath"] = str(pki[f"{cert}_cert"]), str(pki[f"{cert}_key"])
    return RemotingClient(r, endpoint_factory=tls.client_endpoint_factory(props, reactor=r, use_inotify=False))


async def ping(client: RemotingClient, addr: str, timeout: float = 3.0) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(PING), timeout)


async def peer_fingerprint(client: RemotingClient, addr: str) -> str:
    await ping(client, addr)  # the handshake is done once a response came back
    proto = await client.connection(addr)
    cert = proto.transport.getHandle().get_peer_certificate()
    cert = cert.to_cryptography() if hasattr(cert, "to_cryptography") else cert
    return tls.fingerprint(cert)


class Raw(protocol.Protocol):
    """A raw TCP client: sends ``payload`` on connect, records what comes back and when it closes."""

    def __init__(self, payload: bytes) -> None:
        self.payload, self.received, self.closed = payload, b"", defer.Deferred()

    def connectionMade(self) -> None:
        if self.payload:
            self.transport.write(self.payload)

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason) -> None:
        self.closed.callback(time.monotonic())


async def raw_connect(r, addr: str, payload: bytes) -> Raw:
    host, port = addr.split(":")
    p = Raw(payload)
    await protocol.ClientCreator(r, lambda: p).connectTCP(host, int(port))
    return p


async def refused(coro) -> bool:
    try:
        await coro
    except (RemotingConnectionError, RemotingTimeoutError):
        return True
    return False


# ------------------------------------------------------------------ settings

def test_settings_defaults_and_errors(tmp_path):
    s = tls.TlsSettings.from_props({}, read_config_file=False)
    assert (s.server_mode, s.need_client_auth, s.test_mode, s.client_enable) == ("permissive", "none", False, False)
    # no certificate: a self-signed one beside plaintext, as Java's tls.test.mode.enable default (true)
    w = tls.server_factory_wrapper({"tls.config.file": "/nonexistent"})
    assert w is not None and w.settings.server_self_signed and not w.settings.test_mode
    off = {"tls.test.mode.enable": "false", "tls.config.file": "/nonexistent"}
    assert tls.server_factory_wrapper(off) is None  # test mode off, no cert: plaintext
    with pytest.raises(tls.TlsConfigError, match="enforcing needs"):
        tls.server_factory_wrapper({**off, "tls.server.mode": "enforcing"})
    with pytest.raises(tls.TlsConfigError, match="tls.server.mode"):
        tls.TlsSettings.from_props({"tls.server.mode": "enforced"})
    with pytest.raises(tls.TlsConfigError, match="need.client.auth"):
        tls.TlsSettings.from_props({"tls.server.need.client.auth": "always"})
    s = tls.TlsSettings.from_props({"tls.server.trustCertPath": "/x"}, read_config_file=False)
    assert s.server_auth_client is True  # safer than Java: a trust file is used when given
    s = tls.TlsSettings.from_props({"tls.server.trustCertPath": "/x", "tls.server.authClient": "false"},
                                   read_config_file=False)
    assert s.server_auth_client is False


def test_config_file_overrides_all_but_mode_and_enable(tmp_path):
    f = tmp_path / "tls.properties"
    f.write_text("tls.server.mode=disabled\ntls.enable=true\ntls.server.need.client.auth=require\n"
                 "tls.server.certPath=/from/file.pem\n")
    s = tls.TlsSettings.from_props({"tls.config.file": str(f), "tls.server.mode": "enforcing",
                                    "tls.server.certPath": "/from/props.pem"})
    assert s.config_file_used
    assert (s.server_mode, s.client_enable) == ("enforcing", False)
    assert (s.need_client_auth, s.server_cert_path) == ("require", "/from/file.pem")


def test_bad_files_refuse_to_start(pki, tmp_path):
    with pytest.raises(tls.TlsConfigError, match="password|decrypt|private key"):
        tls.server_factory_wrapper(server_props(pki, **{"tls.server.keyPassword": "wrong"}))
    with pytest.raises(tls.TlsConfigError, match="does not match"):
        tls.server_factory_wrapper(server_props(pki, **{"tls.server.keyPath": str(pki["good_key"]),
                                                        "tls.server.keyPassword": ""}))
    with pytest.raises(tls.TlsConfigError, match="cannot read"):
        tls.server_factory_wrapper(server_props(pki, **{"tls.server.certPath": str(tmp_path / "missing.pem")}))


# ------------------------------------------------------------------ modes

def test_permissive_serves_tls_and_plaintext_on_one_port(pki):
    async def body(r):
        srv = Server(r, server_props(pki, **{"tls.server.mode": "permissive"}))
        secure, plain = tls_client(r, pki), RemotingClient(r)
        try:
            a, b = await defer.gatherResults([defer.ensureDeferred(ping(secure, srv.addr)),
                                              defer.ensureDeferred(ping(plain, srv.addr))])
            assert a.remark == b.remark == "pong"
            assert await peer_fingerprint(secure, srv.addr) == pki["server"].fingerprint
            kinds = sorted(type(ch.transport).__name__ for ch in srv.factory.channels)
            assert kinds == ["Server", "_LoggedTLSProtocol"]  # one plaintext TCP, one TLS
            assert len(srv.dispatched) == 3
        finally:
            secure.close()
            plain.close()
            await srv.close()
    run(body)


def test_enforcing_refuses_plaintext_and_dispatches_nothing(pki):
    async def body(r):
        srv = Server(r, server_props(pki))
        try:
            frame = codec.encode(RemotingCommand.request(PING))
            raw = await raw_connect(r, srv.addr, frame)
            await raw.closed
            assert raw.received == b""
            assert srv.dispatched == [] and srv.outer.refused_plaintext == 1
            assert await refused(ping(RemotingClient(r), srv.addr))
            assert srv.dispatched == []
            secure = tls_client(r, pki)
            assert (await ping(secure, srv.addr)).remark == "pong"  # TLS still served
            secure.close()
        finally:
            await srv.close()
    run(body)


def test_disabled_is_plaintext_only(pki):
    async def body(r):
        srv = Server(r, server_props(pki, **{"tls.server.mode": "disabled"}))
        assert srv.wrapper is None
        try:
            assert (await ping(RemotingClient(r), srv.addr)).remark == "pong"
            assert await refused(ping(tls_client(r, pki), srv.addr, timeout=2))
        finally:
            await srv.close()
    run(body)


def test_test_mode_self_signed(pki):
    async def body(r):
        srv = Server(r, {"tls.server.mode": "enforcing", "tls.test.mode.enable": "true",
                         "tls.config.file": "/nonexistent"})
        try:
            client = tls_client(r, pki, trust=False)  # trust-all, as Java's test mode
            assert (await ping(client, srv.addr)).remark == "pong"
            assert await peer_fingerprint(client, srv.addr) == srv.wrapper.holder.fingerprint
            assert await refused(ping(tls_client(r, pki), srv.addr))  # not signed by our CA
            client.close()
        finally:
            await srv.close()
    run(body)


# ------------------------------------------------------------------ mutual TLS

def test_mutual_tls_require(pki):
    async def body(r):
        srv = Server(r, server_props(pki, **{"tls.server.need.client.auth": "require",
                                             "tls.server.trustCertPath": str(pki["ca_path"])}))
        try:
            assert await refused(ping(tls_client(r, pki), srv.addr))  # no certificate
            assert await refused(ping(tls_client(r, pki, cert="bad"), srv.addr))  # other CA
            assert srv.dispatched == []
            good = tls_client(r, pki, cert="good")
            assert (await ping(good, srv.addr)).remark == "pong"
            assert len(srv.dispatched) == 1
            good.close()
        finally:
            await srv.close()
    run(body)


def test_mutual_tls_optional(pki):
    async def body(r):
        srv = Server(r, server_props(pki, **{"tls.server.need.client.auth": "optional",
                                             "tls.server.trustCertPath": str(pki["ca_path"])}))
        try:
            assert (await ping(tls_client(r, pki), srv.addr)).remark == "pong"  # no cert: fine
            assert (await ping(tls_client(r, pki, cert="good"), srv.addr)).remark == "pong"
            assert await refused(ping(tls_client(r, pki, cert="bad"), srv.addr))  # a bad cert is refused
        finally:
            await srv.close()
    run(body)


def test_old_protocol_versions_refused_and_others_continue(pki):
    from OpenSSL import SSL

    async def body(r):
        srv = Server(r, server_props(pki))
        ok = tls_client(r, pki)
        try:
            assert (await ping(ok, srv.addr)).remark == "pong"
            # a TLS 1.1 hello, then garbage records after a good handshake
            ctx = SSL.Context(SSL.TLS_CLIENT_METHOD)
            ctx.set_min_proto_version(SSL.TLS1_VERSION)
            ctx.set_max_proto_version(SSL.TLS1_1_VERSION)
            ctx.set_security_level(0) if hasattr(ctx, "set_security_level") else None
            old = await _blocking_tls(r, srv.addr, ctx)
            assert old.startswith("refused") and "WantRead" not in old, old
            modern = SSL.Context(SSL.TLS_CLIENT_METHOD)
            assert await _blocking_tls(r, srv.addr, modern) == "handshake ok"  # the helper can succeed
            garbage = await raw_connect(r, srv.addr, b"\x16\x03\x01\x00\x05hello-not-tls" * 3)
            await garbage.closed
            assert (await ping(ok, srv.addr)).remark == "pong"  # the open connection still works
            assert srv.dispatched and len(srv.dispatched) == 2
        finally:
            ok.close()
            await srv.close()
    run(body)


async def _blocking_tls(r, addr: str, ctx) -> str:
    from OpenSSL import SSL

    def attempt() -> str:
        host, port = addr.split(":")
        s = socket.create_connection((host, int(port)), timeout=5)
        s.settimeout(None)  # blocking: WantReadError must not pass for a refusal
        conn = SSL.Connection(ctx, s)
        conn.set_connect_state()
        try:
            conn.do_handshake()
            return "handshake ok"
        except (SSL.Error, OSError) as exc:
            return f"refused: {exc}"
        finally:
            s.close()

    from twisted.internet import threads
    r.getThreadPool()  # make sure the pool exists in this reactor
    return await threads.deferToThreadPool(r, r.getThreadPool(), attempt)


def test_stalled_handshake_times_out(pki):
    async def body(r):
        srv = Server(r, server_props(pki, **{"tls.handshake.timeoutMillis": "400",
                                             "tls.server.mode": "permissive"}))
        try:
            t0 = time.monotonic()
            stalled = await raw_connect(r, srv.addr, b"\x16\x03\x01")  # a TLS record header, then nothing
            silent = await raw_connect(r, srv.addr, b"")  # nothing at all
            t1 = await stalled.closed
            assert 0.3 < t1 - t0 < 3 and srv.outer.handshake_timeouts == 1
            await sleep(r, 0.3)
            assert not silent.closed.called  # idle, not handshaking: the idle time applies (as Java)
            silent.transport.loseConnection()
            assert (await ping(RemotingClient(r), srv.addr)).remark == "pong"
        finally:
            await srv.close()
    run(body)


# ------------------------------------------------------------------ reload

def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def test_reload_by_poll_on_clock(pki, tmp_path):
    """Polling with an injected clock: any one file changing reloads; broken files keep the old."""
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_bytes(pki["server"].cert_pem)
    key.write_bytes(pki["server"].key_pem())
    clock = task.Clock()
    w = tls.server_factory_wrapper({"tls.server.certPath": str(cert), "tls.server.keyPath": str(key),
                                    "tls.config.file": "/nonexistent"}, reactor=object(), clock=clock,
                                   use_inotify=False)
    h = w.holder
    h.start()
    assert h.fingerprint == pki["server"].fingerprint
    # renewed certificate, same key: reloads (Java would wait for the key to change too)
    renewed = issue(pki["ca"], "server renewed same key", key=pki["server"].key)
    cert.write_bytes(renewed.cert_pem)
    clock.advance(0.5)
    assert h.fingerprint == renewed.fingerprint and h.reloads == 1
    # half-written certificate: keeps the last good one, counted once
    cert.write_bytes(pki["server2"].cert_pem[:200])
    clock.advance(0.5)
    clock.advance(0.5)
    assert h.fingerprint == renewed.fingerprint and h.failures == 1
    # new cert with a new key, cert written first: mismatch keeps the old, then the key completes it
    cert.write_bytes(pki["server2"].cert_pem)
    clock.advance(0.5)
    assert h.fingerprint == renewed.fingerprint and h.failures == 2
    key.write_bytes(pki["server2"].key_pem())
    clock.advance(0.5)
    assert h.fingerprint == pki["server2"].fingerprint and h.reloads == 2
    # a file missing for a moment (being replaced) is skipped, not an error
    key.unlink()
    clock.advance(0.5)
    assert h.failures == 2
    key.write_bytes(pki["server2"].key_pem())
    clock.advance(0.5)
    assert h.reloads == 2 and h.fingerprint == pki["server2"].fingerprint
    h.stop()
    assert not clock.getDelayedCalls()


def test_reload_live_inotify_new_connections_see_new_cert(pki, tmp_path):
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_bytes(pki["server"].cert_pem)
    key.write_bytes(pki["server"].key_pem(PASSWORD))

    async def body(r):
        props = server_props(pki, **{"tls.server.certPath": str(cert), "tls.server.keyPath": str(key)})
        srv = Server(r, props, use_inotify=True)
        old_client = tls_client(r, pki)
        try:
            assert await peer_fingerprint(old_client, srv.addr) == pki["server"].fingerprint
            assert (await ping(old_client, srv.addr)).remark == "pong"
            _write_atomic(key, pki["server2"].key_pem(PASSWORD))
            _write_atomic(cert, pki["server2"].cert_pem)
            t0 = time.monotonic()
            while srv.wrapper.holder.fingerprint != pki["server2"].fingerprint:
                assert time.monotonic() - t0 < 1.0, "not reloaded within 1 s"
                await sleep(r, 0.02)
            assert time.monotonic() - t0 < 1.0
            new_client = tls_client(r, pki)
            assert await peer_fingerprint(new_client, srv.addr) == pki["server2"].fingerprint
            assert (await ping(new_client, srv.addr)).remark == "pong"
            # the old connection is untouched
            assert (await ping(old_client, srv.addr)).remark == "pong"
            assert await peer_fingerprint(old_client, srv.addr) == pki["server"].fingerprint
            # a broken certificate keeps the last good one for new connections
            cert.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot base64!\n")
            await sleep(r, 0.8)
            assert srv.wrapper.holder.failures >= 1
            third = tls_client(r, pki)
            assert await peer_fingerprint(third, srv.addr) == pki["server2"].fingerprint
            new_client.close()
            third.close()
        finally:
            old_client.close()
            await srv.close()
    run(body)
    # stopping the port stopped the watcher


def test_garbage_after_handshake_ends_only_that_connection(pki):
    from OpenSSL import SSL
    from twisted.logger import globalLogPublisher

    seen: list[str] = []

    def observer(event):
        if event.get("log_namespace") == "rmqpy.remoting.tls":
            from twisted.logger import formatEvent
            seen.append(formatEvent(event))

    async def body(r):
        srv = Server(r, server_props(pki))
        ok = tls_client(r, pki)
        try:
            assert (await ping(ok, srv.addr)).remark == "pong"

            def garbage() -> str:
                host, port = srv.addr.split(":")
                s = socket.create_connection((host, int(port)), timeout=5)
                s.settimeout(None)
                conn = SSL.Connection(SSL.Context(SSL.TLS_CLIENT_METHOD), s)
                conn.set_connect_state()
                conn.do_handshake()
                s.sendall(b"\x17\x03\x03\x00\x20" + b"\xAB" * 32)  # an application record that does not decrypt
                s.settimeout(5)
                try:
                    while s.recv(4096):
                        pass
                    return "closed"
                except OSError as exc:
                    return f"closed: {exc}"
                finally:
                    s.close()

            from twisted.internet import threads
            assert (await threads.deferToThreadPool(r, r.getThreadPool(), garbage)).startswith("closed")
            assert (await ping(ok, srv.addr)).remark == "pong"
            assert len(srv.dispatched) == 2
        finally:
            ok.close()
            await srv.close()

    globalLogPublisher.addObserver(observer)
    try:
        run(body)
    finally:
        globalLogPublisher.removeObserver(observer)
    assert any("TLS connection from 127.0.0.1" in line and "closed" in line for line in seen), seen


def test_injected_clock_drives_timeouts_not_io(pki):
    """The handshake timer runs on the injected clock; TLS I/O still runs on the reactor."""
    async def body(r):
        clock = task.Clock()
        dispatcher = RequestDispatcher()
        srv_obj = Server.__new__(Server)
        srv_obj.dispatched = []
        dispatcher.register(PING, srv_obj)
        wrapper = tls.server_factory_wrapper(server_props(pki), reactor=r, clock=clock, use_inotify=False)
        outer = wrapper(RemotingServerFactory(dispatcher, r))
        port = r.listenTCP(0, outer, interface="127.0.0.1")
        addr = f"127.0.0.1:{port.getHost().port}"
        try:
            client = tls_client(r, pki)
            assert (await ping(client, addr)).remark == "pong"
            stalled = await raw_connect(r, addr, b"\x16\x03\x01")
            await sleep(r, 0.2)
            assert not stalled.closed.called
            clock.advance(10.0)
            await stalled.closed
            assert outer.handshake_timeouts == 1
            assert (await ping(client, addr)).remark == "pong"
            client.close()
        finally:
            await port.stopListening()
    run(body)


def test_namesrv_tap_wires_tls_keys(pki, tmp_path):
    from rmqpy.namesrv.tap import Options, makeService

    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort=0\nkvConfigPath={tmp_path}/kv.json\ntls.server.mode=permissive\n"
                    f"tls.server.certPath={pki['server_cert']}\ntls.server.keyPath={pki['server_key']}\n"
                    f"tls.config.file=/nonexistent\n")
    o = Options()
    o.parseOptions(["-c", str(conf), f"-Dtls.server.keyPassword={PASSWORD}", "-D", "tls.server.mode=enforcing"])
    svc = makeService(o).controller
    assert isinstance(svc.server.wrap_factory, tls.TlsServerWrapper)
    assert svc.server.wrap_factory.settings.server_mode == "enforcing"  # -D overrides the file
    o = Options()
    o.parseOptions(["-c", str(conf)])  # no password for the encrypted key: a clear error, no start
    with pytest.raises(SystemExit, match="rmq-namesrv: .*server.key"):
        makeService(o)


def _client_hello_only(addr: str, then_close: bool) -> float:
    """Sends a real ClientHello and answers nothing; closes at once (``then_close``) or waits
    for the server to close. Returns seconds until the server closed (0 when we closed)."""
    import ssl
    host, port = addr.split(":")
    # the hello is built before connecting (building a default SSL context loads the CA store:
    # 100+ ms on a busy host). t0 is taken before connect: the server's handshake timer starts
    # when its reactor accepts, which is after connect began, so the measured time is never
    # shorter than the timeout; taken after connect returned, t0 could be late by as long as
    # this thread waited for the GIL while the reactor accepted and armed the timer
    obj = ssl.create_default_context().wrap_bio(ssl.MemoryBIO(), out := ssl.MemoryBIO())
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = out.read()
    t0 = time.monotonic()
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(hello)
    if then_close:
        s.recv(65536)  # the server's first flight: the handshake is under way
        s.close()
        return 0.0
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass
    s.close()
    return time.monotonic() - t0


def _handshake_then_drop(addr: str) -> None:
    """A full handshake, then a TCP close without close_notify."""
    import ssl
    host, port = addr.split(":")
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    tls_sock = ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=5))
    assert tls_sock.getpeercert(binary_form=True)
    tls_sock.close()  # closes TCP without unwrapping: no close_notify


def test_log_lines_of_timeouts_and_unclean_closes(pki):
    """One line per event at the right level: a handshake timeout is one warning (not also an
    "Unexpected EOF" error for the server's own abort); a peer leaving mid-handshake is a
    warning; a peer closing an established connection without close_notify is not an error."""
    from twisted.internet import threads
    from twisted.logger import LogLevel, formatEvent, globalLogPublisher

    seen: list[tuple[str, str]] = []

    def observer(event):
        if event.get("log_namespace") == "rmqpy.remoting.tls" and event["log_level"] >= LogLevel.info:
            seen.append((event["log_level"].name, formatEvent(event)))

    async def body(r):
        srv = Server(r, server_props(pki, **{"tls.handshake.timeoutMillis": "400"}))
        pool = r.getThreadPool()
        try:
            took = await threads.deferToThreadPool(r, pool, _client_hello_only, srv.addr, False)
            assert 0.3 < took < 3, took
            await threads.deferToThreadPool(r, pool, _client_hello_only, srv.addr, True)
            await threads.deferToThreadPool(r, pool, _handshake_then_drop, srv.addr)
            await sleep(r, 0.3)  # let the server see the last close
            ok = tls_client(r, pki)
            assert (await ping(ok, srv.addr)).remark == "pong"
            ok.close()
        finally:
            await srv.close()

    globalLogPublisher.addObserver(observer)
    try:
        run(body)
    finally:
        globalLogPublisher.removeObserver(observer)
    seen = [(lvl, line) for lvl, line in seen if not line.startswith("TLS: tls.server.mode")]
    assert [lvl for lvl, _ in seen] == ["warn", "warn"], seen
    assert "TLS handshake not finished within 0.4s" in seen[0][1], seen
    assert "closed by the peer during the handshake" in seen[1][1], seen


def test_pbes1_encrypted_keys_load(pki, tmp_path):
    """PKCS#8 keys encrypted with PBE-SHA1-3DES (what client 4.9.x's netty can read; openssl
    pkcs8 -v1 PBE-SHA1-3DES) load as server and client keys, and a wrong password is an error."""
    cert, key = pki["server"].write(tmp_path, "legacy", PASSWORD, legacy_pbe=True)
    assert b"BEGIN ENCRYPTED PRIVATE KEY" in key.read_bytes()
    w = tls.server_factory_wrapper({"tls.server.certPath": str(cert), "tls.server.keyPath": str(key),
                                    "tls.server.keyPassword": PASSWORD, "tls.config.file": "/nonexistent"},
                                   reactor=object(), clock=task.Clock(), use_inotify=False)
    assert w.holder.fingerprint == pki["server"].fingerprint
    with pytest.raises(tls.TlsConfigError, match="legacy.key"):
        tls.server_factory_wrapper({"tls.server.certPath": str(cert), "tls.server.keyPath": str(key),
                                    "tls.server.keyPassword": "wrong", "tls.config.file": "/nonexistent"},
                                   reactor=object(), clock=task.Clock(), use_inotify=False)
    s = tls.TlsSettings.from_props({"tls.enable": "true", "tls.client.certPath": str(cert),
                                    "tls.client.keyPath": str(key), "tls.client.keyPassword": PASSWORD},
                                   read_config_file=False)
    _, fp = tls.build_client_context(s, {str(cert): cert.read_bytes(), str(key): key.read_bytes()})
    assert fp == pki["server"].fingerprint


def test_a_silent_connection_outlives_the_handshake_timeout_as_a_java_brokers_scan_needs(pki):
    """A Java 5 broker's scanAvailableNameSrv connects to each name server and sends nothing until
    its next registration, 10 s later; Java's name server keeps such a connection until its idle
    time (120 s). A 10 s first-byte deadline reset it under that registration (CI stop 35:
    the registration failed, and a slave learnt its master's HA address 30 s late)."""
    from rmqpy.remoting.connection_limits import ConnectionLimits

    async def body(r):
        clock = task.Clock()
        wrapper = tls.server_factory_wrapper(server_props(pki), reactor=r, clock=clock, use_inotify=False)
        outer = wrapper(RemotingServerFactory(RequestDispatcher(), r, limits=ConnectionLimits(max_idle_seconds=120.0)))
        port = r.listenTCP(0, outer, interface="127.0.0.1")
        addr = f"127.0.0.1:{port.getHost().port}"
        try:
            silent = await raw_connect(r, addr, b"")
            await sleep(r, 0.1)
            clock.advance(10.5)
            await sleep(r, 0.1)
            assert not silent.closed.called and outer.handshake_timeouts == 0
            clock.advance(110.0)
            await silent.closed
        finally:
            await port.stopListening()
    run(body)


def test_a_silent_connection_is_closed_after_the_idle_time_before_any_byte(pki):
    """Java's IdleStateHandler counts from the connect, before its TLS handler saw a byte: with
    serverChannelMaxIdleTimeSeconds shorter than the handshake timeout, a connection that sends
    nothing is closed at the idle time (the name server's idle close broke when TLS detection
    became the default, as connections not yet detected had no idle timer)."""
    from rmqpy.remoting.connection_limits import ConnectionLimits

    async def body(r):
        clock = task.Clock()
        dispatcher = RequestDispatcher()
        wrapper = tls.server_factory_wrapper(server_props(pki), reactor=r, clock=clock, use_inotify=False)
        outer = wrapper(RemotingServerFactory(dispatcher, r, limits=ConnectionLimits(max_idle_seconds=2.0)))
        port = r.listenTCP(0, outer, interface="127.0.0.1")
        addr = f"127.0.0.1:{port.getHost().port}"
        try:
            silent = await raw_connect(r, addr, b"")
            handshaking = await raw_connect(r, addr, b"\x16\x03\x01")  # TLS begun: the handshake's own time
            await sleep(r, 0.2)
            clock.advance(1.9)
            await sleep(r, 0.1)
            assert not silent.closed.called
            clock.advance(0.2)
            await silent.closed
            assert not handshaking.closed.called and outer.handshake_timeouts == 0
            clock.advance(10.0)
            await handshaking.closed
            assert outer.handshake_timeouts == 1
        finally:
            await port.stopListening()
    run(body)


# ------------------------------------------------------------------ the ports' connection cap

@pytest.mark.parametrize("mode", ["permissive", "plain"])
def test_the_connection_cap_counts_silent_connections_and_frees_closed_ones(pki, mode):
    """serverMaxConnections: a connection counts from its accept, before its first byte (the TLS
    detector in front counts it); past the cap a new one is closed at once; a closed one frees its slot."""
    async def body(r):
        cap = ConnectionCap("test remoting ports", r, 2, 0, ("serverMaxConnections", "serverMaxConnectionsPerAddress"))
        props = server_props(pki, **{"tls.server.mode": "permissive"}) if mode == "permissive" else \
            {"tls.test.mode.enable": "false", "tls.config.file": "/nonexistent"}
        srv = Server(r, props, cap=cap)
        client = RemotingClient(r)
        try:
            silent = [await raw_connect(r, srv.addr, b"") for _ in range(2)]
            await sleep(r, 0.2)
            assert cap.total == 2
            third = await raw_connect(r, srv.addr, b"")
            await third.closed  # closed at once by the server
            assert await refused(ping(client, srv.addr, timeout=1.0))
            assert cap.refused >= 2
            silent[0].transport.loseConnection()
            await silent[0].closed
            await sleep(r, 0.2)
            assert cap.total == 1
            assert (await ping(client, srv.addr)).remark == "pong"
            silent[1].transport.loseConnection()
        finally:
            client.close()
            await srv.close()
        await sleep(r, 0.2)
        assert cap.total == 0 and cap.by_address == {}
    run(body)


# ------------------------------------------------------------------ SNI

def _served_fingerprint(port: int, server_name: str | None) -> str:
    """The certificate the server shows a client sending ``server_name`` as its SNI (None: none)."""
    ctx = SSL.Context(SSL.TLS_CLIENT_METHOD)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.settimeout(None)  # pyOpenSSL wants a blocking socket (a timeout one raises WantRead)
        conn = SSL.Connection(ctx, sock)
        if server_name:
            conn.set_tlsext_host_name(server_name.encode())
        conn.set_connect_state()
        conn.do_handshake()
        cert = conn.get_peer_certificate().to_cryptography()
        conn.shutdown()
    return tls.fingerprint(cert)


def test_sni_serves_each_names_certificate_and_the_default_to_the_rest(pki, tmp_path):
    """tls.server.sni.<name>.certPath/keyPath (rmqpy's; Java has one certificate, apache/rocketmq#10302):
    a client's SNI picks its name's pair, exact or by its *. parent; no SNI or another name: the default."""
    named = issue(pki["ca"], "named", hosts=("mq.example",))
    wild = issue(pki["ca"], "wild", hosts=("*.wild.example",))
    n_cert, n_key = named.write(tmp_path, "named")
    w_cert, w_key = wild.write(tmp_path, "wild")
    props = server_props(pki, **{"tls.server.sni.mq.example.certPath": str(n_cert),
                                 "tls.server.sni.mq.example.keyPath": str(n_key),
                                 "tls.server.sni.*.wild.example.certPath": str(w_cert),
                                 "tls.server.sni.*.wild.example.keyPath": str(w_key)})

    async def body(r):
        srv = Server(r, props)
        port = srv.port.getHost().port
        try:
            seen = {name: await threads.deferToThreadPool(r, r.getThreadPool(), _served_fingerprint, port, name)
                    for name in ("mq.example", "MQ.example", "a.wild.example", "a.b.wild.example", "other.example",
                                 None)}
        finally:
            await srv.close()
        assert seen == {"mq.example": named.fingerprint, "MQ.example": named.fingerprint,
                        "a.wild.example": wild.fingerprint, "a.b.wild.example": pki["server"].fingerprint,
                        "other.example": pki["server"].fingerprint, None: pki["server"].fingerprint}
    run(body)


def test_sni_keys_are_checked():
    base = {"tls.config.file": "/nonexistent"}
    with pytest.raises(tls.TlsConfigError, match="needs both certPath and keyPath"):
        tls.TlsSettings.from_props({**base, "tls.server.sni.mq.example.certPath": "/c.pem"})
    with pytest.raises(tls.TlsConfigError, match="not a host name"):
        tls.TlsSettings.from_props({**base, "tls.server.sni.a..b.certPath": "/c", "tls.server.sni.a..b.keyPath": "/k"})
    with pytest.raises(tls.TlsConfigError, match="expected tls.server.sni"):
        tls.TlsSettings.from_props({**base, "tls.server.sni.mq.example.cert": "/c"})
