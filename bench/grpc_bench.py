"""Send and receive throughput through rmqpy's own gRPC endpoint vs through Apache's rocketmq-proxy
5.3.3 in front of the Java 5.3.3 broker, with the official Java or Python 5.x client as the load.

    python bench/grpc_bench.py [--client java] [--rounds 3] [-n 20000] [--inflight 256]
                               [--consumers 4] [--receives 8] [--batch 32] [--java-jit full]
    python bench/grpc_bench.py --client python --rounds 5 -n 1000 --inflight 16   # the first runs

Both server sets run side by side for the whole run (rmqpy: ``twistd rmq-namesrv`` + ``rmq-broker``
with ``grpcServerPort``; Java: NamesrvStartup + BrokerStartup 5.3.3 + ProxyStartup 5.3.3 in cluster
mode, all from tests/interop). After a warm-up (``--warmup`` messages each way per target, not
reported: the Java side's JIT), each round measures both targets, in alternating order, each on a
fresh 8-queue topic and consumer group, in a fresh client process (its start-up is not timed):

* ``--client java`` (bench/java GrpcLoadGen, rocketmq-client-java 5.0.8, full JIT): ``n`` sends
  through one Producer with ``--inflight`` ``sendAsync`` in flight; then ``--consumers``
  SimpleConsumers, each with ``--receives`` ``receiveAsync(--batch)`` in flight, every message
  acked with ``ackAsync``, until ``n`` acks completed;
* ``--client python`` (rocketmq-python-client 5.1.2): ``n`` ``send_async`` with ``--inflight`` in
  flight; SimpleConsumer ``receive(32, 30 s)`` in a loop, each message acked by one of ``--inflight``
  threads (5.1.2's ``ack_async`` returns no Future).

The Java servers get the full tiered JIT with ``--java-jit full`` (tests/interop starts its JVMs
with C1 only, which suits short tests, not a throughput comparison).

Prints and writes bench/report/grpc/grpc_bench.{md,json} (grpc_bench_python.* with ``--client python``):
per round the rates, p99 (per send; per receive call and per ack), the servers' CPU time per message
(/proc: the rmqpy broker process vs the Java broker + proxy processes), the load generator's own CPU
per message inside the timed window and the 1-minute load average, then the medians and the ratios rmqpy / Java. The machine's 2 cores are
shared with other work: the numbers are noisy, read the load average beside them.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "bench"))

import broker_bench  # noqa: E402 (bench/java's build)

from tests.interop import jvm, servers  # noqa: E402

REPORT = ROOT / "bench" / "report" / "grpc"
VERSION = "5.3.3"
C1_ONLY = "-XX:TieredStopAtLevel=1"


def p99(samples: list[float]) -> float:
    return sorted(samples)[int(len(samples) * 0.99)] if samples else 0.0


def worker(argv: list[str]) -> int:
    """``--worker send|receive ENDPOINT TOPIC N BODY INFLIGHT [GROUP]``: one JSON line with the rate,
    p99 in ms and this process's CPU seconds inside the timed window."""
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer

    mode, endpoint, topic, n, body, inflight = argv[0], argv[1], argv[2], int(argv[3]), int(argv[4]), int(argv[5])
    config = ClientConfiguration(endpoint, Credentials(), request_timeout=10)
    if mode == "send":
        producer = Producer(config, (topic,))
        producer.startup()
        payload = b"x" * body
        pending: list = []
        rts: list[float] = []
        cpu0, t0 = time.process_time(), time.perf_counter()

        def sent(f: concurrent.futures.Future, s: float) -> None:
            f.result()
            rts.append(time.perf_counter() - s)

        for _ in range(n):
            m = Message()
            m.topic, m.body, m.tag = topic, payload, "TagA"
            pending.append((producer.send_async(m), time.perf_counter()))
            if len(pending) >= inflight:
                sent(*pending.pop(0))  # the RT of a send includes the wait for the oldest: an upper bound
        for f, s in pending:
            sent(f, s)
        secs, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        producer.shutdown()
        print(json.dumps({"mode": "send", "n": n, "secs": secs, "rate": n / secs, "p99Ms": p99(rts) * 1e3,
                          "cpuSecs": cpu}), flush=True)
        return 0
    consumer = SimpleConsumer(config, argv[6], {topic: FilterExpression()}, await_duration=5)
    consumer.startup()
    time.sleep(1)  # the settings go over the telemetry stream after start-up
    got, acks = 0, []
    receive_rts: list[float] = []
    pool = concurrent.futures.ThreadPoolExecutor(inflight)
    cpu0, t0 = time.process_time(), time.perf_counter()
    deadline = time.time() + 120
    while got < n and time.time() < deadline:
        s = time.perf_counter()
        msgs = consumer.receive(32, 30)
        if msgs:
            receive_rts.append(time.perf_counter() - s)
        for msg in msgs:
            # 5.1.2's ack_async returns None (its _ack_async's Future is an asyncio one, not waitable
            # from this thread): ``inflight`` threads ack with the blocking ack instead
            acks.append(pool.submit(consumer.ack, msg))
            got += 1
        while len(acks) > inflight:
            acks.pop(0).result()
    for f in acks:
        f.result()
    secs, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    pool.shutdown()
    consumer.shutdown()
    print(json.dumps({"mode": "receive", "n": got, "secs": secs, "rate": got / secs,
                      "p99Ms": p99(receive_rts) * 1e3, "cpuSecs": cpu}), flush=True)
    return 0 if got >= n else 1


