"""Fuzz soak: a live ``twistd rmq-namesrv`` and ``twistd rmq-broker`` under mutated frames (issue 11).

    python bench/fuzz_soak.py [--frames 10000000] [--seconds 0] [--workers 2] [--connections 8]
                              [--seed 1] [--keep] [--workdir DIR]

Not a test. Both servers run as real processes (as ``tests/interop/servers.py`` starts
them). ``--workers`` processes each hold ``--connections`` connections (a third to the name
server, the rest to the broker) and send mutated frames in batches, reading and dropping
whatever comes back, reconnecting when a server closes a connection (which it should do
for a bad frame). The frames are real requests (send, batch send, pull, heartbeat, create
topic and subscription group, route and cluster queries, register broker, offsets, locks,
config...) in both serialize types, mutated: bit flips, hostile values put into header
fields and JSON bodies (1e999, 2^63, deep nesting, wrong types, long strings), header
length and serialize type changed, splices, truncation, random request codes, and plain
garbage. Meanwhile one well-behaved client (its own process) keeps doing a route lookup
on the name server and a send + GET_MAX_OFFSET on the broker, one request at a time, and
records each latency.

It stops after ``--frames`` frames or ``--seconds`` seconds (0: no limit), or when a server
dies, and reports: crashes (a server process gone), "Traceback" / "Unhandled Error" lines in
each server log and the log sizes, the well-behaved client's max and p99 latency and its
failures, and each server's RSS over time.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import random
import re
import shutil
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmqpy.protocol import command as codec  # noqa: E402
from rmqpy.protocol.codes import RequestCode  # noqa: E402
from rmqpy.protocol.command import RemotingCommand  # noqa: E402
from tests.interop.servers import start_broker, start_namesrv  # noqa: E402

GOOD_TOPIC = "FuzzGoodTopic"
FUZZ_TOPIC = "FuzzTopic"
ALL_CODES = [int(c) for c in RequestCode]


# ------------------------------------------------------------------ the corpus of valid requests
def _send_ext(topic: str, i: int = 0) -> dict[str, str]:
    return {"a": "PGFuzz", "b": topic, "c": "TBW102", "d": "4", "e": str(i % 4), "f": "0",
            "g": str(int(time.time() * 1000)), "h": "0", "i": f"KEYS\x01k{i}\x02UNIQ_KEY\x01U{i}\x02WAIT\x01true\x02",
            "j": "0", "k": "false", "m": "false", "n": "broker-py"}


def _heartbeat_body() -> bytes:
    return json.dumps({
        "clientID": "10.0.0.1@fuzz", "producerDataSet": [{"groupName": "PGFuzz"}],
        "consumerDataSet": [{"groupName": "CGFuzz", "consumeType": "CONSUME_PASSIVELY",
                             "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                             "unitMode": False, "subscriptionDataSet": [
                                 {"topic": FUZZ_TOPIC, "subString": "a || b", "tagsSet": ["a", "b"],
                                  "codeSet": [97, 98], "subVersion": 1, "expressionType": "TAG",
                                  "classFilterMode": False}]}]}).encode()


def broker_corpus() -> list[RemotingCommand]:
    mq = {"topic": FUZZ_TOPIC, "brokerName": "broker-py", "queueId": 0}
    pull = {"consumerGroup": "CGFuzz", "topic": FUZZ_TOPIC, "queueId": "0", "queueOffset": "0", "maxMsgNums": "8",
            "sysFlag": "2", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
            "subVersion": "0", "expressionType": "TAG"}
    batch_body = b"".join(struct.pack(">iiiih", 20 + 3 + 5, 0, 0, 0, 0) + b"abc" + struct.pack(">h", 5) + b"k\x01v\x02"
                          for _ in range(2))
    R = RequestCode
    reqs = [
        (R.SEND_MESSAGE_V2, _send_ext(FUZZ_TOPIC), b"hello fuzz"),
        (R.SEND_MESSAGE, {"producerGroup": "PGFuzz", "topic": FUZZ_TOPIC, "defaultTopic": "TBW102",
                          "defaultTopicQueueNums": "4", "queueId": "1", "sysFlag": "0", "bornTimestamp": "1700000000000",
                          "flag": "0", "properties": "KEYS\x01x\x02", "reconsumeTimes": "0"}, b"v1 body"),
        (R.SEND_BATCH_MESSAGE, {**_send_ext(FUZZ_TOPIC), "m": "true"}, batch_body),
        (R.PULL_MESSAGE, pull, None),
        (R.HEART_BEAT, None, _heartbeat_body()),
        (R.UPDATE_AND_CREATE_TOPIC, {"topic": FUZZ_TOPIC, "defaultTopic": "TBW102", "readQueueNums": "4",
                                     "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
                                     "topicSysFlag": "0", "order": "false"}, None),
        (R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, json.dumps(
            {"groupName": "CGFuzz", "consumeEnable": True, "consumeFromMinEnable": True, "retryQueueNums": 1,
             "retryMaxTimes": 16, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1}).encode()),
        (R.GET_MAX_OFFSET, {"topic": FUZZ_TOPIC, "queueId": "0"}, None),
        (R.GET_MIN_OFFSET, {"topic": FUZZ_TOPIC, "queueId": "0"}, None),
        (R.QUERY_CONSUMER_OFFSET, {"consumerGroup": "CGFuzz", "topic": FUZZ_TOPIC, "queueId": "0"}, None),
        (R.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "CGFuzz", "topic": FUZZ_TOPIC, "queueId": "0",
                                    "commitOffset": "1"}, None),
        (R.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": FUZZ_TOPIC, "queueId": "0", "timestamp": "1700000000000"}, None),
        (R.GET_EARLIEST_MSG_STORETIME, {"topic": FUZZ_TOPIC, "queueId": "0"}, None),
        (R.VIEW_MESSAGE_BY_ID, {"offset": "0"}, None),
        (R.QUERY_MESSAGE, {"topic": FUZZ_TOPIC, "key": "k1", "maxNum": "32", "beginTimestamp": "0",
                           "endTimestamp": "9999999999999"}, None),
        (R.CONSUMER_SEND_MSG_BACK, {"offset": "0", "group": "CGFuzz", "delayLevel": "0", "originMsgId": "x",
                                    "originTopic": FUZZ_TOPIC, "unitMode": "false", "maxReconsumeTimes": "16"}, None),
        (R.END_TRANSACTION, {"producerGroup": "PGFuzz", "tranStateTableOffset": "0", "commitLogOffset": "0",
                             "commitOrRollback": "8", "fromTransactionCheck": "false", "msgId": "x"}, None),
        (R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CGFuzz"}, None),
        (R.UNREGISTER_CLIENT, {"clientID": "10.0.0.1@fuzz", "producerGroup": "PGFuzz"}, None),
        (R.LOCK_BATCH_MQ, None, json.dumps({"consumerGroup": "CGFuzz", "clientId": "10.0.0.1@fuzz",
                                            "mqSet": [mq]}).encode()),
        (R.UNLOCK_BATCH_MQ, None, json.dumps({"consumerGroup": "CGFuzz", "clientId": "10.0.0.1@fuzz",
                                              "mqSet": [mq]}).encode()),
        (R.CHECK_CLIENT_CONFIG, None, json.dumps({"clientId": "c", "group": "CGFuzz", "subscriptionData": {
            "topic": FUZZ_TOPIC, "subString": "*", "expressionType": "TAG"}}).encode()),
        (R.GET_TOPIC_STATS_INFO, {"topic": FUZZ_TOPIC}, None),
        (R.GET_CONSUME_STATS, {"consumerGroup": "CGFuzz", "topic": FUZZ_TOPIC}, None),
        (R.GET_BROKER_RUNTIME_INFO, None, None),
        (R.GET_ALL_TOPIC_CONFIG, None, None),
        (R.GET_BROKER_CONFIG, None, None),
        (R.QUERY_CONSUME_QUEUE, {"topic": FUZZ_TOPIC, "queueId": "0", "index": "0", "count": "10",
                                 "consumerGroup": "CGFuzz"}, None),
    ]
    return [RemotingCommand.request(code, ext_fields=ext, body=body) for code, ext, body in reqs]


def namesrv_corpus(broker_addr: str) -> list[RemotingCommand]:
    R = RequestCode
    wrapper = {"topicConfigSerializeWrapper": {"topicConfigTable": {"FuzzNsTopic": {
        "topicName": "FuzzNsTopic", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0, "order": False}}, "dataVersion": {"counter": 1, "timestamp": 1700000000000}},
        "filterServerList": []}
    reqs = [
        (R.GET_ROUTEINFO_BY_TOPIC, {"topic": GOOD_TOPIC}, None),
        (R.GET_ROUTEINFO_BY_TOPIC, {"topic": FUZZ_TOPIC, "acceptStandardJsonOnly": "true"}, None),
        (R.GET_BROKER_CLUSTER_INFO, None, None),
        (R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, None, None),
        (R.REGISTER_BROKER, {"brokerName": "fuzz-broker", "brokerAddr": "10.0.0.9:10911", "clusterName": "FuzzCluster",
                             "haServerAddr": "10.0.0.9:10912", "brokerId": "0", "compressed": "false",
                             "bodyCrc32": "0"}, json.dumps(wrapper).encode()),
        (R.QUERY_DATA_VERSION, {"brokerName": "fuzz-broker", "brokerAddr": "10.0.0.9:10911",
                                "clusterName": "FuzzCluster", "brokerId": "0"},
         json.dumps({"counter": 1, "timestamp": 1700000000000}).encode()),
        (R.PUT_KV_CONFIG, {"namespace": "FuzzNs", "key": "k", "value": "v"}, None),
        (R.GET_KV_CONFIG, {"namespace": "FuzzNs", "key": "k"}, None),
        (R.GET_KVLIST_BY_NAMESPACE, {"namespace": "FuzzNs"}, None),
        (R.GET_TOPICS_BY_CLUSTER, {"cluster": "FuzzCluster"}, None),
        (R.REGISTER_TOPIC_IN_NAMESRV, {"topic": "FuzzNsTopic"}, json.dumps({
            "queueDatas": [{"brokerName": "fuzz-broker", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                            "topicSysFlag": 0}],
            "brokerDatas": [{"cluster": "FuzzCluster", "brokerName": "fuzz-broker",
                             "brokerAddrs": {"0": "10.0.0.9:10911"}}]}).encode()),
        (R.BROKER_HEARTBEAT if hasattr(R, "BROKER_HEARTBEAT") else R.GET_BROKER_CLUSTER_INFO,
         {"clusterName": "FuzzCluster", "brokerAddr": "10.0.0.9:10911", "brokerName": "fuzz-broker"}, None),
    ]
    return [RemotingCommand.request(code, ext_fields=ext, body=body) for code, ext, body in reqs]


# ------------------------------------------------------------------ mutators
HOSTILE_VALUES: list[Any] = [
    1e999, -1e999, 2**63, -2**63 - 1, 2**31, -2**31 - 1, 10**40, -1, 0, 1.5, "", " ", "1e999", "9" * 30, "-0",
    "x", None, True, False, [], {}, [[[[1]]]], {"a": {"b": {"c": 1}}}, "\u0000", "\ud800", "../../../../tmp/x",
    "%DLQ%x", "a" * 300, "b" * 70_000, "\n", "k=v\nx=y",
]


def _deep(n: int) -> str:
    return "[" * n + "]" * n


class Mutator:
    """Builds mutated frames (length prefix included) from a corpus of valid requests."""

    def __init__(self, corpus: list[RemotingCommand], rng: random.Random) -> None:
        self.rng = rng
        self.corpus = corpus
        self.frames = [codec.encode(self._with(cmd, st)) for cmd in corpus for st in (0, 1)]
        self.docs = [(cmd, json.loads(codec.encode_header(cmd))) for cmd in corpus]

    @staticmethod
    def _with(cmd: RemotingCommand, serialize_type: int) -> RemotingCommand:
        return RemotingCommand(cmd.code, ext_fields=cmd.ext_fields, body=cmd.body, serialize_type=serialize_type,
                               opaque=random.randrange(1 << 31))

    def frame(self) -> tuple[bytes, bool]:
        """One frame to send and whether the connection is to be closed after it (a frame
        with a corrupt length prefix leaves the stream out of step)."""
        rng = self.rng
        kind = rng.random()
        if kind < 0.10:
            return rng.choice(self.frames), False  # valid: the server does real work too
        if kind < 0.45:
            return self._prefixed(self._json_mutation()), False
        if kind < 0.55:
            return self._prefixed(self._body_mutation()), False
        if kind < 0.75:
            return self._prefixed(self._byte_mutation(rng.choice(self.frames)[4:])), False
        if kind < 0.82:
            return self._prefixed(self._header_word_mutation(rng.choice(self.frames)[4:])), False
        if kind < 0.88:
            a, b = rng.choice(self.frames)[4:], rng.choice(self.frames)[4:]
            return self._prefixed(a[:rng.randrange(len(a) + 1)] + b[rng.randrange(len(b) + 1):]), False
        if kind < 0.95:
            return self._prefixed(rng.randbytes(rng.randrange(0, 200))), False
        # a corrupt length prefix: too small, too large, or random
        body = rng.choice(self.frames)[4:]
        length = rng.choice([0, 1, 3, len(body) - 1, len(body) + 7, 0x7FFFFFFF, 0xFFFFFFFF, rng.randrange(1 << 32)])
        return struct.pack(">I", length & 0xFFFFFFFF) + body, True

    @staticmethod
    def _prefixed(frame: bytes) -> bytes:
        return struct.pack(">I", len(frame)) + frame

    def _hostile(self) -> Any:
        rng = self.rng
        if rng.random() < 0.1:
            return json.loads(_deep(rng.choice([50, 500, 900])))
        return rng.choice(HOSTILE_VALUES)

    def _json_mutation(self) -> bytes:
        """A JSON header with hostile values in header or extFields fields."""
        rng = self.rng
        cmd, doc = rng.choice(self.docs)
        doc = json.loads(json.dumps(doc))
        ext = doc.get("extFields") or {}
        for _ in range(rng.randrange(1, 4)):
            where = rng.random()
            if where < 0.25:
                doc[rng.choice(["code", "opaque", "flag", "version", "language", "remark", "extFields"])] = self._hostile()
            elif where < 0.35:
                doc["code"] = rng.choice(ALL_CODES)  # another processor gets these fields
            elif ext and where < 0.85:
                key = rng.choice(list(ext))
                ext[key] = self._hostile() if rng.random() < 0.5 else str(self._hostile())
            elif ext and where < 0.92:
                ext.pop(rng.choice(list(ext)), None)
            else:
                ext[rng.choice(["x", "topic", "queueId", "group", "brokerName"])] = str(self._hostile())
        if isinstance(doc.get("extFields"), dict):
            doc["extFields"] = ext
        if rng.random() < 0.02:
            text = '{"code":1,"x":' + _deep(rng.choice([2000, 50_000])) + "}"
        else:
            try:
                text = json.dumps(doc, allow_nan=True)
            except (ValueError, TypeError):
                text = '{"code":1e999}'
        header = text.encode("utf-8", "surrogatepass")
        return struct.pack(">I", len(header)) + header + (cmd.body or b"")

    def _body_mutation(self) -> bytes:
        """A valid header with a hostile JSON (or not JSON) body."""
        rng = self.rng
        cmd = rng.choice([c for c in self.corpus if c.body] or self.corpus)
        body = cmd.body or b"{}"
        choice = rng.random()
        if choice < 0.5:
            try:
                obj = json.loads(body)
                self._poke(obj)
                body = json.dumps(obj, allow_nan=True).encode("utf-8", "surrogatepass")
            except ValueError:
                body = rng.randbytes(len(body))
        elif choice < 0.65:
            body = _deep(rng.choice([300, 5000, 50_000])).encode()
        elif choice < 0.8:
            body = body[:rng.randrange(len(body) + 1)]
        else:
            body = rng.choice([b"null", b"[]", b"1e999", b'"x"', b"{}", b"{{{{", b"\xff\xfe", rng.randbytes(64)])
        header = codec.encode_header(cmd)
        return struct.pack(">I", len(header)) + header + body

    def _poke(self, obj: Any, depth: int = 0) -> None:
        rng = self.rng
        if isinstance(obj, dict) and obj:
            key = rng.choice(list(obj))
            if depth < 4 and isinstance(obj[key], (dict, list)) and rng.random() < 0.6:
                self._poke(obj[key], depth + 1)
            else:
                obj[key] = self._hostile()
        elif isinstance(obj, list) and obj:
            i = rng.randrange(len(obj))
            if depth < 4 and isinstance(obj[i], (dict, list)) and rng.random() < 0.6:
                self._poke(obj[i], depth + 1)
            else:
                obj[i] = self._hostile()

    def _byte_mutation(self, frame: bytes) -> bytes:
        rng = self.rng
        data = bytearray(frame)
        for _ in range(rng.randrange(1, 8)):
            op = rng.random()
            pos = rng.randrange(len(data) + 1) if data else 0
            if op < 0.5 and data:
                data[min(pos, len(data) - 1)] ^= 1 << rng.randrange(8)
            elif op < 0.7 and data:
                data[min(pos, len(data) - 1)] = rng.choice(b'\x00\xff\x7f\x80{}[]"\\:,9e-')
            elif op < 0.85:
                data[pos:pos] = rng.randbytes(rng.randrange(1, 16))
            else:
                del data[pos:pos + rng.randrange(1, 16)]
        return bytes(data)

    def _header_word_mutation(self, frame: bytes) -> bytes:
        rng = self.rng
        word = struct.unpack_from(">I", frame, 0)[0] if len(frame) >= 4 else 0
        serialize_type, header_len = word >> 24, word & 0xFFFFFF
        if rng.random() < 0.5:
            serialize_type = rng.choice([0, 1, 2, 0x7F, 0xFF])
        else:
            header_len = rng.choice([0, 1, header_len - 1, header_len + 1, 0xFFFFFF, rng.randrange(1 << 24)]) & 0xFFFFFF
        return struct.pack(">I", (serialize_type << 24) | header_len) + frame[4:]


# ------------------------------------------------------------------ processes
def _connect(addr: str) -> socket.socket | None:
    host, _, port = addr.rpartition(":")
    try:
        sock = socket.create_connection((host, int(port)), timeout=5)
    except OSError:
        return None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _drain(sock: socket.socket) -> bool:
    """Read what is there without waiting; False when the server closed the connection."""
    sock.settimeout(0)  # (with a timeout, recv first waits for data whatever its flags)
    try:
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                return False
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.settimeout(5)


def fuzz_worker(index: int, ns_addr: str, broker_addr: str, connections: int, seed: int, batch: int,
                counters: Any, stop: Any) -> None:
    """Send mutated frames on ``connections`` connections until told to stop.

    counters[index*4 + 0..3]: frames sent, closed by the server, connect failures, send errors."""
    rng = random.Random(seed * 1000 + index)
    mutators = {ns_addr: Mutator(namesrv_corpus(broker_addr), rng), broker_addr: Mutator(broker_corpus(), rng)}
    targets = [ns_addr if i % 3 == 0 else broker_addr for i in range(connections)]
    socks: list[socket.socket | None] = [None] * connections
    base = index * 4
    while not stop.value:
        for i, addr in enumerate(targets):
            sock = socks[i]
            if sock is None:
                sock = socks[i] = _connect(addr)
                if sock is None:
                    counters[base + 2] += 1
                    time.sleep(0.05)
                    continue
            parts, close_after = [], False
            for _ in range(batch):
                frame, close_after = mutators[addr].frame()
                parts.append(frame)
                if close_after:
                    break
            try:
                sock.sendall(b"".join(parts))
                counters[base] += len(parts)
            except OSError:
                counters[base + 3] += 1
                close_after = True
            alive = _drain(sock)
            if not alive:
                counters[base + 1] += 1
            if close_after or not alive:
                sock.close()
                socks[i] = None


def good_client(ns_addr: str, broker_addr: str, results: Any, stop: Any) -> None:
    """One request at a time: a route lookup, a send, a GET_MAX_OFFSET; latencies in ms.

    results: [requests, failures, max_ms, reconnects] and a latency sample list after stop."""
    from rmqpy.tools.blocking_client import BlockingClient
    clients: dict[str, BlockingClient | None] = {ns_addr: None, broker_addr: None}
    latencies: list[float] = []
    i = 0
    while not stop.value:
        i += 1
        which = i % 3
        addr = ns_addr if which == 0 else broker_addr
        if which == 0:
            req = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": GOOD_TOPIC})
        elif which == 1:
            req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext_fields=_send_ext(GOOD_TOPIC, i),
                                          body=b"good %d" % i)
        else:
            req = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, ext_fields={"topic": GOOD_TOPIC, "queueId": "0"})
        start = time.perf_counter()
        try:
            client = clients[addr]
            if client is None:
                client = clients[addr] = BlockingClient(addr, timeout=10)
                results[3] += 1
            client.invoke(req)
        except (OSError, ConnectionError, codec.FrameError):
            results[1] += 1
            if clients[addr] is not None:
                clients[addr].close()  # type: ignore[union-attr]
            clients[addr] = None
            time.sleep(0.1)
            continue
        ms = (time.perf_counter() - start) * 1000
        latencies.append(ms)
        results[0] += 1
        if ms > results[2]:
            results[2] = ms
        time.sleep(0.005)
    latencies.sort()
    results[4] = latencies[int(len(latencies) * 0.99)] if latencies else 0.0
    results[5] = latencies[len(latencies) // 2] if latencies else 0.0


def rss_mib(pid: int) -> float:
    """RSS of ``pid`` and its children (twistd runs in the process itself)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


