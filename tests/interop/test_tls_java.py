"""TLS of ``twistd rmq-namesrv`` driven by the official Java client (4.9.x and 5.x).

The name server runs as a real ``twistd -n rmq-namesrv -c namesrv.conf`` process with the
``tls.*`` keys in its config file and certificates made here (its key an encrypted PKCS#8
PEM). The Java side is our harness (``cluster``: DefaultMQAdminExt.examineBrokerClusterInfo,
a plain name server request) and ``mqadmin getNamesrvConfig``, switched to TLS only by JVM
system properties, as a RocketMQ user would do it: ``-Dtls.enable=true``,
``-Dtls.test.mode.enable=false``, ``-Dtls.client.authServer=true``,
``-Dtls.client.trustCertPath=ca.pem`` and, for mutual TLS, ``-Dtls.client.certPath`` /
``-Dtls.client.keyPath`` (PKCS#8 PEM, possibly encrypted: ``-Dtls.client.keyPassword``).

Also here: live certificate reload under a running Java push consumer (name server and
broker), and bad input (old protocol versions, garbage records, stalled handshakes) sent
with raw sockets to the real ``twistd`` process.
"""
from __future__ import annotations

import contextlib
import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from rmqpy.remoting.tls_testcerts import issue, make_ca
from tests.interop import clients, servers
from tests.interop.conftest import VERSIONS
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

PASSWORD = "namesrv key pw"
CLIENT_PASSWORD = "client key pw"


@pytest.fixture(scope="module")
def pki(tmp_path_factory, client_host) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("tls-pki")
    ca, other = make_ca("interop CA"), make_ca("other CA")
    (d / "ca.pem").write_bytes(ca.cert_pem)
    out = {"dir": d, "ca": d / "ca.pem", "ca_issued": ca}
    out["server_cert"], out["server_key"] = issue(ca, "rmqpy namesrv", hosts=(client_host.host_ip, "127.0.0.1")
                                                  ).write(d, "server", PASSWORD)
    out["good_cert"], out["good_key"] = issue(ca, "java client", server=False).write(d, "good")
    out["bad_cert"], out["bad_key"] = issue(other, "stranger", server=False).write(d, "bad")
    # the same kind of client certificate, its key an encrypted PKCS#8 PEM (tls.client.keyPassword)
    # (PBES2/AES-256; the netty 4.1.65 of client 4.9.8 reads only PBES1, e.g. PBE-SHA1-3DES:
    # "PBES2 SecretKeyFactory not available")
    locked = issue(ca, "java client, encrypted key", server=False)
    out["locked_cert"], out["locked_key"] = locked.write(d, "locked", CLIENT_PASSWORD)
    out["locked-pbes1_cert"], out["locked-pbes1_key"] = locked.write(d, "locked-pbes1", CLIENT_PASSWORD,
                                                                     legacy_pbe=True)
    for p in d.iterdir():
        p.chmod(0o644)
    d.chmod(0o755)
    return out


def server_tls(pki, tmp: Path, **tls_props: object) -> dict[str, object]:
    """A server's tls.* keys: the test CA's server certificate and its encrypted key, plus ``tls_props``."""
    return {"tls.server.certPath": pki["server_cert"], "tls.server.keyPath": pki["server_key"],
            "tls.server.keyPassword": PASSWORD, "tls.config.file": tmp / "no-tls.properties", **tls_props}


def start(tmp: Path, pki, host, **tls_props: str) -> servers.ServerProcess:
    return servers.start_namesrv(tmp, props=server_tls(pki, tmp, **tls_props), host=host.host_ip)


@contextlib.contextmanager
def namesrv(tmp: Path, pki, host, **tls_props: str) -> Iterator[servers.ServerProcess]:
    """``start``, stopped at the end of the block."""
    ns = start(tmp, pki, host, **tls_props)
    try:
        yield ns
    finally:
        ns.stop()


def tls_sysprops(pki, cert: str | None = None) -> dict[str, str]:
    props = {"tls.enable": "true", "tls.test.mode.enable": "false", "tls.client.authServer": "true",
             "tls.client.trustCertPath": str(pki["ca"]), "tls.config.file": str(pki["dir"] / "none.properties")}
    if cert:
        props["tls.client.certPath"] = str(pki[f"{cert}_cert"])
        props["tls.client.keyPath"] = str(pki[f"{cert}_key"])
    return props


