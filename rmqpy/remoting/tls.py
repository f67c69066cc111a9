"""TLS for every remoting port: RocketMQ's ``tls.*`` keys, mutual TLS, live certificate reload.

Server side (:func:`server_factory_wrapper`): a per-connection detector looks at the first
byte, as Java's HandshakeHandler does: ``0x16`` (a TLS handshake record) starts TLS, any
other byte is plaintext (served in ``permissive``, closed unread in ``enforcing``).
Client side (:func:`client_endpoint_factory`): the endpoint hook of
:class:`rmqpy.remoting.client.RemotingClient` for outgoing connections (``tls.enable``).

Keys (the same names and meanings as ``TlsSystemConfig``) come from a ``props`` dict that the
taps fill from the ``tls.*`` keys of their config file and from ``-D key=value`` options;
then the Java-properties file named by ``tls.config.file`` (default
``/etc/rocketmq/tls.properties``, read when it exists) overrides every key except
``tls.server.mode`` and ``tls.enable``, as in Java.

Where rmqpy differs from Java, on purpose (the safer choice):

* ``tls.test.mode.enable`` unset is Java's default (true) for a server with no certificate of its
  own: it serves a fresh self-signed certificate (client auth optional), so a TLS client with its
  defaults (Java's ``tls.enable``, a 5.x gRPC client) connects to a default server as to Java's, and
  ``permissive`` still serves plaintext beside it. Unset, it is false for everything else: a
  configured ``tls.server.certPath`` is served (Java's test mode would serve a self-signed one and
  hide a misspelt path), and rmqpy's clients check what their ``tls.client.*`` keys say (Java's test
  mode makes them trust anything). ``tls.test.mode.enable=true`` is Java's test mode for the
  client side too; ``=false`` serves no certificate unless one is configured: ``permissive``
  is then plaintext only (a TLS hello is closed by the frame decoder) and ``enforcing`` refuses to
  start.
* Unknown values of ``tls.server.mode`` / ``tls.server.need.client.auth`` are errors
  (Java silently falls back to permissive / none).
* ``tls.server.authClient`` / ``tls.client.authServer`` default to true when the matching
  ``trustCertPath`` is set (Java: false, i.e. trust every peer certificate even with a
  trust file configured). An explicit ``false`` keeps Java's trust-all.
* Only TLS 1.2 and 1.3; a handshake must finish within ``tls.handshake.timeoutMillis`` (rmqpy key,
  default 10000) of its first byte. A connection that has sent nothing yet is idle, not
  handshaking: as Java's it is closed after ``serverChannelMaxIdleTimeSeconds`` (120 s), not
  sooner. (A Java 5 broker's name-server scan connects and stays silent until its next
  registration, 10 s later; a 10 s first-byte deadline reset that connection under the
  registration and cost the broker its route for 30 s more.) Where the wrapped server has no idle
  limit, the handshake timeout bounds the silence instead.
* SNI (Java serves one certificate; apache/rocketmq#10302): ``tls.server.sni.<name>.certPath``,
  ``.keyPath`` and ``.keyPassword`` add a pair per server name (``*.example.com`` matches one
  label); a client whose SNI names one gets that pair, anyone else the default certificate. The same
  keys serve the gRPC port (grpc core picks the pair by SNI), and reload watches their files too.
* Reload watches certificate, key and trust files (inotify when available plus a 500 ms
  poll) and reloads when ANY of them changes (Java waits for both cert and key), after
  checking the new key matches the new certificate; a broken file keeps the old context.

Like Java (Netty's client SslContext), clients check the server's chain only, not its host
name: brokers reach name servers by IP address.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from OpenSSL import SSL, crypto
from twisted.internet import protocol
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator, IOpenSSLServerConnectionCreator, ITCPTransport
from twisted.logger import Logger
from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOFactory
from zope.interface import implementer

from rmqpy.common.properties import PropertiesError, load_properties
from rmqpy.remoting.channel import address_text
from rmqpy.remoting.filewatch import POLL_INTERVAL, FileWatcher, digest

log = Logger(namespace="rmqpy.remoting.tls")

DEFAULT_CONFIG_FILE = "/etc/rocketmq/tls.properties"
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
MODES = ("disabled", "permissive", "enforcing")
CLIENT_AUTH = ("none", "optional", "require")
# keys that tls.config.file may override (all but tls.server.mode and tls.enable, as Java)
_FILE_KEYS = (
    "tls.test.mode.enable", "tls.server.need.client.auth", "tls.server.keyPath", "tls.server.keyPassword",
    "tls.server.certPath", "tls.server.authClient", "tls.server.trustCertPath", "tls.client.keyPath",
    "tls.client.keyPassword", "tls.client.certPath", "tls.client.authServer", "tls.client.trustCertPath",
)


class TlsConfigError(ValueError):
    """The tls.* configuration cannot be used (bad value, unreadable or mismatched files)."""


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() == "true"  # Boolean.parseBoolean


def _opt(value: str | None) -> str | None:
    return value if value else None


@dataclass
class TlsSettings:
    server_mode: str = "permissive"
    client_enable: bool = False
    test_mode: bool = False
    server_self_signed: bool = False  # a server without a certificate of its own: tls.test.mode.enable's effect
    need_client_auth: str = "none"
    server_key_path: str | None = None
    server_key_password: str | None = None
    server_cert_path: str | None = None
    server_auth_client: bool = False
    server_trust_cert_path: str | None = None
    client_key_path: str | None = None
    client_key_password: str | None = None
    client_cert_path: str | None = None
    client_auth_server: bool = False
    client_trust_cert_path: str | None = None
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    # rmqpy (Java has none, apache/rocketmq#10302): server name -> (certPath, keyPath, keyPassword),
    # from tls.server.sni.<name>.certPath / .keyPath / .keyPassword; "*.example.com" matches one label
    server_sni: dict[str, tuple[str, str, str | None]] = field(default_factory=dict)
    config_file: str = DEFAULT_CONFIG_FILE
    config_file_used: bool = False
    sources: list[str] = field(default_factory=list)

    @classmethod
    def from_props(cls, props: dict[str, str] | None = None, read_config_file: bool = True) -> "TlsSettings":
        p = {k.strip(): v.strip() for k, v in (props or {}).items() if k.strip().startswith("tls.")}
        s = cls(config_file=p.get("tls.config.file") or DEFAULT_CONFIG_FILE)
        if read_config_file and os.path.isfile(s.config_file) and os.access(s.config_file, os.R_OK):
            try:
                extra = load_properties(s.config_file)
            except PropertiesError as exc:
                raise TlsConfigError(str(exc)) from None
            for key in extra:
                if key in _FILE_KEYS or key.startswith("tls.server.sni."):
                    p[key] = extra[key].strip()
            s.config_file_used = True
        mode = p.get("tls.server.mode", "permissive").lower()
        if mode not in MODES:
            raise TlsConfigError(f"tls.server.mode={mode!r}: expected one of {', '.join(MODES)}")
        auth = (p.get("tls.server.need.client.auth") or "none").lower()
        if auth not in CLIENT_AUTH:
            raise TlsConfigError(f"tls.server.need.client.auth={auth!r}: expected one of {', '.join(CLIENT_AUTH)}")
        s.server_mode, s.need_client_auth = mode, auth
        s.client_enable = _bool(p.get("tls.enable"), False)
        test_mode = p.get("tls.test.mode.enable")
        s.test_mode = _bool(test_mode, False)
        s.server_key_path = _opt(p.get("tls.server.keyPath"))
        s.server_key_password = _opt(p.get("tls.server.keyPassword"))
        s.server_cert_path = _opt(p.get("tls.server.certPath"))
        s.server_trust_cert_path = _opt(p.get("tls.server.trustCertPath"))
        s.server_auth_client = _bool(p.get("tls.server.authClient"), s.server_trust_cert_path is not None)
        s.client_key_path = _opt(p.get("tls.client.keyPath"))
        s.client_key_password = _opt(p.get("tls.client.keyPassword"))
        s.client_cert_path = _opt(p.get("tls.client.certPath"))
        s.client_trust_cert_path = _opt(p.get("tls.client.trustCertPath"))
        s.client_auth_server = _bool(p.get("tls.client.authServer"), s.client_trust_cert_path is not None)
        # Java's test mode defaults to true (TlsSystemConfig.tlsTestModeEnable, ProxyConfig.tlsTestModeEnable)
        s.server_self_signed = not s.server_cert_path and (s.test_mode if test_mode is not None
                                                           else not s.server_key_path)
        s.server_sni = _sni_pairs(p)
        if "tls.handshake.timeoutMillis" in p:
            try:
                s.handshake_timeout = int(p["tls.handshake.timeoutMillis"]) / 1000.0
            except ValueError:
                raise TlsConfigError(f"tls.handshake.timeoutMillis={p['tls.handshake.timeoutMillis']!r}: "
                                     "not an integer") from None
        return s

    def server_paths(self) -> list[str]:
        """The server's files to read and watch (a self-signed default has only the SNI ones)."""
        if self.server_self_signed:
            return self.sni_paths()
        return [q for q in (self.server_cert_path, self.server_key_path, self.server_trust_cert_path) if q] + \
            self.sni_paths()

    def sni_paths(self) -> list[str]:
        return [q for cert, key, _ in self.server_sni.values() for q in (cert, key)]

    def client_paths(self) -> list[str]:
        return [q for q in (self.client_cert_path, self.client_key_path, self.client_trust_cert_path) if q]


