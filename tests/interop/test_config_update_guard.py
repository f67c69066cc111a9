"""Issue 11 row 3 against real ``twistd`` processes: remote config updates cannot reconfigure a server.

The report: UPDATE_BROKER_CONFIG with ``msgTraceTopicName=X\\ntls.server.mode=disabled`` (an
escaped newline inside a value) added ``tls.server.mode=disabled`` to the broker's ``-c``
file, so after a restart an enforcing broker took plaintext requests; ``storePathRootDir``
moved the store to a directory the client chose. Here the broker enforces TLS, the attacker
talks TLS (the port is open to anyone who can connect), and after a restart the broker must
still enforce TLS and use its store. mqadmin (4.9.8 and 5.3.3) is refused as well.
"""
from __future__ import annotations

import shutil
import socket
import ssl
from pathlib import Path

import pytest

from rmqpy.common.properties import load_properties, parse_properties
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.tls_testcerts import issue, make_ca
from rmqpy.tools.blocking_client import BlockingClient
from tests.interop import jvm, servers
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

HOST = "127.0.0.1"
ATTACKS = [
    b"msgTraceTopicName=X\\ntls.server.mode=disabled\n",        # the report, byte for byte
    b"msgTraceTopicName=X\\u000Atls.server.mode=disabled\n",
    b"tls.server.mode=disabled\n",
    b"storePathRootDir=ELSEWHERE\n",
    b"storePathCommitLog=ELSEWHERE/commitlog\n",
    b"listenPort=1\nbrokerIP1=6.6.6.6\n",
    b"aclEnable=true\n",
    b"remoteConfigUpdateAllowKeys=*\n",
    b"brokerConfigPath=ELSEWHERE/broker.conf\n",
]


def _client(addr: str, tls: bool) -> BlockingClient:
    client = BlockingClient(addr, timeout=5)
    if tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        client.sock = ctx.wrap_socket(client.sock)
    return client


def _invoke(addr: str, code: int, body: bytes | None = None, tls: bool = True) -> RemotingCommand:
    with _client(addr, tls) as client:
        return client.invoke(RemotingCommand.request(code, body=body))


def _plaintext_is_served(addr: str) -> bool:
    try:
        _invoke(addr, RequestCode.GET_BROKER_CONFIG, tls=False)
        return True
    except (ConnectionError, socket.timeout, OSError):
        return False


@pytest.fixture
def tls_props(tmp_path: Path) -> dict[str, object]:
    ca = make_ca("config guard CA")
    cert, key = issue(ca, "rmqpy broker", hosts=(HOST,)).write(tmp_path / "pki", "server")
    return {"tls.server.mode": "enforcing", "tls.server.certPath": cert, "tls.server.keyPath": key,
            "tls.test.mode.enable": "false", "tls.config.file": tmp_path / "pki" / "none.properties"}


def test_broker_refuses_and_stays_enforcing_after_restart(tmp_path: Path, tls_props) -> None:
    elsewhere = tmp_path / "elsewhere"
    cluster = servers.Cluster(tmp_path, HOST, broker_props=tls_props)
    try:
        broker = cluster.broker
        conf = broker.workdir / "broker.conf"
        before = load_properties(str(conf))
        assert not _plaintext_is_served(broker.addr)
        for body in ATTACKS:
            resp = _invoke(broker.addr, RequestCode.UPDATE_BROKER_CONFIG,
                           body.replace(b"ELSEWHERE", str(elsewhere).encode()) + b"fileReservedTime=7\n")
            assert (resp.code, resp.remark.split(".")[0]) == (ResponseCode.NO_PERMISSION,
                                                            "Can not update config in black list"), body
        assert load_properties(str(conf)) == before       # nothing refused was written
        # an allowed update is persisted; its value holds every character of the syntax
        value = "X tls.server.mode=disabled:#!\\"
        body = f"msgTraceTopicName={value.replace(chr(92), chr(92) * 2).replace('=', chr(92) + '=')}\n"
        resp = _invoke(broker.addr, RequestCode.UPDATE_BROKER_CONFIG, body.encode())
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        after = load_properties(str(conf))
        assert after["msgTraceTopicName"] == value
        assert {k: v for k, v in after.items() if k.startswith("tls.")} == \
               {k: v for k, v in before.items() if k.startswith("tls.")}
        assert after["storePathRootDir"] == before["storePathRootDir"]

        broker.stop()
        broker.start(60)
        assert not _plaintext_is_served(broker.addr), "plaintext served after a restart"
        config = parse_properties(_invoke(broker.addr, RequestCode.GET_BROKER_CONFIG).body.decode())
        assert config["msgTraceTopicName"] == value
        assert config["storePathRootDir"] == before["storePathRootDir"]
        assert config["fileReservedTime"] != "7"
        assert not elsewhere.exists()
        assert "updateBrokerConfig from" in broker.log_tail(1_000_000)  # the refusal is logged
    finally:
        cluster.close()