class Rmqpy:
    name = "rmqpy"

    def __init__(self, work: Path, props: dict[str, str]) -> None:
        port = servers.free_port()
        self.cluster = servers.Cluster(work / "rmqpy", "127.0.0.1", {"brokerName": "broker-grpc-bench",
                                                                      "grpcServerPort": port, **props})
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


def full_jit() -> None:
    """The Java servers with C2: tests/interop's ``jvm_options`` stops at C1 for short-lived test JVMs;
    the bench wraps it (for the JVMs started in this process) rather than change the tests' launcher."""
    options = jvm.jvm_options
    jvm.jvm_options = lambda *a, **k: [o for o in options(*a, **k) if o != C1_ONLY]  # type: ignore[assignment]


class PySpy:
    """``py-spy record`` of the rmqpy broker during one phase (``--pyspy DIR``): collapsed stacks per
    thread, stopped with SIGINT when the phase ends, so the file covers the phase only."""

    def __init__(self, out: Path | None, pid: int, name: str) -> None:
        self.proc = None
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            self.proc = subprocess.Popen(["py-spy", "record", "-p", str(pid), "-r", "200", "--threads", "--nonblocking",
                                          "--format", "raw", "-o", str(out / f"{name}.txt")],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1)  # attached before the phase starts

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(60)


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


def java_gen(args: list[str], home: Path) -> dict:
    """bench/java's GrpcLoadGen (the shaded 5.0.8 client from tests/interop's build), full JIT."""
    # without the harness's class archive options (its archive is keyed by the harness's class path)
    cmd = [c for c in jvm.grpc_harness_cmd(args, home=home, heap_mb=512)
           if c != C1_ONLY and not c.startswith(("-XX:SharedArchiveFile=", "-XX:ArchiveClassesAtExit="))]
    i = cmd.index(jvm.GRPC_HARNESS_MAIN)
    cmd[i] = "io.rmqpy.bench.GrpcLoadGen"
    j = cmd.index("-cp")
    cmd[j + 1] = os.pathsep.join([str(broker_bench.LOADGEN_JAR), cmd[j + 1]])
    proc = subprocess.run(cmd, cwd=str(home), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"GrpcLoadGen {args[0]} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n"
                           f"{proc.stderr[-3000:]}")
    got = json.loads(lines[-1])
    if args[0] == "receive" and not got["complete"]:
        raise RuntimeError(f"GrpcLoadGen receive got {got['n']} of {args[args.index('-n') + 1]}: {got}")
    return got


