"""Route lookups per second and p99 latency: twistd rmq-namesrv vs the Java name server.

    python bench/namesrv_bench.py [--seconds 10] [--procs 2] [--conns 16] [--repeat 3] [--warmup 5]
                                  [--version 4.9.8] [--c1-only] [--pin 0:1 | --no-pin] [--reactor NAME]

Both servers run side by side, get the same fake broker registration and the same load
from the same generator (a bare epoll loop in several processes, one request in flight
per connection); after a warm-up of each, the runs alternate rmqpy, Java, rmqpy, ... and
the medians are reported, with each server's CPU per request (/proc) and the generator's
CPU per request: on a small machine the generator shares the cores with the server, so
lookups/s is bounded by both, while server CPU per request is the server's own cost. So by
default (on a machine of two cores or more) the servers run on the first core and the generator on
the others (``--pin SERVER_CPUS:GENERATOR_CPUS``, CPU lists as taskset's): each server has one core to
itself, Java's threads included, and lookups/s compares the servers, while the generator keeps up.
Not a test: numbers depend on the machine, which is also running the generator.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import select
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmqpy.protocol import command as codec  # noqa: E402
from rmqpy.protocol.bodies.topic import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper  # noqa: E402
from rmqpy.protocol.codes import RequestCode, ResponseCode  # noqa: E402
from rmqpy.protocol.command import RemotingCommand  # noqa: E402
from rmqpy.protocol.headers import namesrv as h  # noqa: E402
from rmqpy.tools.blocking_client import BlockingClient  # noqa: E402

TOPIC = "BenchTopic"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"port {port} never opened")


def register_fake_broker(addr: str) -> BlockingClient:
    body = RegisterBrokerBody(TopicConfigSerializeWrapper({TOPIC: TopicConfig(TOPIC, 8, 8)}, DataVersion())).encode()
    hdr = h.RegisterBrokerRequestHeader(brokerName="bench-broker", brokerAddr="127.0.0.1:10911",
                                        clusterName="BenchCluster", haServerAddr="127.0.0.1:10912", brokerId=0,
                                        bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF)
    client = BlockingClient(addr)  # kept open: closing it would unregister the broker
    resp = client.invoke(RemotingCommand.request(RequestCode.REGISTER_BROKER, hdr, body))
    assert resp.code == ResponseCode.SUCCESS, resp
    return client


_LENGTH = struct.Struct(">I")


def _lookups(addr: str, frame: bytes, conns: int, seconds: float, latencies: list[float]) -> int:
    """``conns`` connections, one GET_ROUTEINFO_BY_TOPIC in flight on each: the next is written as
    soon as the answer's last byte is in. A bare epoll loop, not asyncio: the generator has one core
    and every microsecond it spends per request (asyncio's handles and callbacks cost 4-6 us of them)
    is a request less that it can ask of a fast server."""
    host, _, port = addr.rpartition(":")
    socks = {}
    for _ in range(conns):
        sock = socket.create_connection((host, int(port)))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as asyncio and the Java client set it
        sock.setblocking(False)
        socks[sock.fileno()] = sock
    poller = select.epoll()
    bufs = dict.fromkeys(socks, b"")
    starts = {}
    until = time.perf_counter() + seconds
    for fd, sock in socks.items():
        poller.register(fd, select.EPOLLIN)
        starts[fd] = time.perf_counter()
        sock.send(frame)
    done, live, append, perf_counter = 0, len(socks), latencies.append, time.perf_counter
    while live:
        for fd, _event in poller.poll():
            sock = socks[fd]
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("closed before the end of the run")
            buf = bufs[fd] + data if bufs[fd] else data
            while len(buf) >= 4:
                (length,) = _LENGTH.unpack_from(buf, 0)
                if len(buf) < length + 4:
                    break
                buf = buf[length + 4:]
                now = perf_counter()
                append(now - starts[fd])
                done += 1
                if now >= until:
                    poller.unregister(fd)
                    sock.close()
                    live -= 1
                    buf = b""
                    break
                starts[fd] = now
                sock.send(frame)  # a few hundred bytes into an empty send buffer: taken whole
            bufs[fd] = buf
    poller.close()
    return done


def _worker(addr: str, conns: int, seconds: float, out: mp.Queue, cpus: set[int] | None = None) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)
    latencies: list[float] = []
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader(topic=TOPIC))
    request.version = 409
    frame = codec.encode(request)
    cpu = time.process_time()
    total = _lookups(addr, frame, conns, seconds, latencies)
    out.put((total, latencies, time.process_time() - cpu))


def _cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a process so far (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Result(NamedTuple):
    qps: float
    p99_ms: float
    server_us: float  # server CPU (user + system) per request
    client_us: float  # load generator CPU per request


def load(addr: str, procs: int, conns: int, seconds: float, server_pid: int, cpus: set[int] | None = None) -> Result:
    queue: mp.Queue = mp.Queue()
    workers = [mp.Process(target=_worker, args=(addr, conns, seconds, queue, cpus)) for _ in range(procs)]
    cpu0 = _cpu_seconds(server_pid)
    for w in workers:
        w.start()
    results = [queue.get() for _ in workers]
    cpu1 = _cpu_seconds(server_pid)
    for w in workers:
        w.join()
    total = sum(r[0] for r in results)
    lat = sorted(x for r in results for x in r[1])
    p99 = lat[int(len(lat) * 0.99)] * 1000 if lat else float("nan")
    client = sum(r[2] for r in results)
    return Result(total / seconds, p99, (cpu1 - cpu0) / total * 1e6, client / total * 1e6)


def cpu_list(text: str) -> set[int]:
    """``0``, ``0,2`` or ``1-3`` (taskset's CPU list) as a set of CPU numbers."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def pinning(text: str | None) -> tuple[set[int], set[int]] | None:
    """(server CPUs, generator CPUs) from ``--pin``; by default the first CPU for the servers and the
    rest for the generator, or none on a machine of one CPU."""
    if text is None:
        mine = sorted(os.sched_getaffinity(0))
        return ({mine[0]}, set(mine[1:])) if len(mine) > 1 else None
    server, _, generator = text.partition(":")
    return cpu_list(server), cpu_list(generator)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs per server; medians are reported")
    ap.add_argument("--warmup", type=float, default=5, help="seconds of load on each server before measuring")
    ap.add_argument("--version", default="4.9.8", help="Java name server version")
    ap.add_argument("--c1-only", action="store_true",
                    help="run the Java name server C1-only as the interop tests do (default: its normal JIT, C2)")
    ap.add_argument("--pin", help="SERVER_CPUS:GENERATOR_CPUS (default: the first CPU for the servers, the others "
                                  "for the generator)")
    ap.add_argument("--no-pin", action="store_true", help="servers and generator share every CPU")
    ap.add_argument("--reactor", help="twistd --reactor for rmqpy's name server, e.g. rmqpy-epoll "
                                      "(rmqpy/remoting/reactor.py); default: twistd's")
    args = ap.parse_args()
    pins = None if args.no_pin else pinning(args.pin)
    gen_cpus = None
    if pins is not None:
        # the servers are started from here and inherit this process's CPUs (every JVM thread too)
        os.sched_setaffinity(0, pins[0])
        gen_cpus = pins[1]
        print(f"servers on CPUs {sorted(pins[0])}, generator on {sorted(pins[1])}", flush=True)
    sys.path.insert(0, str(ROOT / "tests" / "interop"))
    import jvm  # type: ignore[import-not-found]
    runs: dict[str, list[Result]] = {"rmqpy": [], "java": []}
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=tmp)
        reactor = ["--reactor", args.reactor] if args.reactor else []
        ours = subprocess.Popen(["twistd", "-n", "--pidfile=", *reactor, "rmq-namesrv", "--listenPort", str(port)],
                                cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        java = None
        keep = []
        try:
            wait_port(port)
            # jvm.py's options end in -XX:TieredStopAtLevel=1 (right for short-lived test JVMs);
            # a later flag wins, so a long-running benchmark gives Java back its C2 compiler
            jit = [] if args.c1_only else ["-XX:TieredStopAtLevel=4"]
            java = jvm.start_java_namesrv(args.version, free_port(), tmp + "/java", jvm_args=jit)
            servers = {"rmqpy": (f"127.0.0.1:{port}", ours.pid), "java": (java.addr, java.pid)}
            for addr, _ in servers.values():
                keep.append(register_fake_broker(addr))
            for addr, pid in servers.values():
                load(addr, args.procs, args.conns, args.warmup, pid, gen_cpus)
            for _ in range(args.repeat):
                for name, (addr, pid) in servers.items():
                    r = load(addr, args.procs, args.conns, args.seconds, pid, gen_cpus)
                    runs[name].append(r)
                    print(f"  {name:6s} {r.qps:8.0f}/s  p99 {r.p99_ms:6.2f} ms  server CPU {r.server_us:5.1f} us/req  "
                          f"client CPU {r.client_us:5.1f} us/req  load {os.getloadavg()[0]:.2f}", flush=True)
        finally:
            for client in keep:
                client.close()
            ours.terminate()
            ours.wait()
            if java is not None:
                java.stop()
    med = {name: Result(*(statistics.median(getattr(r, f) for r in rs) for f in Result._fields))
           for name, rs in runs.items()}
    for name, r in med.items():
        spread = [f"{x.qps:.0f}" for x in runs[name]]
        print(f"{name:6s} route lookups/s {r.qps:10.0f} (runs {', '.join(spread)})   p99 {r.p99_ms:7.2f} ms   "
              f"server CPU {r.server_us:6.1f} us/req   client CPU {r.client_us:5.1f} us/req")
    print(f"ratio rmqpy/java (medians of {args.repeat}): throughput {med['rmqpy'].qps / med['java'].qps:.2f}x, "
          f"p99 {med['rmqpy'].p99_ms / med['java'].p99_ms:.2f}x (lower is better), "
          f"server CPU per request {med['java'].server_us / med['rmqpy'].server_us:.2f}x less; "
          f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