TRACEBACK = re.compile(r"Traceback|Unhandled Error")


def log_findings(path: Path) -> tuple[int, int, list[str]]:
    """(size in bytes, traceback/unhandled lines, the distinct last lines of tracebacks)."""
    if not path.exists():
        return 0, 0, []
    text = path.read_text(errors="replace")
    count = len(TRACEBACK.findall(text))
    kinds: dict[str, int] = {}
    lines = text.splitlines()
    for n, line in enumerate(lines):
        if "Traceback" in line:
            for follow in lines[n + 1:n + 80]:
                stripped = follow.split("] ", 1)[-1].strip()
                if re.match(r"^[\w.]+(Error|Exception|Exit)\b", stripped):
                    kinds[stripped[:160]] = kinds.get(stripped[:160], 0) + 1
                    break
    return len(text.encode()), count, [f"{v}x {k}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:10]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=10_000_000, help="stop after this many frames")
    parser.add_argument("--seconds", type=float, default=0, help="stop after this many seconds (0: no limit)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--connections", type=int, default=8, help="connections per worker")
    parser.add_argument("--batch", type=int, default=32, help="frames written at once per connection")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, store)")
    parser.add_argument("--report-every", type=float, default=10.0)
    args = parser.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="rmqpy-fuzz-soak-"))
    print(f"work directory {workdir}", flush=True)
    ns = start_namesrv(workdir / "ns")
    broker = None
    try:
        broker = start_broker(workdir / "broker", ns.addr, props={"mappedFileSizeCommitLog": 16 << 20})
        return _run(args, ns, broker)
    finally:
        if broker is not None:
            broker.stop()
        ns.stop()
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


