"""How much CPU a process in its own session gets with 1 or 2 busy threads (the fourth session).

    setsid python3 bench/report/issue29/thread_share.py 1 8; setsid python3 bench/report/issue29/thread_share.py 2 8

Not a test. N threads hash 1 MiB with sha256 in a loop (hashlib releases the GIL for it) for S
seconds; prints the cores the process got (its CPU time over the wall time) and the machine's idle
cores meanwhile. The brokers run in their own session (the harness starts them with
``start_new_session``), so with ``kernel.sched_autogroup_enabled=1`` this is the share a second
broker thread could add when the machine has no idle core.
"""
from __future__ import annotations

import hashlib
import os
import sys
import threading
import time


def _idle() -> tuple[int, int]:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[3] + v[4], sum(v)


def main() -> None:
    n, secs = int(sys.argv[1]), float(sys.argv[2])
    buf = b"x" * (1 << 20)

    def burn() -> None:
        end = time.monotonic() + secs
        while time.monotonic() < end:
            hashlib.sha256(buf).digest()

    i0, c0, t0 = _idle(), time.process_time(), time.monotonic()
    threads = [threading.Thread(target=burn) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    i1, c1, t1 = _idle(), time.process_time(), time.monotonic()
    cores = os.cpu_count() or 1
    print(f"threads={n}: {(c1 - c0) / (t1 - t0):.2f} cores, machine idle "
          f"{cores * (i1[0] - i0[0]) / max(i1[1] - i0[1], 1):.2f} cores, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
