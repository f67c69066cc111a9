"""kill -9 while a SYNC_FLUSH writer runs on the real reactor: every acknowledged
message must survive, no torn record may be returned, CQs must agree with the log."""

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

from twisted.internet.task import Clock

from rmqpy.protocol.message import decode_record
from rmqpy.store.message_store import GetMessageStatus, MessageStore

from .conftest import STORE_HOST, small_config

WRITER = textwrap.dedent("""
    import sys
    from twisted.internet import reactor, defer
    from rmqpy.protocol.message import MessageExtBrokerInner
    from rmqpy.store.config import MessageStoreConfig
    from rmqpy.store.message_store import MessageStore
    root, start = sys.argv[1], int(sys.argv[2])
    cfg = MessageStoreConfig(storePathRootDir=root, mappedFileSizeCommitLog=64 * 1024,
                             mappedFileSizeConsumeQueue=20 * 50, maxHashSlotNum=64, maxIndexNum=256,
                             flushDiskType="SYNC_FLUSH")
    s = MessageStore(cfg, ("127.0.0.1", 10911), reactor)
    s.load(); s.start()
    n = [start]
    def ack(r, uniq):
        a = r.append_message_result
        sys.stdout.write("ACK %s %d %d %d\\n" % (uniq, a.wrote_offset, a.logics_offset, r.put_message_status.value))
        sys.stdout.flush()
    def batch():
        ds = []
        for _ in range(16):
            i = n[0]; n[0] += 1
            uniq = "U%08d" % i
            m = MessageExtBrokerInner(topic="K", queue_id=i % 3, body=(b"%d." % i) * (1 + i % 40),
                                      properties={"UNIQ_KEY": uniq, "TAGS": "t%d" % (i % 5)})
            ds.append(s.put_message(m).addCallback(ack, uniq))
        defer.DeferredList(ds).addCallback(lambda _: reactor.callLater(0, batch))
    reactor.callWhenRunning(batch)
    sys.stdout.write("READY\\n"); sys.stdout.flush()
    reactor.run()
""")


def _run_and_kill(root, start, delay):
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(start)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    line = p.stdout.readline()
    assert line.strip() == b"READY", p.stderr.read()
    time.sleep(delay)
    os.kill(p.pid, signal.SIGKILL)
    out, err = p.communicate()
    acks = {}
    for ln in (line + out).decode().splitlines():
        parts = ln.split()
        if len(parts) == 5 and parts[0] == "ACK" and parts[4] == "0":
            acks[parts[1]] = (int(parts[2]), int(parts[3]))
    return acks


def _check(root, acked):
    s = MessageStore(small_config(root), STORE_HOST, Clock())
    assert s.load()
    try:
        assert not s.last_exit_ok
        by_uniq = {}
        for q in range(3):
            mx = s.get_max_offset_in_queue("K", q)
            off = s.get_min_offset_in_queue("K", q)
            while off < mx:
                g = s.get_message("G", "K", q, off, 32)
                assert g.status == GetMessageStatus.FOUND, (q, off, g.status)
                for i, raw in enumerate(g.message_list):
                    m = decode_record(raw, check_crc=True)  # no torn record
                    assert m.queue_id == q and m.queue_offset == off + i
                    assert s.get_commit_log_offset_in_queue("K", q, off + i) == m.commit_log_offset
                    by_uniq[m.uniq_key] = (m.commit_log_offset, m.queue_offset)
                off = g.next_begin_offset
        for uniq, pos in acked.items():
            assert by_uniq.get(uniq) == pos, f"acknowledged {uniq} at {pos} lost or moved ({by_uniq.get(uniq)})"
        # commit log walk agrees with the CQs
        n = sum(1 for _off, d in s.commit_log.iter_records(s.get_min_phy_offset()) if d.success)
        assert n == len(by_uniq)
        return len(by_uniq)
    finally:
        s.shutdown()


def test_kill9_sync_flush(tmp_path):
    root = tmp_path / "store"
    rnd = random.Random(1234)
    acked = {}
    start = 0
    for _round in range(4):
        acks = _run_and_kill(root, start, rnd.uniform(0.3, 1.2))
        assert acks, "writer acknowledged nothing"
        acked.update(acks)
        total = _check(root, acked)
        start += 100000
        assert total >= len(acked)