def cluster(host, version: str, ns, sysprops: dict[str, str] | None):
    """The harness ``cluster`` query; returns (ok, events)."""
    ev = clients.harness(host, version, ["cluster", "--namesrv", ns.addr, "--timeout-ms", "4000"],
                         timeout=90, check=False, sysprops=sysprops)
    ok = ev.returncode == 0 and bool(ev.of("cluster")) and bool(ev.done and ev.done.get("ok"))
    return ok, ev


def _why(ev, ns=None, stderr: int = 2000) -> str:
    """What went wrong in a harness run: its errors, the end of its stderr and of the server's log."""
    return f"{ev.errors}\n{ev.stderr[-stderr:]}" + (f"\n{ns.log_tail()}" if ns is not None else "")


@pytest.mark.parametrize("version", VERSIONS)
def test_enforcing(version, java_built, client_host, pki, tmp_path):
    with namesrv(tmp_path, pki, client_host, **{"tls.server.mode": "enforcing"}) as ns:
        ok, ev = cluster(client_host, version, ns, tls_sysprops(pki))
        assert ok, f"TLS client refused: {_why(ev, ns)}"
        out = clients.mqadmin(client_host, version, ["getNamesrvConfig"], ns.addr, sysprops=tls_sysprops(pki))
        assert "listenPort" in out and str(ns.port) in out, out
        ok, ev = cluster(client_host, version, ns, None)  # plaintext Java client
        assert not ok, ev
        log = ns.log_tail(20000)
        assert "closing plaintext connection" in log and "enforcing" in log, log


@pytest.mark.parametrize("version", VERSIONS)
def test_permissive_serves_both(version, java_built, client_host, pki, tmp_path):
    with namesrv(tmp_path, pki, client_host, **{"tls.server.mode": "permissive"}) as ns:
        ok, ev = cluster(client_host, version, ns, tls_sysprops(pki))
        assert ok, _why(ev)
        ok, ev = cluster(client_host, version, ns, None)
        assert ok, _why(ev)


@pytest.mark.parametrize("version", VERSIONS)
def test_mutual_tls_require(version, java_built, client_host, pki, tmp_path):
    with namesrv(tmp_path, pki, client_host, **{"tls.server.mode": "enforcing",
                                                 "tls.server.need.client.auth": "require",
                                                 "tls.server.authClient": "true",
                                                 "tls.server.trustCertPath": pki["ca"]}) as ns:
        ok, ev = cluster(client_host, version, ns, tls_sysprops(pki))
        assert not ok, "a client without a certificate was served"
        ok, ev = cluster(client_host, version, ns, tls_sysprops(pki, "bad"))
        assert not ok, "a client certificate from another CA was accepted"
        ok, ev = cluster(client_host, version, ns, tls_sysprops(pki, "good"))
        assert ok, _why(ev, ns)


@pytest.mark.parametrize("version", VERSIONS)
def test_mutual_tls_encrypted_client_key(version, java_built, client_host, pki, tmp_path):
    """The Java client's key is an encrypted PKCS#8 PEM (``-Dtls.client.keyPassword``), the server
    requires a client certificate and its own key is encrypted too (tls.server.keyPassword):
    the right password works, a wrong one gets no service."""
    with namesrv(tmp_path, pki, client_host, **{"tls.server.mode": "enforcing",
                                                 "tls.server.need.client.auth": "require",
                                                 "tls.server.trustCertPath": pki["ca"]}) as ns:
        props = tls_sysprops(pki, "locked-pbes1" if version.startswith("4.") else "locked")
        ok, ev = cluster(client_host, version, ns, {**props, "tls.client.keyPassword": CLIENT_PASSWORD})
        assert ok, _why(ev, ns, stderr=3000)
        ok, ev = cluster(client_host, version, ns, {**props, "tls.client.keyPassword": "wrong"})
        assert not ok, "a client whose key could not be decrypted was served"


def _broker_has_tls() -> bool:
    tap = servers.ROOT / "rmqpy" / "broker" / "tap.py"
    return tap.exists() and "tls_hook" in tap.read_text()


