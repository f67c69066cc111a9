"""CPU per route lookup on the name server's request path, in-process and deterministic (issue 2).

    python bench/namesrv_path_profile.py [-n 200000] [--repeat 5] [--top 25] [--no-profile]
                                         [--version 409] [--topics 1] [--no-replay]

Not a test. Each measured request goes the way a GET_ROUTEINFO_BY_TOPIC (code 105) from a
Java 4.9.8 client goes through ``twistd rmq-namesrv``, minus the socket:

    frame bytes -> RemotingProtocol.dataReceived (framing, rmqpy/remoting/protocol.py)
    -> command.decode (JSON header) -> RequestDispatcher (rmqpy/remoting/dispatch.py)
    -> NamesrvRequestProcessor.get_route_info (header, route cache, rmqpy/namesrv/)
    -> response RemotingCommand -> command.encode -> transport.write

or, from the second request of a kind on, the dispatcher's replay memo
(rmqpy/remoting/replay.py: the kept answer with the request's opaque, nothing decoded);
``--no-replay`` turns the memo off and measures the whole path every time.

The frames are built beforehand (the JSON header a 4.9.8 ``MQClientAPIImpl`` writes:
``extFields {"topic": T}``, language JAVA, version 409, opaques 1..n), so only the name
server's work is counted. One fake master broker registers first (as in
``namesrv_bench.py``: one topic with 8 queues, its connection kept open); the name server
runs on a ``task.Clock`` that never advances, so no timer runs and the numbers are the
per-request work alone.

CPU time is ``time.process_time()`` (user + system of this process), so other load on a
shared machine changes it little; the run is repeated ``--repeat`` times and the minimum
is reported. Then one more run under cProfile prints the top entries by own time
(profiling slows everything down; its totals are not the numbers above).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from twisted.internet import address, task  # noqa: E402

from rmqpy.namesrv.config import NamesrvConfig, NettyServerConfig  # noqa: E402
from rmqpy.namesrv.controller import NamesrvController  # noqa: E402
from rmqpy.protocol import command as codec  # noqa: E402
from rmqpy.protocol.bodies.topic import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper  # noqa: E402
from rmqpy.protocol.codes import RequestCode, ResponseCode  # noqa: E402
from rmqpy.protocol.command import RemotingCommand  # noqa: E402
from rmqpy.protocol.headers import namesrv as h  # noqa: E402

TOPIC = "BenchTopic"
WARMUP = 5000


class NullTransport:
    """Enough of an ITransport for RemotingProtocol; counts what the name server writes."""

    disconnecting = False

    def __init__(self) -> None:
        self.written = 0
        self.frames = 0
        self.last = b""

    def write(self, data: bytes) -> None:
        self.written += len(data)
        self.frames += 1
        self.last = data

    def writeSequence(self, seq) -> None:
        for d in seq:
            self.write(d)

    def getPeer(self):
        return address.IPv4Address("TCP", "127.0.0.1", 40123)

    def getHost(self):
        return address.IPv4Address("TCP", "127.0.0.1", 9876)

    def loseConnection(self) -> None:
        raise AssertionError("the name server closed the connection")

    def abortConnection(self) -> None:
        self.loseConnection()


def topic_name(i: int, topics: int) -> str:
    return TOPIC if topics == 1 else f"{TOPIC}{i % topics}"


def make_namesrv(kv_dir: str, topics: int, replay: bool = True) -> tuple[NamesrvController, NullTransport]:
    """A name server on a task.Clock with one registered master broker (connection kept)."""
    clock = task.Clock()
    clock.advance(1_700_000_000)
    cfg = NamesrvConfig(kvConfigPath=os.path.join(kv_dir, "kvConfig.json"))
    ctl = NamesrvController(cfg, NettyServerConfig(listenPort=0), reactor=clock, clock=clock)
    if not replay:
        ctl.dispatcher.memo.disable()
    ctl.kv.load()
    names = {topic_name(i, topics) for i in range(topics)}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(
        {t: TopicConfig(t, 8, 8) for t in names}, DataVersion())).encode()
    hdr = h.RegisterBrokerRequestHeader(brokerName="bench-broker", brokerAddr="127.0.0.1:10911",
                                        clusterName="BenchCluster", haServerAddr="127.0.0.1:10912", brokerId=0,
                                        bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF)
    req = RemotingCommand.request(RequestCode.REGISTER_BROKER, hdr, body)
    req.opaque, req.version = 1, 409
    broker_conn = ctl.factory.buildProtocol(None)
    broker_transport = NullTransport()
    broker_conn.makeConnection(broker_transport)
    broker_conn.dataReceived(codec.encode(req))
    resp = codec.decode(broker_transport.last[4:])
    assert resp.code == ResponseCode.SUCCESS, resp
    return ctl, broker_transport


def build_frames(n: int, version: int, topics: int, start: int = 1) -> list[bytes]:
    """``n`` GET_ROUTEINFO_BY_TOPIC frames (JSON header, as the Java client writes them)."""
    out = []
    for i in range(start, start + n):
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                      h.GetRouteInfoRequestHeader(topic=topic_name(i, topics)))
        cmd.opaque = i
        cmd.language = 0  # JAVA
        cmd.version = version
        out.append(codec.encode(cmd))
    return out


def run_once(n: int, version: int, topics: int, base: str, frames: list[bytes],
             profile: cProfile.Profile | None = None, replay: bool = True) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, response bytes) for ``n`` lookups on a fresh name server."""
    kv_dir = tempfile.mkdtemp(prefix="ns-", dir=base)
    ctl, _keep = make_namesrv(kv_dir, topics, replay)
    transport = NullTransport()
    proto = ctl.factory.buildProtocol(None)
    proto.makeConnection(transport)
    feed = proto.dataReceived
    for frame in build_frames(WARMUP, version, topics, start=10_000_000):
        feed(frame)
    assert transport.frames == WARMUP, transport.frames
    transport.frames = 0
    transport.written = 0
    c0, w0 = time.process_time(), time.perf_counter()
    if profile is not None:
        profile.enable()
    for frame in frames:
        feed(frame)
    if profile is not None:
        profile.disable()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    assert transport.frames == n, f"{transport.frames} responses for {n} requests"
    last = codec.decode(transport.last[4:])
    assert last.code == ResponseCode.SUCCESS and last.opaque == n and last.body, last
    return cpu, wall, transport.written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=200_000, help="requests per run (default 200000)")
    ap.add_argument("--repeat", type=int, default=5, help="runs; the minimum is reported (default 5)")
    ap.add_argument("--top", type=int, default=25, help="cProfile entries to print")
    ap.add_argument("--no-profile", action="store_true", help="skip the cProfile run")
    ap.add_argument("--version", type=int, default=409, help="client version in the header (409 = 4.9.8)")
    ap.add_argument("--topics", type=int, default=1, help="distinct topics asked for in turn (default 1)")
    ap.add_argument("--no-replay", action="store_true", help="the dispatcher's replay memo off: the whole path each time")
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="rmqpy-nsprof-")
    try:
        frames = build_frames(args.n, args.version, args.topics)
        print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}, "
              f"n={args.n}, repeat={args.repeat}, version={args.version}, topics={args.topics}, "
              f"replay {'off' if args.no_replay else 'on'}")
        runs = [run_once(args.n, args.version, args.topics, base, frames, replay=not args.no_replay)
                for _ in range(args.repeat)]
        cpus = [r[0] for r in runs]
        best = min(cpus)
        print(f"GET_ROUTEINFO_BY_TOPIC: CPU {best * 1e6 / args.n:6.2f} us/request (min of "
              + ", ".join(f"{c * 1e6 / args.n:.2f}" for c in cpus)
              + f"), wall {min(r[1] for r in runs) * 1e6 / args.n:.2f} us/request, "
              f"{args.n / best:,.0f} requests/s per CPU, {runs[0][2] / args.n:.0f} B/response", flush=True)
        if not args.no_profile:
            prof = cProfile.Profile()
            run_once(args.n, args.version, args.topics, base, frames, prof, replay=not args.no_replay)
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
            text = out.getvalue()
            start = text.find("   ncalls")
            print(f"--- cProfile, top {args.top} by own time (per request: divide by {args.n}) ---")
            print(text[start:].rstrip() + "\n", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
