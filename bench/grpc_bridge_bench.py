"""How grpcio should share the broker process with Twisted: a prototype measurement (issue 16).

    python bench/grpc_bridge_bench.py [--rounds 5] [--calls 2000] [--threads 8]

Two servers of one unary method (raw bytes, no protobuf) whose answer comes from a Deferred on the
Twisted reactor, as every rmqpy gRPC activity does:

* ``threads`` (rmqpy's choice, rmqpy/proxy/grpc/servicer.py): Twisted's default reactor, grpcio's
  synchronous server on a thread pool; each call hands its work to the reactor with
  ``callFromThread`` and waits on a queue for the Deferred's result;
* ``aio``: Twisted's asyncio reactor and a ``grpc.aio`` server on the same event loop; each call
  awaits the Deferred as an asyncio future, no thread hop.

Each round starts both servers afresh, in alternating order, and a client process (grpcio's sync
stub) measures: sequential calls (p50 / p99 latency) and ``--threads`` threads calling at once
(calls/s). Prints per round and the medians, with the 1-minute load average, and writes them to
bench/report/grpc/grpc_bridge_bench.json; 2 shared cores: noisy numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

METHOD = "/bench.Bench/Echo"
REPORT = Path(__file__).resolve().parent / "report" / "grpc"


def serve(mode: str) -> None:
    if mode == "aio":
        from twisted.internet import asyncioreactor
        asyncioreactor.install()
    import grpc
    from twisted.internet import defer, reactor

    def work(request: bytes) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        reactor.callLater(0, d.callback, request)  # answered on a later reactor turn, as a processor's reply
        return d

    if mode == "threads":
        import concurrent.futures
        import queue

        def echo(request: bytes, context) -> bytes:
            answer: queue.Queue = queue.Queue(1)
            reactor.callFromThread(lambda: work(request).addBoth(answer.put))
            return answer.get()

        handler = grpc.method_handlers_generic_handler("bench.Bench", {"Echo": grpc.unary_unary_rpc_method_handler(echo)})
        server = grpc.server(concurrent.futures.ThreadPoolExecutor(32), handlers=[handler])
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        reactor.callWhenRunning(lambda: print(port, flush=True))
        reactor.run()
        return

    import asyncio

    async def aecho(request: bytes, context) -> bytes:
        return await work(request).asFuture(asyncio.get_event_loop())

    async def start() -> None:
        handler = grpc.method_handlers_generic_handler("bench.Bench",
                                                       {"Echo": grpc.unary_unary_rpc_method_handler(aecho)})
        server = grpc.aio.server(handlers=[handler])
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(port, flush=True)
        start.server = server  # type: ignore[attr-defined]

    reactor.callWhenRunning(lambda: defer.Deferred.fromFuture(asyncio.ensure_future(start())))
    reactor.run()


def client(port: int, calls: int, threads: int) -> dict:
    import grpc
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    echo = ch.unary_unary(METHOD)
    payload = b"x" * 128
    for _ in range(200):  # warm-up
        echo(payload, timeout=10)
    lat = []
    for _ in range(calls):
        t0 = time.perf_counter()
        echo(payload, timeout=10)
        lat.append(time.perf_counter() - t0)
    lat.sort()
    per = calls // threads

    def loop() -> None:
        for _ in range(per):
            echo(payload, timeout=10)

    ts = [threading.Thread(target=loop) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    secs = time.perf_counter() - t0
    return {"p50_us": lat[len(lat) // 2] * 1e6, "p99_us": lat[int(len(lat) * 0.99)] * 1e6,
            "calls_per_s": per * threads / secs}


def measure(mode: str, calls: int, threads: int) -> dict:
    srv = subprocess.Popen([sys.executable, __file__, "--serve", mode], stdout=subprocess.PIPE, text=True)
    try:
        assert srv.stdout is not None
        port = int(srv.stdout.readline())
        load = os.getloadavg()[0]
        out = subprocess.run([sys.executable, __file__, "--client", str(port), str(calls), str(threads)],
                             capture_output=True, text=True, timeout=300, check=True).stdout
        return {"mode": mode, "load1": load, **json.loads(out)}
    finally:
        srv.kill()
        srv.wait(10)


def main() -> int:
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
        return 0
    if sys.argv[1:2] == ["--client"]:
        print(json.dumps(client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=8)
    a = ap.parse_args()
    rows = []
    for r in range(a.rounds):
        for mode in (("threads", "aio") if r % 2 == 0 else ("aio", "threads")):
            row = measure(mode, a.calls, a.threads)
            rows.append(row)
            print(json.dumps(row), flush=True)
    lines = []
    for mode in ("threads", "aio"):
        mine = [x for x in rows if x["mode"] == mode]
        lines.append(f"{mode}: median p50 {statistics.median(x['p50_us'] for x in mine):.0f} us, "
              f"p99 {statistics.median(x['p99_us'] for x in mine):.0f} us, "
              f"{statistics.median(x['calls_per_s'] for x in mine):.0f} calls/s with {a.threads} threads "
              f"(load {min(x['load1'] for x in mine):.1f}-{max(x['load1'] for x in mine):.1f})")
    print("\n".join(lines))
    REPORT.mkdir(parents=True, exist_ok=True)
    (REPORT / "grpc_bridge_bench.json").write_text(json.dumps({"args": vars(a), "rows": rows, "medians": lines,
                                                               "when": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                     time.gmtime())}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
