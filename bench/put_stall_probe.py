"""Where a put's worst latencies come from: the store on the real reactor, puts paced at a
steady rate, every put timed, every pause of the reactor thread measured, the cyclic GC's
collections timed, commit log rolls and consume queue file creations counted.

    python bench/put_stall_probe.py [--rate 5000] [--seconds 10] [--body 1024]
                                    [--file-mb 16] [--queues 8] [--flush ASYNC_FLUSH] [--top 10]

Not a test. Small commit log files (``--file-mb``) make it roll often, so that what a roll
costs on the put path shows. Prints the put latency percentiles, the longest puts with what
happened in them (a roll, a GC collection), the longest reactor pauses between ticks of a 1 ms
timer (a put never sees those, but a client's request waiting in the socket does), and the GC
pauses.
"""
from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from twisted.internet import reactor, task  # noqa: E402

from rmqpy.protocol.message import MessageExtBrokerInner  # noqa: E402
from rmqpy.store.config import MessageStoreConfig  # noqa: E402
from rmqpy.store.message_store import MessageStore  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=int, default=5000, help="puts per second")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--file-mb", type=int, default=16, help="mappedFileSizeCommitLog in MiB")
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--flush", default="ASYNC_FLUSH")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()

    root = tempfile.mkdtemp(prefix="rmqpy-stall-", dir=a.dir)
    cfg = MessageStoreConfig(storePathRootDir=root, flushDiskType=a.flush,
                             mappedFileSizeCommitLog=a.file_mb << 20, mappedFileSizeConsumeQueue=300000 * 20)
    store = MessageStore(cfg, ("127.0.0.1", 10911), reactor)
    store.load()
    store.start()

    gc_pauses: list[tuple[float, float, int]] = []  # (start, seconds, generation)
    gc_t0 = [0.0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_t0[0] = time.perf_counter()
        else:
            gc_pauses.append((gc_t0[0], time.perf_counter() - gc_t0[0], info["generation"]))
    gc.callbacks.append(on_gc)

    body = os.urandom(a.body // 2).hex().encode()[:a.body]
    puts: list[tuple[float, float, int]] = []  # (seconds, start, files after)
    lags: list[tuple[float, float]] = []
    n = [0]
    t_start = time.perf_counter()
    last_tick = [t_start]
    per_tick = max(1, a.rate // 1000)

    def tick() -> None:
        now = time.perf_counter()
        lags.append((now - last_tick[0], last_tick[0]))
        last_tick[0] = now
        if now - t_start > a.seconds:
            loop.stop()
            reactor.stop()
            return
        want = int((now - t_start) * a.rate)
        k = 0
        while n[0] < want and k < per_tick * 50:
            i = n[0]
            n[0] += 1
            k += 1
            m = MessageExtBrokerInner(topic="Stall", queue_id=i % a.queues, body=body,
                                      properties={"UNIQ_KEY": "U%016d" % i, "KEYS": "k%d" % i})
            t = time.perf_counter()
            store.put_message_now(m)
            puts.append((time.perf_counter() - t, t, len(store.commit_log.queue.files)))

    loop = task.LoopingCall(tick)
    reactor.callWhenRunning(loop.start, 0.001)
    reactor.run()
    elapsed = time.perf_counter() - t_start
    store.shutdown()
    shutil.rmtree(root, ignore_errors=True)
    gc.callbacks.remove(on_gc)

    lat = sorted(p[0] for p in puts)

    def pct(q: float) -> float:
        return lat[min(len(lat) - 1, int(len(lat) * q))] * 1e3

    rolls = puts[-1][2] - 1 if puts else 0
    print(f"{len(puts)} puts in {elapsed:.1f} s ({len(puts) / elapsed:,.0f}/s), {a.body} B bodies, "
          f"{a.file_mb} MiB commit log files ({rolls} rolls), {a.flush}, load average {os.getloadavg()[0]:.1f}")
    print(f"put ms: p50 {pct(0.5):.3f}  p99 {pct(0.99):.3f}  p99.9 {pct(0.999):.3f}  max {lat[-1] * 1e3:.2f}")
    prev_files = {}
    for i, p in enumerate(puts):
        prev_files[p[1]] = puts[i - 1][2] if i else 1
    rolled = sorted(p[0] for p in puts if p[2] != prev_files[p[1]])
    if rolled:
        print(f"puts that rolled the commit log ({len(rolled)}): median {rolled[len(rolled) // 2] * 1e3:.3f} ms, "
              f"max {rolled[-1] * 1e3:.3f} ms")
    print(f"longest {a.top} puts:")
    for secs, start, files in sorted(puts, reverse=True)[:a.top]:
        why = []
        if files != prev_files[start]:
            why.append("rolled to a new commit log file")
        for g0, gs, gen in gc_pauses:
            if start <= g0 <= start + secs:
                why.append(f"GC gen{gen} {gs * 1e3:.2f} ms")
        print(f"  {secs * 1e3:8.2f} ms at +{start - t_start:6.2f} s  {'; '.join(why) or '-'}")
    print(f"longest {a.top} reactor pauses (1 ms timer):")
    for gap, at in sorted(lags, reverse=True)[:a.top]:
        print(f"  {gap * 1e3:8.2f} ms at +{at - t_start:6.2f} s")
    gcs = sorted(gc_pauses, key=lambda g: -g[1])
    gen2 = sum(1 for g in gc_pauses if g[2] == 2)
    print(f"GC: {len(gc_pauses)} collections, {gen2} of generation 2, "
          f"{sum(g[1] for g in gc_pauses) * 1e3:.1f} ms in all; longest: "
          + ", ".join(f"gen{g[2]} {g[1] * 1e3:.2f} ms" for g in gcs[:5]))


if __name__ == "__main__":
    main()
