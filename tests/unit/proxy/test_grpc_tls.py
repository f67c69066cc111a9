"""The gRPC port's certificate reload (rmqpy.proxy.grpc.tls.GrpcTls.fetch, grpcio's per-handshake
fetcher): the first handshake after the files are replaced gets the new certificate, at once."""
from __future__ import annotations

import os
from pathlib import Path

from rmqpy.proxy.grpc.tls import grpc_tls
from rmqpy.remoting.tls_testcerts import issue, make_ca


def _props(cert: str, key: str) -> dict[str, str]:
    return {"tls.server.certPath": cert, "tls.server.keyPath": key, "tls.server.keyPassword": "secret"}


def test_the_first_fetch_after_a_replacement_reloads(tmp_path: Path) -> None:
    ca = make_ca("grpc unit CA")
    cert, key = issue(ca, "one", hosts=("127.0.0.1",)).write(tmp_path, "server", "secret")
    g = grpc_tls(_props(str(cert), str(key)))
    assert g is not None
    assert g.fetch() is None  # nothing changed
    new_cert, new_key = issue(ca, "two", hosts=("127.0.0.1",)).write(tmp_path, "renewed", "secret")
    os.replace(new_key, key)
    os.replace(new_cert, cert)
    # no wait: a handshake right after the replacement (the interop test's second client came
    # within the old 0.5 s poll interval and was served the old certificate)
    assert g.fetch() is not None
    assert g.reloads == 1
    assert g.fetch() is None  # reloaded once, not on every handshake


def test_a_half_replaced_pair_keeps_the_old_certificate_then_reloads(tmp_path: Path) -> None:
    ca = make_ca("grpc unit CA")
    cert, key = issue(ca, "one", hosts=("127.0.0.1",)).write(tmp_path, "server", "secret")
    g = grpc_tls(_props(str(cert), str(key)))
    assert g is not None
    old = g.fingerprint
    new_cert, new_key = issue(ca, "two", hosts=("127.0.0.1",)).write(tmp_path, "renewed", "secret")
    os.replace(new_key, key)  # the new key beside the old certificate: refused, old one kept
    assert g.fetch() is None and g.fingerprint == old
    os.replace(new_cert, cert)
    assert g.fetch() is not None and g.fingerprint != old


def test_touching_without_changing_bytes_does_not_reload(tmp_path: Path) -> None:
    ca = make_ca("grpc unit CA")
    cert, key = issue(ca, "one", hosts=("127.0.0.1",)).write(tmp_path, "server", "secret")
    g = grpc_tls(_props(str(cert), str(key)))
    assert g is not None
    Path(cert).write_bytes(Path(cert).read_bytes())
    assert g.fetch() is None and g.reloads == 0
