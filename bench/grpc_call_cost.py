"""The broker's CPU per gRPC call: Heartbeat, SendMessage, ReceiveMessage + AckMessage (issue 29 item 3, issue 31).

    python bench/grpc_call_cost.py [--rounds 3] [-n 3000] [--inflight 16] [--base /tmp/rmqpy-base]
        [--pyspy DIR] [-D key=value ...]

Starts rmqpy's name server and a broker (tests/interop/servers.py, ``tls.server.mode=disabled`` unless
``-D`` says otherwise: grpcio on the port itself) and, with ``--base``, a second pair run from that
checkout (e.g. ``git archive`` of the commit before a change). Per round, in alternating order, a client
process (``grpc.aio``, the generated stubs, 16 client ids) makes ``-n`` calls of each kind with
``--inflight`` in flight: Heartbeat (a producer's), SendMessage (one 128-byte message each), then
ReceiveMessage (batch 32, long polling 1 s) with an AckMessage per message until the ``n`` sent are
acknowledged. Reports the broker process's CPU (/proc utime+stime, every thread) per call, which the
shared cores disturb far less than rates, and the calls/s. ``--pyspy DIR`` records the broker under each
phase with ``py-spy record --format raw`` (collapsed stacks, one file per target and phase).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.grpc_clients_probe import _settings, cpu_seconds  # noqa: E402
from tests.interop import servers  # noqa: E402

PHASES = ("heartbeat", "send", "receive_ack")


def _metadata(client_id: str) -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2"),
            ("x-mq-protocol", "v2"))


async def _phase(endpoint: str, phase: str, topic: str, group: str, n: int, inflight: int) -> dict[str, Any]:
    import grpc
    from google.protobuf.duration_pb2 import Duration
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as spb
    from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        metas = [_metadata(f"cost-{phase}-{i}") for i in range(16)]
        codes: dict[str, int] = {}
        left = [n]
        t0 = time.monotonic()

        def count(code: int) -> None:
            name = pb.Code.Name(code)
            codes[name] = codes.get(name, 0) + 1

        async def heartbeats(w: int) -> None:
            req = spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER)
            while left[0] > 0:
                left[0] -= 1
                count((await stub.Heartbeat(req, metadata=metas[w % 16], timeout=30)).status.code)

        async def sends(w: int) -> None:
            while left[0] > 0:
                left[0] -= 1
                message = pb.Message(topic=pb.Resource(name=topic), body=b"x" * 128,
                                     system_properties=pb.SystemProperties(
                                         message_id=f"01{time.monotonic_ns():016X}{w:04X}{left[0]:012X}",
                                         body_encoding=pb.Encoding.IDENTITY, message_type=pb.MessageType.NORMAL))
                resp = await stub.SendMessage(spb.SendMessageRequest(messages=[message]), metadata=metas[w % 16],
                                              timeout=30)
                count(resp.status.code)

        acks: asyncio.Queue[Any] = asyncio.Queue()
        received = [0]

        async def receives() -> None:
            req = spb.ReceiveMessageRequest(
                group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
                filter_expression=pb.FilterExpression(type=pb.FilterType.TAG, expression="*"), batch_size=32,
                invisible_duration=Duration(seconds=30), long_polling_timeout=Duration(seconds=1))
            while received[0] < n:
                async for resp in stub.ReceiveMessage(req, metadata=metas[0], timeout=10):
                    if resp.HasField("message"):
                        received[0] += 1
                        await acks.put(resp.message)
                    elif resp.HasField("status"):
                        count(resp.status.code)
            for _ in range(inflight):
                await acks.put(None)

        async def ackers(w: int) -> None:
            while True:
                message = await acks.get()
                if message is None:
                    return
                resp = await stub.AckMessage(spb.AckMessageRequest(
                    group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=[spb.AckMessageEntry(
                        message_id=message.system_properties.message_id,
                        receipt_handle=message.system_properties.receipt_handle)]), metadata=metas[0], timeout=30)
                count(resp.status.code)

        if phase == "heartbeat":  # each client's settings first, on its Telemetry stream, held meanwhile
            hold = asyncio.Event()

            async def settings() -> Any:
                yield _settings(topic)
                await hold.wait()

            streams = [stub.Telemetry(settings(), metadata=meta) for meta in metas]
            for stream in streams:
                await stream.read()
            t0 = time.monotonic()
            await asyncio.gather(*(heartbeats(w) for w in range(inflight)))
            hold.set()
            for stream in streams:
                stream.cancel()
        elif phase == "send":
            await asyncio.gather(*(sends(w) for w in range(inflight)))
        else:
            await asyncio.gather(receives(), *(ackers(w) for w in range(inflight)))
        return {"seconds": time.monotonic() - t0, "codes": codes}


def worker(args: list[str]) -> int:
    endpoint, phase, topic, group, n, inflight = args
    print(json.dumps(asyncio.run(_phase(endpoint, phase, topic, group, int(n), int(inflight)))), flush=True)
    return 0


def run_phase(endpoint: str, phase: str, topic: str, group: str, n: int, inflight: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--worker", endpoint, phase, topic, group, str(n), str(inflight)],
                          capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"worker {phase} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def _valgrind(out: Path) -> str:
    """The broker's interpreter under callgrind, its instrumentation off until a phase starts."""
    out.mkdir(parents=True, exist_ok=True)
    return ("exec env PYTHONHASHSEED=0 valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes "
            f"--callgrind-out-file={out.resolve()}/broker.%p /root/.pyenv/versions/3.11.7/bin/python3 \"$@\"\n")


