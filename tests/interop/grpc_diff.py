"""A differential harness for the gRPC protocol: the same request, valid or not, sent through grpcio
to two endpoints (rmqpy's own and Apache's proxy in front of the Java broker), and their answers
compared field by field.

Why: compatibility is shown by the reference answering alike, not by rmqpy agreeing with itself.
Each :class:`Case` builds one request of one ``MessagingService`` call from the fields of
``messaging_service.proto`` (a valid base request with one field moved to a boundary: 0, 1, the
proxy's limit, limit+1, huge; empty, over-long and non-ASCII strings; forged and expired receipt
handles; topics of the other message types; unknown topics and groups). :func:`cases` is the
bounded set CI runs, :func:`random_cases` the long run's (bench/grpc_diff_long.py).

What an :class:`Answer` holds: the gRPC status code, the response's ``Status`` (code and message),
each entry's status (SendMessage, AckMessage) and, for ReceiveMessage, the statuses of the stream
and how many messages came. Messages are compared exactly after :func:`normalise`, which replaces
only what differs by nature between two servers: addresses (ip:port), message and transaction ids
(32 hex digits), millisecond timestamps (13 digits) and the client ids this harness made up.
"""
from __future__ import annotations

import base64
import queue
import random
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc

from rmqpy.protocol.recall import RecallHandle
from tests.interop import diff_common

# the resources both targets get, under the same names (a NORMAL topic is the base of every case)
TOPICS = {"NORMAL": "DiffNormal", "FIFO": "DiffFifo", "DELAY": "DiffDelay", "TRANSACTION": "DiffTx",
          "HANDLES": "DiffHandles", "EMPTY": "DiffEmpty",
          # typed topics no case sends to: what a receive finds there cannot depend on timing
          "FIFO_EMPTY": "DiffFifoEmpty", "DELAY_EMPTY": "DiffDelayEmpty", "TRANSACTION_EMPTY": "DiffTxEmpty",
          # message.type PRIORITY: 5.4.0's; not created on a 5.3.3 broker, which refuses the type
          "PRIORITY": "DiffPriority"}
GROUP, FIFO_GROUP, HANDLE_GROUP = "diff_group", "diff_fifo_group", "diff_handle_group"
UNKNOWN_TOPIC, UNKNOWN_GROUP = "DiffNoSuchTopic", "diff_no_such_group"
BROKER_NAME = "broker-diff"
CLIENT_VERSION = "5.1.2"  # what the harness claims to be (the proxy's ILLEGAL_POLLING_TIME needs >= 5.0.3)

# ProxyConfig defaults of 5.3.3, the boundaries the cases probe
MIN_INVISIBLE_MS, MAX_INVISIBLE_MS = 10_000, 12 * 3600 * 1000
MIN_POLLING_MS, MAX_POLLING_MS = 5_000, 20_000
MAX_BATCH = 32
MAX_MESSAGE_SIZE = 4 * 1024 * 1024
MAX_GROUP_SIZE, MAX_USER_PROPERTIES, MAX_USER_PROPERTY_SIZE = 64, 128, 16 * 1024
MAX_DELAY_MS = 24 * 3600 * 1000


# ---------------------------------------------------------------------- answers
_NORMALISE = [
    (re.compile(r"\d{1,3}(?:\.\d{1,3}){3}:\d+"), "<addr>"),
    (re.compile(r"\b[0-9A-Fa-f]{32}\b"), "<id>"),
    (re.compile(r"\b1\d{12}\b"), "<ms>"),
    (re.compile(r"diff-client-[0-9a-f]+"), "<client>"),
]


def normalise(text: str) -> str:
    """``text`` with what differs between two servers by nature replaced (see the module's doc)."""
    for pattern, token in _NORMALISE:
        text = pattern.sub(token, text)
    return text


def _status(s: Any) -> tuple[str, str]:
    return pb.Code.Name(s.code) if s.code in pb.Code.values() else str(s.code), normalise(s.message)


@dataclass(frozen=True)
class Answer:
    """What one endpoint answered to one request, in the fields that are compared."""

    grpc: str  # grpc.StatusCode name
    status: tuple[str, str] = ("", "")  # the response's Status: Code name, message
    entries: tuple[tuple[str, str], ...] = ()  # SendResultEntry / AckMessageResultEntry statuses
    received: int = 0  # ReceiveMessage: the messages of the stream
    detail: str = ""  # a gRPC error's details; the route's accepted message types

    def differences(self, other: "Answer") -> list[str]:
        out = []
        for name in ("grpc", "status", "entries", "received", "detail"):
            a, b = getattr(self, name), getattr(other, name)
            if a != b:
                out.append(f"{name}: {a!r} != {b!r}")
        return out


