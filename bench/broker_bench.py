"""Send TPS, send RT and consume TPS: twistd rmq-broker vs the real Java broker (issue 4).

    python bench/broker_bench.py [--seconds 20] [--sizes 128,1024] [--threads 16]
                                 [--mode sync|async] [--window 256] [--only rmqpy|java]
                                 [--harness-check] [--out bench/report]

Not a test. In one run it starts ``twistd rmq-namesrv`` + ``twistd rmq-broker``
(tests/interop/servers.py), and the real Java name server + broker (tests/interop/jvm.py;
server 4.9.7, the newest 4.9 broker on Maven Central), both pairs side by
side, and measures them in turn (rmqpy then Java for each body size, so that
other load on the machine affects both alike). Both brokers: ASYNC_MASTER, ASYNC_FLUSH,
the same store settings (:data:`STORE`).

The load comes from the official Java client 4.9.8 through ``bench/java``
(LoadGen: DefaultMQProducer / DefaultMQPushConsumer printing only totals;
built here with ``mvn -o package`` when missing or stale). Per body size:

* send: ``--threads`` threads, one sync send in flight each (like the official
  benchmark Producer), ``--warmup`` s not counted, then ``--seconds`` s
  measured: TPS, average / p99 / max RT;
* consume: a push consumer with a new group drains the topic from the first
  offset (all messages of the send phase, warm-up included), stopping after
  ``--seconds`` s: TPS from the first to the last message received.

Prints a table with the ratios rmqpy/Java and writes ``OUT/broker_bench.md``,
``OUT/broker_bench.png`` (matplotlib) and ``OUT/broker_bench.json``.
The load generator, name server and broker share the machine's cores, so
the numbers are relative, not absolute capacities.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import rss_split  # noqa: E402
from rmqpy.protocol.codes import RequestCode  # noqa: E402
from tests.interop import jvm, servers  # noqa: E402

BENCH_JAVA = ROOT / "bench" / "java"
LOADGEN_JAR = BENCH_JAVA / "target" / "loadgen.jar"
CLIENT_VERSION = "4.9.8"  # client jars; the Java server is jvm.SERVER_VERSIONS[...] = 4.9.7
# the test suite runs its JVMs C1-only (short-lived, boot time matters); a benchmark measures the
# steady state, so the Java broker, name server and load generator get HotSpot's full tiers back
FULL_JIT = ["-XX:TieredStopAtLevel=4"]

#: the same store / broker settings for both brokers
STORE: dict[str, object] = {
    "brokerClusterName": "DefaultCluster",
    "brokerId": 0,
    "brokerRole": "ASYNC_MASTER",
    "flushDiskType": "ASYNC_FLUSH",
    "autoCreateTopicEnable": True,
    "autoCreateSubscriptionGroup": True,
    "defaultTopicQueueNums": 4,
    "mappedFileSizeCommitLog": 128 * 1024 * 1024,
    "mappedFileSizeConsumeQueue": 300000 * 20,
    "maxHashSlotNum": 100000,
    "maxIndexNum": 400000,
    "messageIndexEnable": True,
    "transientStorePoolEnable": False,
}


# ---------------------------------------------------------------------- load generator

def build_loadgen() -> None:
    src = max(p.stat().st_mtime for p in [BENCH_JAVA / "pom.xml", *(BENCH_JAVA / "src").rglob("*.java")])
    if LOADGEN_JAR.exists() and LOADGEN_JAR.stat().st_mtime >= src:
        return
    for extra in (["-o"], []):  # offline first: the client jars are already in ~/.m2 after interop's build.sh
        proc = subprocess.run(["mvn", "-q", "-B", *extra, "package"], cwd=BENCH_JAVA, capture_output=True, text=True)
        if proc.returncode == 0 and LOADGEN_JAR.exists():
            return
    raise SystemExit(f"building bench/java failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def loadgen_cmd(args: list[str], home: Path) -> list[str]:
    cmd = jvm.java_cmd(CLIENT_VERSION, "io.rmqpy.bench.LoadGen", args, kind="client", heap_mb=512, jvm_args=FULL_JIT, home=home)
    # full tiered JIT for a 20 s run (java_cmd gives short-lived clients C1 only)
    cmd = [c for c in cmd if c != "-XX:TieredStopAtLevel=1"]
    i = cmd.index("-cp")
    cmd[i + 1] = os.pathsep.join([str(LOADGEN_JAR), cmd[i + 1]])
    return cmd


def run_loadgen(args: list[str], home: Path, timeout: float) -> dict:
    cmd = loadgen_cmd(args, home)
    proc = subprocess.run(cmd, cwd=str(home), env=jvm._env(home), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=timeout)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"LoadGen {args[0]} exited {proc.returncode} without a result:\n"
                       f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------- servers

class Target:
    """One name server + broker(s) under test."""

    name: str
    namesrv_addr: str
    broker_pids: list[int]
    boot_seconds: float  # from starting the broker(s) to registered with the name server

    def stop(self) -> None: ...


#: --ha: the master's role and the slave's settings (the slave finds the master through the name server)
HA_MASTER = {"brokerRole": "SYNC_MASTER", "brokerIP2": "127.0.0.1"}
HA_SLAVE = {"brokerRole": "SLAVE", "brokerId": 1, "brokerIP2": "127.0.0.1"}


class PyTarget(Target):
    name = "rmqpy"

    def __init__(self, work: Path, ha: bool = False, brokers: int = 1) -> None:
        self.ns = servers.start_namesrv(work / "namesrv")
        self.slave = None
        self.namesrv_addr = self.ns.addr
        t0 = time.monotonic()
        self.brokers = []
        for i in range(brokers):  # --brokers N: N masters of one cluster (./run.sh --brokers N)
            name = "broker-py" if brokers == 1 else f"broker-py-{i}"
            props = {**STORE, "brokerName": name, **(HA_MASTER if ha else {})}
            self.brokers.append(servers.start_broker(work / f"broker-{i}", self.ns.addr, props))
        self.broker = self.brokers[0]
        for b in self.brokers:
            if not jvm.wait_broker_registered(self.ns.addr, b.addr, "TBW102", 30):
                raise RuntimeError("rmqpy broker did not register with its name server")
        self.boot_seconds = time.monotonic() - t0
        self.broker_pids = [b.proc.pid for b in self.brokers]
        if brokers > 1:
            self.name = f"rmqpy x{brokers}"
        if ha:
            self.slave = servers.start_broker(work / "slave", self.ns.addr, {**props, **HA_SLAVE})
            deadline = time.monotonic() + 30
            while not _ha_reported(self.broker.addr):
                if time.monotonic() > deadline:
                    raise RuntimeError("the rmqpy slave did not report to its master")
                time.sleep(0.2)

    def stop(self) -> None:
        if self.slave is not None:
            self.slave.stop()
        for b in self.brokers:
            b.stop()
        self.ns.stop()


def _ha_reported(addr: str) -> bool:
    code, _remark, _ext, body = jvm.remoting_request(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    return code == 0 and int(json.loads(body)["table"].get("haSlaveAckOffset", -1)) >= 0


class JavaTarget(Target):
    name = "java"

    def __init__(self, work: Path, ha: bool = False, brokers: int = 1) -> None:
        self.ns = jvm.start_java_namesrv(CLIENT_VERSION, workdir=work / "namesrv", heap_mb=256,
                                         jvm_args=FULL_JIT)
        self.slave = None
        props = {**STORE, "brokerName": "broker-java", **(HA_MASTER if ha else {})}
        try:
            t0 = time.monotonic()
            self.broker = jvm.start_java_broker(CLIENT_VERSION, work / "broker", self.ns.addr, props, heap_mb=1024,
                                                 jvm_args=FULL_JIT)
            self.boot_seconds = time.monotonic() - t0
            if ha:
                self.slave = jvm.start_java_broker(CLIENT_VERSION, work / "slave", self.ns.addr,
                                                   {**props, **HA_SLAVE}, heap_mb=1024, wait_registered=False,
                                                   jvm_args=FULL_JIT)
                time.sleep(7)  # a Java slave's first report comes haSendHeartbeatInterval (5 s) after it connects
        except BaseException:
            if self.slave is not None:
                self.slave.kill9()
            self.ns.kill9()
            raise
        self.namesrv_addr = self.ns.addr
        self.broker_pids = [self.broker.pid]

    def stop(self) -> None:
        if self.slave is not None:
            self.slave.stop(30)
        self.broker.stop(30)
        self.ns.stop(10)


# ---------------------------------------------------------------------- measuring

def rss_mib(pids: list[int]) -> dict[str, float]:
    """VmRSS, RssAnon, RssFile, RssShmem and VmHWM (MiB) summed over ``pids`` (NaN: one is gone)."""
    out = dict.fromkeys(rss_split.STATUS_FIELDS, 0.0)
    for pid in pids:
        st = rss_split.status(pid)
        for k in out:
            out[k] += st.get(k, float("nan"))
    return out


def rss_kinds(pids: list[int]) -> dict[str, float]:
    """Resident MiB per kind of mapping (bench/rss_split.py), summed over ``pids``."""
    out: dict[str, float] = {}
    for pid in pids:
        for kind, mib in rss_split.by_kind(pid).items():
            out[kind] = out.get(kind, 0.0) + mib
    return {k: round(v, 1) for k, v in out.items()}


def measure(target: Target, size: int, a: argparse.Namespace, home: Path, rnd: int = 0) -> dict:
    topic = f"Bench_{target.name.replace(' ', '_')}_{size}_{int(time.time())}"
    prod_args = ["produce", "-n", target.namesrv_addr, "-t", topic, "--mode", a.mode, "--threads", a.threads,
                 "--window", a.window, "--body-size", size, "--warmup", a.warmup, "--seconds", a.seconds,
                 "--batch", a.batch]
    pids = target.broker_pids
    load = os.getloadavg()[0]
    rss0 = rss_mib(pids)
    c0 = sum(cpu_seconds(p) for p in pids)
    prod = run_loadgen([str(x) for x in prod_args], home, timeout=a.warmup + a.seconds + 90)
    c1 = sum(cpu_seconds(p) for p in pids)
    rss1 = rss_mib(pids)
    kinds1 = rss_kinds(pids)
    print(f"  [{target.name} {size} B round {rnd}] send: {prod}", flush=True)
    # oneway: the sender cannot know what was stored; the consumer drains whatever is there
    expect = prod["totalOk"] if a.mode != "oneway" else 2 ** 62
    cons_args = ["consume", "-n", target.namesrv_addr, "-t", topic, "-g", f"bench_cg_{topic}",
                 "--expect", expect, "--seconds", a.seconds, "--idle-ms", 5000]
    c2 = sum(cpu_seconds(p) for p in pids)
    cons = run_loadgen([str(x) for x in cons_args], home, timeout=a.seconds + 120)
    c3 = sum(cpu_seconds(p) for p in pids)
    print(f"  [{target.name} {size} B round {rnd}] consume: {cons}", flush=True)
    return {
        "target": target.name, "size": size, "round": rnd, "boot_s": target.boot_seconds,
        "rss_before_mib": rss0["VmRSS"], "rss_after_send_mib": rss1["VmRSS"],
        # what the RSS is made of (bench/rss_split.py): private memory, mapped files (the store's
        # pages among them), and the peak since the broker started
        "rss_anon_after_send_mib": rss1["RssAnon"], "rss_file_after_send_mib": rss1["RssFile"],
        "rss_shmem_after_send_mib": rss1["RssShmem"], "rss_peak_mib": rss1["VmHWM"],
        "rss_anon_before_mib": rss0["RssAnon"], "rss_file_before_mib": rss0["RssFile"],
        "rss_kinds_after_send_mib": kinds1,
        "send_tps": prod["tps"], "avg_rt_ms": prod["avgRtMs"], "p99_rt_ms": prod["p99RtMs"],
        "max_rt_ms": prod["maxRtMs"], "send_failed": prod["failed"], "sent_total": prod["totalOk"],
        "consume_tps": cons["tps"], "consumed": cons["received"], "consume_first_ms": cons["firstMsgAfterMs"],
        # broker CPU seconds per 1000 messages (whole phase incl. warm-up / consumer start)
        "send_cpu_ms_per_msg": 1000 * (c1 - c0) / max(1, prod["totalOk"]),
        "consume_cpu_ms_per_msg": 1000 * (c3 - c2) / max(1, cons["received"]),
        "loadavg_1min_before": load,
        "produce": prod, "consume": cons,
    }


def harness_check(target: Target, home: Path, count: int = 3000) -> dict:
    """How fast the interop harness (one JSON line per message) sends, vs LoadGen with one thread."""
    t = time.monotonic()
    ev = jvm.harness(CLIENT_VERSION, ["produce", "-n", target.namesrv_addr, "-t", "HarnessCheck", "--mode", "sync",
                                      "-c", count, "--body-size", 128], timeout=300, home=home)
    wall = time.monotonic() - t
    done = ev.done or {}
    harness_tps = count / (done.get("elapsedMs", wall * 1000) / 1000)
    lg = run_loadgen(["produce", "-n", target.namesrv_addr, "-t", "HarnessCheck", "--mode", "sync", "--threads", "1",
                      "--body-size", "128", "--warmup", "2", "--seconds", "5"], home, 120)
    out = {"harness_sync_1thread_tps": round(harness_tps, 1), "harness_wall_s": round(wall, 1),
           "loadgen_sync_1thread_tps": lg["tps"]}
    print(f"  harness check on {target.name}: {out}", flush=True)
    return out


# ---------------------------------------------------------------------- output

def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


METRICS = [("send TPS", "send_tps", "{:,.0f}"), ("avg send RT (ms)", "avg_rt_ms", "{:.2f}"),
           ("p99 send RT (ms)", "p99_rt_ms", "{:.2f}"), ("max send RT (ms)", "max_rt_ms", "{:.1f}"),
           ("consume TPS", "consume_tps", "{:,.0f}"),
           ("broker CPU ms/msg, send", "send_cpu_ms_per_msg", "{:.3f}"),
           ("broker CPU ms/msg, consume", "consume_cpu_ms_per_msg", "{:.3f}"),
           ("broker RSS after send (MiB)", "rss_after_send_mib", "{:,.0f}"),
           ("of which RssAnon (MiB)", "rss_anon_after_send_mib", "{:,.0f}"),
           ("of which RssFile (MiB)", "rss_file_after_send_mib", "{:,.0f}"),
           ("broker peak RSS, VmHWM (MiB)", "rss_peak_mib", "{:,.0f}"),
           ("boot to registered (s)", "boot_s", "{:.1f}")]
JAVA_LABEL = "Java 4.9.7"  # the broker jar: Maven Central has no 4.9.8 broker (jvm.SERVER_VERSIONS)


def target_names(results: list[dict]) -> tuple[str | None, str | None]:
    py = next((r["target"] for r in results if r["target"] != "java"), None)
    java = "java" if any(r["target"] == "java" for r in results) else None
    return py, java


def stat(results: list[dict], target: str | None, size: int, key: str) -> tuple[float, float, float, int] | None:
    """(median, min, max, runs) of ``key`` over the rounds of one target and size."""
    vals = sorted(r[key] for r in results if r["target"] == target and r["size"] == size and key in r)
    if not vals:
        return None
    return statistics.median(vals), vals[0], vals[-1], len(vals)


def cell(st: tuple[float, float, float, int] | None, fmt: str) -> str:
    if st is None:
        return "-"
    med, lo, hi, n = st
    return fmt.format(med) if n == 1 else f"{fmt.format(med)} ({fmt.format(lo)}-{fmt.format(hi)})"


def table(results: list[dict], sizes: list[int]) -> str:
    py_name, java_name = target_names(results)
    rows = [f"| body | metric | {py_name or 'rmqpy'} | {JAVA_LABEL} | rmqpy/Java |", "|---:|---|---:|---:|---:|"]
    for size in sizes:
        for label, key, fmt in METRICS:
            py, java = stat(results, py_name, size, key), stat(results, java_name, size, key)
            rv = f"{ratio(py[0], java[0]):.2f}" if py and java else "-"
            rows.append(f"| {size} B | {label} | {cell(py, fmt)} | {cell(java, fmt)} | {rv} |")
    return "\n".join(rows)


def kinds_table(results: list[dict], sizes: list[int]) -> str:
    """RSS after send by kind of mapping (bench/rss_split.py), each target's last round per body size."""
    py_name, java_name = target_names(results)
    targets = [t for t in (py_name, java_name) if t is not None]
    rows = [f"| body | mapping | {' | '.join(JAVA_LABEL if t == 'java' else t for t in targets)} |",
            "|---:|---|" + "---:|" * len(targets)]
    for size in sizes:
        last = {t: next((r["rss_kinds_after_send_mib"] for r in reversed(results)
                         if r["target"] == t and r["size"] == size and "rss_kinds_after_send_mib" in r), {})
                for t in targets}
        kinds = sorted({k for m in last.values() for k, v in m.items() if v >= 1.0},
                       key=lambda k: -max(m.get(k, 0.0) for m in last.values()))
        rows += [f"| {size} B | {k} | " + " | ".join(f"{last[t].get(k, 0.0):,.1f}" for t in targets) + " |"
                 for k in kinds]
    return "\n".join(rows) if len(rows) > 2 else ""


