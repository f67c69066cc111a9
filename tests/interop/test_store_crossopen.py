"""Cross-opening the store with the real Java broker (facts §6, §7).

(a) a Java broker stores messages sent by the Java producer; after the broker
    stops, rmqpy opens that store and returns the same messages (bytes, ids,
    offsets, tags hash in the consume queue, key index);
(b) rmqpy writes a store; a Java broker starts on it and a Java consumer reads
    every message with the ids/offsets rmqpy assigned.

The Java name server and broker run on the host, bound to every address and advertising the
client host's ``host_ip``; the Java producer and consumer run on the module's client host (its
own network namespace, or a podman container), as in every interop module.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from twisted.internet.task import Clock

from rmqpy.broker.configfile import write_config
from rmqpy.protocol import fastjson
from rmqpy.protocol.message import MessageExtBrokerInner, create_offset_msg_id, create_uniq_id, decode_record, java_string_hash
from rmqpy.store.config import MessageStoreConfig
from rmqpy.store.message_store import GetMessageStatus, MessageStore
from tests.interop import clients, jvm

pytestmark = pytest.mark.interop

VERSIONS = ("4.9.8", "5.3.3")
N = 60


def store_config(root: Path, **kw) -> MessageStoreConfig:
    d = jvm.BROKER_DEFAULTS
    return MessageStoreConfig(storePathRootDir=str(root), storePathCommitLog=str(root / "commitlog"),
                              mappedFileSizeCommitLog=int(d["mappedFileSizeCommitLog"]),
                              mappedFileSizeConsumeQueue=int(d["mappedFileSizeConsumeQueue"]),
                              maxHashSlotNum=int(d["maxHashSlotNum"]), maxIndexNum=int(d["maxIndexNum"]), **kw)


@pytest.fixture(scope="module", params=VERSIONS)
def version(request):
    return request.param


@pytest.fixture
def namesrv(java_built, version, tmp_path):
    ns = jvm.start_java_namesrv(version, workdir=tmp_path / "ns", props={"bindAddress": "0.0.0.0"})
    yield ns
    ns.stop()


def start_broker(version, home: Path, client_host, namesrv, port: int) -> jvm.JavaProcess:
    """The Java broker on the host, reachable from (and advertising) the client host's host_ip."""
    return jvm.start_java_broker(version, home, f"{client_host.host_ip}:{namesrv.port}", {"bindAddress": "0.0.0.0"},
                                 listen_port=port, broker_ip=client_host.host_ip)