def answer_of(call: str, response: Any) -> Answer:
    """The compared fields of a successful call's response (a stream's list for ReceiveMessage)."""
    if call == "ReceiveMessage":
        statuses = [r.status for r in response if r.HasField("status")]
        received = sum(1 for r in response if r.HasField("message"))
        return Answer("OK", _status(statuses[0]) if statuses else ("", ""),
                      tuple(_status(s) for s in statuses[1:]), received)
    entries: tuple[tuple[str, str], ...] = ()
    if call in ("SendMessage", "AckMessage"):
        entries = tuple(_status(e.status) for e in response.entries)
    detail = ""
    if call == "QueryRoute" and response.message_queues:
        detail = ",".join(sorted({"+".join(pb.MessageType.Name(t) for t in q.accept_message_types)
                                  for q in response.message_queues}))
    return Answer("OK", _status(response.status), entries, 0, detail)


# ---------------------------------------------------------------------- a target
class Target:
    """One gRPC endpoint as the harness uses it: a channel, and three client identities: ``none``
    (never sent settings), ``producer`` and ``consumer`` (a SimpleConsumer of :data:`GROUP`), the
    latter two with their Telemetry streams kept open as a client keeps them."""

    def __init__(self, name: str, endpoint: str) -> None:
        self.name, self.endpoint = name, endpoint
        self.channel = grpc.insecure_channel(endpoint, options=[("grpc.max_send_message_length", 64 << 20),
                                                                ("grpc.max_receive_message_length", 64 << 20)])
        self.stub = sgrpc.MessagingServiceStub(self.channel)
        self.ids = {k: f"diff-client-{uuid.uuid4().hex[:12]}" for k in ("none", "producer", "consumer", "handles")}
        self._streams: list[queue.Queue[Any]] = []
        self._handles: queue.Queue[tuple[str, str]] = queue.Queue()

    def metadata(self, who: str) -> list[tuple[str, str]]:
        return [("x-mq-client-id", self.ids[who]), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "v2"),
                ("x-mq-client-version", CLIENT_VERSION), ("x-mq-request-id", uuid.uuid4().hex)]

    def open_sessions(self) -> None:
        """The producer's and the consumers' settings on their Telemetry streams, each answered."""
        ua = pb.UA(language=pb.Language.PYTHON, version=CLIENT_VERSION, platform="linux", hostname="diff")
        base = dict(access_point=pb.Endpoints(scheme=pb.AddressScheme.IPv4), user_agent=ua)
        base["request_timeout"] = _duration(3000)
        producer = pb.Settings(client_type=pb.ClientType.PRODUCER, **base,
                               publishing=pb.Publishing(topics=[pb.Resource(name=t) for t in TOPICS.values()]))
        self._settings("producer", producer)
        for who, group in (("consumer", GROUP), ("handles", HANDLE_GROUP)):
            sub = pb.Subscription(group=pb.Resource(name=group), long_polling_timeout=_duration(MIN_POLLING_MS),
                                  subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name=t),
                                                                      expression=pb.FilterExpression(expression="*"))
                                                 for t in TOPICS.values()])
            self._settings(who, pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER, subscription=sub, **base))

    def _settings(self, who: str, settings: Any) -> None:
        out: queue.Queue[Any] = queue.Queue()
        out.put(spb.TelemetryCommand(settings=settings))
        self._streams.append(out)

        def commands() -> Iterator[Any]:
            while True:
                cmd = out.get()
                if cmd is None:
                    return
                yield cmd
        replies = self.stub.Telemetry(commands(), metadata=self.metadata(who))
        first = next(replies)
        assert first.status.code == pb.Code.OK, (self.name, who, first)
        threading.Thread(target=_drain, args=(replies,), daemon=True).start()
        hb = self.stub.Heartbeat(spb.HeartbeatRequest(group=settings.subscription.group, client_type=settings.client_type),
                                 metadata=self.metadata(who), timeout=10)
        assert hb.status.code == pb.Code.OK, (self.name, who, hb)

    def close(self) -> None:
        for out in self._streams:
            out.put(None)
        self.channel.close()

    # ------------------------------------------------------------------ receipt handles
    def stock_handles(self, n: int) -> None:
        """``n`` fresh receipt handles: messages sent to the handles topic, received (60 s hidden)."""
        send = spb.SendMessageRequest(messages=[_message(TOPICS["HANDLES"], f"handle-{i}") for i in range(n)])
        for m in send.messages:
            r = self.stub.SendMessage(spb.SendMessageRequest(messages=[m]), metadata=self.metadata("producer"),
                                      timeout=10)
            assert r.status.code == pb.Code.OK, (self.name, r)
        deadline = time.monotonic() + 60
        got = 0
        while got < n and time.monotonic() < deadline:
            req = spb.ReceiveMessageRequest(group=pb.Resource(name=HANDLE_GROUP),
                                            message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPICS["HANDLES"])),
                                            filter_expression=pb.FilterExpression(expression="*"),
                                            batch_size=MAX_BATCH, invisible_duration=_duration(300_000),
                                            long_polling_timeout=_duration(MIN_POLLING_MS))
            for r in self.stub.ReceiveMessage(req, metadata=self.metadata("handles"), timeout=30):
                if r.HasField("message"):
                    self._handles.put((r.message.system_properties.message_id,
                                       r.message.system_properties.receipt_handle))
                    got += 1
        assert got >= n, f"{self.name}: {got} of {n} handles"

    def handle(self) -> tuple[str, str]:
        """A received message's (id, receipt handle), each handed out once."""
        return self._handles.get_nowait()

    # ------------------------------------------------------------------ a call
    def ask(self, case: "Case") -> Answer:
        request = case.build(self)
        fn = getattr(self.stub, case.call)
        try:
            if case.call in ("ReceiveMessage", "PullMessage"):  # server streams
                return answer_of(case.call, list(fn(request, metadata=self.metadata(case.who), timeout=case.timeout)))
            return answer_of(case.call, fn(request, metadata=self.metadata(case.who), timeout=case.timeout))
        except grpc.RpcError as exc:
            return Answer(exc.code().name, detail=normalise(exc.details() or ""))