class Phases:
    """The send and receive phase of one round through the chosen client."""

    def __init__(self, a: argparse.Namespace, work: Path) -> None:
        self.a, self.home = a, work / "gen"

    def send(self, endpoint: str, topic: str, n: int) -> dict:
        a = self.a
        if a.client == "python":
            return run_worker(["send", endpoint, topic, str(n), str(a.body), str(a.inflight)])
        return java_gen(["send", "-e", endpoint, "-t", topic, "-n", str(n), "--inflight", str(a.inflight),
                         "--body-size", str(a.body)], self.home)

    def receive(self, endpoint: str, topic: str, n: int, group: str) -> dict:
        a = self.a
        if a.client == "python":
            return run_worker(["receive", endpoint, topic, str(n), str(a.body), str(a.inflight), group])
        return java_gen(["receive", "-e", endpoint, "-t", topic, "-g", group, "-n", str(n), "--consumers",
                         str(a.consumers), "--receives", str(a.receives), "--batch", str(a.batch)], self.home)


KEYS = ("send", "receive", "send_p99_ms", "receive_p99_ms", "send_cpu_us", "receive_cpu_us", "gen_send_cpu_us",
        "gen_receive_cpu_us")
UNITS = {"send": "send msg/s", "receive": "receive+ack msg/s", "send_p99_ms": "send p99 ms",
         "receive_p99_ms": "receive call p99 ms", "send_cpu_us": "server CPU µs/msg, send",
         "receive_cpu_us": "server CPU µs/msg, receive+ack", "gen_send_cpu_us": "generator CPU µs/msg, send",
         "gen_receive_cpu_us": "generator CPU µs/msg, receive+ack"}