def _verify_tool(root: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    p = subprocess.run([sys.executable, "-m", "rmqpy.store", "verify", str(root)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("stop", ["clean", "kill9"])
def test_java_writes_rmqpy_reads(version, namesrv, client_host, tmp_path, stop):
    home = tmp_path / "broker"
    port = jvm.free_broker_port()
    broker = start_broker(version, home, client_host, namesrv, port)
    try:
        ev = clients.harness(client_host, version,
                             ["produce", "-n", f"{client_host.host_ip}:{namesrv.port}", "-t", "XOPEN_A", "-c", str(N),
                              "--tags", "TagA,TagB,TagC", "--keys", "key-{i}", "--body", "body-{i}",
                              "--queue-mod", "4"], timeout=180)
        sent = ev.of("sent")
        assert len(sent) == N, ev.errors
        # the Java broker stored them as host_ip:port, the address it advertises (offsetMsgId starts with it)
        assert {e["offsetMsgId"][:8] for e in sent} == {socket.inet_aton(client_host.host_ip).hex().upper()}
    finally:
        if stop == "kill9":
            time.sleep(1.5)  # let the broker's reput catch up a little; recovery redoes the rest
            broker.kill9()
        else:
            broker.stop()
    root = home / "store"
    s = MessageStore(store_config(root), (client_host.host_ip, port), Clock())
    assert s.load()
    try:
        assert s.last_exit_ok == (stop == "clean")
        for e in sent:
            q, qoff = e["queueId"], e["queueOffset"]
            g = s.get_message("G", "XOPEN_A", q, qoff, 1)
            assert g.status == GetMessageStatus.FOUND, (e, g.status)
            m = decode_record(g.message_list[0])
            assert m.queue_offset == qoff and m.queue_id == q
            assert create_offset_msg_id(m.store_host, m.commit_log_offset) == e["offsetMsgId"]
            assert m.uniq_key == e["msgId"]
            assert m.body == f"body-{e['i']}".encode()
            assert m.keys == f"key-{e['i']}" and m.tags == e["tags"]
            assert m.born_host[0] == client_host.client_ip and m.store_host == (client_host.host_ip, port)
            unit = s.find_consume_queue("XOPEN_A", q).get_unit(qoff)
            assert unit == (m.commit_log_offset, m.store_size, java_string_hash(e["tags"]))
            r = s.query_message("XOPEN_A", f"key-{e['i']}", 32, 0, 2**62)
            assert [decode_record(x).uniq_key for x in r.message_list] == [e["msgId"]]
        assert s.look_message_by_offset(s.get_commit_log_offset_in_queue("XOPEN_A", 0, 0)) is not None
    finally:
        s.shutdown()
    rep = _verify_tool(root)
    assert rep["ok"] and rep["records"] >= N


def test_rmqpy_writes_java_reads(version, namesrv, client_host, tmp_path):
    home = tmp_path / "broker"
    home.mkdir()
    root = home / "store"
    port = jvm.free_broker_port()
    topic = "XOPEN_B"
    clock = Clock()
    clock.advance(time.time())
    # written as the Java broker that takes it over will be addressed: host_ip:port
    s = MessageStore(store_config(root), (client_host.host_ip, port), clock)
    assert s.load()
    s.start()
    expected = {}
    for i in range(N):
        q = i % 4
        uniq = create_uniq_id("127.0.0.1")
        m = MessageExtBrokerInner(topic=topic, queue_id=q, body=f"rmqpy-{i}".encode(),
                                  properties={"TAGS": "T%d" % (i % 3), "KEYS": f"k{i}", "UNIQ_KEY": uniq,
                                              "WAIT": "true"},
                                  born_host=(client_host.client_ip, 50000), born_timestamp=int(time.time() * 1000))
        out = []
        s.put_message(m).addCallback(out.append)
        a = out[0].append_message_result
        expected[uniq] = (q, a.logics_offset, a.msg_id, f"rmqpy-{i}")
        clock.advance(0.001)
    s.shutdown()
    write_config(str(root / "config" / "topics.json"), fastjson.dumps({
        "dataVersion": {"counter": 1, "timestamp": int(time.time() * 1000)},
        "topicConfigTable": {topic: {"order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG",
                                     "topicName": topic, "topicSysFlag": 0, "writeQueueNums": 4}}}, pretty=True))
    broker = start_broker(version, home, client_host, namesrv, port)
    ns_addr = f"{client_host.host_ip}:{namesrv.port}"
    try:
        ev = clients.harness(client_host, version, ["consume-lite", "-n", ns_addr, "-t", topic, "-g", "XOPEN_G",
                                                    "-c", str(N), "--from", "first", "--timeout-ms", "60000"],
                             timeout=180)
        got = ev.of("received")
        assert len(got) == N, (ev.errors, broker.log_tail())
        for e in got:
            q, qoff, mid, body = expected[e["msgId"]]
            assert (e["queueId"], e["queueOffset"], e["offsetMsgId"], e["body"]) == (q, qoff, mid, body)
            assert e["bodyCRC"] == zlib.crc32(body.encode()) & 0x7FFFFFFF
        # the Java broker keeps appending after our data
        ev = clients.harness(client_host, version, ["produce", "-n", ns_addr, "-t", topic, "-c", "4",
                                                    "--queue-mod", "4"], timeout=120)
        assert [e["queueOffset"] for e in ev.of("sent")] == [N // 4] * 4
    finally:
        broker.stop()
    # and we can read what Java appended
    s = MessageStore(store_config(root), (client_host.host_ip, port), Clock())
    assert s.load()
    try:
        for q in range(4):
            assert s.get_max_offset_in_queue(topic, q) == N // 4 + 1
    finally:
        s.shutdown()
