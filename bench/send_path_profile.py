"""CPU per sent message on the broker's send path, in-process and deterministic (issue 4).

    python bench/send_path_profile.py [-n 50000] [--sizes 128,1024] [--repeat 3] [--top 25]
                                      [--no-profile] [--index/--no-index] [--dir DIR] [--pull]
                                      [--metrics] [--batch K] [--prefault]

Not a test. Each measured message goes the way a SEND_MESSAGE_V2 request from a Java
4.9.8 producer goes through ``twistd rmq-broker``, minus the socket:

    frame bytes -> RemotingProtocol.dataReceived (framing, rmqpy/remoting/protocol.py)
    -> command.decode (JSON header) -> RequestDispatcher -> SendMessageProcessor
    -> MessageStore.put_message (commit log, consume queue, index, arrive listeners)
    -> response RemotingCommand -> command.encode -> transport.write

The frames are built beforehand (one per message: the header a ``DefaultMQProducer``
sends for ``new Message(topic, body)``: UNIQ_KEY + WAIT=true, queue ids 0..3 in turn),
so only the broker's work is counted. The broker runs on a ``task.Clock`` that never
advances, with the store settings of ``broker_bench.py`` (ASYNC_FLUSH, index on,
128 MiB commit log files): no timer (flush, stats, name-server registration) runs, so
the numbers are the per-message work alone and repeat from run to run.

With ``--pull`` it measures PULL_MESSAGE instead: the ``n`` messages are sent first (not
counted), then read back by pulls of 32 (the header a 4.9.8 push consumer sends, subscription
``*``) through the same path; the figure is CPU per pulled message.

CPU time is ``time.process_time()`` (user + system of this process), so other load on a
shared machine changes it little; each size is measured ``--repeat`` times on a fresh
store and the minimum is reported. Then one more run under cProfile prints the top
entries by own time (profiling slows everything down; its totals are not the numbers
above).
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from twisted.internet import address, task  # noqa: E402

from rmqpy.broker.config import BrokerSettings  # noqa: E402
from rmqpy.broker.controller import BrokerController  # noqa: E402
from rmqpy.protocol import command as codec  # noqa: E402
from rmqpy.protocol.codes import RequestCode, ResponseCode  # noqa: E402
from rmqpy.protocol.command import RemotingCommand  # noqa: E402
from rmqpy.protocol.headers.broker import PullMessageRequestHeader, SendMessageRequestHeaderV2  # noqa: E402
from rmqpy.protocol.message import encode_batch_body  # noqa: E402
from rmqpy.remoting.protocol import RemotingProtocol  # noqa: E402

TOPIC = "BenchTopic"
WARMUP = 2000

#: as broker_bench.STORE
STORE = {
    "flushDiskType": "ASYNC_FLUSH",
    "brokerRole": "ASYNC_MASTER",
    "mappedFileSizeCommitLog": 128 * 1024 * 1024,
    "mappedFileSizeConsumeQueue": 300000 * 20,
    "maxHashSlotNum": 100000,
    "maxIndexNum": 400000,
    "messageIndexEnable": True,
    "transientStorePoolEnable": False,
}


class NullTransport:
    """Enough of an ITransport for RemotingProtocol; counts what the broker writes."""

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
        # what Twisted's FileDescriptor does with the pieces queued for one write: joins them
        # (one write of one piece it sends as it is)
        self.write(b"".join(seq))

    def getPeer(self):
        return address.IPv4Address("TCP", "127.0.0.1", 40123)

    def getHost(self):
        return address.IPv4Address("TCP", "127.0.0.1", 10911)

    def loseConnection(self) -> None:
        raise AssertionError("the broker closed the connection")

    def abortConnection(self) -> None:
        self.loseConnection()


METRICS = False


def make_broker(root: str, index: bool) -> tuple[BrokerController, task.Clock]:
    clock = task.Clock()
    clock.advance(1_700_000_000)
    settings = BrokerSettings()
    b = settings.broker
    b.brokerIP1 = b.brokerIP2 = "127.0.0.1"
    b.brokerName = "broker-a"
    b.namesrvAddr = None
    b.autoCreateTopicEnable = True
    settings.netty.listenPort = 10911
    s = settings.store
    s.storePathRootDir = root
    for key, value in STORE.items():
        setattr(s, key, value)
    s.messageIndexEnable = index
    if METRICS:  # --metrics: the Prometheus hooks on the path (no endpoint: nothing scrapes here)
        b.metricsExporterType = "PROM"
    controller = BrokerController(settings, clock)
    controller.initialize()
    controller.start()
    if PREFAULT:  # --prefault: the thread that faults the commit log's next pages in (start() leaves it
        controller.message_store.start_prefault()  # to a reactor with threads, not this task.Clock)
    return controller, clock


PREFAULT = False  # --prefault: MessageStore.start_prefault() (the compiled path's page-fault thread)
BATCH = 1  # --batch K: SEND_BATCH_MESSAGE of K messages instead of one SEND_MESSAGE_V2 each


def build_frames(n: int, body_size: int, start: int = 0) -> list[bytes]:
    """``n`` SEND_MESSAGE_V2 frames (JSON header, as the Java client writes them); with ``BATCH``
    above 1, ``n / BATCH`` SEND_BATCH_MESSAGE frames of BATCH messages each."""
    body = bytes((i * 7 + 3) & 0xFF for i in range(body_size))
    if BATCH > 1:
        return _batch_frames(n, body, start)
    out = []
    for i in range(start, start + n):
        uniq = "7F00000100002A9F0000%012X" % i
        props = f"UNIQ_KEY\x01{uniq}\x02WAIT\x01true\x02"
        header = SendMessageRequestHeaderV2(a="bench_producer", b=TOPIC, c="TBW102", d=4, e=i % 4, f=0,
                                            g=1_700_000_000_000 + i, h=0, i=props, j=0, k=False, m=False)
        cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, body)
        cmd.opaque = i + 1
        cmd.language = 0  # JAVA
        cmd.version = 409  # V4_9_8
        out.append(codec.encode(cmd))
    return out


def _batch_frames(n: int, body: bytes, start: int) -> list[bytes]:
    """As a 4.9.8 ``DefaultMQProducer.send(Collection)``: each message's UNIQ_KEY in its properties,
    the batch header with the topic, WAIT=true and batch=true."""
    out = []
    for first in range(start, start + n, BATCH):
        items = [(0, body, f"UNIQ_KEY\x01{'7F00000100002A9F0000%012X' % i}\x02WAIT\x01true")
                 for i in range(first, first + BATCH)]
        header = SendMessageRequestHeaderV2(a="bench_producer", b=TOPIC, c="TBW102", d=4, e=(first // BATCH) % 4, f=0,
                                            g=1_700_000_000_000 + first, h=0, i="WAIT\x01true\x02", j=0, k=False,
                                            m=True)
        cmd = RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header, encode_batch_body(items))
        cmd.opaque = first + 1
        cmd.language = 0
        cmd.version = 409
        out.append(codec.encode(cmd))
    return out


PULL_BATCH = 32


def build_pull_frames(n: int, queues: int = 4, start: int = 20_000_000) -> list[bytes]:
    """PULL_MESSAGE frames reading ``n`` messages spread over ``queues`` queues, 32 at a time."""
    out = []
    for q in range(queues):
        for off in range(0, (n + queues - 1 - q) // queues, PULL_BATCH):
            h = PullMessageRequestHeader(consumerGroup="bench_consumer", topic=TOPIC, queueId=q, queueOffset=off,
                                         maxMsgNums=PULL_BATCH, sysFlag=0x2 | 0x4, commitOffset=off,
                                         suspendTimeoutMillis=15000, subscription="*", subVersion=0,
                                         expressionType="TAG")
            cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, h)
            cmd.opaque = start + len(out)
            cmd.language = 0
            cmd.version = 409
            out.append(codec.encode(cmd))
    return out


def run_pull_once(body_size: int, n: int, index: bool, base: str, profile: cProfile.Profile | None = None
                  ) -> tuple[float, float, int, float]:
    """(CPU seconds, wall seconds, response bytes, this thread's CPU seconds) for pulling back ``n`` sent messages."""
    root = tempfile.mkdtemp(prefix="store-", dir=base)
    broker, _clock = make_broker(root, index)
    try:
        transport = NullTransport()
        proto = RemotingProtocol(broker.dispatcher, broker.reactor)
        proto.makeConnection(transport)
        feed = proto.dataReceived
        for frame in build_frames(n, body_size):
            feed(frame)
        assert transport.frames == n, transport.frames
        for frame in build_pull_frames(min(n, 4 * PULL_BATCH), start=30_000_000):  # warm-up
            feed(frame)
        frames = build_pull_frames(n)
        transport.frames = 0
        transport.written = 0
        c0, w0, t0 = time.process_time(), time.perf_counter(), time.thread_time()
        if profile is not None:
            profile.enable()
        for frame in frames:
            feed(frame)
        if profile is not None:
            profile.disable()
        cpu, wall, own = time.process_time() - c0, time.perf_counter() - w0, time.thread_time() - t0
        assert transport.frames == len(frames), f"{transport.frames} responses for {len(frames)} pulls"
        last = codec.decode(transport.last[4:])
        assert last.code == ResponseCode.SUCCESS and last.body, last
        return cpu, wall, transport.written, own
    finally:
        broker.message_store.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def run_once(body_size: int, n: int, index: bool, base: str, profile: cProfile.Profile | None = None
             ) -> tuple[float, float, int, float]:
    """(CPU seconds, wall seconds, response bytes, this thread's CPU seconds) for ``n`` sends on a fresh broker."""
    root = tempfile.mkdtemp(prefix="store-", dir=base)
    broker, _clock = make_broker(root, index)
    try:
        transport = NullTransport()
        proto = RemotingProtocol(broker.dispatcher, broker.reactor)
        proto.makeConnection(transport)
        feed = proto.dataReceived
        warm = build_frames(WARMUP, body_size, start=10_000_000)
        for frame in warm:
            feed(frame)
        assert transport.frames == len(warm), transport.frames
        frames = build_frames(n, body_size)
        transport.frames = 0
        transport.written = 0
        c0, w0, t0 = time.process_time(), time.perf_counter(), time.thread_time()
        if profile is not None:
            profile.enable()
        for frame in frames:
            feed(frame)
        if profile is not None:
            profile.disable()
        cpu, wall, own = time.process_time() - c0, time.perf_counter() - w0, time.thread_time() - t0
        assert transport.frames == len(frames), f"{transport.frames} responses for {len(frames)} requests"
        last = codec.decode(transport.last[4:])
        assert last.code == ResponseCode.SUCCESS, last
        assert broker.message_store.get_max_offset_in_queue(TOPIC, (n - 1) % 4) >= n // 4
        return cpu, wall, transport.written, own
    finally:
        broker.message_store.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=50_000, help="messages per run (default 50000)")
    ap.add_argument("--sizes", default="128,1024", help="body sizes in bytes (default 128,1024)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per size; the minimum is reported")
    ap.add_argument("--top", type=int, default=25, help="cProfile entries to print per size")
    ap.add_argument("--no-profile", action="store_true", help="skip the cProfile run")
    ap.add_argument("--index", action=argparse.BooleanOptionalAction, default=True,
                    help="messageIndexEnable (default on, as broker_bench)")
    ap.add_argument("--dir", default=None, help="where the temporary stores go (default: tmp)")
    ap.add_argument("--pull", action="store_true",
                    help="measure PULL_MESSAGE (32 a pull) of the n sent messages instead of the sends")
    ap.add_argument("--batch", type=int, default=1,
                    help="send SEND_BATCH_MESSAGE requests of this many messages (CPU still per message)")
    ap.add_argument("--prefault", action="store_true",
                    help="start the store's commit-log page-fault thread (rmqpy/store/prefault.py)")
    ap.add_argument("--metrics", action="store_true",
                    help="metricsExporterType=PROM: count with the metrics hooks and the RPC latency too")
    args = ap.parse_args()
    global METRICS, BATCH, PREFAULT
    METRICS, BATCH, PREFAULT = args.metrics, max(1, args.batch), args.prefault
    run = run_pull_once if args.pull else run_once
    sizes = [int(s) for s in args.sizes.split(",") if s]
    base = tempfile.mkdtemp(prefix="rmqpy-sendprof-", dir=args.dir)
    results = {}
    try:
        print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}, "
              f"n={args.n}, repeat={args.repeat}, index={'on' if args.index else 'off'}"
              + (f", SEND_BATCH_MESSAGE of {BATCH}" if BATCH > 1 else "")
              + (", commit log pages faulted in by a thread" if PREFAULT else "")
              + (f", PULL_MESSAGE of {PULL_BATCH}: CPU per pulled message" if args.pull else ""))
        for size in sizes:
            runs = [run(size, args.n, args.index, base) for _ in range(args.repeat)]
            cpus = [r[0] for r in runs]
            best = min(cpus)
            results[size] = best
            print(f"body {size:>5} B: CPU {best * 1e6 / args.n:7.1f} us/msg (min of "
                  + ", ".join(f"{c * 1e6 / args.n:.1f}" for c in cpus)
                  + f"), wall {min(r[1] for r in runs) * 1e6 / args.n:.1f} us/msg, "
                  f"reactor thread CPU {min(r[3] for r in runs) * 1e6 / args.n:.1f} us/msg, "
                  f"{args.n / best:,.0f} msg/s per CPU", flush=True)
            if not args.no_profile:
                prof = cProfile.Profile()
                run(size, args.n, args.index, base, prof)
                out = io.StringIO()
                st = pstats.Stats(prof, stream=out)
                st.sort_stats("tottime").print_stats(args.top)
                text = out.getvalue()
                start = text.find("   ncalls")
                print(f"--- cProfile, body {size} B, top {args.top} by own time "
                      f"(per message: divide by {args.n}) ---")
                print(text[start:].rstrip() + "\n", flush=True)
        print("summary: " + ", ".join(f"{s} B {v * 1e6 / args.n:.1f} us/msg" for s, v in results.items()))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
