"""Route lookups per second and p99 latency: twistd rmq-namesrv vs the Java name server.

    python bench/namesrv_bench.py [--seconds 10] [--procs 2] [--conns 16]

Both servers get the same fake broker registration and the same load from the same
generator (asyncio, several processes, one request in flight per connection), one after
the other in the same run. Prints both results and the ratio rmqpy / Java.
Not a test: numbers depend on the machine, which is also running the generator.
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

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


async def _connection(addr: str, until: float, latencies: list[float]) -> int:
    host, _, port = addr.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader(topic=TOPIC))
    request.version = 409
    frame = codec.encode(request)
    done = 0
    while time.perf_counter() < until:
        start = time.perf_counter()
        writer.write(frame)
        (length,) = struct.unpack(">I", await reader.readexactly(4))
        await reader.readexactly(length)
        latencies.append(time.perf_counter() - start)
        done += 1
    writer.close()
    return done


def _worker(addr: str, conns: int, seconds: float, out: mp.Queue) -> None:
    latencies: list[float] = []
    until = time.perf_counter() + seconds

    async def main() -> int:
        counts = await asyncio.gather(*[_connection(addr, until, latencies) for _ in range(conns)])
        return sum(counts)

    total = asyncio.run(main())
    out.put((total, latencies))


def load(addr: str, procs: int, conns: int, seconds: float) -> tuple[float, float]:
    queue: mp.Queue = mp.Queue()
    workers = [mp.Process(target=_worker, args=(addr, conns, seconds, queue)) for _ in range(procs)]
    for w in workers:
        w.start()
    results = [queue.get() for _ in workers]
    for w in workers:
        w.join()
    total = sum(r[0] for r in results)
    lat = sorted(x for r in results for x in r[1])
    p99 = lat[int(len(lat) * 0.99)] * 1000 if lat else float("nan")
    return total / seconds, p99


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--version", default="4.9.8", help="Java name server version")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=tmp)
        ours = subprocess.Popen(["twistd", "-n", "--pidfile=", "rmq-namesrv", "--listenPort", str(port)],
                                cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            wait_port(port)
            keep = register_fake_broker(f"127.0.0.1:{port}")
            results["rmqpy"] = load(f"127.0.0.1:{port}", args.procs, args.conns, args.seconds)
            keep.close()
        finally:
            ours.terminate()
            ours.wait()
        sys.path.insert(0, str(ROOT / "tests" / "interop"))
        import jvm  # type: ignore[import-not-found]
        jport = free_port()
        java = jvm.start_java_namesrv(args.version, jport, tmp + "/java")
        try:
            keep = register_fake_broker(f"127.0.0.1:{jport}")
            results["java"] = load(f"127.0.0.1:{jport}", args.procs, args.conns, args.seconds)
            keep.close()
        finally:
            java.stop()
    for name, (qps, p99) in results.items():
        print(f"{name:6s} route lookups/s {qps:10.0f}   p99 {p99:7.2f} ms")
    print(f"ratio rmqpy/java: throughput {results['rmqpy'][0] / results['java'][0]:.2f}x, "
          f"p99 {results['rmqpy'][1] / results['java'][1]:.2f}x (lower is better for p99)")


if __name__ == "__main__":
    main()
