"""Issue 13 item 5: one logging path. The store logs through stdlib ``logging``; the broker's
tap bridges it into Twisted's logger, so after ``kill -9`` a real ``twistd rmq-broker`` says
in its own log that it recovered abnormally, and how much, once; a clean restart says it
recovered normally. Before the bridge the store's info lines went nowhere.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.tools.blocking_client import BlockingClient

from .servers import Cluster

pytestmark = pytest.mark.interop

TOPIC = "TRecoveryLog"
N = 200


def _send(client: BlockingClient, i: int) -> RemotingCommand:
    ext = {"a": "PGRecovery", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(i % 4), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": f"KEYS\x01k{i}\x02WAIT\x01true\x02",
           "j": "0", "k": "false", "m": "false", "n": "broker-py"}
    return client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, body=b"r" * 512, ext_fields=ext))


def _since(log: Path, start: int) -> list[str]:
    return log.read_bytes()[start:].decode(errors="replace").splitlines()


def test_kill9_then_restart_logs_the_abnormal_recovery(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, "127.0.0.1")
    try:
        broker = cluster.broker
        with BlockingClient(cluster.broker_addr) as client:
            for i in range(N):
                assert _send(client, i).code == 0
        broker.kill9()
        mark = broker.log.stat().st_size
        broker.start()
        lines = _since(broker.log, mark)
        store_lines = [line for line in lines if "[rmqpy.store." in line]
        assert [line for line in store_lines if "message store load: last exit ABNORMAL" in line], lines
        abnormal = [line for line in store_lines if "recover abnormally" in line]
        assert len(abnormal) == 1, store_lines
        # twistd's format: "<time> [rmqpy.store.message_store#info] recover abnormally ..."
        assert "[rmqpy.store.message_store#info]" in abnormal[0]
        m = re.search(r"re-dispatched (\d+) records", abnormal[0])
        assert m and int(m.group(1)) >= N, abnormal[0]
        assert not any("recover normally" in line for line in store_lines)

        broker.stop()  # a clean stop: the next start recovers normally
        mark = broker.log.stat().st_size
        broker.start()
        store_lines = [line for line in _since(broker.log, mark) if "[rmqpy.store." in line]
        assert any("message store load: last exit OK" in line for line in store_lines), store_lines
        assert len([line for line in store_lines if "recover normally" in line]) == 1, store_lines
        assert not any("recover abnormally" in line for line in store_lines)
        with BlockingClient(cluster.broker_addr) as client:  # and it serves what it recovered
            r = client.invoke(RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                                      ext_fields={"topic": TOPIC, "queueId": "0"}))
            assert (r.code, int(r.ext_fields["offset"])) == (0, N // 4)
    finally:
        cluster.close()