def _run(args: argparse.Namespace, ns: Any, broker: Any) -> int:
    from rmqpy.tools.blocking_client import BlockingClient
    with BlockingClient(broker.addr) as c:  # the good client's topic exists before the clock starts
        c.invoke(RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields={
            "topic": GOOD_TOPIC, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}))
    ctx = mp.get_context("fork")
    stop = ctx.Value("b", 0, lock=False)
    counters = ctx.Array("q", 4 * args.workers, lock=False)
    results = ctx.Array("d", 6, lock=False)
    procs = [ctx.Process(target=fuzz_worker, args=(w, ns.addr, broker.addr, args.connections, args.seed, args.batch,
                                                   counters, stop), daemon=True) for w in range(args.workers)]
    good = ctx.Process(target=good_client, args=(ns.addr, broker.addr, results, stop), daemon=True)
    servers = {"namesrv": ns, "broker": broker}
    rss: dict[str, list[tuple[float, float]]] = {name: [] for name in servers}
    log_start = {name: s.log.stat().st_size for name, s in servers.items()}
    start = time.time()
    good.start()
    for p in procs:
        p.start()
    crashed: list[str] = []
    last_report = start
    frames = 0
    try:
        while True:
            time.sleep(1.0)
            now = time.time() - start
            frames = sum(counters[w * 4] for w in range(args.workers))
            for name, s in servers.items():
                rss[name].append((now, rss_mib(s.proc.pid)))
                if s.proc.poll() is not None:
                    crashed.append(f"{name} exited with {s.proc.returncode}")
            if time.time() - last_report >= args.report_every:
                last_report = time.time()
                print(f"{now:7.0f} s  frames {frames:,} ({frames / max(now, 1e-9):,.0f}/s)  good {int(results[0]):,} "
                      f"req, {int(results[1])} failed, max {results[2]:.0f} ms  RSS ns {rss['namesrv'][-1][1]:.0f} MiB, "
                      f"broker {rss['broker'][-1][1]:.0f} MiB", flush=True)
            if crashed or frames >= args.frames or (args.seconds and now >= args.seconds):
                break
    except KeyboardInterrupt:
        pass
    stop.value = 1
    for p in [*procs, good]:
        p.join(15)
        if p.is_alive():
            p.terminate()
    elapsed = time.time() - start
    frames = sum(counters[w * 4] for w in range(args.workers))
    closed = sum(counters[w * 4 + 1] for w in range(args.workers))
    connect_failures = sum(counters[w * 4 + 2] for w in range(args.workers))
    print()
    print(f"frames sent      {frames:,} in {elapsed:.0f} s ({frames / elapsed:,.0f}/s), "
          f"{args.workers} workers x {args.connections} connections")
    print(f"connections      closed by a server {closed:,}, connect failures {connect_failures:,}")
    print(f"crashes          {', '.join(crashed) if crashed else 'none'}")
    for name, s in servers.items():
        size, tracebacks, kinds = log_findings(s.log)
        print(f"{name:8} log     {size / 1024:,.0f} KiB ({(size - log_start[name]) / 1024:,.0f} KiB during the run), "
              f"Traceback/Unhandled Error lines: {tracebacks}")
        for k in kinds:
            print(f"                   {k}")
        samples = rss[name]
        if samples:
            marks = [samples[int(i * (len(samples) - 1) / 4)] for i in range(5)]
            print(f"{name:8} RSS     " + ", ".join(f"{t:.0f}s {m:.0f}" for t, m in marks)
                  + f" MiB (max {max(m for _, m in samples):.0f})")
    print(f"good client      {int(results[0]):,} requests, {int(results[1])} failed, "
          f"{int(results[3])} connects; latency p50 {results[5]:.1f} ms, p99 {results[4]:.1f} ms, "
          f"max {results[2]:.0f} ms")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