# ------------------------------------------------------------------ building contexts

_SNI_NAME = re.compile(r"^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")


def _sni_pairs(p: dict[str, str]) -> dict[str, tuple[str, str, str | None]]:
    """The ``tls.server.sni.<name>.*`` keys: a certificate and key per server name, both required."""
    found: dict[str, dict[str, str]] = {}
    for key, value in p.items():
        if not key.startswith("tls.server.sni."):
            continue
        name, _, attr = key[len("tls.server.sni."):].rpartition(".")
        if attr not in ("certPath", "keyPath", "keyPassword"):
            raise TlsConfigError(f"{key}: expected tls.server.sni.<server name>.certPath, .keyPath or .keyPassword")
        name = name.lower()
        if len(name) > 253 or not _SNI_NAME.match(name):
            raise TlsConfigError(f"{key}: {name!r} is not a host name (or *.domain)")
        found.setdefault(name, {})[attr] = value
    out = {}
    for name, attrs in found.items():
        if not attrs.get("certPath") or not attrs.get("keyPath"):
            raise TlsConfigError(f"tls.server.sni.{name}: needs both certPath and keyPath")
        out[name] = (attrs["certPath"], attrs["keyPath"], _opt(attrs.get("keyPassword")))
    return out


def sni_match(names: Iterable[str], server_name: str) -> str | None:
    """The configured name a client's SNI ``server_name`` selects: the same name, else the
    ``*.`` name of its parent domain; None for neither (the default certificate then)."""
    wanted = server_name.lower().rstrip(".")
    names = set(names)
    if wanted in names:
        return wanted
    parent = wanted.partition(".")[2]
    return f"*.{parent}" if parent and f"*.{parent}" in names else None


