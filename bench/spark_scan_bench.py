"""Scan throughput of the Spark ``rocketmq`` data source against raw read bandwidth.

Generates a store of about ``--gb`` GiB (RocketMQ format: 1 GiB commit log files by default,
consume queues), then in the same run measures

* raw: reading the commit log files sequentially (8 MiB reads, page cache warm, as the scans);
* reader: the scanner alone in this process (no Spark), one core;
* spark commitlog / consumequeue: ``spark.read.format("rocketmq")`` on local[N] written to the
  ``noop`` sink (every column materialised),

and prints rows/s, MB/s and the ratio to the raw bandwidth.  Not a test.

    python3 bench/spark_scan_bench.py [--gb 1] [--body-size 1024] [--dir /tmp/rmqpy-spark-bench] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "spark")]


def generate(root: Path, gb: float, body_size: int, file_size: int) -> tuple[int, int]:
    from tests.spark.storegen import Msg, StoreWriter
    if (root / "DONE").exists():
        n, b = map(int, (root / "DONE").read_text().split())
        return n, b
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    w = StoreWriter(str(root), file_size, cq_units=300_000)
    target = int(gb * (1 << 30))
    topics = [f"BenchTopic{i}" for i in range(4)]
    i = 0
    body = os.urandom(body_size)
    t0 = time.perf_counter()
    while w.phy < target:
        w.add(Msg(topics[i % 4], i % 8, body, tags=f"T{i % 5}", keys=f"key-{i}", props={"seq": str(i)}))
        i += 1
        if i % 200_000 == 0:
            w.messages.clear()  # keep memory flat
            print(f"  generated {i} messages, {w.phy / 2**20:.0f} MiB", file=sys.stderr)
    w.messages.clear()
    w.close()
    (root / "DONE").write_text(f"{i} {w.phy}")
    print(f"  generated {i} messages / {w.phy / 2**20:.0f} MiB in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return i, w.phy


def raw_read(root: Path) -> tuple[float, int]:
    n = 0
    buf = bytearray(8 << 20)
    t0 = time.perf_counter()
    for p in sorted((root / "commitlog").iterdir()):
        with open(p, "rb", buffering=0) as f:
            while True:
                k = f.readinto(buf)
                if not k:
                    break
                n += k
    return time.perf_counter() - t0, n


def direct_read(root: Path) -> tuple[float, int] | None:
    """Sequential O_DIRECT read (the device, past the page cache, without evicting anything)."""
    import mmap
    if not hasattr(os, "O_DIRECT"):
        return None
    buf = mmap.mmap(-1, 8 << 20)
    n = 0
    t0 = time.perf_counter()
    try:
        for p in sorted((root / "commitlog").iterdir()):
            fd = os.open(p, os.O_RDONLY | os.O_DIRECT)
            try:
                off = 0
                while True:
                    k = os.preadv(fd, [buf], off)
                    if not k:
                        break
                    n += k
                    off += k
            finally:
                os.close(fd)
    except OSError:  # file system without O_DIRECT
        return None
    return time.perf_counter() - t0, n


def reader_scan(root: Path) -> tuple[float, int]:
    from rmqpy_spark import reader as R
    rows = 0
    t0 = time.perf_counter()
    for sp in R.plan_commitlog(str(root)):
        for b in R.scan_commitlog_file(sp.path, sp.base, sp.start, sp.end):
            rows += b.num_rows
    return time.perf_counter() - t0, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--file-size", type=int, default=1 << 30, help="mappedFileSizeCommitLog")
    ap.add_argument("--dir", default="/tmp/rmqpy-spark-bench")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the generated store")
    ap.add_argument("--skip-cq", action="store_true", help="skip the consumequeue partitioning run")
    a = ap.parse_args()
    root = Path(a.dir) / f"b{a.body_size}-g{a.gb}"
    nmsg, nbytes = generate(root, a.gb, a.body_size, a.file_size)
    file_bytes = sum(p.stat().st_size for p in (root / "commitlog").iterdir())
    raw_read(root)  # warm the page cache for every measurement alike
    raw_s, raw_n = raw_read(root)
    raw_mbs = raw_n / raw_s / 1e6
    direct = direct_read(root)
    rd_s, rd_rows = reader_scan(root)

    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "spark")])
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    import pyarrow
    import pyspark
    spark = (SparkSession.builder.master(f"local[{a.cores}]").config("spark.driver.memory", "4g")
             .config("spark.ui.enabled", "false").config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from rmqpy_spark import register
    register(spark)
    results = []
    modes = ["commitlog"] + ([] if a.skip_cq else ["consumequeue"])
    for mode in modes:
        df = spark.read.format("rocketmq").option("partitioning", mode).load(str(root))
        df.limit(1).collect()  # start the Python workers
        t0 = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        dt = time.perf_counter() - t0
        rows = spark.read.format("rocketmq").option("partitioning", mode).load(str(root)).count() if mode == modes[0] else nmsg
        results.append((mode, dt, rows, df.rdd.getNumPartitions()))
    spark.stop()

    print(f"pyspark {pyspark.__version__}, pyarrow {pyarrow.__version__}, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores, local[{a.cores}]")
    print(f"store: {nmsg} messages, body {a.body_size} B, {nbytes / 1e6:.0f} MB of records "
          f"in {len(list((root / 'commitlog').iterdir()))} commit log file(s) ({file_bytes / 1e6:.0f} MB on disk)")
    print(f"raw sequential read:  {raw_mbs:8.0f} MB/s ({raw_n / 1e6:.0f} MB in {raw_s:.2f}s)")
    if direct:
        d_mbs = direct[1] / direct[0] / 1e6
        print(f"raw O_DIRECT read:    {d_mbs:8.0f} MB/s (the device, no page cache)")
    print(f"reader only (1 core): {rd_rows / rd_s:10.0f} rows/s  {nbytes / rd_s / 1e6:6.0f} MB/s  "
          f"ratio {nbytes / rd_s / 1e6 / raw_mbs:5.1%}")
    for mode, dt, rows, parts in results:
        mbs = nbytes / dt / 1e6
        print(f"spark {mode:<13} ({parts:3d} partitions): {rows / dt:10.0f} rows/s  {mbs:6.0f} MB/s  "
              f"{dt:6.2f}s  ratio to raw {mbs / raw_mbs:5.1%}"
              + (f", to O_DIRECT {mbs / (direct[1] / direct[0] / 1e6):5.1%}" if direct else ""))
    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