def _drain(replies: Iterator[Any]) -> None:
    """Read a Telemetry stream until it ends (its cancellation at close is its normal end)."""
    try:
        for _ in replies:
            pass
    except grpc.RpcError:
        pass


def _duration(ms: int) -> Any:
    d = Duration()
    d.FromMilliseconds(ms)
    return d


def _timestamp(ms: int) -> Any:
    t = Timestamp()
    t.FromMilliseconds(ms)
    return t


def _message(topic: str, body: str = "diff", kind: int = pb.MessageType.NORMAL, **sp: Any) -> Any:
    props = pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), message_type=kind,
                                body_encoding=pb.Encoding.IDENTITY, born_host="diff-host",
                                born_timestamp=_timestamp(int(time.time() * 1000)))
    for k, v in sp.items():
        if k == "keys":
            props.keys.extend(v)
        elif isinstance(v, (int, str)):
            setattr(props, k, v)
        else:
            getattr(props, k).CopyFrom(v)
    return pb.Message(topic=pb.Resource(name=topic), system_properties=props, body=body.encode())


# ---------------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    """One request: ``build(target)`` makes it (a receipt handle is the target's own), sent as ``who``."""

    call: str
    label: str
    build: Callable[[Target], Any] = field(compare=False)
    who: str = "consumer"
    timeout: float = 10.0

    @property
    def name(self) -> str:
        return f"{self.call}[{self.label}]"


NAMES = {  # Resource.name values: (label, value)
    "empty": "", "one": "a", "127": "T" * 127, "128": "T" * 128, "255": "T" * 255, "256": "T" * 256,
    "huge": "T" * 10_000, "non-ascii": "主题", "space": "a b", "control": "a\x01b", "percent": "%a%",
    "retry": "%RETRY%diff_group", "dlq": "%DLQ%diff_group", "system": "TBW102", "sys-trace": "RMQ_SYS_TRACE_TOPIC",
    "sys-group": "CID_RMQ_SYS_diff", "unknown": UNKNOWN_TOPIC,
}


def _topic_cases(call: str, build: Callable[[Target, str], Any], who: str = "consumer",
                 timeout: float = 10.0) -> list[Case]:
    return [Case(call, f"topic={k}", (lambda t, v=v: build(t, v)), who, timeout) for k, v in NAMES.items()]


def _group_cases(call: str, build: Callable[[Target, str], Any], who: str = "consumer",
                 timeout: float = 10.0) -> list[Case]:
    groups = {k: v for k, v in NAMES.items() if k not in ("unknown",)}
    groups["unknown"] = UNKNOWN_GROUP
    return [Case(call, f"group={k}", (lambda t, v=v: build(t, v)), who, timeout) for k, v in groups.items()]


def _receive(topic: str = TOPICS["EMPTY"], group: str = GROUP, batch: int = 1, invisible: int | None = 30_000,
             polling: int | None = MIN_POLLING_MS, expression: str = "*", sql: bool = False,
             auto_renew: bool = False) -> Any:
    req = spb.ReceiveMessageRequest(group=pb.Resource(name=group),
                                    message_queue=pb.MessageQueue(topic=pb.Resource(name=topic)),
                                    filter_expression=pb.FilterExpression(
                                        type=pb.FilterType.SQL if sql else pb.FilterType.TAG, expression=expression),
                                    batch_size=batch, auto_renew=auto_renew)
    if invisible is not None:
        req.invisible_duration.CopyFrom(_duration(invisible))
    if polling is not None:
        req.long_polling_timeout.CopyFrom(_duration(polling))
    return req