def _twistd_profile(out: Path, name: str) -> str:
    """twistd's own cProfile of the reactor thread (written when the broker stops); argv is
    python -c CODE -n --pidfile= TAP ...: the options go before the TAP."""
    out.mkdir(parents=True, exist_ok=True)
    return (f'a="$1"; b="$2"; c="$3"; d="$4"; shift 4; exec {sys.executable} "$a" "$b" "$c" "$d" '
            f'--profile={out.resolve()}/reactor-{name}.pstats --profiler=cprofile --savestats "$@"\n')


def _wrapped_cluster(tmp: Path, props: dict[str, object], launcher: str) -> Any:
    """A name server, and a broker whose interpreter is started by the shell line ``launcher``."""
    tmp.mkdir(parents=True, exist_ok=True)
    wrapper = tmp / "broker-python"
    wrapper.write_text("#!/bin/bash\n" + launcher)
    wrapper.chmod(0o755)
    ns = servers.start_namesrv(tmp / "ns")
    executable, sys.executable = sys.executable, str(wrapper)
    try:
        broker = servers.start_broker(tmp / "broker", ns.addr, props=props, timeout=900)
    finally:
        sys.executable = executable
    servers.wait_broker_registered(ns.addr, broker.addr)

    class Pair:
        ns_addr = ns.addr

        def __init__(self) -> None:
            self.broker = broker

        def close(self) -> None:
            broker.stop(120)
            ns.stop()
    return Pair()


def _cg(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True, timeout=300)


