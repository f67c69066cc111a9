"""Large gRPC SendMessage requests (issue 31 case 7): the broker's memory before, at the peak and
after, and how long a small client waits while they arrive.

    python bench/grpc_large_send_probe.py [-n 12] [--mb 129] [--after 10] [--root CHECKOUT] [-D key=value ...]

Starts rmqpy's name server and a broker (tests/interop/servers.py; ``--root``: the checkout to run them
from, e.g. an export of main for the "before" figure) with its gRPC port, creates a topic, and sends
``-n`` SendMessage requests at once, each one message of ``--mb`` MiB (129 MiB by default: the request
fits the proxy's 130 MiB ``grpcMaxInboundMessageSize``) from its own grpcio channel, through the
generated stubs of the official Python client (``rocketmq.grpc_protocol``; the client's Producer would
refuse such a body itself). Meanwhile a second client, on its own channel, does a QueryRoute and a
small SendMessage in turn, and a third sends small messages through rmqpy.client (the remoting
port); the slowest call of each is reported: the remoting one waits through the reactor's stalls
only, the gRPC one also behind grpcio's single polling thread, which copies every received request
into one ``bytes`` while holding the GIL.
The broker's RSS and anonymous memory (``/proc/PID/status`` RssAnon) are sampled every 20 ms: before
the big sends, their peak, right after the last answer and ``--after`` seconds later.

With the broker's defaults the body is over ``maxMessageSize`` (4 MiB, as Java's broker and proxy),
so each answer is MESSAGE_BODY_TOO_LARGE: the probe then measures what a refused request costs.
``-D maxMessageSize=140000000 -D mappedFileSizeCommitLog=1073741824`` lets them through to the store.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import grpc
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.interop import servers  # noqa: E402

MiB = 1024 * 1024
SEND = "/apache.rocketmq.v2.MessagingService/SendMessage"


def memory(pid: int) -> tuple[int, int]:
    """(RSS, RssAnon) in bytes."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon"):
                fields[k] = int(v.split()[0]) * 1024
    return fields.get("VmRSS", 0), fields.get("RssAnon", 0)


def message(topic: str, body: bytes) -> pb.Message:
    m = pb.Message(body=body)
    m.topic.name = topic
    m.system_properties.message_id = uuid.uuid4().hex.upper()
    m.system_properties.body_encoding = pb.Encoding.IDENTITY
    m.system_properties.born_host = "127.0.0.1"
    m.system_properties.born_timestamp.GetCurrentTime()
    return m


def metadata(client_id: str) -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "v2"))


class Sampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_rss, self.peak_anon, self.running = pid, 0, 0, True

    def run(self) -> None:
        while self.running:
            rss, anon = memory(self.pid)
            self.peak_rss, self.peak_anon = max(self.peak_rss, rss), max(self.peak_anon, anon)
            time.sleep(0.02)