def plot(results: list[dict], sizes: list[int], path: Path, a: argparse.Namespace) -> bool:
    """The plot (medians); False without matplotlib (pip install -r bench/requirements.txt)."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot (pip install -r bench/requirements.txt)", flush=True)
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = {}
    for r in results:
        st = {k: stat(results, r["target"], r["size"], k) for _l, k, _f in METRICS}
        by[(r["target"], r["size"])] = {k: v[0] for k, v in st.items() if v is not None}
    py_name, java_name = target_names(results)
    targets = [t for t in (py_name, java_name) if t is not None]
    colors = {py_name: "#3572A5", "java": "#b07219"}
    labels = {py_name: f"{py_name} (twistd)", "java": JAVA_LABEL}
    panels = [("send TPS", "send_tps", False), ("consume TPS", "consume_tps", False),
              ("avg send RT (ms)", "avg_rt_ms", False), ("max send RT (ms)", "max_rt_ms", False)]
    fig, axes = plt.subplots(1, len(panels), figsize=(16, 4.2))
    width = 0.8 / len(targets)
    for ax, (title, key, log) in zip(axes, panels):
        for i, t in enumerate(targets):
            xs = [j + (i - (len(targets) - 1) / 2) * width for j in range(len(sizes))]
            vals = [by[(t, s)][key] if (t, s) in by else 0 for s in sizes]
            bars = ax.bar(xs, vals, width, label=labels[t], color=colors[t])
            for b, v in zip(bars, vals):
                ax.annotate(f"{v:,.0f}" if "TPS" in title else f"{v:.1f}", (b.get_x() + b.get_width() / 2, v),
                            ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(sizes)))
        ax.set_xticklabels([f"{s} B" for s in sizes])
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
        ax.margins(y=0.15)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(loc="upper right", fontsize=8)
    fig.suptitle(f"rmqpy vs Java broker, Java client 4.9.8 load: {describe_load(a)}, "
                 f"{a.seconds:g} s per measurement, {getattr(a, 'flush', 'ASYNC_FLUSH')}, medians of "
                 f"{getattr(a, 'repeat', 1)} ({os.cpu_count()} cores shared)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def describe_load(a: argparse.Namespace) -> str:
    batch = int(getattr(a, "batch", 1))
    what = f"{a.mode} send" + (f" of batches of {batch}" if batch > 1 else "")
    return what + (f", window {a.window}" if a.mode == "async" else f", {a.threads} threads")


def report(results: list[dict], sizes: list[int], a: argparse.Namespace, check: dict | None, cmdline: str,
           started: str, took: float) -> str:
    py_name, java_name = target_names(results)
    rounds = max((r.get("round", 0) for r in results), default=0) + 1
    lines = [
        "# Broker benchmark: rmqpy vs Java (issues 4, 19)",
        "",
        f"Run {started}, {took:.0f} s, on {platform.node()} ({os.cpu_count()} cores, "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"{_java_version()}). Produced by:",
        "",
        f"    {cmdline}",
        "",
        *(["![plot](broker_bench.png)", ""] if getattr(a, "plotted", True) else []),
        f"Load: {describe_load(a)}, {getattr(a, 'flush', 'ASYNC_FLUSH')}. "
        + (f"Medians of {rounds} rounds, (min-max) after each; the targets alternate within a round and "
           "the order flips every round." if rounds > 1 else "One round."),
        "",
        table(results, sizes),
        "",
        "## Ratios rmqpy / Java (medians)",
        "",
    ]
    for s in sizes:
        m = {k: (stat(results, py_name, s, k), stat(results, java_name, s, k))
             for k in ("send_tps", "avg_rt_ms", "p99_rt_ms", "max_rt_ms", "consume_tps")}
        if all(p and j for p, j in m.values()):
            r = {k: ratio(p[0], j[0]) for k, (p, j) in m.items()}  # type: ignore[index]
            lines.append(f"* {s} B: send TPS {r['send_tps']:.2f}, avg RT {r['avg_rt_ms']:.2f}, "
                         f"p99 RT {r['p99_rt_ms']:.2f}, max RT {r['max_rt_ms']:.2f}, "
                         f"consume TPS {r['consume_tps']:.2f}")
    kinds = kinds_table(results, sizes)
    if kinds:
        lines += ["", "## RSS after send by mapping (MiB, each broker's last round; bench/rss_split.py)", "",
                  "RssFile is mapped files: the store's (the commit log's pages a put wrote or a pull read), the "
                  "libraries, a JVM's modules; RssAnon is private memory (Python's heap, malloc arenas, thread "
                  "stacks; a JVM's heap).", "", kinds]
    lines += [
        "",
        "## Set-up",
        "",
        "* Servers: `twistd rmq-namesrv` + `twistd rmq-broker` (tests/interop/servers.py), then the real Java "
        "NamesrvStartup + BrokerStartup 4.9.7 (tests/interop/jvm.py; broker heap 1 GiB, SerialGC). Both pairs "
        "run side by side for the whole run and are measured in turn (rmqpy, Java, per body size); the one not "
        "measured is idle. Both brokers get the same properties: "
        + ", ".join(f"`{k}={_prop(v)}`" for k, v in STORE.items()) + ".",
        *(["* `--ha`: each master runs with " + ", ".join(f"`{k}={v}`" for k, v in HA_MASTER.items())
           + " and has a slave of its own kind (the same properties and " + ", ".join(
               f"`{k}={v}`" for k, v in HA_SLAVE.items()) + "), so a send is answered once the slave holds it; "
           "the CPU figures are the master's only."] if getattr(a, "ha", False) else []),
        f"* Load: `bench/java` LoadGen on the official Java client {CLIENT_VERSION}, one JVM per phase. "
        f"Send: {describe_load(a)} sharing one DefaultMQProducer"
        + (f" (window {a.window})" if a.mode == "async" else "")
        + f", {a.warmup:g} s warm-up not counted, then {a.seconds:g} s measured; RT = time of one "
        "`send()` call as the client sees it. A new topic per measurement (auto-created, 4 queues).",
        f"* Consume: DefaultMQPushConsumer (default 20 consume threads, pull batch 32), new group, "
        f"CONSUME_FROM_FIRST_OFFSET, drains what the send phase stored; TPS = messages / (last - first "
        f"message received), stopped after {a.seconds:g} s.",
        "* Broker CPU ms/msg: user+system CPU time of the broker process over the whole phase divided by "
        "the messages of that phase (rmqpy's broker is one Python process; the Java broker's figure "
        "includes its JIT and GC threads).",
        "* Everything (load generator, name server, broker) shares the same cores, so these are relative "
        "numbers for this machine, not capacities. The machine was shared with other work during the run; "
        "1-minute load average before each measurement: "
        + ", ".join(f"{r['target']} {r['size']} B: {r['loadavg_1min_before']:.1f}" for r in results) + ".",
    ]
    if check:
        lines += [
            "",
            "## Why not the interop harness",
            "",
            "`tests/interop/java` harness `produce --mode sync` (one JSON line per message, 3000 messages, "
            f"128 B) against rmqpy: {check['harness_sync_1thread_tps']:,.0f} msg/s; LoadGen with one sync "
            f"thread against the same broker: {check['loadgen_sync_1thread_tps']:,.0f} msg/s. The harness "
            "sends from one thread only and formats a JSON line per message, which costs it a good part of "
            "its rate already at one thread, so the benchmark uses LoadGen (totals only, N threads).",
        ]
    return "\n".join(lines) + "\n"


def _prop(v: object) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _java_version() -> str:
    try:
        out = subprocess.run([jvm.java_executable(), "-version"], capture_output=True, text=True).stderr
        return out.splitlines()[0].replace('"', "")
    except (OSError, IndexError, jvm.JavaError):
        return "java ?"


# ---------------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=20, help="measured seconds per send / consume phase")
    ap.add_argument("--warmup", type=float, default=5, help="send warm-up seconds (not counted)")
    ap.add_argument("--sizes", default="128,1024", help="body sizes in bytes")
    ap.add_argument("--mode", choices=("sync", "async", "oneway"), default="sync")
    ap.add_argument("--batch", type=int, default=1, help="sync: messages per send call (a batch)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds; the targets alternate within a round and the order flips every round")
    ap.add_argument("--brokers", type=int, default=1,
                    help="rmqpy: N brokers of one cluster (./run.sh --brokers N) against one Java broker")
    ap.add_argument("--threads", type=int, default=16, help="sync sender threads")
    ap.add_argument("--window", type=int, default=256, help="async: sends in flight")
    ap.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH",
                    help="flushDiskType of both brokers")
    ap.add_argument("--only", choices=("rmqpy", "java"), help="measure one broker only")
    ap.add_argument("--harness-check", action="store_true",
                    help="also measure the interop harness' own send rate (one JSON line per message)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "report")
    ap.add_argument("--keep", action="store_true", help="keep the servers' work directories")
    ap.add_argument("--ha", action="store_true",
                    help="a SYNC_MASTER with a slave of the same kind per target (default --out bench/report/ha)")
    ap.add_argument("--from-json", type=Path, metavar="JSON",
                    help="measure nothing: rewrite the report and plot from a broker_bench.json of an earlier run")
    a = ap.parse_args()
    if a.ha and a.out == ROOT / "bench" / "report":
        a.out = ROOT / "bench" / "report" / "ha"
    if a.from_json:
        return rewrite(a.from_json, a.out)
    sizes = [int(s) for s in a.sizes.split(",")]
    if a.batch < 1 or (a.batch > 1 and a.mode != "sync") or a.repeat < 1 or not 1 <= a.brokers <= 16:
        ap.error("--batch N needs --mode sync; --repeat >= 1; --brokers 1..16")
    STORE["flushDiskType"] = a.flush
    cmdline = "python " + " ".join([os.path.relpath(__file__, ROOT), *sys.argv[1:]])
    started = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    t0 = time.monotonic()

    jvm.ensure_built()
    build_loadgen()
    work = Path(tempfile.mkdtemp(prefix="rmqpy-broker-bench-"))
    home = jvm.prepare_home(work / "client-home")
    results: list[dict] = []
    check = None
    targets: list[Target] = []
    try:
        # both pairs run side by side (idle while the other one is measured) and the
        # measurements alternate, so that other load on the machine hits both alike
        for cls in (PyTarget, JavaTarget):
            if a.only and a.only != cls.name:
                continue
            print(f"starting {cls.name} name server + broker ...", flush=True)
            targets.append(cls(work / cls.name, ha=a.ha, brokers=a.brokers if cls is PyTarget else 1))
            print(f"  {targets[-1].name}: boot to registered {targets[-1].boot_seconds:.1f} s", flush=True)
        if a.harness_check:
            check = harness_check(targets[0], home)
        for rnd in range(a.repeat):
            for size in sizes:
                for target in (targets if rnd % 2 == 0 else targets[::-1]):
                    results.append(measure(target, size, a, home, rnd))
    finally:
        for target in targets:
            target.stop()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"work directories kept in {work}")
    took = time.monotonic() - t0

    print()
    print(table(results, sizes))
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "broker_bench.json").write_text(json.dumps(
        {"started": started, "seconds": took, "command": cmdline, "args": {k: str(v) for k, v in vars(a).items()},
         "store": {k: str(v) for k, v in STORE.items()}, "harness_check": check, "results": results}, indent=1) + "\n")
    a.plotted = plot(results, sizes, a.out / "broker_bench.png", a)
    (a.out / "broker_bench.md").write_text(report(results, sizes, a, check, cmdline, started, took))
    print(f"\nwrote {a.out / 'broker_bench.md'}" + (", broker_bench.png" if a.plotted else "")
          + f", broker_bench.json ({took:.0f} s)")


def rewrite(src: Path, out: Path) -> None:
    d = json.loads(src.read_text())
    args = d["args"]
    a = argparse.Namespace(seconds=float(args["seconds"]), warmup=float(args["warmup"]), mode=args["mode"],
                           threads=int(args["threads"]), window=int(args["window"]),
                           ha=args.get("ha") == "True", batch=int(args.get("batch", 1)),
                           flush=args.get("flush", "ASYNC_FLUSH"), repeat=int(args.get("repeat", 1)))
    sizes = [int(x) for x in args["sizes"].split(",")]
    out.mkdir(parents=True, exist_ok=True)
    a.plotted = plot(d["results"], sizes, out / "broker_bench.png", a)
    (out / "broker_bench.md").write_text(report(d["results"], sizes, a, d.get("harness_check"), d["command"],
                                                d["started"], d["seconds"]))
    print(f"rewrote {out / 'broker_bench.md'} and broker_bench.png from {src}")


if __name__ == "__main__":
    main()