def test_namesrv_refuses_and_keeps_its_config(tmp_path: Path) -> None:
    ns = servers.start_namesrv(tmp_path / "ns", host=HOST)
    try:
        conf = ns.workdir / "namesrv.conf"
        text = conf.read_text()
        config = _invoke(ns.addr, RequestCode.GET_NAMESRV_CONFIG, tls=False).body
        for body in [b"productEnvName=X\\ntls.server.mode=disabled\n", b"tls.server.mode=enforcing\n",
                     b"kvConfigPath=/tmp/x\n", b"configStorePath=/tmp/x\n", b"listenPort=1\n",
                     b"bindAddress=6.6.6.6\n", b"remoteConfigUpdateAllowKeys=*\n"]:
            resp = _invoke(ns.addr, RequestCode.UPDATE_NAMESRV_CONFIG, body + b"orderMessageEnable=true\n", tls=False)
            assert resp.code == ResponseCode.NO_PERMISSION, body
        resp = _invoke(ns.addr, RequestCode.UPDATE_NAMESRV_CONFIG, b"scanNotActiveBrokerInterval=abc\n", tls=False)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "scanNotActiveBrokerInterval" in resp.remark
        assert _invoke(ns.addr, RequestCode.GET_NAMESRV_CONFIG, tls=False).body == config
        ns.stop()
        ns.start()
        assert conf.read_text() == text
        assert _invoke(ns.addr, RequestCode.GET_NAMESRV_CONFIG, tls=False).body == config
    finally:
        ns.stop()


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK")
@pytest.mark.parametrize("version", jvm.VERSIONS)
def test_mqadmin_update_broker_config_is_refused(tmp_path: Path, java_built, version: str) -> None:
    with servers.Cluster(tmp_path, HOST) as cluster:
        conf = cluster.broker.workdir / "broker.conf"
        before = conf.read_text()
        rc, out, err = jvm.mqadmin(version, ["updateBrokerConfig", "-b", cluster.broker_addr,
                                            "-k", "storePathRootDir", "-v", str(tmp_path / "x")], cluster.ns_addr)
        assert "CODE: 16" in out + err and "black list" in out + err, out + err
        assert conf.read_text() == before
        rc, out, err = jvm.mqadmin(version, ["updateBrokerConfig", "-b", cluster.broker_addr,
                                            "-k", "fileReservedTime", "-v", "9"], cluster.ns_addr)
        assert "success" in (out + err).lower(), out + err
        assert "fileReservedTime=9\n" in conf.read_text()


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK")
def test_mqadmin_switches_a_running_slave_to_master(tmp_path: Path, java_built) -> None:
    """Issue 27: ``mqadmin updateBrokerConfig -k brokerRole -v ASYNC_MASTER`` on a running rmqpy slave
    makes it the master without a restart: mqadmin reads the new role and id back, the broker
    registers again as brokerId 0, and a stock Java 5.3.3 producer (which finds no master before) sends
    to it. Java 4.9.7/5.3.3 only set the field (docs/compatibility.md); rmqpy runs the role switch."""
    version, topic = "5.3.3", "TRoleSwitch"
    with servers.Cluster(tmp_path, HOST, {"brokerRole": "SLAVE", "brokerId": 1}) as cluster:

        def config() -> dict[str, str]:  # mqadmin getBrokerConfig's "key = value" lines
            rc, out, err = jvm.mqadmin(version, ["getBrokerConfig", "-b", cluster.broker_addr], cluster.ns_addr)
            pairs = (line.split("=", 1) for line in out.splitlines() if "=" in line and not line.startswith("="))
            return {k.strip(): v.strip() for k, v in pairs}
        before = config()
        assert (before.get("brokerRole"), before.get("brokerId")) == ("SLAVE", "1"), before
        master_entry = f'0:"{cluster.broker_addr}"'.encode()  # brokerAddrs of the cluster info, as fastjson writes it

        def registered_as_master() -> bool:
            code, _, _, body = jvm.remoting_request(cluster.ns_addr, RequestCode.GET_BROKER_CLUSTER_INFO)
            return code == 0 and master_entry in (body or b"")
        assert not registered_as_master()  # a slave: brokerId 1
        rc, out, err = jvm.mqadmin(version, ["updateBrokerConfig", "-b", cluster.broker_addr,
                                            "-k", "brokerRole", "-v", "ASYNC_MASTER"], cluster.ns_addr)
        assert "success" in (out + err).lower(), out + err
        after = config()
        assert (after.get("brokerRole"), after.get("brokerId")) == ("ASYNC_MASTER", "0"), after
        wait_until(registered_as_master, 15, 0.2, what="the broker registered again as brokerId 0",
                   diag=cluster.broker.log_tail)
        ev = jvm.harness(version, ["produce", "-n", cluster.ns_addr, "-t", topic, "-c", "3"], timeout=60)
        assert [e["status"] for e in ev.of("sent")] == ["SEND_OK"] * 3, ev.errors
