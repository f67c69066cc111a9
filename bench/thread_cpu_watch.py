"""Where the rmqpy broker's CPU goes by thread during a ``broker_bench.py`` run (issue 29 item 2).

    python bench/broker_bench.py --batch 32 --sizes 1024 ... --out DIR &
    python bench/thread_cpu_watch.py watch $! DIR.threads.jsonl [--py-spy DIR.spy]
    python bench/thread_cpu_watch.py summary DIR [DIR ...]      # reads DIR.threads.jsonl

Not a test. ``watch`` samples once a second, until the bench process ends: the CPU seconds of
each thread of the rmqpy broker it started (``main`` is the reactor thread), of the LoadGen
producer and of the Java broker, the machine's idle cores (from /proc/stat) and the load
average, one JSON line each. With ``--py-spy`` it records the broker (``py-spy record -d 8 -r
250 -f raw --nonblocking``) 2 s into its first send round. ``summary`` prints, per rmqpy send
round of ``DIR/broker_bench.json``: TPS, the process's CPU per message (the bench's own
figure), and the reactor thread's and the other threads' CPU per message, over the seconds the
producer ran (warm-up included, so divided by all messages sent in the round).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

HZ = os.sysconf("SC_CLK_TCK")


def _children(root: int) -> list[int]:
    parent: dict[int, list[int]] = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                ppid = int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parent.setdefault(ppid, []).append(int(p))
    out, todo = [], [root]
    while todo:
        for c in parent.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def _cpu(stat_path: str) -> float | None:
    try:
        f = Path(stat_path).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(f[11]) + int(f[12])) / HZ


def _idle() -> tuple[int, int]:
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return v[3] + v[4], sum(v)


def watch(bench_pid: int, out: Path, spy: Path | None) -> None:
    prev: dict[tuple[str, int | str], float] = {}
    cores = os.cpu_count() or 1
    last_idle = _idle()
    spied = spy is None
    with out.open("w") as log:
        while os.path.exists(f"/proc/{bench_pid}"):
            time.sleep(1)
            kids = _children(bench_pid)
            broker = [p for p in kids if "rmq-broker" in _cmdline(p)]
            gen = [p for p in kids if "LoadGen" in _cmdline(p) and " produce " in _cmdline(p)]
            java = [p for p in kids if "BrokerStartup" in _cmdline(p)]
            now_idle = _idle()
            row: dict[str, object] = {
                "t": round(time.time(), 1), "load": os.getloadavg()[0],
                "idle_cores": round((now_idle[0] - last_idle[0]) / max(now_idle[1] - last_idle[1], 1) * cores, 2)}
            last_idle = now_idle
            for name, pids in (("broker", broker), ("gen", gen), ("jbroker", java)):
                if pids:
                    c = _cpu(f"/proc/{pids[0]}/stat")
                    if c is not None:
                        row[name] = round(c - prev.get((name, pids[0]), c), 2)
                        prev[(name, pids[0])] = c
            if broker:
                pid = broker[0]
                threads: dict[str, float] = {}
                try:
                    tids = os.listdir(f"/proc/{pid}/task")
                except OSError:
                    tids = []
                for tid in tids:
                    c = _cpu(f"/proc/{pid}/task/{tid}/stat")
                    if c is None:
                        continue
                    d = c - prev.get(("t", tid), c)
                    prev[("t", tid)] = c
                    if d > 0:
                        threads["main" if int(tid) == pid else tid] = round(d, 3)
                row["threads"] = threads
                if not spied and gen:
                    spied = True
                    time.sleep(2)
                    subprocess.Popen(["py-spy", "record", "-p", str(pid), "-d", "8", "-r", "250", "-f", "raw",
                                      "--nonblocking", "-o", str(spy)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print(json.dumps(row), file=log, flush=True)


def summary(run_dir: Path) -> str:
    results = [r for r in json.loads((run_dir / "broker_bench.json").read_text())["results"] if r["target"] == "rmqpy"]
    rows = [json.loads(line) for line in Path(f"{run_dir}.threads.jsonl").read_text().splitlines()]
    groups: list[list[dict]] = []
    last = None
    for m in rows:  # the seconds a producer ran, split where it did not
        if m.get("gen") is None or "threads" not in m:
            continue
        if last is None or m["t"] - last > 3:
            groups.append([])
        groups[-1].append(m)
        last = m["t"]
    # rmqpy's rounds: the ones its reactor thread was busy in (Java's rounds leave it idle)
    groups = [g for g in groups if sum(m["threads"].get("main", 0) for m in g) / len(g) > 0.05]
    parts = []
    for r, g in zip(sorted(results, key=lambda r: r["round"]), groups):
        n = r["sent_total"]
        main = sum(m["threads"].get("main", 0) for m in g)
        other = sum(v for m in g for k, v in m["threads"].items() if k != "main")
        idle = sum(m["idle_cores"] for m in g) / len(g)
        parts.append(f"{r['send_tps']:,.0f} msg/s, process {1000 * r['send_cpu_ms_per_msg']:.1f} us/msg, reactor "
                     f"{1e6 * main / n:.1f}, other threads {1e6 * other / n:.1f} us/msg, idle {idle:.2f} cores "
                     f"(load {r['loadavg_1min_before']:.1f})")
    return f"{run_dir.name}: " + " | ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("watch")
    w.add_argument("pid", type=int, help="the broker_bench.py process")
    w.add_argument("out", type=Path)
    w.add_argument("--py-spy", type=Path, default=None, metavar="OUT")
    s = sub.add_parser("summary")
    s.add_argument("dirs", type=Path, nargs="+")
    a = ap.parse_args()
    if a.cmd == "watch":
        watch(a.pid, a.out, a.py_spy)
    else:
        for d in a.dirs:
            print(summary(d))


if __name__ == "__main__":
    main()
