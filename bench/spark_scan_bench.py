"""Scan throughput of the Spark ``rocketmq`` data source against raw read bandwidth.

Generates a store of about ``--gb`` GiB (RocketMQ format: 1 GiB commit log files by default,
consume queues), then in the same run measures

* raw: reading the commit log files sequentially (8 MiB reads, page cache warm, as the scans);
* reader: the scanner alone in this process (no Spark), one core;
* spark commitlog / consumequeue: ``spark.read.format("rocketmq")`` on local[N] written to the
  ``noop`` sink (every column materialised), with Spark's default settings;
* spark commitlog, tuned: the same scan in a second SparkSession with ``--tuned-conf``
  (default ``spark.buffer.size=1m``: the socket buffers between the Python worker and the JVM)
  and optionally the reader options ``batchRows``/``batchBytes`` of ``--tuned-batch``,

and prints rows/s, MB/s and the ratios to both raw bandwidths (page cache and O_DIRECT).  Not a test.

    python3 bench/spark_scan_bench.py [--gb 1] [--body-size 1024] [--dir /tmp/rmqpy-spark-bench] [--keep]

``--broker N`` measures broker mode instead: an rmqpy name server and broker on this machine, N
messages of ``--body-size`` bytes sent to one topic (4 queues), then in the same run

* spark broker mode: ``spark.read.format("rocketmq").option("nameServer", ...)`` on local[N] to
  the ``noop`` sink (every column materialised; the executors pull with rmqpy.client; one
  partition per queue), after a read of each queue's first message has started the Python
  workers of every task slot (not counted, as the JVM start of the Java consumer is not);
* the Java 5.3.3 push consumer (the interop harness, a new group from the first offset)
  draining the same topic: from its ``started`` event to its ``done`` event (after COUNT
  consumed), so the JVM start is not counted, its JSON line per message is;

in turn ``--rounds`` times (Spark, Java, Spark, Java; each Java round a new group from the first
offset), and prints each round's rows/s and the ratio of the total times.

    python3 bench/spark_scan_bench.py --broker 200000 [--body-size 1024] [--cores 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
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


def reader_scan(root: Path) -> tuple[float, float, int]:
    """(wall s, CPU s, rows) of the scanner alone (planning excluded)."""
    from rmqpy_spark import reader as R
    rows = 0
    splits = R.plan_commitlog(str(root))
    t0, c0 = time.perf_counter(), time.process_time()
    for sp in splits:
        for b in R.scan_commitlog_file(sp.path, sp.base, sp.start, sp.end):
            rows += b.num_rows
    return time.perf_counter() - t0, time.process_time() - c0, rows


def spark_session(cores: int, conf: dict):
    from pyspark.sql import SparkSession
    b = (SparkSession.builder.master(f"local[{cores}]").config("spark.driver.memory", "4g")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]))
    for k, v in conf.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from rmqpy_spark import register
    register(spark)
    return spark


def spark_scan(spark, root: Path, mode: str, opts: dict) -> tuple[float, int]:
    """(seconds, partitions) of writing every column of the scan to the noop sink."""
    df = spark.read.format("rocketmq").option("partitioning", mode).options(**opts).load(str(root))
    df.limit(1).collect()  # start the Python workers
    t0 = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0, df.rdd.getNumPartitions()


def broker_bench(a) -> None:
    """Broker-mode scan rows/s against the Java push consumer draining the same topic."""
    import tempfile

    from rmqpy.client import Message, Producer, PullConsumer
    from tests.interop import jvm, servers

    n = a.broker
    tmp = Path(tempfile.mkdtemp(prefix="rmqpy-spark-broker-bench-"))
    ns = servers.start_namesrv(tmp / "ns")
    broker = servers.start_broker(tmp / "broker", ns.addr, props={"mappedFileSizeCommitLog": 256 << 20})
    try:
        topic = "SparkBrokerBench"
        body = os.urandom(a.body_size)
        t0 = time.perf_counter()
        with Producer(name_server=ns.addr, group="bench_producer") as p:
            i = 0
            while i < n:
                k = min(64, n - i)
                p.send_batch([Message(topic, body, tags=f"T{(i + j) % 5}", keys=[f"key-{i + j}"]) for j in range(k)])
                i += k
        print(f"sent {n} messages of {a.body_size} B to {topic} in {time.perf_counter() - t0:.1f}s", flush=True)
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "spark")])
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        spark = spark_session(a.cores, {})
        df = spark.read.format("rocketmq").option("nameServer", ns.addr).option("topic", topic) \
            .option("pullBatchSize", 256).load()  # one partition per queue (maxQueueSplit's default)
        # start the Python workers of every task slot, as the Java consumer's JVM start is not counted
        # either: a read of each queue's first message (one task per queue, all slots busy at once)
        with PullConsumer(name_server=ns.addr, group="bench_probe") as c:
            first = {}
            for q in c.fetch_queues(topic):
                first.setdefault(q.broker_name, {})[str(q.queue_id)] = c.min_offset(q) + 1
        spark.read.format("rocketmq").option("nameServer", ns.addr).option("topic", topic) \
            .option("endingOffsets", json.dumps({topic: first})).load().write.format("noop").mode("overwrite").save()
        jvm.ensure_built()
        spark_s, java_s = [], []
        for r in range(a.rounds):  # Spark then Java, again: a burst of other work hits both alike
            t0 = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            spark_s.append(time.perf_counter() - t0)
            parts = df.rdd.getNumPartitions()
            print(f"round {r + 1}: load average {os.getloadavg()[0]:.1f}; spark broker mode, local[{a.cores}], "
                  f"{parts} partitions: {n / spark_s[-1]:9.0f} rows/s ({spark_s[-1]:.2f}s)", flush=True)
            h = jvm.harness_popen("5.3.3", ["consume-push", "-n", ns.addr, "-t", topic, "-g", f"bench_java_drain{r}",
                                            "-c", str(n), "--from", "first", "--timeout-ms", "600000",
                                            "--max-body-print", "0"])
            with h:
                h.wait_for("started", 120)
                t0 = time.perf_counter()
                done = h.wait_for("done", 900)
                java_s.append(time.perf_counter() - t0)
            print(f"round {r + 1}: load average {os.getloadavg()[0]:.1f}; java 5.3.3 push consumer: "
                  f"{done.get('consumed')} consumed, {n / java_s[-1]:9.0f} rows/s ({java_s[-1]:.2f}s); "
                  f"ratio {java_s[-1] / spark_s[-1]:.2f}", flush=True)
        rows = df.count()
        spark.stop()
        print(f"spark broker mode: {rows} rows, {n * a.rounds / sum(spark_s):9.0f} rows/s; java 5.3.3 push consumer: "
              f"{n * a.rounds / sum(java_s):9.0f} rows/s ({a.rounds} rounds each)")
        print(f"ratio spark broker mode / java push consumer: {sum(java_s) / sum(spark_s):.2f}", flush=True)
    finally:
        broker.stop()
        ns.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--body-size", type=int, default=1024)
    ap.add_argument("--file-size", type=int, default=1 << 30, help="mappedFileSizeCommitLog")
    ap.add_argument("--dir", default="/tmp/rmqpy-spark-bench")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the generated store")
    ap.add_argument("--skip-cq", action="store_true", help="skip the consumequeue partitioning run")
    ap.add_argument("--tuned-conf", default="spark.buffer.size=1048576",
                    help="comma list k=v for the tuned SparkSession ('' = skip the tuned run)")
    ap.add_argument("--tuned-batch", default="", help="batchRows,batchBytes of the tuned run (default: the reader's)")
    ap.add_argument("--broker", type=int, default=0, metavar="N",
                    help="broker mode: N messages through an rmqpy broker, against the Java push consumer")
    ap.add_argument("--rounds", type=int, default=2,
                    help="broker mode: Spark then Java this many times in turn; the ratio is of the total times")
    a = ap.parse_args()
    if a.broker:
        broker_bench(a)
        return
    root = Path(a.dir) / f"b{a.body_size}-g{a.gb}"
    nmsg, nbytes = generate(root, a.gb, a.body_size, a.file_size)
    file_bytes = sum(p.stat().st_size for p in (root / "commitlog").iterdir())
    raw_read(root)  # warm the page cache for every measurement alike
    raw_s, raw_n = raw_read(root)
    raw_mbs = raw_n / raw_s / 1e6
    direct = direct_read(root)
    d_mbs = direct[1] / direct[0] / 1e6 if direct else None
    rd_s, rd_cpu, rd_rows = reader_scan(root)

    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "spark")])
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import pyarrow
    import pyspark
    print(f"pyspark {pyspark.__version__}, pyarrow {pyarrow.__version__}, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores, local[{a.cores}], load average {os.getloadavg()[0]:.1f} before Spark", flush=True)
    print(f"store: {nmsg} messages, body {a.body_size} B, {nbytes / 1e6:.0f} MB of "
          f"records in {len(list((root / 'commitlog').iterdir()))} commit log file(s) ({file_bytes / 1e6:.0f} MB on disk)")
    print(f"raw sequential read (page cache): {raw_mbs:8.0f} MB/s ({raw_n / 1e6:.0f} MB in {raw_s:.2f}s)")
    if direct:
        print(f"raw O_DIRECT read (the device):   {d_mbs:8.0f} MB/s")
    print("MB/s below = MB of records (the store's written bytes) / seconds; ratios to the two raw reads above")

    def ratios(mbs: float) -> str:
        return f"ratio to page cache {mbs / raw_mbs:5.1%}" + (f", to O_DIRECT {mbs / d_mbs:5.1%}" if direct else "")

    print(f"reader only (1 core, no Spark): {rd_rows / rd_s:9.0f} rows/s {nbytes / rd_s / 1e6:6.0f} MB/s "
          f"(per CPU second: {rd_rows / rd_cpu:.0f} rows/s, {nbytes / rd_cpu / 1e6:.0f} MB/s)  {ratios(nbytes / rd_s / 1e6)}")

    def report(name: str, dt: float, parts: int) -> None:
        mbs = nbytes / dt / 1e6
        print(f"spark {name} ({parts} partitions): {nmsg / dt:9.0f} rows/s {mbs:6.0f} MB/s {dt:6.2f}s  {ratios(mbs)}",
              flush=True)

    spark = spark_session(a.cores, {})
    modes = ["commitlog"] + ([] if a.skip_cq else ["consumequeue"])
    for mode in modes:
        dt, parts = spark_scan(spark, root, mode, {})
        report(f"{mode}, defaults", dt, parts)
    t0 = time.perf_counter()
    rows = spark.read.format("rocketmq").load(str(root)).count()
    count_s = time.perf_counter() - t0
    spark.stop()
    print(f"rows read: {rows} (count()); for comparison, not a full scan: count() with defaults makes and sends "
          f"every batch but turns no column into rows: {rows / count_s:.0f} rows/s, {nbytes / count_s / 1e6:.0f} MB/s",
          flush=True)
    tuned = dict(kv.split("=", 1) for kv in a.tuned_conf.split(",") if kv)
    if a.tuned_conf:
        bopts = dict(zip(("batchRows", "batchBytes"), a.tuned_batch.split(","))) if a.tuned_batch else {}
        spark = spark_session(a.cores, tuned)
        dt, parts = spark_scan(spark, root, "commitlog", bopts)
        report(", ".join(["commitlog", a.tuned_conf] + [f"{k}={v}" for k, v in bopts.items()]), dt, parts)
        spark.stop()

    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
