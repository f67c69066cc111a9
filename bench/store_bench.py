"""Message store benchmark: puts/s and MB/s for 128 B and 1 KiB bodies, single and
batched puts, ASYNC_FLUSH and SYNC_FLUSH, against raw sequential disk bandwidth
measured here on the same filesystem.

    python bench/store_bench.py [--dir DIR] [--seconds 3] [--raw-mb 256]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from twisted.internet import defer, task  # noqa: E402

from rmqpy.protocol.message import MessageExtBatch, MessageExtBrokerInner, encode_batch_body  # noqa: E402
from rmqpy.store.config import MessageStoreConfig  # noqa: E402
from rmqpy.store.message_store import MessageStore  # noqa: E402


def raw_disk(path: str, mb: int) -> tuple[float, float, float]:
    """Sequential write (+fsync) and read bandwidth in MB/s, and fsync latency (ms)."""
    fn = os.path.join(path, "raw.bin")
    chunk = os.urandom(1 << 20)
    t = time.perf_counter()
    fd = os.open(fn, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for _ in range(mb):
        os.write(fd, chunk)
    os.fsync(fd)
    os.close(fd)
    w = mb / (time.perf_counter() - t)
    t = time.perf_counter()
    fd = os.open(fn, os.O_RDONLY)
    while os.read(fd, 1 << 20):
        pass
    os.close(fd)
    r = mb / (time.perf_counter() - t)
    # small-write fsync latency
    fd = os.open(fn, os.O_WRONLY)
    lat = []
    for i in range(50):
        os.pwrite(fd, b"x" * 128, i * 4096)
        t = time.perf_counter()
        os.fsync(fd)
        lat.append(time.perf_counter() - t)
    os.close(fd)
    os.unlink(fn)
    lat.sort()
    return w, r, lat[len(lat) // 2] * 1000


def make_store(root: str, flush: str, reactor) -> MessageStore:
    shutil.rmtree(root, ignore_errors=True)
    cfg = MessageStoreConfig(storePathRootDir=root, flushDiskType=flush, mappedFileSizeCommitLog=256 << 20)
    s = MessageStore(cfg, ("127.0.0.1", 10911), reactor)
    s.load()
    s.start()
    return s


@defer.inlineCallbacks
def run_case(reactor, root, flush, body_size, batch, seconds, inflight):
    s = make_store(root, flush, reactor)
    body = os.urandom(body_size)
    props = {"TAGS": "TagA", "WAIT": "true"}
    n = 0
    nbytes = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    uniq = [0]

    def one():
        uniq[0] += 1
        if batch == 1:
            m = MessageExtBrokerInner(topic="BenchTopic", queue_id=uniq[0] % 4, body=body,
                                      properties={**props, "UNIQ_KEY": "%032X" % uniq[0]},
                                      born_host=("127.0.0.1", 40000), born_timestamp=0)
            return s.put_message(m)
        items = [(0, body, {"TAGS": "TagA", "UNIQ_KEY": "%032X" % (uniq[0] * 1000 + i)}) for i in range(batch)]
        return s.put_messages(MessageExtBatch(topic="BenchTopic", queue_id=uniq[0] % 4,
                                              body=encode_batch_body(items), properties_string="WAIT\x01true\x02",
                                              born_host=("127.0.0.1", 40000)))

    while time.perf_counter() < deadline:
        ds = [one() for _ in range(inflight)]
        results = yield defer.gatherResults(ds)
        for r in results:
            assert r.is_ok(), r
            n += r.append_message_result.msg_num
            nbytes += r.append_message_result.wrote_bytes
        if flush == "ASYNC_FLUSH":
            yield task.deferLater(reactor, 0, lambda: None)  # let timers (flush) run
    el = time.perf_counter() - t0
    # read back through get_message
    t1 = time.perf_counter()
    got = 0
    got_bytes = 0
    for q in range(4):
        off = 0
        mx = s.get_max_offset_in_queue("BenchTopic", q)
        while off < mx:
            g = s.get_message("G", "BenchTopic", q, off, 32)
            got += g.message_count
            got_bytes += g.buffer_total_size
            off = g.next_begin_offset
    rel = time.perf_counter() - t1
    s.shutdown()
    shutil.rmtree(root, ignore_errors=True)
    return n / el, nbytes / el / 1e6, (got / rel if rel else 0.0), (got_bytes / rel / 1e6 if rel else 0.0)


@defer.inlineCallbacks
def main(reactor, args):
    base = tempfile.mkdtemp(prefix="rmqpy-bench-", dir=args.dir)
    try:
        w, r, fs = raw_disk(base, args.raw_mb)
        print(f"raw disk ({base}): sequential write+fsync {w:.0f} MB/s, read {r:.0f} MB/s, "
              f"fsync(128 B) median {fs:.2f} ms")
        print("w ratio = store put MB/s / raw write MB/s; r ratio = get_message MB/s / raw read MB/s")
        print(f"{'flush':<12}{'body':>6}{'batch':>7}{'puts/s':>12}{'MB/s':>9}{'w ratio':>9}{'gets/s':>12}{'get MB/s':>10}{'r ratio':>9}")
        for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            for body in (128, 1024):
                for batch in (1, 32):
                    inflight = 64 if batch == 1 else 4
                    pps, mbs, gps, gmbs = yield run_case(reactor, os.path.join(base, "store"), flush, body, batch,
                                                   args.seconds, inflight)
                    print(f"{flush:<12}{body:>6}{batch:>7}{pps:>12.0f}{mbs:>9.1f}{mbs / w:>9.3f}{gps:>12.0f}{gmbs:>10.1f}{gmbs / r:>9.3f}",
                          flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None, help="directory on the disk to measure (default: tmp)")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--raw-mb", type=int, default=256)
    a = ap.parse_args()
    task.react(main, [a])