def _cg_dump(pid: int, out: Path) -> dict[str, int]:
    """Dumps the counts since the last zeroing: the dump's instructions per thread (callgrind's
    thread numbers: 1 is the reactor's)."""
    before = set(out.glob(f"broker.{pid}.*"))
    _cg(pid, "-d")
    time.sleep(2.0)
    for _ in range(600):
        new = sorted(set(out.glob(f"broker.{pid}.*")) - before)
        if new and all(p.stat().st_size > 0 for p in new):
            time.sleep(1.0)
            threads = {}
            for path in new:
                for line in path.read_text(errors="replace").splitlines():
                    if line.startswith(("totals:", "summary:")):
                        threads[path.name.rpartition("-")[2]] = int(line.split()[1])
                        break
            return threads
        time.sleep(0.5)
    raise RuntimeError("no callgrind dump")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=3000)
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--base", help="a second broker run from this checkout, measured alternately")
    ap.add_argument("--pyspy", help="record each phase with py-spy into this folder")
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--callgrind", help="run the brokers under valgrind's callgrind (instrumented only during "
                    "each phase) and report instructions per call; its dumps go into this folder")
    ap.add_argument("--profile-reactor", help="twistd's cProfile of each broker's reactor thread, into this folder")
    ap.add_argument("-D", action="append", default=[], help="broker property key=value")
    a = ap.parse_args()
    props: dict[str, object] = {"tls.server.mode": "disabled"}
    props.update(kv.split("=", 1) for kv in a.D)  # type: ignore[misc]
    roots = {"this": ROOT} | ({"base": Path(a.base).resolve()} if a.base else {})
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        clusters = {}
        try:
            for name, root in roots.items():
                servers.ROOT = root
                port = servers.free_port()
                broker_props = {**props, "brokerName": f"broker-{name}", "grpcServerPort": port}
                if a.callgrind:
                    c = _wrapped_cluster(Path(tmp) / name, broker_props, _valgrind(Path(a.callgrind)))
                elif a.profile_reactor:
                    c = _wrapped_cluster(Path(tmp) / name, broker_props, _twistd_profile(Path(a.profile_reactor), name))
                else:
                    c = servers.Cluster(Path(tmp) / name, "127.0.0.1", broker_props)
                clusters[name] = (c, f"127.0.0.1:{port}")
            servers.ROOT = ROOT
            names = list(clusters)
            for r in range(a.rounds):
                for name in (names if r % 2 == 0 else names[::-1]):
                    c, endpoint = clusters[name]
                    pid = c.broker.proc.pid
                    topic, group = f"CostT{r}{name}", f"CostG{r}{name}"
                    subprocess.run([sys.executable, "-m", "rmqpy.tools.admin", "updateTopic", "-n", c.ns_addr, "-c",
                                    "DefaultCluster", "-t", topic, "-r", "8", "-w", "8"], check=True,
                                   capture_output=True, cwd=ROOT)
                    for phase in a.phases.split(","):
                        spy = None
                        if a.pyspy:
                            Path(a.pyspy).mkdir(parents=True, exist_ok=True)
                            mode = ["--native"] if os.environ.get("PYSPY_NATIVE") else ["--nonblocking"]
                            spy = subprocess.Popen(["py-spy", "record", "-p", str(pid), "--format", "raw", "-r", "200",
                                                    "--threads", *mode, "-o", f"{a.pyspy}/{name}-{phase}-{r}.txt"],
                                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                            time.sleep(1.0)
                        if a.callgrind:
                            _cg(pid, "-i", "on")
                            _cg(pid, "-z")
                        cpu0 = cpu_seconds(pid)
                        out = run_phase(endpoint, phase, topic, group, a.n, a.inflight)
                        cpu = cpu_seconds(pid) - cpu0
                        if a.callgrind:
                            out["instructions"] = threads = _cg_dump(pid, Path(a.callgrind))
                            _cg(pid, "-i", "off")
                            row = results.setdefault(name, {})
                            row.setdefault(f"{phase} kinstr/call", []).append(sum(threads.values()) / a.n / 1000)
                            row.setdefault(f"{phase} kinstr/call, reactor thread", []).append(
                                threads.get("01", 0) / a.n / 1000)
                        if spy is not None:
                            spy.send_signal(2)
                            spy.wait(30)
                        row = results.setdefault(name, {})
                        row.setdefault(f"{phase} µs/call", []).append(cpu / a.n * 1e6)
                        row.setdefault(f"{phase} calls/s", []).append(a.n / out["seconds"])
                        print(json.dumps({"round": r, "target": name, "phase": phase, "cpu_s": round(cpu, 2),
                                          "us_per_call": round(cpu / a.n * 1e6), **out}), flush=True)
        finally:
            for c, _ in clusters.values():
                c.close()
    print("| median | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    for key in next(iter(results.values())):
        print(f"| {key} | " + " | ".join(f"{statistics.median(results[n][key]):.0f}" for n in results) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