def command(a: argparse.Namespace) -> str:
    if a.client == "python":
        return (f"python bench/grpc_bench.py --client python --rounds {a.rounds} -n {a.n} --body {a.body} "
                f"--inflight {a.inflight} --warmup {a.warmup} --java-jit {a.java_jit}")
    return (f"python bench/grpc_bench.py --rounds {a.rounds} -n {a.n} --body {a.body} --inflight {a.inflight} "
            f"--consumers {a.consumers} --receives {a.receives} --batch {a.batch} --warmup {a.warmup} "
            f"--java-jit {a.java_jit}" + "".join(f" -D {kv}" for kv in a.D))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--client", choices=("java", "python"), default="java", help="the load generator")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=20000, help="messages per round and target")
    ap.add_argument("--body", type=int, default=128)
    ap.add_argument("--inflight", type=int, default=256, help="sends in flight (python: also the ack threads)")
    ap.add_argument("--consumers", type=int, default=4, help="java: SimpleConsumers receiving")
    ap.add_argument("--receives", type=int, default=8, help="java: receives in flight per consumer")
    ap.add_argument("--batch", type=int, default=32, help="java: messages per receive")
    ap.add_argument("--warmup", type=int, default=10000, help="messages per target sent and received first")
    ap.add_argument("--java-jit", choices=("full", "c1"), default="full", help="the Java servers' JIT")
    ap.add_argument("--only", choices=("rmqpy", "java"), help="one target (profiling)")
    ap.add_argument("-D", action="append", default=[], help="rmqpy broker property key=value, e.g. "
                    "tls.server.mode=disabled (grpcio on the port, no front relaying the connections)")
    ap.add_argument("--pyspy", type=Path, help="py-spy the rmqpy broker in each phase, stacks into this dir")
    a = ap.parse_args()
    jvm.ensure_built()
    if a.client == "java":
        broker_bench.build_loadgen()
    if a.java_jit == "full":
        full_jit()
    work = Path(tempfile.mkdtemp(prefix="grpc-bench-"))
    phases = Phases(a, work)
    targets: list = []
    try:
        if a.only != "java":
            targets.append(Rmqpy(work, dict(kv.split("=", 1) for kv in a.D)))
        if a.only != "rmqpy":
            targets.append(JavaProxy(work))
        for r in ["Warm", *range(a.rounds)]:
            for t in targets:
                rc, out, err = jvm.mqadmin(VERSION, ["updateTopic", "-c", "DefaultCluster", "-t", f"GrpcBench{r}",
                                                     "-r", "8", "-w", "8"], t.ns_addr)
                assert "success" in out, out + err
        for t in targets:  # the JVMs' JIT and both brokers' first files, not reported
            phases.send(t.endpoint, "GrpcBenchWarm", a.warmup)
            phases.receive(t.endpoint, "GrpcBenchWarm", a.warmup, "grpc_bench_warm")
        rows = []
        for r in range(a.rounds):
            order = targets if r % 2 == 0 else targets[::-1]
            for t in order:
                topic = f"GrpcBench{r}"
                load = os.getloadavg()[0]
                spy_dir = a.pyspy if t.name == "rmqpy" else None
                spy = PySpy(spy_dir, t.pids[0], f"send-{r}")
                c0 = cpu_seconds(t.pids)
                sent = phases.send(t.endpoint, topic, a.n)
                c1 = cpu_seconds(t.pids)
                spy.stop()
                spy = PySpy(spy_dir, t.pids[0], f"receive-{r}")
                c1 = cpu_seconds(t.pids)
                got = phases.receive(t.endpoint, topic, a.n, f"grpc_bench_{r}")
                c2 = cpu_seconds(t.pids)
                spy.stop()
                # server CPU per message, client start-up and shutdown included (idle servers: ~0)
                row = {"round": r, "target": t.name, "send": sent["rate"], "receive": got["rate"],
                       "send_p99_ms": sent["p99Ms"], "receive_p99_ms": got["p99Ms"],
                       "ack_p99_ms": got.get("ackP99Ms"),
                       "send_cpu_us": (c1 - c0) / a.n * 1e6, "receive_cpu_us": (c2 - c1) / a.n * 1e6,
                       "gen_send_cpu_us": sent["cpuSecs"] / a.n * 1e6,
                       "gen_receive_cpu_us": got["cpuSecs"] / a.n * 1e6,
                       "send_secs": sent["secs"], "receive_secs": got["secs"],
                       "failed": sent.get("failed", 0) + got.get("failed", 0),  # GrpcLoadGen's failed calls
                       "errors": sent.get("errors", []) + got.get("errors", []),  # and the first few's text
                       "load1": load, "load1_after": os.getloadavg()[0]}
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        for t in targets:
            t.stop()
    names = [t.name for t in targets]
    med = {(t, k): statistics.median(x[k] for x in rows if x["target"] == t) for t in names for k in KEYS}
    result = {"args": vars(a), "command": command(a), "rows": rows,
              "median": {f"{t}.{k}": v for (t, k), v in med.items()},
              "ratio": {k: med[("rmqpy", k)] / med[("java", k)] for k in KEYS} if len(names) == 2 else {},
              "cpus": os.cpu_count()}
    REPORT.mkdir(parents=True, exist_ok=True)
    stem = "grpc_bench" if a.client == "java" else "grpc_bench_python"
    (REPORT / f"{stem}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    client = "rocketmq-client-java 5.0.8 (bench/java GrpcLoadGen)" if a.client == "java" else \
        "rocketmq-python-client 5.1.2"
    md = [f"# gRPC endpoint: {client} through rmqpy vs through rocketmq-proxy 5.3.3 + Java broker 5.3.3",
          "",
          f"`{command(a)}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores shared "
          "with other work: noisy numbers, see the load average.",
          "",
          "Server CPU: the rmqpy broker process (its gRPC endpoint included) vs the Java broker + proxy "
          "processes, per message. Generator CPU: the client process's, inside the timed window.",
          "",
          "| round | target | send msg/s | receive+ack msg/s | p99 ms send / receive call | "
          "server CPU µs/msg send / receive | generator CPU µs/msg send / receive | load avg (1 min) before / after |",
          "|---|---|---|---|---|---|---|---|"]
    md += [f"| {x['round']} | {x['target']} | {x['send']:.0f} | {x['receive']:.0f} | "
           f"{x['send_p99_ms']:.1f} / {x['receive_p99_ms']:.1f} | "
           f"{x['send_cpu_us']:.0f} / {x['receive_cpu_us']:.0f} | "
           f"{x['gen_send_cpu_us']:.0f} / {x['gen_receive_cpu_us']:.0f} | {x['load1']:.1f} / {x['load1_after']:.1f} |"
           for x in rows]
    if len(names) == 2:
        md += ["", "| median | rmqpy | Java | rmqpy / Java |", "|---|---|---|---|"]
        md += [f"| {UNITS[k]} | {med[('rmqpy', k)]:.{1 if 'p99' in k else 0}f} | "
               f"{med[('java', k)]:.{1 if 'p99' in k else 0}f} | {result['ratio'][k]:.2f} |" for k in KEYS]
    (REPORT / f"{stem}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