@pytest.mark.parametrize("version", VERSIONS)
def test_broker_produce_consume_over_tls(version, java_built, client_host, pki, tmp_path):
    """Everything enforcing TLS: name server, both broker ports, the broker's own connections to
    the name server (``tls.enable``), and the Java producer and push consumer."""
    if not _broker_has_tls():
        pytest.skip("rmqpy/broker/tap.py does not call rmqpy.remoting.tls_hook yet")
    ns = start(tmp_path / "ns", pki, client_host, **{"tls.server.mode": "enforcing"})
    broker_tls = server_tls(pki, tmp_path, **{"tls.server.mode": "enforcing", "tls.enable": "true",
                                              "tls.client.trustCertPath": pki["ca"]})
    broker = None
    try:
        broker = servers.start_broker(tmp_path / "broker", ns.addr, host=client_host.host_ip, props=broker_tls)
        tag = version.replace(".", "")
        topic, group = f"TlsTopic{tag}", f"tls_group_{tag}"
        common = ["-n", ns.addr]
        sent = clients.harness(client_host, version, ["produce", *common, "--topic", topic, "--count", "5",
                                                      "--body", "tls {i}"], timeout=120,
                               sysprops=tls_sysprops(pki))
        assert len(sent.of("sent")) == 5, sent
        got = clients.harness(client_host, version, ["consume-push", *common, "--poll-namesrv-ms", "1000",
                                                     "--topic", topic, "--group", group, "--count", "5",
                                                     "--timeout-ms", "40000"], timeout=120,
                              sysprops=tls_sysprops(pki))
        assert sorted(e["body"] for e in got.of("received"))[:5] == [f"tls {i}" for i in range(5)], got
        plain = clients.harness(client_host, version, ["produce", *common, "--topic", topic, "--count", "1",
                                                       "--send-timeout-ms", "3000", "--retries", "0"],
                                timeout=120, check=False)
        assert not plain.of("sent"), "a plaintext producer was served"
    finally:
        if broker is not None:
            print(broker.log_tail(3000))
            broker.stop()
        ns.stop()


# ------------------------------------------------------------------ live reload under a Java consumer

# Runs inside the client host: reads "host port" lines, answers each with the SHA-256 of the
# certificate that a NEW TLS connection to host:port is served (or "error ...").
_PROBE = r"""
import hashlib, socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
for line in sys.stdin:
    host, port = line.split()
    try:
        with socket.create_connection((host, int(port)), timeout=3) as raw:
            with ctx.wrap_socket(raw) as s:
                print(hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest(), flush=True)
    except Exception as exc:
        print("error", type(exc).__name__, exc, flush=True)
"""


