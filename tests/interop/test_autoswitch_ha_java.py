"""Issue 28, slice 2: AutoSwitch HA between rmqpy and Java 5.3.3, both ways.

test_rmqpy_replica_copies_a_java_controller_mode_master: an rmqpy replica of a Java 5.3.3 master
in controller mode.

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

test_java_replica_is_truncated_by_and_copies_an_rmqpy_master: the other way, with Apache's own
replica classes but no Java broker: ``tests/interop/java/probe/AutoSwitchReplicaProbe.java``
builds a 5.3.3 ``DefaultMessageStore`` in controller mode (hence ``AutoSwitchHAService`` and
``AutoSwitchHAClient``) on a diverged store and makes it a replica of an rmqpy store
(``tests/interop/autoswitch_master.py``) of two later epochs: Java cuts its log where the rmqpy
master's epoch list says and copies the rest; its commit log, consume queues and epoch file must
then equal rmqpy's, byte for byte.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rmqpy.protocol.codes import RequestCode
from rmqpy.store.epoch import read_epoch_file
from tests import java_probe
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


PROBE = Path(__file__).resolve().parent / "java" / "probe" / "AutoSwitchReplicaProbe.java"


def _consume_queues(store: Path) -> dict[str, bytes]:
    root = store / "consumequeue"
    return {str(f.relative_to(root)): f.read_bytes() for f in sorted(root.rglob("*")) if f.is_file()}


def _rmqpy_store(root: Path, epoch: int | None, first: int, count: int) -> int:
    """An rmqpy store at ``root`` (on a task.Clock, in this process), master of ``epoch`` (None: as it
    is), with ``count`` more messages from number ``first``; closed; its max offset."""
    from twisted.internet.task import Clock

    from rmqpy.store.config import MessageStoreConfig
    from rmqpy.store.ha.autoswitch.api import AutoSwitchSettings
    from rmqpy.store.ha.autoswitch.service import AutoSwitchHAService
    from rmqpy.store.message_store import MessageStore
    from tests.interop.autoswitch_master import message

    clock = Clock()
    clock.advance(1_700_000_000)
    store = MessageStore(MessageStoreConfig.from_properties({"storePathRootDir": str(root),
                                                             **{k: str(v) for k, v in SIZES.items()}}),
                         ("127.0.0.1", 10911), clock)
    store.load()
    store.start()
    if epoch is not None:
        service = AutoSwitchHAService(clock, store, AutoSwitchSettings.from_store_config(store.config),
                                      store.blocking.run)
        service.change_to_master(epoch)
    for i in range(first, first + count):
        store.put_message(message(i))
    end = store.get_max_phy_offset()
    store.shutdown()
    return end


def test_java_replica_is_truncated_by_and_copies_an_rmqpy_master(java_built, tmp_path):
    """A was master of epoch 1 with M as its replica (M: a copy of A at offset S); A wrote 300
    more records M never got. M, elected for epochs 2 and 3, wrote 1,000 records. A, now Apache's
    Java replica (its store written by rmqpy, opened by Java's DefaultMessageStore), gets M's epochs
    [1-0, 2-S, 3-T] in the handshake, cuts its log at S and copies epochs 2 and 3."""
    classes = java_probe.compile_probe(PROBE)
    a, m = tmp_path / "a", tmp_path / "m"
    shared = _rmqpy_store(a, 1, 0, 1000)
    shutil.copytree(a, m)
    diverged = _rmqpy_store(a, None, 5000, 300)
    assert diverged > shared
    repo = str(Path(__file__).resolve().parents[2])
    master = subprocess.Popen(
        [sys.executable, "-m", "tests.interop.autoswitch_master", "--store", str(m), "--epochs", "2,3",
         "--first", "1000", "--count", "1000", "--timeout", "45", *(f"{k}={v}" for k, v in SIZES.items())],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=repo)
    try:
        assert master.stdout is not None
        first = json.loads(master.stdout.readline() or "{}")
        assert "haPort" in first, master.stderr.read() if master.stderr else ""
        end, epochs = first["maxOffset"], first["epochs"]
        assert epochs[:2] == [[1, 0], [2, shared]] and len(epochs) == 3 and shared < epochs[2][1] < end
        home = tmp_path / "java"
        home.mkdir()
        java = subprocess.run(
            [jvm.java_executable(), *jvm.jvm_options(256), f"-Duser.home={home}", f"-Djava.io.tmpdir={home}",
             "-Drmq.logback.configurationFile=rmq.broker.logback.xml", "-cp", java_probe.classpath(classes),
             "AutoSwitchReplicaProbe", str(a), f"127.0.0.1:{first['haPort']}", "2", str(end), "30000",
             str(servers.free_port()), str(SIZES["mappedFileSizeCommitLog"])],
            capture_output=True, text=True, timeout=90, cwd=str(home), env={**os.environ, "ROCKETMQ_HOME": str(home)})
        out, err = master.communicate(timeout=30)
    finally:
        if master.poll() is None:
            master.kill()
    lines = [line.split() for line in java.stdout.splitlines() if line.startswith(("result ", "epoch "))]
    assert java.returncode == 0 and lines, (java.stdout[-2000:], java.stderr[-2000:], err[-3000:])
    assert lines[0] == ["result", str(end), str(end)]  # its max and confirm offsets: the master's end
    assert [[int(x) for x in line[1:]] for line in lines[1:]] == epochs
    assert master.returncode == 0, err[-3000:]
    acked = json.loads(out.strip().splitlines()[-1])
    assert acked == {"acked": [[2, end]], "syncStateSet": [1, 2]}  # Java's reports; the replica caught up
    assert _commit_log(a, end) == _commit_log(m, end)  # A's 300 records gone, M's epochs 2 and 3 in their place
    assert _consume_queues(a) == _consume_queues(m)
    assert (a / "epochFileCheckpoint").read_bytes() == (m / "epochFileCheckpoint").read_bytes()