def _read_files(paths: list[str]) -> dict[str, bytes]:
    out = {}
    for path in paths:
        try:
            with open(path, "rb") as fh:
                out[path] = fh.read()
        except OSError as exc:
            raise TlsConfigError(f"cannot read {path}: {exc.strerror}") from None
    return out


def _load_certs(data: bytes, path: str) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise TlsConfigError(f"{path}: not a PEM certificate file ({exc})") from None
    if not certs:
        raise TlsConfigError(f"{path}: no certificate")
    return certs


def _load_key(data: bytes, password: str | None, path: str) -> Any:
    try:
        return serialization.load_pem_private_key(data, password.encode() if password else None)
    except TypeError as exc:  # encrypted without a password, or a password for a clear key
        raise TlsConfigError(f"{path}: {exc}") from None
    except (ValueError, Exception) as exc:
        raise TlsConfigError(f"{path}: cannot load the private key ({type(exc).__name__}: {exc})") from None


def fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex()


def _base_context(server: bool) -> SSL.Context:
    ctx = SSL.Context(SSL.TLS_SERVER_METHOD if server else SSL.TLS_CLIENT_METHOD)
    ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
    ctx.set_max_proto_version(SSL.TLS1_3_VERSION)
    ctx.set_options(SSL.OP_NO_COMPRESSION | SSL.OP_NO_RENEGOTIATION)
    if server:
        # no resumption: every connection shows (and checks) the current certificates
        ctx.set_options(SSL.OP_NO_TICKET)
        ctx.set_session_cache_mode(SSL.SESS_CACHE_OFF)
    return ctx


