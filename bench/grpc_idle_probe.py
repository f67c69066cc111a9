"""Idle connections against the gRPC port (issue 31 case 1): how many stay open, and whether producers
still send while they are held and after the idle time.

    python bench/grpc_idle_probe.py [-n 600] [--sources 8] [--idle-ms 5000] [--kind h2|silent|both]
    python bench/grpc_idle_probe.py --grpc 127.0.0.1:8081 --namesrv 127.0.0.1:9876 --topic T [...]

Without ``--grpc`` it starts rmqpy's name server and a broker (tests/interop/servers.py, ``--root``: the
checkout to run them from, e.g. an export of main for the "before" figure) with
``grpcClientIdleTimeMills=--idle-ms``; with it, it probes the broker already running there (the idle time
must then be given as the broker has it). Opens ``-n`` TCP connections to the gRPC port from
``--sources`` loopback addresses (127.0.0.2, ...: a flood from several hosts; the producers connect from
127.0.0.1): ``h2`` ones send the HTTP/2 client preface and an empty SETTINGS frame and then nothing
(a gRPC channel that makes no call), ``silent`` ones send nothing at all. Reports the connections
open right after the flood, after the first-byte timeout and after the idle time, and at the first and
the last point whether one message goes through the official Python client (gRPC, to ``--topic``) and
through rmqpy.client (remoting, through the name server, to a topic of its own each time, created by
the send: the store must open new consume-queue files for it, what a descriptor flood prevents).
For a broker under a small open-file limit run the probe under one (the broker inherits it):

    prlimit --nofile=4096:4096 python bench/grpc_idle_probe.py -n 1500 [--root /tmp/rmqpy-main]
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import resource
import select
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.interop import servers  # noqa: E402

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # + empty SETTINGS


KIND: dict[int, str] = {}  # id(socket) -> "h2" or "silent"
CLOSED: dict[str, list[float]] = {"h2": [], "silent": []}  # seconds after the flood's end each was seen closed
T0 = [0.0]


def open_flood(host: str, port: int, n: int, sources: int, kind: str) -> list[socket.socket]:
    socks = []
    for i in range(n):
        s = socket.socket()
        s.bind((f"127.0.0.{2 + i % sources}", 0))
        try:
            s.connect((host, port))
        except OSError as exc:
            print(f"connect {i}: {exc}", flush=True)
            s.close()
            continue
        KIND[id(s)] = "h2" if kind == "h2" or (kind == "both" and i % 2 == 0) else "silent"
        if KIND[id(s)] == "h2":
            try:
                s.sendall(PREFACE)
            except OSError:
                pass
        s.setblocking(False)
        socks.append(s)
    return socks


def still_open(socks: list[socket.socket]) -> list[socket.socket]:
    """Drops the sockets the server closed (EOF or reset); reads and discards what it sent."""
    alive = []
    poller = select.poll()
    by_fd = {s.fileno(): s for s in socks}
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    ready = {fd for fd, _ in poller.poll(0)}
    for fd, s in by_fd.items():
        if fd in ready:
            try:
                while True:
                    data = s.recv(65536)
                    if not data:
                        raise ConnectionResetError
            except BlockingIOError:
                pass
            except OSError:
                CLOSED[KIND.get(id(s), "silent")].append(time.monotonic() - T0[0])
                s.close()
                continue
        alive.append(s)
    return alive


def grpc_send(endpoint: str, topic: str, timeout: float = 40) -> str:
    """Whether the official Python client starts and sends one message: "yes (N ms)" (its start-up
    and the send), or "no: " and why."""
    code = ("import sys, time\nfrom rocketmq import ClientConfiguration, Credentials, Message, Producer\n"
            "t = time.monotonic()\n"
            "p = Producer(ClientConfiguration(sys.argv[1], Credentials(), request_timeout=5), (sys.argv[2],))\n"
            "p.startup()\nm = Message()\nm.topic, m.body = sys.argv[2], b'probe'\n"
            "p.send(m)\nprint('SENT %.0f' % ((time.monotonic() - t) * 1000), flush=True)\np.shutdown()\n")
    try:
        proc = subprocess.run([sys.executable, "-c", code, endpoint, topic], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"no (timed out after {timeout:.0f} s)"
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("SENT")), None)
    if line:
        return f"yes ({line[5:]} ms)"
    return "no: " + (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1][:200]


def remoting_send(namesrv: str, topic: str) -> str:
    from rmqpy.client import Message, Producer
    try:
        with Producer(namesrv, send_timeout_ms=5000) as producer:
            result = producer.send(Message(topic, b"probe"))
        return f"yes ({result.status})" if "OK" in str(result.status) else f"no ({result.status})"
    except Exception as exc:  # what the broker answered or why nothing came back
        return f"no: {type(exc).__name__}: {str(exc)[:200]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=600)
    ap.add_argument("--sources", type=int, default=8)
    ap.add_argument("--kind", choices=("h2", "silent", "both"), default="h2")
    ap.add_argument("--idle-ms", type=int, default=5000)
    ap.add_argument("--first-byte-ms", type=int, default=10000, help="the broker's tls.handshake.timeoutMillis")
    ap.add_argument("--grpc", help="host:port of a running broker's gRPC port")
    ap.add_argument("--namesrv", help="host:port of its name server")
    ap.add_argument("--topic", default="IdleProbe")
    ap.add_argument("--root", help="checkout the servers run from (default: this one)")
    ap.add_argument("-D", action="append", default=[], help="key=value for the broker started here")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    report: dict[str, object] = {"n": a.n, "kind": a.kind, "sources": a.sources, "idle_ms": a.idle_ms,
                                 "nofile": [soft, hard]}
    cluster = None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            if a.grpc:
                endpoint, namesrv = a.grpc, a.namesrv
            else:
                if a.root:
                    servers.ROOT = Path(a.root).resolve()
                port = servers.free_port()
                props: dict[str, object] = {"grpcServerPort": port, "grpcClientIdleTimeMills": a.idle_ms}
                props.update(kv.split("=", 1) for kv in a.D)
                cluster = servers.Cluster(Path(tmp), "127.0.0.1", props)
                endpoint, namesrv = f"127.0.0.1:{port}", cluster.ns_addr
                subprocess.run([sys.executable, "-m", "rmqpy.tools.admin", "updateTopic", "-n", namesrv, "-c",
                                "DefaultCluster", "-t", a.topic], check=True, capture_output=True, cwd=ROOT)
                time.sleep(1)
            host, port_text = endpoint.rsplit(":", 1)
            report["before flood: grpc send"] = grpc_send(endpoint, a.topic)
            t0 = T0[0] = time.monotonic()
            socks = open_flood(host, int(port_text), a.n, a.sources, a.kind)
            report["seconds to open the flood"] = round(time.monotonic() - t0, 1)
            t0 = T0[0] = time.monotonic()  # the times below count from the flood's end
            time.sleep(1.0)
            socks = still_open(socks)
            report["open 1 s after the flood"] = len(socks)
            # the sends run beside the polling, so that a close is seen within 0.5 s
            pool = concurrent.futures.ThreadPoolExecutor(2)
            during = {"during: grpc send": pool.submit(grpc_send, endpoint, a.topic),
                      "during: remoting send": pool.submit(remoting_send, namesrv, f"{a.topic}During")}
            for label, at in (("after the first-byte timeout", a.first_byte_ms / 1000 + 2),
                              ("after the idle time", max(a.first_byte_ms, a.idle_ms) / 1000 + 5)):
                while time.monotonic() - t0 < at:
                    time.sleep(0.5)
                    socks = still_open(socks)
                report[f"open {label} ({at:.0f} s)"] = len(socks)
            for key, fut in during.items():
                report[key] = fut.result()
            pool.shutdown()
            report["after: grpc send"] = grpc_send(endpoint, a.topic)
            report["after: remoting send"] = remoting_send(namesrv, f"{a.topic}After")
            for s in socks:
                s.close()
            for k, times in CLOSED.items():
                if times:
                    times.sort()
                    report[f"{k}: closed by the broker, first / median / last (s)"] = \
                        f"{len(times)}: {times[0]:.1f} / {times[len(times) // 2]:.1f} / {times[-1]:.1f}"
            if cluster is not None:
                log = "".join(p.read_text(errors="replace") for p in Path(tmp, "broker").rglob("*.log"))
                report["broker log: EMFILE lines"] = log.count("Too many open files")
                report["broker log: refusal lines"] = log.count("refusing connections")
                report["broker log: caps"] = [ln.split("gRPC port: ", 1)[1][:160] for ln in log.splitlines()
                                              if "gRPC port: at most" in ln]
                report["broker log: open files"] = [ln.split("open files: ", 1)[1] for ln in log.splitlines()
                                                    if "open files: soft" in ln or "open files: the soft" in ln]
        finally:
            if cluster is not None:
                cluster.close()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
