"""Many connected RocketMQ 5 clients against the gRPC port (issue 31 case 2): each its own connection
with its Telemetry stream open, as an official client keeps one, and how a new client is served meanwhile.

    prlimit --nofile=200000:200000 python bench/grpc_clients_probe.py -n 20000 [--procs 4] [--heartbeat-s 0]
        [--root /tmp/rmqpy-main] [-D key=value ...]

Starts rmqpy's name server and a broker (tests/interop/servers.py; ``--root``: the checkout to run them
from, e.g. an export of an older main) with ``grpcMaxConnectionsPerAddress=-1`` (every client here comes
from 127.0.0.1, which the default per-address cap would stop at a quarter of the port's cap). ``--procs``
load-generator processes open ``-n`` clients in all: a ``grpc.aio`` channel each with a subchannel of its
own (its own TCP connection), a client id each, and on it the Telemetry stream an official producer opens:
its settings command sent, the broker's settings answer read, the stream then held. With
``--heartbeat-s`` each client also sends a Heartbeat that often (an official client: every 10 s).

Reports the clients connected (settings answered) and refused, the time to connect them, the broker's
RSS and thread count, and, while they are held, what a new client waits: a fresh connection's first
QueryRoute and SendMessage (``--samples`` times; p50 and max), and whether the official Python client
(5.1.2) starts and sends one message. The broker inherits this process's open-file limit, which it
raises to the hard limit at start: run the probe under ``prlimit`` for more than ~6,000 clients (the
default TLS-and-plain-text port relays each connection through the front: 3 descriptors a client;
``-D tls.server.mode=disabled``: grpcio holds the port, one descriptor a client). The clients' closed
connections sit in TIME_WAIT for a minute afterwards, in the ephemeral range where tests/interop's
``free_port`` looks: run it apart from the interop tests.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.grpc_idle_probe import grpc_send  # noqa: E402
from tests.interop import servers  # noqa: E402

TOPIC = "ClientsProbe"


def _settings(topic: str) -> Any:
    from google.protobuf.duration_pb2 import Duration
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as spb
    return spb.TelemetryCommand(settings=pb.Settings(
        client_type=pb.ClientType.PRODUCER, request_timeout=Duration(seconds=3),
        publishing=pb.Publishing(topics=[pb.Resource(name=topic)], max_body_size=4 * 1024 * 1024),
        user_agent=pb.UA(language=pb.Language.PYTHON, version="5.1.2", platform="probe", hostname="probe")))


def _metadata(client_id: str) -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"),
            ("x-mq-protocol", "v2"))


async def _client(endpoint: str, client_id: str, topic: str, heartbeat_s: float, connected: list[int],
                  refused: list[int], hold: asyncio.Event) -> None:
    import grpc
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as spb
    from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc
    channel = grpc.aio.insecure_channel(endpoint, options=[("grpc.use_local_subchannel_pool", 1)])
    stub = sgrpc.MessagingServiceStub(channel)
    commands: asyncio.Queue[Any] = asyncio.Queue()
    await commands.put(_settings(topic))

    async def outgoing() -> Any:
        while True:
            yield await commands.get()

    try:
        stream = stub.Telemetry(outgoing(), metadata=_metadata(client_id))
        first = await asyncio.wait_for(stream.read(), 60)
        if first is grpc.aio.EOF or first.status.code != pb.Code.OK:
            refused[0] += 1
            return
        connected[0] += 1
        while not hold.is_set():
            if heartbeat_s > 0:
                await stub.Heartbeat(spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER),
                                     metadata=_metadata(client_id), timeout=10)
                try:
                    await asyncio.wait_for(hold.wait(), heartbeat_s)
                except asyncio.TimeoutError:
                    pass
            else:
                await hold.wait()
    except Exception:  # noqa: BLE001 (refused, reset or timed out: counted)
        refused[0] += 1
    finally:
        await channel.close()


async def _worker(endpoint: str, n: int, first: int, topic: str, heartbeat_s: float) -> None:
    """One load-generator process: ``n`` clients, opened 200 at a time; a line of counts a second; held
    until stdin closes."""
    connected, refused = [0], [0]
    hold = asyncio.Event()
    tasks = []
    for start in range(0, n, 200):
        batch = [asyncio.ensure_future(_client(endpoint, f"probe-{first + i}", topic, heartbeat_s, connected,
                                                refused, hold)) for i in range(start, min(n, start + 200))]
        tasks += batch
        while connected[0] + refused[0] < len(tasks) - 100:  # at most ~300 connecting at once
            await asyncio.sleep(0.05)
    loop = asyncio.get_running_loop()
    stdin_closed = loop.run_in_executor(None, sys.stdin.read)
    while not stdin_closed.done():
        print(json.dumps({"connected": connected[0], "refused": refused[0]}), flush=True)
        await asyncio.wait([stdin_closed], timeout=1.0)
    hold.set()
    await asyncio.gather(*tasks, return_exceptions=True)


def new_client(endpoint: str, topic: str) -> tuple[float, float, str]:
    """A new client's first QueryRoute and SendMessage on a connection of its own: (ms, ms, codes)."""
    import grpc
    client_id = f"probe-new-{time.monotonic_ns()}"
    t0 = time.monotonic()
    try:
        return _new_client(endpoint, topic, client_id)
    except grpc.RpcError as exc:
        return (time.monotonic() - t0) * 1000, 0.0, f"gRPC {exc.code().name}"  # type: ignore[attr-defined]


