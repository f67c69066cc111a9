"""Issue 11 rows 1, 2 and 9 against a real ``twistd rmq-broker``: what an attacker's client sees.

Row 1: UPDATE_AND_CREATE_TOPIC with 2,000,000,000 read/write queues, then the stats requests,
used to hang the reactor and grow RSS to 19.6 GB. Row 2: CONSUMER_SEND_MSG_BACK with group
``../../../../../../some/dir/x`` made a consume-queue file outside the store. Row 9: a
SEND_MESSAGE_V2 with bornTimestamp 2^63 left a partial record header past the write position.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import CreateTopicRequestHeader, GetConsumeStatsRequestHeader, TopicRequestHeader
from rmqpy.protocol.headers.broker import ConsumerSendMsgBackRequestHeader, SendMessageRequestHeaderV2
from rmqpy.protocol.message import decode_offset_msg_id, properties_to_string
from rmqpy.tools.blocking_client import BlockingClient
from tests.interop import servers

pytestmark = pytest.mark.interop

HOST = "127.0.0.1"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def invoke(addr: str, code: int, header=None, body: bytes | None = None) -> RemotingCommand:
    with BlockingClient(addr, timeout=10) as client:
        return client.invoke(RemotingCommand.request(code, header, body))


def send(addr: str, topic: str, born: int = 1_700_000_000_000) -> RemotingCommand:
    header = SendMessageRequestHeaderV2(a="PG", b=topic, c="TBW102", d=4, e=0, f=0, g=0, h=0,
                                        i=properties_to_string({"WAIT": "true"}), j=0, k=False, m=False)
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, b"hostile-names")
    request.ext_fields["g"] = str(born)  # as a client written apart from rmqpy would put it
    with BlockingClient(addr, timeout=10) as client:
        return client.invoke(request)


def create_topic(addr: str, topic: str, queues: int) -> RemotingCommand:
    h = CreateTopicRequestHeader(topic=topic, defaultTopic="TBW102", readQueueNums=queues, writeQueueNums=queues,
                                 perm=6, topicFilterType="SINGLE_TAG", topicSysFlag=0, order=False)
    return invoke(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, h)


def tree(top: Path) -> set[str]:
    out = set()
    for d, dirs, files in os.walk(top):
        out.update(os.path.join(d, n) for n in dirs + files)
    return out


def verify(store: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqpy.store", "verify", str(store)], capture_output=True,
                          text=True, timeout=120, cwd=str(servers.ROOT))


@pytest.fixture
def cluster(tmp_path):
    with servers.Cluster(tmp_path, HOST) as c:
        yield c


def test_row1_huge_queue_counts_refused_others_served_rss_bounded(cluster):
    addr, pid = cluster.broker_addr, cluster.broker.proc.pid
    assert send(addr, "Warm").code == ResponseCode.SUCCESS
    rss0 = rss_kib(pid)
    served: list[float] = []
    stop = threading.Event()

    def other_client() -> None:  # a well-behaved producer all along
        while not stop.is_set():
            t0 = time.monotonic()
            assert send(addr, "Bystander").code == ResponseCode.SUCCESS
            served.append(time.monotonic() - t0)

    bystander = threading.Thread(target=other_client, daemon=True)
    bystander.start()
    try:
        resp = create_topic(addr, "Huge", 2_000_000_000)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark == "readQueueNums 2000000000 is out of range [0, 1024] (broker setting maxTopicQueueNums)"
        resp = invoke(addr, RequestCode.GET_TOPIC_STATS_INFO, TopicRequestHeader(topic="Huge"))
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        # the largest allowed topic: every stats request answers, in seconds
        assert create_topic(addr, "Widest", 1024).code == ResponseCode.SUCCESS
        for _ in range(3):
            resp = invoke(addr, RequestCode.GET_TOPIC_STATS_INFO, TopicRequestHeader(topic="Widest"))
            assert resp.code == ResponseCode.SUCCESS
            assert len(fastjson.loads(resp.body)["offsetTable"]) == 1024
            resp = invoke(addr, RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader("G", "Widest"))
            assert resp.code in (ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE)
    finally:
        stop.set()
        bystander.join(15)
    assert served and max(served) < 5, f"the other client waited {max(served or [0]):.1f} s"
    assert rss_kib(pid) - rss0 < 100 * 1024, f"RSS {rss0} -> {rss_kib(pid)} KiB"


TRAVERSALS = ["../../../../../../some/dir/x", "../../../escaped", "..", "a/../../escaped2"]


def test_row2_send_back_with_traversal_group_refused_nothing_outside_store(cluster, tmp_path):
    addr = cluster.broker_addr
    store = tmp_path / "broker" / "store"
    resp = send(addr, "T")
    assert resp.code == ResponseCode.SUCCESS
    _, phy = decode_offset_msg_id(resp.ext_fields["msgId"])
    outside_before = {p for p in tree(tmp_path) if not p.startswith(str(store) + os.sep)}
    cq_dir = store / "consumequeue"
    for group in TRAVERSALS:
        for delay in (-1, 0):  # %DLQ%<group> and %RETRY%<group>
            h = ConsumerSendMsgBackRequestHeader(offset=phy, group=group, delayLevel=delay, originMsgId=None,
                                                 originTopic="T", unitMode=False, maxReconsumeTimes=None)
            resp = invoke(addr, RequestCode.CONSUMER_SEND_MSG_BACK, h)
            assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, (group, resp.remark)
            assert resp.remark.startswith(f"subscription group not exist, {group} ")
            for prefix in ("%DLQ%", "%RETRY%"):
                assert not os.path.lexists(os.path.normpath(os.path.join(cq_dir, prefix + group)))
    assert {p for p in tree(tmp_path) if not p.startswith(str(store) + os.sep)} == outside_before
    assert not any(name.startswith(("%DLQ%.", "%RETRY%.")) for name in os.listdir(cq_dir))
    # the broker still serves, and a proper group still gets its DLQ
    h = ConsumerSendMsgBackRequestHeader(offset=phy, group="GoodGroup", delayLevel=-1, originMsgId=None,
                                         originTopic="T", unitMode=False, maxReconsumeTimes=None)
    assert invoke(addr, RequestCode.CONSUMER_SEND_MSG_BACK, h).code == ResponseCode.SUCCESS


def test_row9_born_timestamp_2_63_refused_nothing_written_verify_clean(cluster, tmp_path):
    addr = cluster.broker_addr
    store = tmp_path / "broker" / "store"
    assert send(addr, "T9").code == ResponseCode.SUCCESS
    commitlog = store / "commitlog" / ("0" * 20)
    before = commitlog.read_bytes()  # the broker's MAP_SHARED writes show in read() at once
    for born in (2 ** 63, -(2 ** 63) - 1, 2 ** 64 + 5):
        resp = send(addr, "T9", born)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark == f"HeaderError: header field g='{born}' is outside the Java long range"
    assert commitlog.read_bytes() == before, "the refused sends changed the commit log"
    resp = send(addr, "T9", 2 ** 63 - 1)  # the largest Java long is a valid bornTimestamp
    assert resp.code == ResponseCode.SUCCESS
    cluster.broker.stop()
    cluster.broker.start()
    assert send(cluster.broker_addr, "T9").code == ResponseCode.SUCCESS
    cluster.broker.stop()
    result = verify(store)
    assert result.returncode == 0, result.stdout + result.stderr
