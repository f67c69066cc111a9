"""Issue 28, slice 2: an rmqpy AutoSwitch HA replica of a Java 5.3.3 master in controller mode.

Apache's controller runs embedded in the Java 5.3.3 name server (``enableControllerInNamesrv``,
one DLedger peer); the Java 5.3.3 broker (``enableControllerMode``) registers with it, gets
its broker id and is elected master of epoch 1. The official Java 5.3.3 producer sends a few
thousand messages over 1 MiB commit log files. Then an rmqpy store, driven at store level by
``tests/interop/autoswitch_replica.py`` (the broker's controller client is another slice),
connects to the master's ``haListenPort`` as broker id 2: handshake, the master's epochs, the
copy. The replica is not registered with the controller; the Java master serves it anyway
(its HA port checks no registration; it only fails to add it to the in-sync set). Its commit
log must be byte-identical to Java's up to the master's max offset, and its epoch file hold the
master's epoch from offset 0.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rmqpy.protocol.codes import RequestCode
from rmqpy.store.epoch import read_epoch_file
from tests.interop import clients, jvm, servers
from tests.interop.test_ha_java import _commit_log
from tests.interop.waiting import wait_until

pytestmark = pytest.mark.interop

VERSION = "5.3.3"
SIZES = {"mappedFileSizeCommitLog": 1024 * 1024, "mappedFileSizeConsumeQueue": 20 * 10000,
         "maxHashSlotNum": 20000, "maxIndexNum": 80000}
COUNT = 2500
BODY = 600  # ~2 MB of records: the copy crosses commit log files


def _runtime(addr: str) -> dict[str, str]:
    code, remark, _ext, body = jvm.remoting_request(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert code == 0, remark
    return json.loads(body)["table"]


def _acked(addr: str, end: int) -> dict | None:
    """The Java master's HA connection entry (GET_BROKER_HA_STATUS) that acknowledged ``end``."""
    code, remark, _ext, body = jvm.remoting_request(addr, 907)
    assert code == 0, remark
    info = json.loads(body)
    return next((c for c in info.get("haConnectionInfo") or [] if c.get("slaveAckOffset", -1) >= end), None)


def test_rmqpy_replica_copies_a_java_controller_mode_master(java_built, client_host, tmp_path):
    ip = client_host.host_ip
    controller_port = servers.free_port()
    ns = jvm.start_java_namesrv(VERSION, workdir=tmp_path / "ns", props={
        "bindAddress": "0.0.0.0", "enableControllerInNamesrv": True, "controllerDLegerGroup": "g1",
        "controllerDLegerPeers": f"n0-{ip}:{controller_port}", "controllerDLegerSelfId": "n0",
        "controllerStorePath": str(tmp_path / "ns" / "controller"), "mappedFileSize": 4 * 1024 * 1024})
    broker = None
    try:
        ns_addr = f"{ip}:{ns.port}"
        broker = jvm.start_java_broker(VERSION, tmp_path / "master", ns_addr, {
            "brokerClusterName": "AsCluster", "brokerName": "broker-as", "brokerId": -1, "brokerRole": "SLAVE",
            "enableControllerMode": True, "controllerAddr": f"{ip}:{controller_port}", "bindAddress": "0.0.0.0",
            **SIZES}, broker_ip=ip, wait_registered=False)
        addr = f"{ip}:{broker.port}"
        wait_until(lambda: jvm.broker_registered(ns_addr, addr, "TBW102"), 60,
                   what="the Java broker elected master and registered", diag=lambda: broker.log_tail(40))
        topic = "TopicAutoSwitch"
        ev = clients.harness(client_host, VERSION, ["produce", "-n", ns_addr, "-t", topic, "-c", str(COUNT),
                                                    "--body-size", str(BODY), "--keys", "k{i}"],
                             timeout=120, check=False)
        assert ev.done and ev.done.get("ok"), (ev.errors[:5], broker.log_tail(40))
        assert {e.get("status") for e in ev.of("sent")} == {"SEND_OK"}
        end = int(_runtime(addr)["commitLogMaxOffset"])
        assert end > SIZES["mappedFileSizeCommitLog"]
        replica = tmp_path / "replica"
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.interop.autoswitch_replica", "--store", str(replica),
             "--master-ha", f"{ip}:{broker.port + 1}", "--broker-id", "2", "--until", str(end), "--timeout", "40",
             "--linger", "5", *(f"{k}={v}" for k, v in SIZES.items())],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            cwd=str(Path(__file__).resolve().parents[2]))
        try:
            # the Java master parsed the replica's reports: its HA status lists the connection
            # with everything acknowledged
            seen = wait_until(lambda: _acked(addr, end), 45, step=0.2,
                              what="the Java master saw the replica acknowledge its end",
                              diag=lambda: broker.log_tail(20))
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, (out, err[-4000:], broker.log_tail(30))
        result = json.loads(out.strip().splitlines()[-1])
        assert result["maxOffset"] >= end
        assert _commit_log(replica, end) == _commit_log(tmp_path / "master" / "store", end)
        java_epochs = read_epoch_file(str(tmp_path / "master" / "store" / "epochFileCheckpoint"))
        assert [(e.epoch, e.start_offset) for e in java_epochs] == [(1, 0)]
        assert result["epochs"] == [[1, 0]]
        assert read_epoch_file(str(replica / "epochFileCheckpoint")) == java_epochs
        assert result["confirmOffset"] >= end  # the Java master's confirm offset: its max offset
        assert seen["slaveAckOffset"] >= end and seen["transferFromWhere"] >= end, seen
    finally:
        if broker is not None:
            broker.kill9()
        ns.kill9()
