"""What handing a batch's GIL-free work to another thread costs the thread that hands it (the fourth session).

    python bench/report/issue29/handoff_bench.py [BYTES] [--batches 4000] [--rounds 3]

Not a test. A reactor-like main thread does, per batch, ~50 us of Python and a C call that runs
without the GIL (``zlib.crc32`` of BYTES, which zlib does without the GIL above 5 KiB; 16 KiB
about 4 us, 64 KiB about 15 us here), and polls a pipe with ``select`` as the reactor does.
``inline``: the C call on the main thread. ``offload``: the main thread puts the batch on a
``queue.SimpleQueue``; a worker makes the call and writes a byte to the pipe (what
``reactor.callFromThread`` does to wake the reactor), which the main thread reads when ``select``
says so. Prints the main thread's CPU, the process's CPU and the wall time per batch: what a reput
thread for the dispatch's compiled loops (about 1.7k instructions per message, 54k per batch of
32) would save the reactor thread, against what the hand-off costs.
"""
from __future__ import annotations

import argparse
import os
import queue
import select
import threading
import time
import zlib


def _python_part() -> int:
    s = 0
    for i in range(1500):
        s += i * i
    return s


def inline(buf: bytes, n: int) -> tuple[float, float, float]:
    t0, c0, w0 = time.thread_time(), time.process_time(), time.perf_counter()
    for _ in range(n):
        _python_part()
        zlib.crc32(buf)
        select.select([], [], [], 0)
    return time.thread_time() - t0, time.process_time() - c0, time.perf_counter() - w0


def offload(buf: bytes, n: int) -> tuple[float, float, float]:
    jobs: queue.SimpleQueue[int | None] = queue.SimpleQueue()
    r, w = os.pipe()
    os.set_blocking(r, False)

    def worker() -> None:
        while jobs.get() is not None:
            zlib.crc32(buf)
            os.write(w, b"x")

    th = threading.Thread(target=worker)
    th.start()
    done = 0
    t0, c0, w0 = time.thread_time(), time.process_time(), time.perf_counter()
    for _ in range(n):
        _python_part()
        jobs.put(1)
        if select.select([r], [], [], 0)[0]:
            done += len(os.read(r, 4096))
    while done < n:
        select.select([r], [], [], 1)
        done += len(os.read(r, 4096))
    out = time.thread_time() - t0, time.process_time() - c0, time.perf_counter() - w0
    jobs.put(None)
    th.join()
    os.close(r)
    os.close(w)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bytes", type=int, nargs="?", default=16384)
    ap.add_argument("--batches", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    buf = os.urandom(a.bytes)
    times = []
    for _ in range(200):
        t = time.perf_counter()
        zlib.crc32(buf)
        times.append(time.perf_counter() - t)
    print(f"C call (crc32 of {a.bytes} B) {1e6 * min(times):.1f} us, load {os.getloadavg()[0]:.1f}; "
          "us per batch: main thread CPU / process CPU / wall")
    for _ in range(a.rounds):
        i, o = inline(buf, a.batches), offload(buf, a.batches)
        print("inline %.1f / %.1f / %.1f | offload %.1f / %.1f / %.1f" % tuple(1e6 * x / a.batches for x in i + o),
              flush=True)


if __name__ == "__main__":
    main()