def _send(*messages: Any) -> Any:
    return spb.SendMessageRequest(messages=list(messages))


def _ack(t: Target, topic: str = TOPICS["HANDLES"], group: str = HANDLE_GROUP,
         handle: Callable[[Target], tuple[str, str]] | None = None, n: int = 1) -> Any:
    entries = []
    for _ in range(n):
        mid, rh = (handle or Target.handle)(t)
        entries.append(spb.AckMessageEntry(message_id=mid, receipt_handle=rh))
    return spb.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=entries)


def _change(t: Target, ms: int = 30_000, topic: str = TOPICS["HANDLES"], group: str = HANDLE_GROUP,
            handle: Callable[[Target], tuple[str, str]] | None = None) -> Any:
    mid, rh = (handle or Target.handle)(t)
    return spb.ChangeInvisibleDurationRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic),
                                              receipt_handle=rh, message_id=mid, invisible_duration=_duration(ms))


def _forward(t: Target, topic: str = TOPICS["HANDLES"], group: str = HANDLE_GROUP,
             handle: Callable[[Target], tuple[str, str]] | None = None) -> Any:
    mid, rh = (handle or Target.handle)(t)
    return spb.ForwardMessageToDeadLetterQueueRequest(group=pb.Resource(name=group), topic=pb.Resource(name=topic),
                                                      receipt_handle=rh, message_id=mid, delivery_attempt=1,
                                                      max_delivery_attempts=16)


def _forged(text: str) -> Callable[[Target], tuple[str, str]]:
    return lambda t: ("0" * 32, text)


def _expired(t: Target) -> tuple[str, str]:
    """A handle of this target's as it was received, its pop time moved an hour back."""
    mid, rh = t.handle()
    parts = rh.split(" ")
    parts[1] = str(int(parts[1]) - 3600_000)
    return mid, " ".join(parts)


FORGED = {
    "empty": "", "garbage": "not-a-handle", "non-ascii": "句柄", "short": "1 2 3",
    "nine-bad-numbers": "a b c d e f g h i",
    "other-broker": f"0 {int(time.time() * 1000)} 60000 0 0 no-such-broker 0 0 0",
    "huge": "9" * 5000,
}