def _use_pair(ctx: SSL.Context, files: dict[str, bytes], cert_path: str, key_path: str,
              password: str | None) -> str:
    certs = _load_certs(files[cert_path], cert_path)
    key = _load_key(files[key_path], password, key_path)
    try:
        ctx.use_certificate(certs[0])
        for extra in certs[1:]:
            ctx.add_extra_chain_cert(crypto.X509.from_cryptography(extra))
        ctx.use_privatekey(key)
        ctx.check_privatekey()
    except (SSL.Error, crypto.Error, TypeError) as exc:
        raise TlsConfigError(f"{key_path} does not match the certificate of {cert_path} ({exc})") from None
    return fingerprint(certs[0])


def _trust(ctx: SSL.Context, files: dict[str, bytes], path: str) -> None:
    store = ctx.get_cert_store()
    assert store is not None  # OpenSSL makes it with the context
    for cert in _load_certs(files[path], path):
        store.add_cert(crypto.X509.from_cryptography(cert))


def _trust_all(conn: Any, cert: Any, errno: int, depth: int, ok: int) -> bool:
    return True


def self_signed_pair(common_name: str = "rmqpy-test-mode") -> tuple[bytes, bytes]:
    """A fresh self-signed certificate and key (PEM), for ``tls.test.mode.enable=true``."""
    import datetime

    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=3650)).sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def build_server_context(s: TlsSettings, files: dict[str, bytes]) -> tuple[SSL.Context, str]:
    """(context, SHA-256 fingerprint of the served certificate) from the file contents. With
    ``tls.server.sni.*`` pairs, a client's SNI picks its pair's context (same client-auth rules)."""
    ctx = _base_context(server=True)
    if s.server_self_signed:
        cert_pem, key_pem = files["<test-cert>"], files["<test-key>"]
        fp = _use_pair(ctx, {"c": cert_pem, "k": key_pem}, "c", "k", None)
        ctx.set_verify(SSL.VERIFY_PEER, _trust_all)  # Java test mode: client auth OPTIONAL, trust all
    else:
        fp = _use_pair(ctx, files, s.server_cert_path, s.server_key_path, s.server_key_password)  # type: ignore[arg-type]
        _client_auth(ctx, s, files)
    if s.server_sni:
        by_name = {}
        for name, (cert_path, key_path, password) in s.server_sni.items():
            named = _base_context(server=True)
            _use_pair(named, files, cert_path, key_path, password)
            if s.server_self_signed:
                named.set_verify(SSL.VERIFY_PEER, _trust_all)
            else:
                _client_auth(named, s, files)
            by_name[name] = named

        def pick(conn: SSL.Connection) -> None:
            server_name = conn.get_servername()
            name = sni_match(by_name, server_name.decode("ascii", "replace")) if server_name else None
            if name is not None:
                conn.set_context(by_name[name])
        ctx.set_tlsext_servername_callback(pick)
    return ctx, fp


def _client_auth(ctx: SSL.Context, s: TlsSettings, files: dict[str, bytes]) -> None:
    """tls.server.need.client.auth and the trust of client certificates, as Java applies them."""
    if s.need_client_auth == "none":
        ctx.set_verify(SSL.VERIFY_NONE)
        return
    mode = SSL.VERIFY_PEER | (SSL.VERIFY_FAIL_IF_NO_PEER_CERT if s.need_client_auth == "require" else 0)
    if s.server_auth_client:
        if not s.server_trust_cert_path:
            raise TlsConfigError("tls.server.authClient=true needs tls.server.trustCertPath")
        _trust(ctx, files, s.server_trust_cert_path)
        if s.need_client_auth == "optional":
            ctx.set_verify(mode, lambda conn, cert, errno, depth, ok: bool(ok))
        else:
            ctx.set_verify(mode)
    else:
        ctx.set_verify(mode, _trust_all)  # Java: authClient=false trusts every client certificate