class CertProbe:
    """A Python process in the client host that opens a new TLS connection per question."""

    def __init__(self, host) -> None:
        self.proc = host.popen([sys.executable, "-u", "-c", _PROBE], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def fingerprint(self, addr: str) -> str:
        host, port = addr.rsplit(":", 1)
        self.proc.stdin.write(f"{host} {port}\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def wait_for(self, addrs: list[str], expected: str, within: float) -> dict[str, str]:
        """Polls every address until each presents ``expected``; returns the last answers."""
        seen: dict[str, str] = {}

        def all_expected() -> bool:
            seen.update((a, self.fingerprint(a)) for a in addrs)
            return all(v == expected for v in seen.values())

        wait_until(all_expected, within, 0.05)
        return seen

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.chmod(0o644)
    os.replace(tmp, path)


def _established(host, peer: str) -> set[str]:
    """Local addresses of the client host's established TCP connections to ``peer``."""
    out = host.run(["ss", "-tnH", "state", "established"], timeout=10).stdout
    conns = set()
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[-1] == peer:
            conns.add(cols[-2])
    return conns


def _received(path: Path) -> list[str]:
    return [e.get("body") for e in clients.read_events(path).of("received")] if path.exists() else []


def _wait_received(path: Path, bodies: list[str], proc, timeout: float = 40) -> None:
    def got_all() -> bool:
        if set(bodies) <= set(_received(path)):
            return True
        assert proc.poll() is None, f"consumer exited {proc.returncode}: {path.read_text()[-3000:]}"
        return False

    wait_until(got_all, timeout, 0.2, what=f"consumer getting {bodies}", diag=lambda: f"got {_received(path)}")


def _produce(host, version: str, ns, topic: str, prefix: str, pki, count: int = 5) -> None:
    ev = clients.harness(host, version, ["produce", "-n", ns.addr, "--topic", topic, "--count", str(count),
                                         "--body", prefix + " {i}"], timeout=90, sysprops=tls_sysprops(pki))
    assert len(ev.of("sent")) == count, ev


RELOAD_ERROR = "reload after change of"


@pytest.mark.parametrize("version", VERSIONS)
def test_reload_under_java_consumer(version, java_built, client_host, pki, tmp_path):
    """Replace the certificate of a running name server and broker (both watch the same files)
    while a Java push consumer is connected over TLS: (a) renewed certificate, same key;
    (b) new certificate and new key; (c) a half-written certificate. New TLS connections to
    every port present the new certificate within 2 s, the consumer's connections stay open
    and it receives every message sent before and after; the broken file keeps the last good
    certificate in service, is logged as an error, and a new Java producer still works."""
    if not _broker_has_tls():
        pytest.skip("rmqpy/broker/tap.py does not call rmqpy.remoting.tls_hook yet")
    ca = pki["ca_issued"]
    live = tmp_path / "live-certs"
    live.mkdir()
    live.chmod(0o755)
    cert, key = live / "server.pem", live / "server.key"
    first = issue(ca, "rmqpy reload 1", hosts=(client_host.host_ip, "127.0.0.1"))
    _write_atomic(cert, first.cert_pem)
    _write_atomic(key, first.key_pem(PASSWORD))
    files = {"tls.server.certPath": cert, "tls.server.keyPath": key, "tls.server.keyPassword": PASSWORD,
             "tls.server.mode": "enforcing", "tls.config.file": tmp_path / "no-tls.properties"}
    ns = servers.start_namesrv(tmp_path / "ns", props=files, host=client_host.host_ip)
    broker = consumer = probe = None
    try:
        broker = servers.start_broker(tmp_path / "broker", ns.addr, host=client_host.host_ip,
                                      props={**files, "tls.enable": "true",
                                             "tls.client.trustCertPath": pki["ca"]})
        addrs = [ns.addr, broker.addr, f"{broker.host}:{broker.port - 2}"]
        probe = CertProbe(client_host)
        assert probe.wait_for(addrs, first.fingerprint, 5) == {a: first.fingerprint for a in addrs}

        tag = version.replace(".", "")
        topic, group = f"TlsReload{tag}", f"tls_reload_{tag}"
        _produce(client_host, version, ns, topic, "before", pki)
        out = tmp_path / "consumer.jsonl"
        consumer = clients.harness_popen(client_host, version, [
            "consume-push", "-n", ns.addr, "--poll-namesrv-ms", "1000", "--topic", topic, "--group", group,
            "--count", "20", "--timeout-ms", "85000", "--linger-ms", "3000"], out, sysprops=tls_sysprops(pki))
        _wait_received(out, [f"before {i}" for i in range(5)], consumer, timeout=60)
        consumer_conns = _established(client_host, broker.addr)
        assert consumer_conns, "the consumer holds no connection to the broker"

        # (a) renewed certificate, same key; (b) new certificate and new key
        renewed = issue(ca, "rmqpy reload 2", hosts=(client_host.host_ip, "127.0.0.1"), key=first.key)
        rekeyed = issue(ca, "rmqpy reload 3", hosts=(client_host.host_ip, "127.0.0.1"), fresh_key=True)
        for step, new, prefix in (("same key", renewed, "after-renew"), ("new key", rekeyed, "after-rekey")):
            if new is rekeyed:
                _write_atomic(key, new.key_pem(PASSWORD))
            _write_atomic(cert, new.cert_pem)
            t0 = time.monotonic()
            seen = probe.wait_for(addrs, new.fingerprint, 2.0)
            took = time.monotonic() - t0
            assert seen == {a: new.fingerprint for a in addrs}, \
                f"{step}: new connections not served the new certificate within 2 s: {seen}\n{broker.log_tail()}"
            assert took < 2.0, f"{step}: took {took:.2f}s"
            print(f"{step}: new certificate on {len(addrs)} ports after {took:.2f}s; consumer {consumer_conns}")
            _produce(client_host, version, ns, topic, prefix, pki)
            _wait_received(out, [f"{prefix} {i}" for i in range(5)], consumer)
            assert consumer_conns <= _established(client_host, broker.addr), \
                f"{step}: the consumer's connections {consumer_conns} were closed"

        # (c) a half-written certificate: the last good one stays in service, with an error logged
        ns_mark, broker_mark = len(ns.log.read_bytes()), len(broker.log.read_bytes())
        broken = issue(ca, "rmqpy reload 4", hosts=(client_host.host_ip, "127.0.0.1"))
        cert.write_bytes(broken.cert_pem[: len(broken.cert_pem) // 2])
        wait_until(lambda: RELOAD_ERROR in ns.log.read_bytes()[ns_mark:].decode(errors="replace")
                   and RELOAD_ERROR in broker.log.read_bytes()[broker_mark:].decode(errors="replace"), 5, 0.1,
                   what="a reload error in both logs", diag=lambda: f"{broker.log_tail()}\n{ns.log_tail()}")
        for server in (ns, broker):
            line = next(x for x in server.log.read_bytes()[ns_mark if server is ns else broker_mark:]
                        .decode(errors="replace").splitlines() if RELOAD_ERROR in x)
            assert "error" in line.lower() and "keeping the previous certificate" in line \
                and rekeyed.fingerprint in line, line
        seen = {a: probe.fingerprint(a) for a in addrs}
        assert seen == {a: rekeyed.fingerprint for a in addrs}, seen
        _produce(client_host, version, ns, topic, "after-broken", pki)  # a new Java producer
        _wait_received(out, [f"after-broken {i}" for i in range(5)], consumer)
        assert consumer_conns <= _established(client_host, broker.addr)

        consumer.wait(60)
        ev = clients.read_events(out)
        assert consumer.returncode == 0 and ev.done and ev.done["ok"], ev
        expected = {f"{p} {i}" for p in ("before", "after-renew", "after-rekey", "after-broken") for i in range(5)}
        assert set(_received(out)) == expected
    finally:
        if consumer is not None and consumer.poll() is None:
            consumer.kill()
            consumer.wait(10)
        if probe is not None:
            probe.close()
        if broker is not None:
            broker.stop()
        ns.stop()


# ------------------------------------------------------------------ bad input on an enforcing port

HANDSHAKE_TIMEOUT_MS = 1500


def _old_client_hello(version: bytes) -> bytes:
    """A ClientHello offering only ``version`` (b"\\x03\\x01" TLS 1.0, b"\\x03\\x02" TLS 1.1)."""
    suites = b"\xc0\x13\xc0\x14\x00\x2f\x00\x35"
    body = version + os.urandom(32) + b"\x00" + len(suites).to_bytes(2, "big") + suites + b"\x01\x00"
    hs = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + len(hs).to_bytes(2, "big") + hs


def _read_to_eof(sock: socket.socket, timeout: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes; (bytes, seconds until the close)."""
    t0 = time.monotonic()
    sock.settimeout(timeout)
    got = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:
        pass
    return got, time.monotonic() - t0


def _remoting_frame(code: int, opaque: int) -> bytes:
    import json
    header = json.dumps({"code": code, "flag": 0, "language": "JAVA", "opaque": opaque,
                         "serializeTypeCurrentRPC": "JSON", "version": 409}).encode()
    return (4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header


class _TlsOverBio:
    """A TLS client over a plain socket (SSLObject on memory BIOs), so that raw bytes can be
    written under it and the handshake can be stopped half way."""

    def __init__(self, addr: str, ca: Path) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        ctx = ssl.create_default_context(cafile=str(ca))
        ctx.check_hostname = False
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.obj = ctx.wrap_bio(self.inc, self.out)

    def _pump(self) -> None:
        data = self.out.read()
        if data:
            self.sock.sendall(data)

    def start_handshake(self) -> None:
        """Sends the ClientHello and reads the server's first flight, then stops."""
        with pytest.raises(ssl.SSLWantReadError):
            self.obj.do_handshake()
        self._pump()
        self.inc.write(self.sock.recv(65536))

    def handshake(self) -> None:
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._pump()
                data = self.sock.recv(65536)
                assert data, "server closed during the handshake"
                self.inc.write(data)
        self._pump()

    def request(self, code: int, opaque: int = 1) -> int:
        """One remoting request over TLS; returns the response code."""
        self.obj.write(_remoting_frame(code, opaque))
        self._pump()
        buf = b""
        while True:
            try:
                buf += self.obj.read(65536)
            except ssl.SSLWantReadError:
                data = self.sock.recv(65536)
                assert data, "server closed the connection"
                self.inc.write(data)
                continue
            if len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
                break
        import json
        hlen = int.from_bytes(buf[4:8], "big") & 0xFFFFFF
        return int(json.loads(buf[8:8 + hlen])["code"])

    def close(self) -> None:
        self.sock.close()


def test_bad_input_on_enforcing_port(client_host, pki, tmp_path):
    """Against the real ``twistd rmq-namesrv`` (enforcing, tls.handshake.timeoutMillis=1500):
    a TLS 1.0 / 1.1 ClientHello gets a protocol_version alert and a close; garbage records
    after a good handshake close only that connection; a client that stops mid-handshake is
    closed by the server within the handshake timeout; meanwhile another TLS connection keeps
    getting answers, and each bad connection leaves a line in the server log."""
    ns = start(tmp_path, pki, client_host, **{"tls.server.mode": "enforcing",
                                               "tls.handshake.timeoutMillis": str(HANDSHAKE_TIMEOUT_MS)})
    keeper = _TlsOverBio(ns.addr, pki["ca"])
    others: list[socket.socket] = []
    try:
        keeper.handshake()
        assert keeper.request(319) == 0  # GET_NAMESRV_CONFIG: SUCCESS

        # a client that stops mid-handshake (after the server's first flight), and one that
        # sends only the first bytes of a TLS record: both closed within the timeout
        stalled = _TlsOverBio(ns.addr, pki["ca"])
        others.append(stalled.sock)
        stalled.start_handshake()
        t0 = time.monotonic()
        partial = socket.create_connection((ns.host, ns.port), timeout=5)
        others.append(partial)
        partial.sendall(b"\x16\x03\x01")
        assert keeper.request(319, 2) == 0  # served while the others stall

        # TLS 1.0 and 1.1 only: refused with a protocol_version alert, at once
        for version in (b"\x03\x01", b"\x03\x02"):
            old = socket.create_connection((ns.host, ns.port), timeout=5)
            others.append(old)
            old.sendall(_old_client_hello(version))
            reply, took = _read_to_eof(old, 5)
            assert reply[:1] == b"\x15" and reply[5:7] == b"\x02\x46", \
                f"TLS {version.hex()}: expected a fatal protocol_version alert, got {reply[:16].hex()}"
            assert took < 1.0, f"TLS {version.hex()}: closed only after {took:.2f}s"

        # garbage after a good handshake: that connection is closed, the keeper is not
        bad = _TlsOverBio(ns.addr, pki["ca"])
        others.append(bad.sock)
        bad.handshake()
        assert bad.request(319, 3) == 0
        bad.sock.sendall(b"\x17\x03\x03\x00\x20" + b"\xab" * 32)  # an application record that does not decrypt
        reply, took = _read_to_eof(bad.sock, 5)
        assert took < 1.0, f"garbage: closed only after {took:.2f}s"
        bad.inc.write(reply)  # what came back is the server's (TLS 1.3: encrypted) alert
        with pytest.raises(ssl.SSLError, match="(?i)alert") as alert:
            bad.obj.read(1024)
        print("garbage answered with", alert.value)
        assert keeper.request(319, 4) == 0

        limit = HANDSHAKE_TIMEOUT_MS / 1000
        for name, sock in (("stalled handshake", stalled.sock), ("partial record", partial)):
            _read_to_eof(sock, limit + 5)
            took = time.monotonic() - t0
            assert limit - 0.3 < took < limit + 1.5, f"{name}: closed after {took:.2f}s (timeout {limit}s)"
        assert keeper.request(319, 5) == 0  # still served after all of that

        log = ns.log_tail(50_000)
        assert log.count("TLS handshake not finished within 1.5s") == 2, log
        errors = [x for x in log.splitlines() if "[rmqpy.remoting.tls#error]" in x]
        # one line per bad connection: two refused versions, one garbage record, and no
        # second ("Unexpected EOF") line for the connections the server timed out itself
        assert len(errors) == 3, "\n".join(errors)
        assert sum("closed: unsupported protocol" in x for x in errors) == 2, errors
        assert sum("bad record mac" in x for x in errors) == 1, errors
    finally:
        keeper.close()
        for s in others:
            s.close()
        ns.stop()