class SmallClient(threading.Thread):
    """QueryRoute and a small SendMessage in turn; the slowest call and the number done."""

    def __init__(self, endpoint: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.channel = grpc.insecure_channel(endpoint)
        self.stub = sgrpc.MessagingServiceStub(self.channel)
        self.topic, self.running = topic, True
        self.max_ms, self.calls, self.errors, self.slow = 0.0, 0, [], []  # slow: (offset s, ms) over 200 ms
        self.t0 = time.monotonic()
        self.md = metadata("small-" + uuid.uuid4().hex[:8])

    def one(self, i: int) -> None:
        if i % 2:
            req = spb.QueryRouteRequest()
            req.topic.name = self.topic
            resp = self.stub.QueryRoute(req, metadata=self.md, timeout=30)
        else:
            resp = self.stub.SendMessage(spb.SendMessageRequest(messages=[message(self.topic, b"small")]),
                                         metadata=self.md, timeout=30)
        if resp.status.code != pb.Code.OK:
            self.errors.append(pb.Code.Name(resp.status.code))

    def run(self) -> None:
        i = 0
        while self.running:
            t = time.monotonic()
            try:
                self.one(i)
            except grpc.RpcError as exc:
                self.errors.append(str(exc.code()))
            ms = (time.monotonic() - t) * 1000
            if ms > 200:
                self.slow.append((round(t - self.t0, 1), round(ms)))
            self.max_ms = max(self.max_ms, ms)
            self.calls += 1
            i += 1
            time.sleep(0.01)


class RemotingClient(SmallClient):
    """Small sends through rmqpy.client (the remoting port): what the reactor's stalls alone cost a
    client, without grpcio's polling thread in the way."""

    def __init__(self, namesrv: str, topic: str) -> None:
        threading.Thread.__init__(self, daemon=True)
        from rmqpy.client import Producer
        self.producer = Producer(namesrv, send_timeout_ms=30000)
        self.producer.start()
        self.topic, self.running = topic, True
        self.max_ms, self.calls, self.errors, self.slow = 0.0, 0, [], []
        self.t0 = time.monotonic()

    def one(self, i: int) -> None:
        from rmqpy.client import Message
        result = self.producer.send(Message(self.topic, b"small"))
        if "OK" not in str(result.status):
            self.errors.append(str(result.status))


def big_send(endpoint: str, raw: bytes, results: list, i: int) -> None:
    ch = grpc.insecure_channel(endpoint, options=[("grpc.max_send_message_length", -1),
                                                  ("grpc.max_receive_message_length", -1)])
    call = ch.unary_unary(SEND, request_serializer=lambda b: b,
                          response_deserializer=spb.SendMessageResponse.FromString)
    t = time.monotonic()
    try:
        resp = call(raw, metadata=metadata(f"big-{i}"), timeout=300)
        results[i] = (pb.Code.Name(resp.status.code), resp.status.message[:80], round(time.monotonic() - t, 2))
    except grpc.RpcError as exc:
        results[i] = (str(exc.code()), (exc.details() or "")[:80], round(time.monotonic() - t, 2))
    ch.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=12)
    ap.add_argument("--mb", type=float, default=129, help="body size in MiB")
    ap.add_argument("--after", type=float, default=10)
    ap.add_argument("--topic", default="LargeSendProbe")
    ap.add_argument("--root", help="checkout the servers run from (default: this one)")
    ap.add_argument("-D", action="append", default=[], help="key=value for the broker started here")
    a = ap.parse_args()
    report: dict[str, object] = {"n": a.n, "body MiB": a.mb}
    with tempfile.TemporaryDirectory() as tmp:
        if a.root:
            servers.ROOT = Path(a.root).resolve()
        port = servers.free_port()
        props: dict[str, object] = {"grpcServerPort": port}
        props.update(kv.split("=", 1) for kv in a.D)
        cluster = servers.Cluster(Path(tmp), "127.0.0.1", props)
        try:
            endpoint = f"127.0.0.1:{port}"
            subprocess.run([sys.executable, "-m", "rmqpy.tools.admin", "updateTopic", "-n", cluster.ns_addr, "-c",
                            "DefaultCluster", "-t", a.topic], check=True, capture_output=True, cwd=ROOT)
            time.sleep(1)
            pid = cluster.broker.proc.pid
            small = SmallClient(endpoint, a.topic)
            remoting = RemotingClient(cluster.ns_addr, a.topic)
            for i in range(20):  # warm: the small clients' connections, the broker's first calls
                small.one(i)
                remoting.one(i)
            raw = spb.SendMessageRequest(messages=[message(a.topic, os.urandom(int(a.mb * MiB)))]).SerializeToString()
            report["request bytes"] = len(raw)
            time.sleep(2)
            rss, anon = memory(pid)
            report["before: RSS / anon MB"] = f"{rss / 1e6:.0f} / {anon / 1e6:.0f}"
            sampler = Sampler(pid)
            sampler.start()
            small.start()
            remoting.start()
            time.sleep(1)
            results: list = [None] * a.n
            t0 = time.monotonic()
            senders = [threading.Thread(target=big_send, args=(endpoint, raw, results, i)) for i in range(a.n)]
            for t in senders:
                t.start()
            for t in senders:
                t.join()
            report["big sends: seconds"] = round(time.monotonic() - t0, 1)
            answers: dict[str, int] = {}
            for r in results:
                key = f"{r[0]} {r[1]}"
                answers[key] = answers.get(key, 0) + 1
            report["big sends: answers"] = answers
            report["big sends: slowest answer s"] = max(r[2] for r in results)
            time.sleep(0.5)
            small.running = remoting.running = False
            small.join()
            remoting.join()
            remoting.producer.shutdown()
            sampler.running = False
            sampler.join()
            rss, anon = memory(pid)
            report["peak: RSS / anon MB"] = f"{sampler.peak_rss / 1e6:.0f} / {sampler.peak_anon / 1e6:.0f}"
            report["after the last answer: RSS / anon MB"] = f"{rss / 1e6:.0f} / {anon / 1e6:.0f}"
            report["small client: calls, max ms"] = f"{small.calls}, {small.max_ms:.0f}"
            report["small client: calls over 200 ms (s from start, ms)"] = small.slow[:20]
            report["small client: errors"] = small.errors[:5]
            report["remoting client: calls, max ms"] = f"{remoting.calls}, {remoting.max_ms:.0f}"
            report["remoting client: calls over 200 ms (s from start, ms)"] = remoting.slow[:20]
            report["remoting client: errors"] = remoting.errors[:5]
            del raw
            time.sleep(a.after)
            rss, anon = memory(pid)
            report[f"{a.after:.0f} s after: RSS / anon MB"] = f"{rss / 1e6:.0f} / {anon / 1e6:.0f}"
        finally:
            cluster.close()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