def build_client_context(s: TlsSettings, files: dict[str, bytes]) -> tuple[SSL.Context, str]:
    ctx = _base_context(server=False)
    fp = ""
    if s.client_cert_path and s.client_key_path and not s.test_mode:
        fp = _use_pair(ctx, files, s.client_cert_path, s.client_key_path, s.client_key_password)
    if s.client_auth_server and not s.test_mode:
        if s.client_trust_cert_path:
            _trust(ctx, files, s.client_trust_cert_path)
        else:
            ctx.set_default_verify_paths()
        ctx.set_verify(SSL.VERIFY_PEER)
    else:
        ctx.set_verify(SSL.VERIFY_PEER, _trust_all)
    return ctx, fp


# ------------------------------------------------------------------ live reload

class ReloadingContext:
    """An SSL context rebuilt when any of its files changes; the old one stays on any error.

    ``check()`` hashes the files and, when a hash differs from the last attempted state,
    builds a new context from exactly the bytes it hashed. A missing file skips the
    check (an editor or a cert manager is replacing it). New connections take
    ``context``; open ones keep the context they were made with.
    """

    def __init__(self, name: str, build: Callable[[dict[str, bytes]], tuple[SSL.Context, str]],
                 paths: list[str], clock: Any, reactor: Any = None, use_inotify: bool | None = None,
                 poll_interval: float = POLL_INTERVAL, static_files: dict[str, bytes] | None = None) -> None:
        self.name = name
        self._build = build
        self.paths = list(dict.fromkeys(paths))
        self.clock = clock
        self.reactor = reactor
        self.poll_interval = poll_interval
        self._static = dict(static_files or {})
        files = _read_files(self.paths)
        self.context, self.fingerprint = build({**files, **self._static})
        self._hashes = self._digest(files)
        self.reloads = 0
        self.failures = 0
        self.loaded_at = time.time()
        self._users = 0
        if use_inotify is None:
            use_inotify = reactor is not None and clock is reactor
        self.use_inotify = use_inotify and bool(self.paths)
        self._watcher = FileWatcher(f"TLS {name}", self.check, self._dirs, clock, reactor, self.use_inotify,
                                    poll_interval)

    def _dirs(self) -> list[str]:
        return sorted({os.path.dirname(os.path.abspath(p)) for p in self.paths})

    @staticmethod
    def _digest(files: dict[str, bytes]) -> dict[str, str]:
        return digest(files)

    def check(self) -> bool:
        """Reload if a watched file changed since the last attempt; True when swapped."""
        files = {}
        for path in self.paths:
            try:
                with open(path, "rb") as fh:
                    files[path] = fh.read()
            except OSError:
                return False  # being replaced: look again at the next poll/event
        digest = self._digest(files)
        if digest == self._hashes:
            return False
        changed = sorted(p for p in self.paths if digest[p] != self._hashes.get(p))
        self._hashes = digest  # a broken state is reported once, retried when it changes again
        try:
            context, fp = self._build({**files, **self._static})
        except Exception as exc:
            self.failures += 1
            log.error("TLS {name}: reload after change of {changed} failed, keeping the previous "
                      "certificate (sha256 {fp}): {err}", name=self.name, changed=", ".join(changed),
                      fp=self.fingerprint, err=exc)
            return False
        old, self.context, self.fingerprint = self.fingerprint, context, fp
        self.reloads += 1
        self.loaded_at = time.time()
        log.info("TLS {name}: reloaded after change of {changed}; certificate sha256 {old} -> {new}",
                 name=self.name, changed=", ".join(changed), old=old, new=fp)
        return True

    # watching (rmqpy.remoting.filewatch), shared by every port that uses this context
    def start(self) -> None:
        self._users += 1
        if self._users > 1 or not self.paths:
            return
        self._watcher.start()

    def stop(self) -> None:
        self._users = max(0, self._users - 1)
        if self._users:
            return
        self._watcher.stop()


# ------------------------------------------------------------------ server side