def _new_client(endpoint: str, topic: str, client_id: str) -> tuple[float, float, str]:
    import grpc
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as spb
    from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc
    with grpc.insecure_channel(endpoint, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        t0 = time.monotonic()
        route = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=topic)), metadata=_metadata(client_id),
                                timeout=30)
        t1 = time.monotonic()
        message = pb.Message(topic=pb.Resource(name=topic), body=b"probe", system_properties=pb.SystemProperties(
            message_id=f"01{time.monotonic_ns():030X}"[:34], body_encoding=pb.Encoding.IDENTITY,
            message_type=pb.MessageType.NORMAL))
        sent = stub.SendMessage(spb.SendMessageRequest(messages=[message]), metadata=_metadata(client_id), timeout=30)
        t2 = time.monotonic()
    code = f"{pb.Code.Name(route.status.code)}/{pb.Code.Name(sent.status.code)}"
    return (t1 - t0) * 1000, (t2 - t1) * 1000, code


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "Threads"):
            out[key] = int(value.split()[0])
    out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=20000)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--heartbeat-s", type=float, default=0.0)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--root", help="checkout the servers run from (default: this one)")
    ap.add_argument("-D", action="append", default=[], help="key=value for the broker")
    ap.add_argument("--worker", nargs=4, metavar=("ENDPOINT", "N", "FIRST", "HEARTBEAT_S"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if a.worker:
        endpoint, n, first, heartbeat_s = a.worker
        asyncio.run(_worker(endpoint, int(n), int(first), TOPIC, float(heartbeat_s)))
        return 0
    report: dict[str, Any] = {"n": a.n, "procs": a.procs, "heartbeat_s": a.heartbeat_s, "nofile": hard,
                              "root": a.root or str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        if a.root:
            servers.ROOT = Path(a.root).resolve()
        port = servers.free_port()
        props: dict[str, object] = {"grpcServerPort": port, "grpcMaxConnectionsPerAddress": -1}
        props.update(kv.split("=", 1) for kv in a.D)
        workers: list[subprocess.Popen] = []
        with servers.Cluster(Path(tmp), "127.0.0.1", props) as cluster:
            endpoint = f"127.0.0.1:{port}"
            subprocess.run([sys.executable, "-m", "rmqpy.tools.admin", "updateTopic", "-n", cluster.ns_addr, "-c",
                            "DefaultCluster", "-t", TOPIC], check=True, capture_output=True, cwd=ROOT)
            time.sleep(1)
            broker_pid = cluster.broker.proc.pid
            report["broker before"] = proc_status(broker_pid)
            report["new client before (route ms, send ms, codes)"] = new_client(endpoint, TOPIC)
            t0 = time.monotonic()
            share = a.n // a.procs
            counts: list[dict[str, int]] = []
            try:
                for i in range(a.procs):
                    n = share if i < a.procs - 1 else a.n - share * (a.procs - 1)
                    workers.append(subprocess.Popen(
                        [sys.executable, __file__, "--worker", endpoint, str(n), str(i * share), str(a.heartbeat_s)],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT))
                counts = [{"connected": 0, "refused": 0} for _ in workers]
                last_change, last_total = time.monotonic(), -1
                while True:  # until every client is connected or refused, or nothing moved for 30 s
                    for i, w in enumerate(workers):
                        assert w.stdout is not None
                        counts[i] = json.loads(w.stdout.readline())
                    total = sum(c["connected"] + c["refused"] for c in counts)
                    if total != last_total:
                        last_change, last_total = time.monotonic(), total
                    if total >= a.n or time.monotonic() - last_change > 30:
                        break
                report["seconds to connect"] = round(time.monotonic() - t0, 1)
                report["connected"] = sum(c["connected"] for c in counts)
                report["refused or failed"] = sum(c["refused"] for c in counts)
                time.sleep(5)
                report["broker while held"] = proc_status(broker_pid)
                cpu0, t_cpu = cpu_seconds(broker_pid), time.monotonic()
                time.sleep(10)
                report["broker CPU % while held (10 s)"] = round(
                    (cpu_seconds(broker_pid) - cpu0) / (time.monotonic() - t_cpu) * 100, 1)
                samples = [new_client(endpoint, TOPIC) for _ in range(a.samples)]
                for k, label in ((0, "route"), (1, "send")):
                    ms = sorted(s[k] for s in samples)
                    report[f"new client while held: first {label} ms p50 / max"] = \
                        f"{ms[len(ms) // 2]:.1f} / {ms[-1]:.1f}"
                report["new client while held: codes"] = sorted({s[2] for s in samples})
                report["official Python client while held: started and sent"] = grpc_send(endpoint, TOPIC, 60)
                report["broker after the samples"] = proc_status(broker_pid)
            finally:
                for w in workers:
                    if w.stdin:
                        w.stdin.close()
                for w in workers:
                    try:
                        w.wait(60)
                    except subprocess.TimeoutExpired:
                        w.kill()
            log = "".join(p.read_text(errors="replace") for p in Path(tmp, "broker").rglob("*.log"))
            report["broker log: lines with 'refus' or 'EMFILE'"] = sum(
                1 for ln in log.splitlines() if "refus" in ln or "Too many open files" in ln)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
