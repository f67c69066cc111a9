"""Send and receive throughput of the official Python client (rocketmq-python-client 5.1.2) through
rmqpy's own gRPC endpoint vs through Apache's rocketmq-proxy 5.3.3 in front of the Java 5.3.3 broker.

    python bench/grpc_bench.py [--rounds 3] [-n 1000] [--body 128] [--inflight 16] [--warmup 1000]

Both server sets run side by side for the whole run (rmqpy: ``twistd rmq-namesrv`` + ``rmq-broker``
with ``grpcServerPort``; Java: NamesrvStartup + BrokerStartup 5.3.3 + ProxyStartup 5.3.3 in cluster
mode, all from tests/interop). After a warm-up (``--warmup`` messages each way per target, not
reported: the Java side's JIT), each round measures both targets, in alternating order, each on a
fresh 8-queue topic and consumer group, in a fresh client process (its start-up is not timed):

* send: ``n`` messages through one Producer with ``--inflight`` ``send_async`` calls in flight;
* receive: SimpleConsumer ``receive(32, 30 s)`` until all ``n`` arrived, each acked by one of
  ``--inflight`` threads (5.1.2's ``ack_async`` returns no Future); the acks are waited for before
  the time is taken.

Prints and writes bench/report/grpc/grpc_bench.{md,json}: per round the rates, the servers' CPU time
per message (/proc: the rmqpy broker process vs the Java broker + proxy processes) and the 1-minute
load average, then the medians and the ratios rmqpy / Java. The machine's 2 cores are shared with other
work: the numbers are noisy, read the load average beside them.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.interop import jvm, servers  # noqa: E402

REPORT = ROOT / "bench" / "report" / "grpc"
VERSION = "5.3.3"


def worker(argv: list[str]) -> int:
    """``--worker send|receive ENDPOINT TOPIC N BODY INFLIGHT [GROUP]``: one JSON line with the rate."""
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    mode, endpoint, topic, n, body, inflight = argv[0], argv[1], argv[2], int(argv[3]), int(argv[4]), int(argv[5])
    config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
    if mode == "send":
        producer = Producer(config, (topic,))
        producer.startup()
        payload = b"x" * body
        pending: list = []
        t0 = time.perf_counter()
        for _ in range(n):
            m = Message()
            m.topic, m.body, m.tag = topic, payload, "TagA"
            pending.append(producer.send_async(m))
            if len(pending) >= inflight:
                pending.pop(0).result()
        for f in pending:
            f.result()
        secs = time.perf_counter() - t0
        producer.shutdown()
        print(json.dumps({"mode": "send", "n": n, "secs": secs, "rate": n / secs}), flush=True)
        return 0
    consumer = SimpleConsumer(config, argv[6], {topic: FilterExpression()}, await_duration=5)
    consumer.startup()
    time.sleep(1)  # the settings go over the telemetry stream after start-up
    got, acks = 0, []
    pool = concurrent.futures.ThreadPoolExecutor(inflight)
    t0 = time.perf_counter()
    deadline = time.time() + 120
    while got < n and time.time() < deadline:
        for msg in consumer.receive(32, 30):
            # 5.1.2's ack_async returns None (its _ack_async's Future is an asyncio one, not waitable
            # from this thread): ``inflight`` threads ack with the blocking ack instead
            acks.append(pool.submit(consumer.ack, msg))
            got += 1
        while len(acks) > inflight:
            acks.pop(0).result()
    for f in acks:
        f.result()
    secs = time.perf_counter() - t0
    pool.shutdown()
    consumer.shutdown()
    print(json.dumps({"mode": "receive", "n": got, "secs": secs, "rate": got / secs}), flush=True)
    return 0 if got >= n else 1


class Rmqpy:
    name = "rmqpy"

    def __init__(self, work: Path) -> None:
        port = servers.free_port()
        self.cluster = servers.Cluster(work / "rmqpy", "127.0.0.1", {"brokerName": "broker-grpc-bench",
                                                                      "grpcServerPort": port})
        self.ns_addr, self.endpoint = self.cluster.ns_addr, f"127.0.0.1:{port}"
        assert self.cluster.broker.proc is not None
        self.pids = [self.cluster.broker.proc.pid]  # the endpoint is in the broker process

    def stop(self) -> None:
        self.cluster.close()


class JavaProxy:
    name = "java"

    def __init__(self, work: Path) -> None:
        self.cluster = jvm.JavaCluster(VERSION, work / "java", "127.0.0.1", {"brokerName": "broker-grpc-bench"})
        self.proxy = jvm.start_java_proxy(VERSION, work / "proxy", self.cluster.ns_addr, heap_mb=512)
        self.ns_addr, self.endpoint = self.cluster.ns_addr, f"127.0.0.1:{self.proxy.port}"
        self.pids = [self.cluster.broker.pid, self.proxy.pid]

    def stop(self) -> None:
        self.proxy.kill9()
        self.cluster.close(clean=False)


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of the server processes (all their threads), in seconds."""
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def run_worker(args: list[str]) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True, text=True,
                          timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"worker {args[0]} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=1000, help="messages per round and target")
    ap.add_argument("--body", type=int, default=128)
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=1000, help="messages per target sent and received first")
    a = ap.parse_args()
    jvm.ensure_built()
    work = Path(tempfile.mkdtemp(prefix="grpc-bench-"))
    targets = [Rmqpy(work)]
    try:
        targets.append(JavaProxy(work))
        for r in ["Warm", *range(a.rounds)]:
            for t in targets:
                rc, out, err = jvm.mqadmin(VERSION, ["updateTopic", "-c", "DefaultCluster", "-t", f"GrpcBench{r}",
                                                     "-r", "8", "-w", "8"], t.ns_addr)
                assert "success" in out, out + err
        for t in targets:  # the JVMs' JIT and both brokers' first files, not reported
            run_worker(["send", t.endpoint, "GrpcBenchWarm", str(a.warmup), str(a.body), str(a.inflight)])
            run_worker(["receive", t.endpoint, "GrpcBenchWarm", str(a.warmup), str(a.body), str(a.inflight),
                        "grpc_bench_warm"])
        rows = []
        for r in range(a.rounds):
            order = targets if r % 2 == 0 else targets[::-1]
            for t in order:
                topic = f"GrpcBench{r}"
                load = os.getloadavg()[0]
                c0 = cpu_seconds(t.pids)
                sent = run_worker(["send", t.endpoint, topic, str(a.n), str(a.body), str(a.inflight)])
                c1 = cpu_seconds(t.pids)
                got = run_worker(["receive", t.endpoint, topic, str(a.n), str(a.body), str(a.inflight),
                                  f"grpc_bench_{r}"])
                c2 = cpu_seconds(t.pids)
                # server CPU per message, client start-up and shutdown included (idle servers: ~0)
                row = {"round": r, "target": t.name, "send": sent["rate"], "receive": got["rate"],
                       "send_cpu_us": (c1 - c0) / a.n * 1e6, "receive_cpu_us": (c2 - c1) / a.n * 1e6,
                       "load1": load, "load1_after": os.getloadavg()[0]}
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        for t in targets:
            t.stop()
    keys = ("send", "receive", "send_cpu_us", "receive_cpu_us")
    med = {(t, k): statistics.median(x[k] for x in rows if x["target"] == t) for t in ("rmqpy", "java") for k in keys}
    result = {"args": vars(a), "rows": rows, "median": {f"{t}.{k}": v for (t, k), v in med.items()},
              "ratio": {k: med[("rmqpy", k)] / med[("java", k)] for k in keys},
              "cpus": os.cpu_count()}
    REPORT.mkdir(parents=True, exist_ok=True)
    (REPORT / "grpc_bench.json").write_text(json.dumps(result, indent=2) + "\n")
    md = ["# gRPC endpoint: Python client 5.1.2 through rmqpy vs through rocketmq-proxy 5.3.3 + Java broker 5.3.3",
          "",
          f"`python bench/grpc_bench.py --rounds {a.rounds} -n {a.n} --body {a.body} --inflight {a.inflight} "
          f"--warmup {a.warmup}`, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores shared with other work: "
          "noisy numbers, see the load average.",
          "",
          "Server CPU: the rmqpy broker process (its gRPC endpoint included) vs the Java broker + proxy "
          "processes, per message.",
          "",
          "| round | target | send msg/s | receive+ack msg/s | server CPU µs/msg send / receive | "
          "load avg (1 min) before / after |",
          "|---|---|---|---|---|---|"]
    md += [f"| {x['round']} | {x['target']} | {x['send']:.0f} | {x['receive']:.0f} | "
           f"{x['send_cpu_us']:.0f} / {x['receive_cpu_us']:.0f} | {x['load1']:.1f} / {x['load1_after']:.1f} |"
           for x in rows]
    md += ["", "| median | rmqpy | Java | rmqpy / Java |", "|---|---|---|---|"]
    units = {"send": "send msg/s", "receive": "receive+ack msg/s", "send_cpu_us": "server CPU µs/msg, send",
             "receive_cpu_us": "server CPU µs/msg, receive+ack"}
    md += [f"| {units[k]} | {med[('rmqpy', k)]:.0f} | {med[('java', k)]:.0f} | {result['ratio'][k]:.2f} |"
           for k in keys]
    (REPORT / "grpc_bench.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