@implementer(IOpenSSLServerConnectionCreator)
class _ServerCreator:
    def __init__(self, holder: ReloadingContext) -> None:
        self.holder = holder

    def serverConnectionForTLS(self, tls_protocol: Any) -> SSL.Connection:  # noqa: N802
        conn = SSL.Connection(self.holder.context, None)
        conn.set_accept_state()
        return conn


def _is_eof(err: Exception) -> bool:
    """The peer closed TCP without a close_notify (OpenSSL's "Unexpected EOF")."""
    if isinstance(err, SSL.SysCallError):
        return True
    return isinstance(err, SSL.Error) and "unexpected eof" in _ssl_reason(err).lower()


class _LoggedTLSProtocol(BufferingTLSTransport):
    """Logs why a TLS connection failed (bad version, bad certificate, garbage records).

    Not logged as errors: a peer that closes an established TLS connection without a
    close_notify (many clients do), and the end of a connection that the server itself
    aborted for a handshake timeout (already logged by the detector).
    """

    timed_out = False

    def _tlsShutdownFinished(self, reason: Any) -> None:  # noqa: N802 (Twisted's name)
        if reason is not None and isinstance(reason.value, SSL.Error) and self._reason is None:
            peer = self.transport.getPeer() if self.transport is not None else None
            where = address_text(peer)
            if not _is_eof(reason.value):
                log.error("TLS connection from {peer} closed: {err}", peer=where, err=_ssl_reason(reason.value))
            elif not self._handshakeDone and not self.timed_out:
                log.warn("TLS connection from {peer} closed by the peer during the handshake", peer=where)
            else:
                log.debug("TLS connection from {peer} closed without close_notify", peer=where)
        super()._tlsShutdownFinished(reason)  # type: ignore[no-untyped-call]  # Twisted: unannotated


def _ssl_reason(err: SSL.Error) -> str:
    try:
        return "; ".join(e[2] for e in err.args[0]) or repr(err)
    except Exception:
        return repr(err)


class TlsDetectingFactory(protocol.Factory):
    """Wraps a remoting factory: a first-byte detector in front of every connection."""

    noisy = False

    def __init__(self, inner: protocol.Factory, wrapper: "TlsServerWrapper") -> None:
        self.inner = inner
        self.wrapper = wrapper
        self.tls_factory = TLSMemoryBIOFactory(_ServerCreator(wrapper.holder), False, inner, clock=wrapper.reactor)
        self.tls_factory.protocol = _LoggedTLSProtocol
        self.refused_plaintext = 0
        self.handshake_timeouts = 0
        # the inner factory's connection cap is counted here, at the accept: a connection waiting for
        # its first byte holds a descriptor as much as one past it
        self.cap: Any = getattr(inner, "cap", None)
        if self.cap is not None:
            inner.admits_at_build = False  # type: ignore[attr-defined]

    def startFactory(self) -> None:  # noqa: N802
        self.wrapper.holder.start()
        self.inner.doStart()  # type: ignore[no-untyped-call]  # Twisted: unannotated

    def stopFactory(self) -> None:  # noqa: N802
        self.inner.doStop()  # type: ignore[no-untyped-call]
        self.wrapper.holder.stop()

    def buildProtocol(self, addr: Any) -> "_Detector | None":  # noqa: N802
        if self.cap is not None and not self.cap.admit(str(getattr(addr, "host", "?"))):
            return None  # Twisted closes the socket at once
        return _Detector(self, addr)


