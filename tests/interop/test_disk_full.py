"""A full disk is an error, never a crash (issue 11, row 4): a real ``twistd rmq-broker``
with its store on a 64 MiB tmpfs, sent to until the disk is full.

Before the fix the broker died of SIGBUS (mapped writes into the holes of sparse files on
a full tmpfs) and the producer saw a dropped connection.  Needs root for ``mount``; skipped
with the reason otherwise.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.tools.blocking_client import BlockingClient

from .servers import ROOT, Cluster

pytestmark = pytest.mark.interop

TOPIC = "TDiskFull"
BODY = b"d" * (128 * 1024)
FILLER = 36 << 20


def _mount_tmpfs(path: Path, size: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the CI runs as root)")
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"mount -t tmpfs is not permitted here: {r.stderr.strip()}")


def _send(client: BlockingClient, i: int) -> RemotingCommand:
    ext = {"a": "PGDiskFull", "b": TOPIC, "c": "TBW102", "d": "1", "e": "0", "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": f"KEYS\x01k{i}\x02WAIT\x01true\x02",
           "j": "0", "k": "false", "m": "false", "n": "broker-py"}
    return client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, body=BODY, ext_fields=ext))


def _pull(client: BlockingClient, offset: int) -> RemotingCommand:
    pull = {"consumerGroup": "GDiskFull", "topic": TOPIC, "queueId": "0", "queueOffset": str(offset),
            "maxMsgNums": "4", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
            "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
    return client.invoke(RemotingCommand.request(RequestCode.PULL_MESSAGE, ext_fields=pull))


def _max_offset(client: BlockingClient) -> int:
    r = client.invoke(RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                              ext_fields={"topic": TOPIC, "queueId": "0"}))
    assert r.code == 0, r.remark
    return int(r.ext_fields["offset"])


def _verify(store: Path) -> dict:
    r = subprocess.run([sys.executable, "-m", "rmqpy.store", "verify", str(store)], cwd=str(ROOT),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def test_full_disk_refuses_sends_keeps_serving_and_loses_nothing(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "64m")
    cluster = None
    try:
        filler = disk / "filler"
        with open(filler, "wb") as f:  # most of the disk, freed later to give space back
            f.write(bytes(FILLER))
        store = disk / "store"
        cluster = Cluster(tmp_path, "127.0.0.1", broker_props={
            "storePathRootDir": store, "mappedFileSizeCommitLog": 8 << 20,
            "mappedFileSizeConsumeQueue": 3000 * 20, "maxHashSlotNum": 1000, "maxIndexNum": 4000,
            "cleanFileForciblyEnable": False})
        acked = 0
        with BlockingClient(cluster.broker_addr, timeout=10) as client:
            refused = None
            for i in range(400):  # 28 MiB of free space hold fewer than 224 of these
                r = _send(client, i)
                if r.code != 0:
                    refused = r
                    break
                acked += 1
            assert refused is not None, "the disk never filled up"
            assert acked > 100, acked  # two commit log files and more
            assert refused.code == 14, (refused.code, refused.remark)  # SERVICE_NOT_AVAILABLE
            assert refused.remark.startswith("service not available now. It may be caused by one of the "
                                             "following reasons: the broker's disk is full [CL: ")
            r = _send(client, -1)  # refused again, on the same connection
            assert r.code == 14
            assert cluster.broker.proc.poll() is None, cluster.broker.log_tail()
            # reads are served meanwhile
            p = _pull(client, 0)
            assert p.code == 0 and p.body and BODY in p.body, (p.code, p.remark)
            assert _max_offset(client) == acked
            # space comes back: sends are accepted again
            filler.unlink()
            deadline = time.time() + 5
            while True:
                r = _send(client, acked)
                if r.code == 0 or time.time() > deadline:
                    break
                time.sleep(0.2)
            assert r.code == 0, (r.code, r.remark)
            acked += 1
        cluster.broker.stop()
        assert "Server Shut Down" in cluster.broker.log_tail(), cluster.broker.log_tail()
        report = _verify(store)
        assert report["ok"], report["problems"]
        assert report["records"] == acked and report["consumeQueueUnits"] == acked
        cluster.broker.start()
        with BlockingClient(cluster.broker_addr, timeout=10) as client:
            assert _max_offset(client) == acked
            p = _pull(client, acked - 1)
            assert p.code == 0 and BODY in p.body
    finally:
        if cluster is not None:
            cluster.close()
            print(cluster.broker.log_tail(3000))
        subprocess.run(["umount", "-l", str(disk)], check=False)
