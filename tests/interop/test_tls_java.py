"""TLS of ``twistd rmq-namesrv`` driven by the official Java client (4.9.x and 5.x).

The name server runs as a real ``twistd -n rmq-namesrv -c namesrv.conf`` process with the
``tls.*`` keys in its config file and certificates made here (its key an encrypted PKCS#8
PEM). The Java side is our harness (``cluster``: DefaultMQAdminExt.examineBrokerClusterInfo,
a plain name server request) and ``mqadmin getNamesrvConfig``, switched to TLS only by JVM
system properties, as a RocketMQ user would do it: ``-Dtls.enable=true``,
``-Dtls.test.mode.enable=false``, ``-Dtls.client.authServer=true``,
``-Dtls.client.trustCertPath=ca.pem`` and, for mutual TLS, ``-Dtls.client.certPath`` /
``-Dtls.client.keyPath`` (PKCS#8 PEM).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from rmqpy.remoting.tls_testcerts import issue, make_ca
from tests.interop import clients, servers
from tests.interop.conftest import VERSIONS

pytestmark = pytest.mark.interop

PASSWORD = "namesrv key pw"


@pytest.fixture(scope="module")
def pki(tmp_path_factory, client_host) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("tls-pki")
    ca, other = make_ca("interop CA"), make_ca("other CA")
    (d / "ca.pem").write_bytes(ca.cert_pem)
    out = {"dir": d, "ca": d / "ca.pem"}
    out["server_cert"], out["server_key"] = issue(ca, "rmqpy namesrv", hosts=(client_host.host_ip, "127.0.0.1")
                                                  ).write(d, "server", PASSWORD)
    out["good_cert"], out["good_key"] = issue(ca, "java client", server=False).write(d, "good")
    out["bad_cert"], out["bad_key"] = issue(other, "stranger", server=False).write(d, "bad")
    for p in d.iterdir():
        p.chmod(0o644)
    d.chmod(0o755)
    return out


def start(tmp: Path, pki, host, **tls_props: str) -> servers.ServerProcess:
    props = {"tls.server.certPath": pki["server_cert"], "tls.server.keyPath": pki["server_key"],
             "tls.server.keyPassword": PASSWORD, "tls.config.file": tmp / "no-tls.properties", **tls_props}
    return servers.start_namesrv(tmp, props=props, host=host.host_ip)


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


@pytest.mark.parametrize("version", VERSIONS)
def test_enforcing(version, java_built, client_host, pki, tmp_path):
    ns = start(tmp_path, pki, client_host, **{"tls.server.mode": "enforcing"})
    try:
        ok, ev = cluster(client_host, version, ns, tls_sysprops(pki))
        assert ok, f"TLS client refused: {ev.errors}\n{ev.stderr[-2000:]}\n{ns.log_tail()}"
        out = clients.mqadmin(client_host, version, ["getNamesrvConfig"], ns.addr, sysprops=tls_sysprops(pki))
        assert "listenPort" in out and str(ns.port) in out, out
        ok, ev = cluster(client_host, version, ns, None)  # plaintext Java client
        assert not ok, ev
        log = ns.log_tail(20000)
        assert "closing plaintext connection" in log and "enforcing" in log, log
    finally:
        ns.stop()


@pytest.mark.parametrize("version", VERSIONS)
def test_permissive_serves_both(version, java_built, client_host, pki, tmp_path):
    ns = start(tmp_path, pki, client_host, **{"tls.server.mode": "permissive"})
    try:
        ok, ev = cluster(client_host, version, ns, tls_sysprops(pki))
        assert ok, f"{ev.errors}\n{ev.stderr[-2000:]}"
        ok, ev = cluster(client_host, version, ns, None)
        assert ok, f"{ev.errors}\n{ev.stderr[-2000:]}"
    finally:
        ns.stop()


@pytest.mark.parametrize("version", VERSIONS)
def test_mutual_tls_require(version, java_built, client_host, pki, tmp_path):
    ns = start(tmp_path, pki, client_host, **{"tls.server.mode": "enforcing",
                                               "tls.server.need.client.auth": "require",
                                               "tls.server.authClient": "true",
                                               "tls.server.trustCertPath": pki["ca"]})
    try:
        ok, ev = cluster(client_host, version, ns, tls_sysprops(pki))
        assert not ok, "a client without a certificate was served"
        ok, ev = cluster(client_host, version, ns, tls_sysprops(pki, "bad"))
        assert not ok, "a client certificate from another CA was accepted"
        ok, ev = cluster(client_host, version, ns, tls_sysprops(pki, "good"))
        assert ok, f"{ev.errors}\n{ev.stderr[-2000:]}\n{ns.log_tail()}"
    finally:
        ns.stop()


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
    broker_tls = {"tls.server.mode": "enforcing", "tls.server.certPath": pki["server_cert"],
                  "tls.server.keyPath": pki["server_key"], "tls.server.keyPassword": PASSWORD,
                  "tls.enable": "true", "tls.client.trustCertPath": pki["ca"],
                  "tls.config.file": tmp_path / "no-tls.properties"}
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
