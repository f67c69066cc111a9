"""TLS on the gRPC port from the same ``tls.*`` keys as the remoting ports (rmqpy.remoting.tls).

As the proxy's ``ProxyAndTlsProtocolNegotiator``: ``permissive`` (the default) serves TLS and plain
text on the one port (grpcio takes one kind of credentials per port, so :mod:`rmqpy.proxy.grpc.front`
reads each connection's first byte and relays it to grpcio's TLS or plain loopback port),
``enforcing`` TLS only, ``disabled`` plain text only. The certificate is ``tls.server.certPath``/
``keyPath``, else a self-signed one (``tls.test.mode.enable``, whose default is Java's, true, for a
server without a certificate: rmqpy.remoting.tls); ``tls.test.mode.enable=false`` without a
certificate is plain text only. The proxy reads its own keys (``tlsCertPath``/``tlsKeyPath`` of
ProxyConfig); rmqpy's endpoint is in the broker and reads the broker's ``tls.*`` keys.

Certificate reload: grpcio asks :meth:`GrpcTls.fetch` before every handshake; it stats the files
(inode, mtime, size: a few microseconds) and, when those and then their bytes changed, checks the new pair
as the remoting ports do (:func:`rmqpy.remoting.tls.build_server_context`) and hands grpcio the
new certificate; a broken file keeps the old one. There is no
polling delay (the remoting ports' FileWatcher polls every 0.5 s): the first handshake after the
files were replaced gets the new certificate. ``need.client.auth=require`` requires a client
certificate issued by ``tls.server.trustCertPath``; ``optional`` is served as ``none`` (grpcio
has no optional client authentication).
"""
from __future__ import annotations

import os
import threading
from typing import Any

import grpc
from cryptography.hazmat.primitives import serialization

from rmqpy.remoting import tls
from rmqpy.remoting.filewatch import digest

log = tls.log


class GrpcTls:
    def __init__(self, settings: tls.TlsSettings) -> None:
        self.settings = settings
        self._static: dict[str, bytes] = {}
        self.paths = settings.server_paths()
        if settings.server_self_signed:
            self._static["<test-cert>"], self._static["<test-key>"] = tls.self_signed_pair()
        self._stamps = self._stat()
        files = self._read()
        self.initial, self.fingerprint = self._config(files)
        self._hashes = digest(files)
        self._lock = threading.Lock()
        self.reloads = 0

    def _stat(self) -> tuple[tuple[int, int, int], ...] | None:
        """(inode, mtime ns, size) of each file, or None while one is missing (being replaced)."""
        out = []
        for path in self.paths:
            try:
                st = os.stat(path)
            except OSError:
                return None
            out.append((st.st_ino, st.st_mtime_ns, st.st_size))
        return tuple(out)

    def _read(self) -> dict[str, bytes]:
        out = {}
        for path in self.paths:
            try:
                with open(path, "rb") as fh:
                    out[path] = fh.read()
            except OSError as exc:
                raise tls.TlsConfigError(f"cannot read {path}: {exc.strerror}") from None
        return out

    def _config(self, files: dict[str, bytes]) -> tuple[Any, str]:
        """grpcio's certificate configuration of ``files``, checked as the remoting ports check them."""
        s = self.settings
        _, fp = tls.build_server_context(s, {**files, **self._static})  # raises TlsConfigError
        if s.server_self_signed:
            pairs = [(self._static["<test-key>"], self._static["<test-cert>"])]
        else:
            assert s.server_cert_path and s.server_key_path
            pairs = [_pair(files, s.server_cert_path, s.server_key_path, s.server_key_password)]
        # the tls.server.sni.* pairs after the default one: grpc core picks the pair whose certificate
        # names the client's SNI, the first for a client sending none or another name
        pairs += [_pair(files, cert, key, password) for cert, key, password in s.server_sni.values()]
        roots = files.get(s.server_trust_cert_path or "") if self.require_client_auth else None
        return grpc.ssl_server_certificate_configuration(pairs, roots), fp

    @property
    def require_client_auth(self) -> bool:
        return self.settings.need_client_auth == "require" and self.settings.server_trust_cert_path is not None

    def fetch(self) -> Any:
        """grpcio's fetcher (its threads, before each handshake): a new configuration or None."""
        with self._lock:
            if not self.paths:
                return None
            stamps = self._stat()
            if stamps is None or stamps == self._stamps:
                return None
            try:
                files = self._read()
            except tls.TlsConfigError:
                return None  # being replaced: look again at the next handshake
            self._stamps = stamps
            hashes = digest(files)
            if hashes == self._hashes:
                return None
            self._hashes = hashes
            try:
                config, fp = self._config(files)
            except Exception as exc:
                log.error("TLS grpc: reload failed, keeping the previous certificate (sha256 {fp}): {err}",
                          fp=self.fingerprint, err=exc)
                return None
            log.info("TLS grpc: reloaded; certificate sha256 {old} -> {new}", old=self.fingerprint, new=fp)
            self.fingerprint = fp
            self.reloads += 1
            return config

    def credentials(self) -> Any:
        return grpc.dynamic_ssl_server_credentials(self.initial, self.fetch, self.require_client_auth)


def _pair(files: dict[str, bytes], cert_path: str, key_path: str, password: str | None) -> tuple[bytes, bytes]:
    """(clear PEM key, certificate chain) as grpcio takes a pair (it reads no encrypted key)."""
    key = serialization.load_pem_private_key(files[key_path], password.encode() if password else None)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return key_pem, files[cert_path]


def grpc_tls(props: dict[str, str] | None) -> GrpcTls | None:
    """The gRPC port's TLS for the server ``props`` (tls.* keys), or None for plain text."""
    s = tls.TlsSettings.from_props(props)
    if s.server_mode == "disabled" or not (s.server_cert_path or s.server_key_path or s.server_self_signed):
        return None
    if not (s.server_cert_path and s.server_key_path) and not s.server_self_signed:
        raise tls.TlsConfigError("TLS needs both tls.server.certPath and tls.server.keyPath")
    return GrpcTls(s)