class _Detector(protocol.Protocol):
    transport: ITCPTransport  # from listenTCP, set before connectionMade

    def __init__(self, factory: TlsDetectingFactory, addr: Any) -> None:
        self.factory = factory
        self.addr = addr
        self.delegate: Any = None
        self.is_tls = False
        self._timer: Any = None
        self._timer_is_idle = False  # which of the two deadlines _timer is: idle or handshake

    @property
    def peer(self) -> str:
        return address_text(self.addr)

    def connectionMade(self) -> None:  # noqa: N802
        w = self.factory.wrapper
        # Java's IdleStateHandler counts from the connect, before its TLS handler has seen a byte: a
        # connection that sends nothing is idle, closed at the idle time; the handshake's own time
        # starts with its first byte (dataReceived)
        limits = getattr(self.factory.inner, "limits", None)
        idle = limits.max_idle_seconds if limits is not None else 0
        if idle > 0:
            self._timer = w.clock.callLater(idle, self._idle)
            self._timer_is_idle = True
        else:
            self._timer = w.clock.callLater(w.settings.handshake_timeout, self._timed_out)

    def _idle(self) -> None:
        self._timer = None
        # the line of Java's NettyConnectManageHandler, as the sweeper writes it for a known channel
        log.warn("NETTY SERVER PIPELINE: IDLE exception [{peer}]", peer=self.peer)
        self.transport.abortConnection()

    def _timed_out(self) -> None:
        self._timer = None
        self.factory.handshake_timeouts += 1
        what = "TLS handshake not finished" if self.is_tls else "nothing received"
        log.warn("closing connection from {peer}: {what} within {s}s (tls.handshake.timeoutMillis)",
                 peer=self.peer, what=what, s=self.factory.wrapper.settings.handshake_timeout)
        if self.delegate is not None:
            self.delegate.timed_out = True  # the abort below is not the peer's doing: no second line
        self.transport.abortConnection()

    def _cancel_timer(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        self._timer_is_idle = False

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        if self.delegate is None:
            if not data:
                return
            mode = self.factory.wrapper.settings.server_mode
            if data[0] == 0x16:
                self.is_tls = True
                if self._timer is not None and self._timer_is_idle:
                    # no longer idle: the handshake has its own time from here
                    self._cancel_timer()
                    w = self.factory.wrapper
                    self._timer = w.clock.callLater(w.settings.handshake_timeout, self._timed_out)
                self.delegate = self.factory.tls_factory.buildProtocol(self.addr)
            elif mode == "enforcing":
                self._cancel_timer()
                self.factory.refused_plaintext += 1
                log.warn("closing plaintext connection from {peer}: tls.server.mode=enforcing", peer=self.peer)
                self.transport.abortConnection()
                return
            else:
                self._cancel_timer()
                self.delegate = self.factory.inner.buildProtocol(self.addr)
            if self.delegate is None or getattr(self.delegate, "wrappedProtocol", self.delegate) is None:
                # the inner factory refused the connection (a cap reached since the accept; the HA port)
                self.delegate = None
                self._cancel_timer()
                self.transport.abortConnection()
                return
            self.delegate.makeConnection(self.transport)
        self.delegate.dataReceived(data)
        if self._timer is not None and isinstance(self.delegate, _LoggedTLSProtocol) and self.delegate._handshakeDone:
            self._cancel_timer()

    def connectionLost(self, reason: Any = protocol.connectionDone) -> None:  # noqa: N802
        self._cancel_timer()
        if self.factory.cap is not None:
            self.factory.cap.release(str(getattr(self.addr, "host", "?")))
        if self.delegate is not None:
            delegate, self.delegate = self.delegate, None
            delegate.connectionLost(reason)


class TlsServerWrapper:
    """The ``wrap_factory`` of :class:`RemotingServerService`; one per server, any number of ports."""

    def __init__(self, settings: TlsSettings, reactor: Any = None, clock: Any = None,
                 use_inotify: bool | None = None, poll_interval: float = POLL_INTERVAL) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.settings = settings
        self.reactor = reactor
        self.clock = clock or reactor
        static: dict[str, bytes] = {}
        paths = settings.server_paths()
        if settings.server_self_signed:
            static["<test-cert>"], static["<test-key>"] = self_signed_pair()
            log.info("TLS: no tls.server.certPath: serving a self-signed certificate beside plaintext "
                     "(tls.test.mode.enable, Java's default; not for production)")
        self.holder = ReloadingContext("server", lambda files: build_server_context(settings, files), paths,
                                       self.clock, reactor, use_inotify, poll_interval, static)
        log.info("TLS: tls.server.mode={mode}, need.client.auth={auth}, authClient={ac}, certificate sha256 "
                 "{fp}{cf}", mode=settings.server_mode, auth=settings.need_client_auth,
                 ac=settings.server_auth_client, fp=self.holder.fingerprint,
                 cf=f" (with {settings.config_file})" if settings.config_file_used else "")

    def __call__(self, factory: protocol.Factory) -> TlsDetectingFactory:
        return TlsDetectingFactory(factory, self)


def server_factory_wrapper(props: dict[str, str] | None, reactor: Any = None, clock: Any = None,
                           use_inotify: bool | None = None) -> TlsServerWrapper | None:
    """The factory wrapper for the server ``props`` (tls.* keys), or None for plaintext.

    Raises :class:`TlsConfigError` when the configuration cannot work (enforcing without a
    certificate, unreadable or mismatched files, unknown values).
    """
    s = TlsSettings.from_props(props)
    if s.server_mode == "disabled":
        log.info("TLS: tls.server.mode=disabled: plaintext only")
        return None
    if not s.server_cert_path and not s.server_key_path and not s.server_self_signed:
        if s.server_mode == "enforcing":
            raise TlsConfigError("tls.server.mode=enforcing needs tls.server.certPath and tls.server.keyPath "
                                 "(or tls.test.mode.enable=true for a self-signed certificate)")
        log.info("TLS: no tls.server.certPath configured: plaintext only")
        return None
    if not (s.server_cert_path and s.server_key_path) and not s.server_self_signed:
        raise TlsConfigError("TLS needs both tls.server.certPath and tls.server.keyPath")
    return TlsServerWrapper(s, reactor, clock, use_inotify)


# ------------------------------------------------------------------ client side

@implementer(IOpenSSLClientConnectionCreator)
class _ClientCreator:
    def __init__(self, holder: ReloadingContext, host: str) -> None:
        self.holder = holder
        self.host = host

    def clientConnectionForTLS(self, tls_protocol: Any) -> SSL.Connection:  # noqa: N802
        conn = SSL.Connection(self.holder.context, None)
        if self.host and not _is_ip(self.host):
            conn.set_tlsext_host_name(self.host.encode("idna"))
        conn.set_connect_state()
        return conn


def _is_ip(host: str) -> bool:
    import ipaddress
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


class TlsClientEndpoints:
    """``endpoint_factory(reactor, host, port)`` for :class:`RemotingClient` when ``tls.enable``."""

    def __init__(self, settings: TlsSettings, reactor: Any = None, clock: Any = None,
                 use_inotify: bool | None = None, connect_timeout: float = 3.0) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.settings = settings
        self.connect_timeout = connect_timeout
        paths = [] if settings.test_mode else settings.client_paths()
        self.holder = ReloadingContext("client", lambda files: build_client_context(settings, files), paths,
                                       clock or reactor, reactor, use_inotify)
        if not settings.client_auth_server or settings.test_mode:
            log.warn("TLS client: server certificates are not verified (tls.client.authServer=false)")

    def __call__(self, reactor: Any, host: str, port: int) -> Any:
        from twisted.internet.endpoints import HostnameEndpoint, wrapClientTLS
        if not self._started:  # watch the client files from the first connection on
            self.start()
        return wrapClientTLS(_ClientCreator(self.holder, host),
                             HostnameEndpoint(reactor, host, port, timeout=self.connect_timeout), clock=reactor)

    _started = False

    def start(self) -> None:
        if not self._started:
            self._started = True
            self.holder.start()

    def stop(self) -> None:
        if self._started:
            self._started = False
            self.holder.stop()


def props_from_config(config_file: str | None, overrides: dict[str, str] | None = None) -> dict[str, str]:
    """The ``tls.*`` keys of a server properties file (``-c``), then ``overrides`` (``-D``) on top."""
    props: dict[str, str] = {}
    if config_file:
        try:
            props = {k: v for k, v in load_properties(config_file).items() if k.startswith("tls.")}
        except PropertiesError as exc:
            raise TlsConfigError(str(exc)) from None
    props.update(overrides or {})
    return props


def client_endpoint_factory(props: dict[str, str] | None, reactor: Any = None, clock: Any = None,
                            use_inotify: bool | None = None) -> TlsClientEndpoints | None:
    """The ``endpoint_factory`` for outgoing connections, or None unless ``tls.enable=true``."""
    s = TlsSettings.from_props(props)
    if not s.client_enable:
        return None
    return TlsClientEndpoints(s, reactor, clock, use_inotify)
