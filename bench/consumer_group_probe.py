"""One consumer group of many clients (issue 31 case 3): heartbeat latency, NOTIFY_CONSUMER_IDS_CHANGED
frames and the broker's CPU and RSS, rmqpy beside the Java broker in the same run.

    python bench/consumer_group_probe.py [-n 5000] [--seconds 150] [--interval 10] [--java 4.9.8]
        [--targets rmqpy,java]

Each target is a fresh name server and broker (rmqpy from this checkout: run the probe from an export
of an older commit for a "before" figure; Java ``--java``). ``-n`` simulated 4.x clients, one
TCP connection each, join one clustering group over the first ``--interval`` seconds and then send a
HEART_BEAT every ``--interval`` seconds, as the Java client does (heartbeatBrokerInterval, 30 s by
default; the issue measured 10 s). A client told NOTIFY_CONSUMER_IDS_CHANGED asks for the member list
(GET_CONSUMER_LIST_BY_GROUP), as a real client's immediate rebalance does. Reported per target:
heartbeat round-trip p50/p99/max (ms), heartbeats unanswered at the end, notifications and member-list
answers received (and their bytes), connections the broker closed, the broker's CPU seconds and peak
RSS, and the probe's own CPU seconds (when it nears the run's length, the RTTs include the probe's own
delay). ``--timeline`` adds those figures per ``--interval`` seconds. One asyncio loop drives all
clients; run it on a machine with nothing else busy.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmqpy.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, SubscriptionData  # noqa: E402
from rmqpy.protocol.codes import RequestCode  # noqa: E402
from rmqpy.protocol.command import RemotingCommand, decode, encode  # noqa: E402
from rmqpy.protocol.headers.broker import GetConsumerListByGroupRequestHeader  # noqa: E402

GROUP, TOPIC = "GID_PROBE", "TopicProbe"


class Stats:
    def __init__(self) -> None:
        self.rtts: list[float] = []
        self.sent_at: list[float] = []  # when each answered heartbeat was sent (s since the start)
        self.notice_at: list[float] = []  # when each notice arrived (s since the start)
        self.start = time.monotonic()
        self.notices = 0
        self.lists = 0
        self.list_bytes = 0
        self.closed = 0
        self.outstanding = 0


async def client(i: int, host: str, port: int, a: argparse.Namespace, st: Stats, stop: float) -> None:
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        st.closed += 1
        return
    hb = RemotingCommand.request(RequestCode.HEART_BEAT, body=HeartbeatData(
        clientID=f"10.0.{i // 250}.{i % 250}@probe{i}",
        consumerDataSet=[ConsumerData(GROUP, subscriptionDataSet=[SubscriptionData.build(TOPIC, "*", "TAG", 1)])],
    ).encode())
    sent: dict[int, float] = {}
    opaque = [i * 1_000_000]

    async def reads() -> None:
        while True:
            head = await reader.readexactly(4)
            data = await reader.readexactly(int.from_bytes(head, "big"))
            cmd = decode(data)
            if cmd.is_response:
                t = sent.pop(cmd.opaque, None)
                if t is not None:
                    st.rtts.append((time.monotonic() - t) * 1000)
                    st.sent_at.append(t - st.start)
                    st.outstanding -= 1
                else:
                    st.lists += 1
                    st.list_bytes += len(data)
            elif cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
                st.notices += 1
                st.notice_at.append(time.monotonic() - st.start)
                q = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                            GetConsumerListByGroupRequestHeader(consumerGroup=GROUP))
                opaque[0] += 1
                q.opaque = opaque[0]
                writer.write(encode(q))

    reading = asyncio.ensure_future(reads())
    try:
        await asyncio.sleep(random.uniform(0, a.interval))
        while time.monotonic() < stop and not reading.done():
            hb.opaque = opaque[0] = opaque[0] + 1
            f = encode(hb)
            sent[opaque[0]] = time.monotonic()
            st.outstanding += 1
            writer.write(f)
            await asyncio.sleep(a.interval)
    finally:
        if reading.done() and not reading.cancelled():
            if a.debug:
                print(repr(reading.exception()), file=sys.stderr)
            st.closed += 1
        reading.cancel()
        writer.close()


def timeline(st: Stats, step: float) -> list[dict]:
    """Per ``step`` seconds of the run: heartbeats sent then and answered, their p99 and max RTT (ms),
    and the notices that arrived then: which phase (the group forming, or steady) is slow."""
    rows = []
    for k in range(int(max(st.sent_at + st.notice_at, default=0) // step) + 1):
        rtts = sorted(r for r, t in zip(st.rtts, st.sent_at) if k * step <= t < (k + 1) * step) or [float("nan")]
        rows.append({"from_s": k * step, "heartbeats": len(rtts), "p99_ms": round(rtts[max(0, int(len(rtts) * 0.99) - 1)], 1),
                     "max_ms": round(rtts[-1], 1),
                     "notices": sum(1 for t in st.notice_at if k * step <= t < (k + 1) * step)})
    return rows


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def drive(addr: str, pid: int, a: argparse.Namespace) -> dict:
    host, port = addr.rsplit(":", 1)
    st = Stats()
    cpu0, own0 = cpu_seconds(pid), cpu_seconds(os.getpid())
    peak = [rss_mib(pid)]
    stop = time.monotonic() + a.seconds

    async def sample() -> None:
        while time.monotonic() < stop:
            peak[0] = max(peak[0], rss_mib(pid))
            await asyncio.sleep(1)

    sampler = asyncio.ensure_future(sample())
    await asyncio.gather(*(client(i, host, int(port), a, st, stop) for i in range(a.clients)))
    sampler.cancel()
    rtts = sorted(st.rtts) or [float("nan")]
    return {"heartbeats": len(st.rtts), "unanswered": st.outstanding,
            "rtt_ms": {"p50": round(statistics.median(rtts), 1), "p99": round(rtts[int(len(rtts) * 0.99) - 1], 1),
                       "max": round(rtts[-1], 1)},
            "notices": st.notices, "member_lists": st.lists, "member_list_mib": round(st.list_bytes / 2**20, 1),
            "closed_by_broker": st.closed, "broker_cpu_s": round(cpu_seconds(pid) - cpu0, 1),
            "broker_peak_rss_mib": round(peak[0], 1), "probe_cpu_s": round(cpu_seconds(os.getpid()) - own0, 1),
            **({"timeline": timeline(st, a.interval)} if a.timeline else {})}


def run_target(target: str, a: argparse.Namespace, jvm: Any, servers: Any) -> dict:
    """A fresh name server and broker of ``target``, the clients against it, then both stopped."""
    work = Path(tempfile.mkdtemp(prefix=f"rmqpy-cg-{target}-"))
    try:
        if target == "rmqpy":
            ns = servers.start_namesrv(work / "ns")
            broker = servers.start_broker(work / "broker", ns.addr, {"brokerName": "probe"})
            try:
                return asyncio.run(drive(broker.addr, broker.proc.pid, a))
            finally:
                broker.stop()
                ns.stop()
        jns = jvm.start_java_namesrv(a.java, workdir=work / "ns")
        jb = jvm.start_java_broker(a.java, work / "broker", jns.addr, {"brokerName": "probe"}, heap_mb=1024)
        try:
            return asyncio.run(drive(f"127.0.0.1:{jb.port}", jb.pid, a))
        finally:
            jb.stop(30)
            jns.stop(10)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the store reserves its files' blocks: gigabytes


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--clients", type=int, default=5000)
    p.add_argument("--seconds", type=float, default=150.0)
    p.add_argument("--interval", type=float, default=10.0)
    p.add_argument("--java", default="4.9.8")
    p.add_argument("--targets", default="rmqpy,java")
    p.add_argument("--debug", action="store_true", help="print why a client's connection ended")
    p.add_argument("--timeline", action="store_true",
                   help="also report, per --interval seconds, the heartbeats' p99/max RTT and the notices")
    a = p.parse_args()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    from tests.interop import jvm, servers
    results = {}
    for target in a.targets.split(","):
        results[target] = run_target(target, a, jvm, servers)
        print(json.dumps({target: results[target]}), flush=True)
    print(json.dumps({"clients": a.clients, "seconds": a.seconds, "interval": a.interval, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
