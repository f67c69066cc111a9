"""The gRPC port's certificate reload (rmqpy.proxy.grpc.tls.GrpcTls.fetch, grpcio's per-handshake
fetcher): the first handshake after the files are replaced gets the new certificate, at once."""
from __future__ import annotations

import concurrent.futures
import os
from pathlib import Path

import grpc

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


def _serve(g) -> tuple[grpc.Server, int]:
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("rmqpy.test.Sni", {
        "Ping": grpc.unary_unary_rpc_method_handler(lambda request, context: b"pong")}),))
    port = server.add_secure_port("127.0.0.1:0", g.credentials())
    server.start()
    return server, port


def _ping_as(port: int, ca_pem: bytes, server_name: str) -> bool:
    """A call whose client sends ``server_name`` as its SNI and checks the certificate against it."""
    credentials = grpc.ssl_channel_credentials(root_certificates=ca_pem)
    with grpc.secure_channel(f"127.0.0.1:{port}", credentials,
                             options=[("grpc.ssl_target_name_override", server_name)]) as channel:
        try:
            return channel.unary_unary("/rmqpy.test.Sni/Ping")(b"", timeout=10) == b"pong"
        except grpc.RpcError:
            return False


def test_sni_picks_the_certificate_of_the_name_the_client_asks_for(tmp_path: Path) -> None:
    """tls.server.sni.<name>.*: each name's pair is served to a client asking for it (exact or by
    its *. parent); anyone else gets the default certificate."""
    ca = make_ca("grpc unit CA")
    cert, key = issue(ca, "default", hosts=("localhost",)).write(tmp_path, "server", "secret")
    a_cert, a_key = issue(ca, "a", hosts=("a.example",)).write(tmp_path, "a", "secret")
    w_cert, w_key = issue(ca, "wild", hosts=("*.wild.example",)).write(tmp_path, "wild")
    g = grpc_tls({**_props(str(cert), str(key)),
                  "tls.server.sni.a.example.certPath": str(a_cert), "tls.server.sni.a.example.keyPath": str(a_key),
                  "tls.server.sni.a.example.keyPassword": "secret",
                  "tls.server.sni.*.wild.example.certPath": str(w_cert),
                  "tls.server.sni.*.wild.example.keyPath": str(w_key)})
    assert g is not None
    server, port = _serve(g)
    try:
        assert _ping_as(port, ca.cert_pem, "a.example")  # its own certificate, which names it
        assert _ping_as(port, ca.cert_pem, "x.wild.example")
        assert _ping_as(port, ca.cert_pem, "localhost")  # the default one
        assert not _ping_as(port, ca.cert_pem, "b.example")  # the default, which does not name it
    finally:
        server.stop(None)
