"""What a put's first write into the commit log's pages costs, and what faulting them in ahead saves.

    python bench/report/issue29/page_fault_bench.py [--rounds 3] [--fsync-every 475] [--dir DIR]

Not a test (the fourth session of README.md). A fresh file of 128 MiB, sized and reserved as the
store makes its files (ftruncate + posix_fallocate), mapped; 37 KiB writes (a batch of 32
messages of 1 KiB) from its start to its end, one after the other, as the commit log's appends.
Per mode, the CPU of the writes alone (``time.thread_time`` around each) and of the whole run
(``time.process_time``, the populating included), in us per write:

* ``none``: nothing ahead (the store as it is without ``RMQPY_PREFAULT``);
* ``write-XM``: ``madvise(MADV_POPULATE_WRITE)`` of the same mapping, X MiB ahead of the writes,
  X/4 at a time (what rmqpy/store/prefault.py does, here on the writer's own thread);
* ``read-2M``: ``MADV_POPULATE_READ`` instead (the pages mapped without dirtying them);
* ``other-2M``: POPULATE_WRITE through a second mapping of the file.

``--fsync-every N`` fsyncs the file every N writes (475: every 17 MiB, the commit log's 500 ms
flush at 35 MB/s), which writes out and cleans the populated pages the writes have not reached.
"""
from __future__ import annotations

import argparse
import mmap
import os
import tempfile
import time

SIZE = 128 << 20
WRITE = 32 * 1150
POPULATE_WRITE, POPULATE_READ = 23, 22  # Linux 5.14


def run(path: str, mode: str, fsync_every: int) -> tuple[float, float]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, SIZE)
        os.posix_fallocate(fd, 0, SIZE)
        mm = mmap.mmap(fd, SIZE)
        kind, _, ahead = mode.partition("-")
        lead = int(ahead[:-1]) << 20 if ahead else 0
        data = b"x" * WRITE
        n = SIZE // WRITE - 1
        done = 0
        writes = 0.0
        c0 = time.process_time()
        for i in range(n):
            pos = i * WRITE
            if lead and pos + WRITE + lead > done and done < SIZE:
                end = min(SIZE, max(done, pos) + lead + lead // 4)
                if kind == "write":
                    mm.madvise(POPULATE_WRITE, done, end - done)
                elif kind == "read":
                    mm.madvise(POPULATE_READ, done, end - done)
                else:
                    other = mmap.mmap(fd, end - done, offset=done)
                    other.madvise(POPULATE_WRITE)
                    other.close()
                done = end
            t = time.thread_time()
            mm[pos:pos + WRITE] = data
            writes += time.thread_time() - t
            if fsync_every and i % fsync_every == fsync_every - 1:
                os.fsync(fd)
        total = time.process_time() - c0
        mm.close()
        return 1e6 * writes / n, 1e6 * total / n
    finally:
        os.close(fd)
        os.unlink(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fsync-every", type=int, default=0, metavar="N")
    ap.add_argument("--modes", default="none,write-8M,write-2M,write-1M,read-2M,other-2M")
    ap.add_argument("--dir", default=None, help="where the file goes (default: tmp; the store's file system)")
    a = ap.parse_args()
    path = os.path.join(a.dir or tempfile.gettempdir(), "rmqpy-page-fault-bench.bin")
    print(f"load average {os.getloadavg()[0]:.1f}, 37 KiB writes into a fallocated 128 MiB file, "
          f"fsync every {a.fsync_every or 'never'}; us per write: the writes' CPU / the whole run's CPU")
    for r in range(a.rounds):
        print(f"round {r + 1}: " + " | ".join(
            f"{m} {w:.1f} / {t:.1f}" for m in a.modes.split(",") for w, t in [run(path, m, a.fsync_every)]),
            flush=True)


if __name__ == "__main__":
    main()