def cases(handles: bool = True) -> list[Case]:
    """The bounded set CI runs: each call's fields at their boundaries, one at a time."""
    out: list[Case] = []
    N, F, D, T = TOPICS["NORMAL"], TOPICS["FIFO"], TOPICS["DELAY"], TOPICS["TRANSACTION"]
    # ---- QueryRoute / QueryAssignment
    out += _topic_cases("QueryRoute", lambda t, v: spb.QueryRouteRequest(
        topic=pb.Resource(name=v), endpoints=pb.Endpoints(scheme=pb.AddressScheme.IPv4,
                                                          addresses=[pb.Address(host="127.0.0.1", port=8081)])))
    for kind, topic in TOPICS.items():
        if kind in ("FIFO", "DELAY", "TRANSACTION", "NORMAL", "PRIORITY"):
            out.append(Case("QueryRoute", f"type={kind}", lambda t, v=topic: spb.QueryRouteRequest(
                topic=pb.Resource(name=v), endpoints=pb.Endpoints(scheme=pb.AddressScheme.IPv4,
                                                                  addresses=[pb.Address(host="127.0.0.1", port=1)]))))
    out.append(Case("QueryRoute", "no-endpoints", lambda t: spb.QueryRouteRequest(topic=pb.Resource(name=N))))
    out += _topic_cases("QueryAssignment", lambda t, v: spb.QueryAssignmentRequest(
        topic=pb.Resource(name=v), group=pb.Resource(name=GROUP)))
    out += _group_cases("QueryAssignment", lambda t, v: spb.QueryAssignmentRequest(
        topic=pb.Resource(name=N), group=pb.Resource(name=v)))
    # ---- Heartbeat, in each client state
    for who in ("none", "producer", "consumer"):
        out.append(Case("Heartbeat", f"{who}", lambda t: spb.HeartbeatRequest(
            group=pb.Resource(name=GROUP), client_type=pb.ClientType.SIMPLE_CONSUMER), who))
    out += _group_cases("Heartbeat", lambda t, v: spb.HeartbeatRequest(group=pb.Resource(name=v),
                                                                      client_type=pb.ClientType.SIMPLE_CONSUMER))
    # ---- SendMessage
    p = "producer"
    out.append(Case("SendMessage", "valid", lambda t: _send(_message(N)), p))
    out.append(Case("SendMessage", "no-messages", lambda t: _send(), p))
    out.append(Case("SendMessage", "as-unknown-client", lambda t: _send(_message(N)), "none"))
    out += _topic_cases("SendMessage", lambda t, v: _send(_message(v)), p)
    out.append(Case("SendMessage", "two-topics", lambda t: _send(_message(N), _message(D)), p))
    out.append(Case("SendMessage", "batch-2", lambda t: _send(_message(N), _message(N)), p))
    out.append(Case("SendMessage", "body-empty", lambda t: _send(_message(N, "")), p))
    out.append(Case("SendMessage", "body-1", lambda t: _send(_message(N, "x")), p))
    for k, size in (("limit", MAX_MESSAGE_SIZE), ("limit+1", MAX_MESSAGE_SIZE + 1)):
        out.append(Case("SendMessage", f"body-{k}", lambda t, s=size: _send(_message(N, "x" * s)), p, 30))
    out.append(Case("SendMessage", "batch-body-limit+1", lambda t: _send(
        _message(N, "x" * (MAX_MESSAGE_SIZE // 2)), _message(N, "x" * (MAX_MESSAGE_SIZE // 2 + 1))), p, 30))
    out.append(Case("SendMessage", "body-non-ascii", lambda t: _send(_message(N, "消息")), p))
    for k, v in (("blank", " "), ("pipe", "a|b"), ("control", "a\x01b"), ("non-ascii", "标签"), ("empty", ""),
                 ("long", "t" * 10_000)):
        out.append(Case("SendMessage", f"tag={k}", lambda t, v=v: _send(_message(N, tag=v)), p))
    for k, v in (("blank", [" "]), ("control", ["a\x01"]), ("empty", [""]), ("non-ascii", ["键"]),
                 ("space-inside", ["a b"])):
        out.append(Case("SendMessage", f"keys={k}", lambda t, v=v: _send(_message(N, keys=v)), p))
    for k, v in (("empty", ""), ("128", "m" * 128), ("129", "m" * 129), ("control", "m\x01"), ("non-ascii", "标识")):
        out.append(Case("SendMessage", f"message_id={k}", lambda t, v=v: _send(_message(N, message_id=v)), p))
    for k, v in (("blank", " "), ("1", "g"), ("limit", "g" * MAX_GROUP_SIZE), ("limit+1", "g" * (MAX_GROUP_SIZE + 1)),
                 ("control", "g\x01"), ("non-ascii", "组" * MAX_GROUP_SIZE)):
        out.append(Case("SendMessage", f"message_group={k}", lambda t, v=v: _send(
            _message(F, kind=pb.MessageType.FIFO, message_group=v)), p))
    # the user properties: their number and their total size (keys and values)
    for k, n in (("limit", MAX_USER_PROPERTIES), ("limit+1", MAX_USER_PROPERTIES + 1)):
        out.append(Case("SendMessage", f"properties-count-{k}", lambda t, n=n: _send(
            _with_props(_message(N), {f"k{i}": "v" for i in range(n)})), p))
    for k, size in (("limit", MAX_USER_PROPERTY_SIZE), ("limit+1", MAX_USER_PROPERTY_SIZE + 1)):
        out.append(Case("SendMessage", f"properties-size-{k}", lambda t, s=size: _send(
            _with_props(_message(N), {"k": "v" * (s - 1)})), p))
    out.append(Case("SendMessage", "properties-size-non-ascii", lambda t: _send(
        _with_props(_message(N), {"k": "值" * (MAX_USER_PROPERTY_SIZE // 2)})), p))
    for k, props in (("system-key", {"UNIQ_KEY": "x"}), ("priority-key", {"_SYS_MSG_PRIORITY_": "1"}),
                     ("origin-group-key", {"ORIGIN_GROUP": "g"}), ("empty-key", {"": "v"}), ("control-key", {"a\x01": "v"}),
                     ("control-value", {"a": "v\x01"}), ("empty-value", {"a": ""}), ("non-ascii", {"键": "值"})):
        out.append(Case("SendMessage", f"property={k}", lambda t, pr=props: _send(_with_props(_message(N), pr)), p))
    # delivery timestamps and message types against topic types
    now = lambda: int(time.time() * 1000)  # noqa: E731
    for k, off in (("past", -60_000), ("now+10s", 10_000), ("limit-1m", MAX_DELAY_MS - 60_000),
                   ("limit+1m", MAX_DELAY_MS + 60_000)):
        out.append(Case("SendMessage", f"delivery={k}", lambda t, o=off: _send(
            _message(D, kind=pb.MessageType.DELAY, delivery_timestamp=_timestamp(now() + o))), p))
    # PRIORITY: a priority (proto 2.1.1, proxy 5.4.0); the message type field stays NORMAL, as a client sends it
    kinds = {"NORMAL": {}, "FIFO": {"message_group": "g"}, "DELAY": {"delivery_timestamp": None},
             "TRANSACTION": {}, "PRIORITY": {"priority": 1}}
    for topic_kind in ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "PRIORITY"):
        for msg_kind, extra in kinds.items():
            out.append(Case("SendMessage", f"{msg_kind}-to-{topic_kind}", lambda t, tk=topic_kind, mk=msg_kind, e=extra: _send(
                _message(TOPICS[tk], kind=pb.MessageType.Value(mk if mk != "PRIORITY" else "NORMAL"),
                         **{k: (v if v is not None else _timestamp(now() + 10_000)) for k, v in e.items()})), p))
    for k, v in (("0", 0), ("-1", -1)):  # 5.4.0: a negative one is Message.setPriority's exception
        out.append(Case("SendMessage", f"priority={k}", lambda t, v=v: _send(_message(N, priority=v)), p))
    # ---- ReceiveMessage (an empty topic: the valid ones wait out the long polling)
    out.append(Case("ReceiveMessage", "valid", lambda t: _receive(), timeout=15))
    out.append(Case("ReceiveMessage", "as-unknown-client", lambda t: _receive(), "none", 15))
    out.append(Case("ReceiveMessage", "as-producer", lambda t: _receive(), "producer", 15))
    out += _topic_cases("ReceiveMessage", lambda t, v: _receive(topic=v), timeout=15)
    out += _group_cases("ReceiveMessage", lambda t, v: _receive(group=v), timeout=15)
    for b in (0, 1, MAX_BATCH, MAX_BATCH + 1, 1_000_000, -1):
        out.append(Case("ReceiveMessage", f"batch={b}", lambda t, b=b: _receive(batch=b), timeout=15))
    for k, ms in (("absent", None), ("0", 0), ("1ms", 1), ("min-1", MIN_INVISIBLE_MS - 1), ("min", MIN_INVISIBLE_MS),
                  ("max", MAX_INVISIBLE_MS), ("max+1", MAX_INVISIBLE_MS + 1), ("huge", 10**12), ("negative", -1000)):
        out.append(Case("ReceiveMessage", f"invisible={k}", lambda t, ms=ms: _receive(invisible=ms), timeout=15))
    out.append(Case("ReceiveMessage", "auto-renew-invisible=0", lambda t: _receive(invisible=0, auto_renew=True),
                    timeout=15))
    for k, ms in (("absent", None), ("0", 0), ("1", 1), ("min", MIN_POLLING_MS), ("max+1", MAX_POLLING_MS + 1),
                  ("huge", 10**9), ("negative", -1000)):
        out.append(Case("ReceiveMessage", f"polling={k}", lambda t, ms=ms: _receive(polling=ms), timeout=25))
    out.append(Case("ReceiveMessage", "deadline-below-min-polling", lambda t: _receive(polling=MIN_POLLING_MS),
                    timeout=3))
    # the polling time is the proxy's first check: before a blank topic or a bad group
    out.append(Case("ReceiveMessage", "deadline-below-min-polling-blank-topic",
                    lambda t: _receive(topic="", group="a\x01", polling=MIN_POLLING_MS), timeout=3))
    for k, (exp, sql) in (("tag-empty", ("", False)), ("tag-or", ("a||b", False)), ("tag-non-ascii", ("标签", False)),
                          ("sql-bad", ("a >", True)), ("sql-empty", ("", True)), ("sql-ok", ("a > 1", True)),
                          ("tag-long", ("t" * 70_000, False))):
        out.append(Case("ReceiveMessage", f"filter={k}", lambda t, e=exp, s=sql: _receive(expression=e, sql=s),
                        timeout=15))
    for kind in ("FIFO", "DELAY", "TRANSACTION"):
        out.append(Case("ReceiveMessage", f"topic-type={kind}", lambda t, k=kind: _receive(topic=TOPICS[f"{k}_EMPTY"]),
                        timeout=15))
    # ---- AckMessage / ChangeInvisibleDuration / ForwardMessageToDeadLetterQueue
    out.append(Case("AckMessage", "no-entries", lambda t: spb.AckMessageRequest(
        group=pb.Resource(name=HANDLE_GROUP), topic=pb.Resource(name=TOPICS["HANDLES"]))))
    out += _topic_cases("AckMessage", lambda t, v: _ack(t, topic=v, handle=_forged(FORGED["other-broker"])))
    out += _group_cases("AckMessage", lambda t, v: _ack(t, group=v, handle=_forged(FORGED["other-broker"])))
    out += _topic_cases("ChangeInvisibleDuration", lambda t, v: _change(t, topic=v, handle=_forged(FORGED["other-broker"])))
    out += _group_cases("ChangeInvisibleDuration", lambda t, v: _change(t, group=v, handle=_forged(FORGED["other-broker"])))
    for k, text in FORGED.items():
        out.append(Case("AckMessage", f"handle={k}", lambda t, h=text: _ack(t, handle=_forged(h))))
        out.append(Case("ChangeInvisibleDuration", f"handle={k}", lambda t, h=text: _change(t, handle=_forged(h))))
        out.append(Case("ForwardMessageToDeadLetterQueue", f"handle={k}", lambda t, h=text: _forward(t, handle=_forged(h))))
    for k, ms in (("0", 0), ("1", 1), ("max", MAX_INVISIBLE_MS), ("max+1", MAX_INVISIBLE_MS + 1), ("negative", -1000)):
        out.append(Case("ChangeInvisibleDuration", f"invisible={k}",
                        lambda t, ms=ms: _change(t, ms, handle=_forged(FORGED["other-broker"]))))
    out += _topic_cases("ForwardMessageToDeadLetterQueue", lambda t, v: _forward(t, topic=v, handle=_forged(FORGED["other-broker"])))
    out += _group_cases("ForwardMessageToDeadLetterQueue", lambda t, v: _forward(t, group=v, handle=_forged(FORGED["other-broker"])))
    if handles:  # real handles of each target: valid, expired, acked twice, of another group
        out.append(Case("AckMessage", "valid", lambda t: _ack(t)))
        out.append(Case("AckMessage", "valid-2", lambda t: _ack(t, n=2)))
        out.append(Case("AckMessage", "expired", lambda t: _ack(t, handle=_expired)))
        out.append(Case("AckMessage", "other-group", lambda t: _ack(t, group=GROUP)))
        out.append(Case("AckMessage", "valid-and-forged", lambda t: _ack2(t)))
        out.append(Case("ChangeInvisibleDuration", "valid", lambda t: _change(t)))
        out.append(Case("ChangeInvisibleDuration", "expired", lambda t: _change(t, handle=_expired)))
        out.append(Case("ChangeInvisibleDuration", "valid-0", lambda t: _change(t, 0)))
        out.append(Case("ForwardMessageToDeadLetterQueue", "valid", lambda t: _forward(t)))
    # ---- EndTransaction
    out += _topic_cases("EndTransaction", lambda t, v: _end(v), p)
    for k, v in (("empty", ""), ("blank", " "), ("128", "x" * 128), ("129", "x" * 129), ("unknown", "0" * 32),
                 ("non-ascii", "事务")):
        out.append(Case("EndTransaction", f"transaction_id={k}", lambda t, v=v: _end(T, tid=v), p))
    for res in ("TRANSACTION_RESOLUTION_UNSPECIFIED", "COMMIT", "ROLLBACK"):
        out.append(Case("EndTransaction", f"resolution={res}", lambda t, r=res: _end(
            T, resolution=pb.TransactionResolution.Value(r)), p))
    # ---- RecallMessage (the broker refuses a recall with recallMessageEnable at its default, false)
    out += _topic_cases("RecallMessage", lambda t, v: _recall(v, _handle(v)), p)
    for kind in ("NORMAL", "FIFO", "TRANSACTION"):
        out.append(Case("RecallMessage", f"type={kind}", lambda t, v=TOPICS[kind]: _recall(v, _handle(v)), p))
    for k, h in (("empty", ""), ("garbage", "not a handle!"), ("plain-base64", "djEgYSBiIGMgZA=="),
                 ("v2", _b64("v2 DiffDelay broker-diff 1 id")), ("four-fields", _b64(f"v1 {D} {BROKER_NAME} 1")),
                 ("other-topic", _handle(N)), ("other-broker", _handle(D, "no-such-broker")),
                 ("past", _handle(D, ts="1")), ("valid", _handle(D)), ("no-padding", _handle(D).rstrip("="))):
        out.append(Case("RecallMessage", f"recall_handle={k}", lambda t, h=h: _recall(D, h), p))
    out.append(Case("RecallMessage", "as-unknown-client", lambda t: _recall(D, _handle(D)), "none"))
    # ---- the calls of the proto the proxy does not serve (SyncLiteSubscription: proto 2.1.1, proxy 5.4.0)
    for call in ("PullMessage", "UpdateOffset", "GetOffset", "QueryOffset", "SyncLiteSubscription"):
        out.append(Case(call, "unserved", lambda t, c=call: getattr(spb, f"{c}Request")()))
    return out


def _with_props(m: Any, props: dict[str, str]) -> Any:
    for k, v in props.items():
        m.user_properties[k] = v
    return m


def _ack2(t: Target) -> Any:
    req = _ack(t)
    req.entries.add(message_id="0" * 32, receipt_handle=FORGED["other-broker"])
    return req


def _end(topic: str, tid: str = "0" * 32, resolution: int = pb.TransactionResolution.COMMIT) -> Any:
    return spb.EndTransactionRequest(topic=pb.Resource(name=topic), message_id="0" * 32, transaction_id=tid,
                                     resolution=resolution, source=pb.TransactionSource.SOURCE_CLIENT)


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


def _handle(topic: str, broker: str = BROKER_NAME, ts: str | None = None) -> str:
    """A recall handle of the form a broker gives a delay send (RecallMessageHandle.HandleV1), due in an hour."""
    return RecallHandle(topic, broker, ts or str(int(time.time() * 1000) + 3_600_000), uuid.uuid4().hex.upper()).encode()


def _recall(topic: str, handle: str) -> Any:
    return spb.RecallMessageRequest(topic=pb.Resource(name=topic), recall_handle=handle)


def handles_needed(selected: list[Case]) -> int:
    """How many real receipt handles the cases take from each target."""
    return sum(2 if c.label in ("valid-2",) else 1 for c in selected
               if c.call in ("AckMessage", "ChangeInvisibleDuration", "ForwardMessageToDeadLetterQueue")
               and c.label in ("valid", "valid-2", "expired", "other-group", "valid-and-forged", "valid-0"))


_STRINGS = ["", "a", " ", "a\x01", "主题", "T" * 127, "T" * 128, "T" * 256, "%RETRY%x", "TBW102", "|", "x" * 5000]
_NUMBERS = [0, 1, -1, 31, 32, 33, 127, 128, 129, 9_999, 10_000, 10_001, 2**31 - 1, -2**31]


def random_cases(count: int, seed: int) -> list[Case]:
    """``count`` cases for the long run: the bounded set's requests with two or three of their
    fields moved to random boundary values (strings, numbers), reproducible from ``seed``."""
    rng = random.Random(seed)
    base = [c for c in cases(handles=False)
            if c.call not in ("ReceiveMessage",) or rng.random() < 0.3]
    out = []
    for i in range(count):
        c = rng.choice(base)
        moves = [(rng.random(), rng.choice(_STRINGS), rng.choice(_NUMBERS)) for _ in range(rng.randint(1, 3))]
        out.append(Case(c.call, f"{c.label}~{i}", lambda t, c=c, mv=moves: _mutate(c.build(t), mv, c.call),
                        c.who, min(c.timeout, 25)))
    return out


def _mutate(msg: Any, moves: list[tuple[float, str, int]], call: str) -> Any:
    """``msg`` with scalar fields (at any depth, the ones set or not) set to the moves' values."""
    fields = list(_scalar_fields(msg))
    for pick, text, number in moves:
        if not fields:
            break
        holder, fd = fields[int(pick * len(fields)) % len(fields)]
        try:
            if fd.type == fd.TYPE_STRING:
                setattr(holder, fd.name, text)
            elif fd.type in (fd.TYPE_INT32, fd.TYPE_INT64):
                setattr(holder, fd.name, number)
            elif fd.type == fd.TYPE_BYTES:
                setattr(holder, fd.name, text.encode())
        except (ValueError, TypeError):
            pass
    return msg


def _repeated(fd: Any) -> bool:
    is_repeated = getattr(fd, "is_repeated", None)  # newer protobuf; ``label`` before
    return bool(is_repeated) if is_repeated is not None else fd.label == fd.LABEL_REPEATED


def _scalar_fields(msg: Any) -> Iterator[tuple[Any, Any]]:
    for fd in msg.DESCRIPTOR.fields:
        if _repeated(fd):
            if fd.type == fd.TYPE_MESSAGE and not fd.message_type.GetOptions().map_entry:
                for item in getattr(msg, fd.name):
                    yield from _scalar_fields(item)
            continue
        if fd.type == fd.TYPE_MESSAGE:
            if fd.message_type.full_name.startswith("google.protobuf"):
                continue
            yield from _scalar_fields(getattr(msg, fd.name))
        elif fd.type in (fd.TYPE_STRING, fd.TYPE_INT32, fd.TYPE_INT64, fd.TYPE_BYTES):
            yield msg, fd


# ---------------------------------------------------------------------- running
Result = diff_common.Result


def run(ours: Target, theirs: Target, selected: list[Case], workers: int = 8) -> list[Result]:
    """Each case sent to both targets (side by side, a case at a time per worker)."""
    def one(c: Case) -> Result:
        with ThreadPoolExecutor(2) as pair:
            a, b = pair.submit(_ask, ours, c), pair.submit(_ask, theirs, c)
            return Result(c, a.result(), b.result())
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, selected))


def _ask(t: Target, c: Case) -> Answer:
    try:
        return t.ask(c)
    except Exception as exc:  # the harness's own failure (e.g. no handle left): shown, not hidden
        return Answer("HARNESS", ("", f"{type(exc).__name__}: {exc}"))
