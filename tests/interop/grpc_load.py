"""Background load on a gRPC endpoint while a scenario module's official clients run against it
(issue 25, item 4: scenarios proven under load, not on an idle server).

:class:`GrpcLoad` is a producer and a SimpleConsumer of its own topic and group, speaking the protocol
through grpcio as a RocketMQ 5 client does (settings on a Telemetry stream, x-mq-* metadata, heartbeats):
``senders`` threads send at ``rate`` messages a second in all, and ``receives`` receives are in flight at
once, each acking what it got. A send answered TOO_MANY_REQUESTS (a broker's flow control: "broker busy")
is sent again after a backoff, as the official producer does (up to its 3 attempts, the delays of the
retry policy the proxy gives it: 10 ms doubling); it is counted, not an error. Nothing else is retried:
every other call that is not OK is kept in the report, and so is every message sent but never received,
so a target that drops a message or answers a well-formed call with an error under load fails the
module, as it would fail an application.
"""
from __future__ import annotations

import queue
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc

#: the load's topic and group: a module creates both (NORMAL topic, 4 queues) before :meth:`GrpcLoad.start`
TOPIC, GROUP = "GrpcLoad", "grpc_load"
#: a receive's long polling (the 5.x clients' default for a SimpleConsumer's awaitDuration is 30 s; shorter
#: here so that :meth:`GrpcLoad.stop` is quick) and invisible time
POLLING_MS, INVISIBLE_MS = 5_000, 30_000
#: as the official clients: a heartbeat every 10 s (Apache's proxy forgets a consumer's settings once its
#: channel expires without one), and a failed call's next try 1 s later (the Java client's receive backoff)
HEARTBEAT_S, BACKOFF_S = 10.0, 1.0
#: a producer's attempts and the first delay of its exponential backoff after TOO_MANY_REQUESTS (s): the
#: proxy's ProxyConfig.grpcClientProducerMaxAttempts and grpcClientProducerBackoffInitialMillis, which
#: the Java client's ProducerImpl applies to a throttled send
SEND_ATTEMPTS, THROTTLED_BACKOFF_S = 3, 0.01


def create_topic(broker_addr: str, ns_addr: str, topic: str = TOPIC, timeout: float = 30) -> None:
    """The load's topic (NORMAL, 4 queues) on a broker over remoting, as mqadmin updateTopic would, and
    until its name server routes it (a proxy asks the name server)."""
    from tests.interop import jvm
    fields = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
              "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    code, remark, _, _ = jvm.remoting_request(broker_addr, 17, fields)  # UPDATE_AND_CREATE_TOPIC
    assert code == 0, (broker_addr, topic, code, remark)
    deadline = time.monotonic() + timeout
    while jvm.remoting_request(ns_addr, 105, {"topic": topic})[0] != 0:  # GET_ROUTEINFO_BY_TOPIC
        assert time.monotonic() < deadline, f"{topic} not routed by {ns_addr}"
        time.sleep(0.2)


def _duration(ms: int) -> Duration:
    d = Duration()
    d.FromMilliseconds(ms)
    return d


@dataclass
class LoadReport:
    sent: set[str] = field(default_factory=set)
    received: set[str] = field(default_factory=set)
    acked: int = 0
    throttled: int = 0  # sends answered TOO_MANY_REQUESTS and sent again
    errors: list[str] = field(default_factory=list)

    @property
    def missing(self) -> set[str]:
        return self.sent - self.received

    def __str__(self) -> str:
        return (f"{len(self.sent)} sent, {len(self.received)} received, {self.acked} acked, "
                f"{len(self.missing)} missing, {self.throttled} throttled and sent again, "
                f"{len(self.errors)} errors {self.errors[:5]}")


class GrpcLoad:
    def __init__(self, endpoint: str, rate: float = 20.0, receives: int = 4, senders: int = 2,
                 topic: str = TOPIC, group: str = GROUP) -> None:
        self.endpoint, self.rate, self.receives, self.senders = endpoint, rate, receives, senders
        self.topic, self.group = topic, group
        self.channel = grpc.insecure_channel(endpoint)
        self.stub = sgrpc.MessagingServiceStub(self.channel)
        self.client_id = f"grpc-load-{uuid.uuid4().hex[:12]}"
        self.report = LoadReport()
        self._lock = threading.Lock()
        self._sending = threading.Event()
        self._receiving = threading.Event()
        self._stopping = threading.Event()  # set once halting: ends the heartbeats
        self._threads: list[threading.Thread] = []
        self._telemetry: queue.Queue[Any] = queue.Queue()
        self._running = False

    def _metadata(self) -> list[tuple[str, str]]:
        return [("x-mq-client-id", self.client_id), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "v2"),
                ("x-mq-client-version", "5.1.2"), ("x-mq-request-id", uuid.uuid4().hex)]

    def _error(self, call: str, what: Any) -> None:
        with self._lock:
            self.report.errors.append(f"{call}: {what}")

    # ------------------------------------------------------------------ the client's session
    def _open(self) -> None:
        """Producer and SimpleConsumer settings on one Telemetry stream (one client id for both, as
        the load is one client), answered, then a heartbeat; once the endpoint takes connections (a
        restarted broker's gRPC port opens after its remoting port)."""
        grpc.channel_ready_future(self.channel).result(timeout=60)
        self._telemetry = queue.Queue()
        ua = pb.UA(language=pb.Language.PYTHON, version="5.1.2", platform="linux", hostname="grpc-load")
        sub = pb.Subscription(group=pb.Resource(name=self.group), long_polling_timeout=_duration(POLLING_MS),
                              subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name=self.topic),
                                                                  expression=pb.FilterExpression(expression="*"))])
        settings = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER, subscription=sub, user_agent=ua,
                               access_point=pb.Endpoints(scheme=pb.AddressScheme.IPv4),
                               request_timeout=_duration(3000))
        self._telemetry.put(spb.TelemetryCommand(settings=settings))

        def commands() -> Iterator[Any]:
            while (cmd := self._telemetry.get()) is not None:
                yield cmd
        replies = self.stub.Telemetry(commands(), metadata=self._metadata())
        first = next(replies)
        assert first.status.code == pb.Code.OK, (self.endpoint, first)
        self._spawn(self._drain, replies)
        assert self._heartbeat(), (self.endpoint, self.report.errors[-1:])

    def _heartbeat(self) -> bool:
        try:
            hb = self.stub.Heartbeat(spb.HeartbeatRequest(group=pb.Resource(name=self.group),
                                                          client_type=pb.ClientType.SIMPLE_CONSUMER),
                                     metadata=self._metadata(), timeout=10)
        except grpc.RpcError as exc:
            self._error("Heartbeat", f"{exc.code().name} {exc.details()}")
            return False
        if hb.status.code != pb.Code.OK:
            self._error("Heartbeat", f"{pb.Code.Name(hb.status.code)} {hb.status.message}")
        return hb.status.code == pb.Code.OK

    def _heartbeat_loop(self) -> None:
        while not self._stopping.wait(HEARTBEAT_S):
            self._heartbeat()

    @staticmethod
    def _drain(replies: Iterator[Any]) -> None:
        try:
            for _ in replies:
                pass
        except grpc.RpcError:
            pass  # cancelled at close

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=f"grpc-load-{target.__name__}", daemon=True)
        thread.start()
        self._threads.append(thread)

    # ------------------------------------------------------------------ the load
    def start(self) -> "GrpcLoad":
        self._open()
        self._running = True
        self._stopping.clear()
        self._sending.set()
        self._receiving.set()
        self._spawn(self._heartbeat_loop)
        for _ in range(self.receives):
            self._spawn(self._receive_loop)
        for n in range(self.senders):
            self._spawn(self._send_loop, n)
        return self

    def _send_loop(self, n: int) -> None:
        period = self.senders / self.rate
        next_at = time.monotonic()
        i = 0
        while self._sending.is_set():
            key = f"load-{n}-{i}-{uuid.uuid4().hex[:6]}"
            i += 1
            props = pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), message_type=pb.MessageType.NORMAL,
                                        body_encoding=pb.Encoding.IDENTITY, born_host="grpc-load", keys=[key])
            born = Timestamp()
            born.FromMilliseconds(int(time.time() * 1000))
            props.born_timestamp.CopyFrom(born)
            message = pb.Message(topic=pb.Resource(name=self.topic), system_properties=props, body=key.encode())
            if not self._send(key, message):
                next_at += BACKOFF_S
            next_at += period
            time.sleep(max(0.0, next_at - time.monotonic()))

    def _send(self, key: str, message: Any) -> bool:
        """One message sent as the official producer sends it: again after a backoff while throttled."""
        for attempt in range(1, SEND_ATTEMPTS + 1):
            try:
                r = self.stub.SendMessage(spb.SendMessageRequest(messages=[message]), metadata=self._metadata(),
                                          timeout=10)
            except grpc.RpcError as exc:
                self._error("SendMessage", f"{exc.code().name} {exc.details()}")
                return False
            if r.status.code == pb.Code.OK:
                with self._lock:
                    self.report.sent.add(key)
                return True
            if r.status.code != pb.Code.TOO_MANY_REQUESTS or attempt == SEND_ATTEMPTS:
                self._error("SendMessage", f"{pb.Code.Name(r.status.code)} {r.status.message}")
                return False
            with self._lock:
                self.report.throttled += 1
            time.sleep(THROTTLED_BACKOFF_S * 2 ** (attempt - 1))
        return False

    def _receive_loop(self) -> None:
        request = spb.ReceiveMessageRequest(group=pb.Resource(name=self.group),
                                            message_queue=pb.MessageQueue(topic=pb.Resource(name=self.topic)),
                                            filter_expression=pb.FilterExpression(expression="*"), batch_size=16,
                                            invisible_duration=_duration(INVISIBLE_MS),
                                            long_polling_timeout=_duration(POLLING_MS))
        while self._receiving.is_set():
            got = []
            failed = False
            try:
                for r in self.stub.ReceiveMessage(request, metadata=self._metadata(), timeout=POLLING_MS / 1000 + 10):
                    if r.HasField("message"):
                        got.append(r.message)
                    elif r.HasField("status") and r.status.code not in (pb.Code.OK, pb.Code.MESSAGE_NOT_FOUND):
                        self._error("ReceiveMessage", f"{pb.Code.Name(r.status.code)} {r.status.message}")
                        failed = True
            except grpc.RpcError as exc:
                self._error("ReceiveMessage", f"{exc.code().name} {exc.details()}")
                failed = True
            if got:
                self._ack(got)
            if failed:
                time.sleep(BACKOFF_S)

    def _ack(self, messages: list[Any]) -> None:
        with self._lock:
            self.report.received.update(m.system_properties.keys[0] for m in messages)
        entries = [spb.AckMessageEntry(message_id=m.system_properties.message_id,
                                       receipt_handle=m.system_properties.receipt_handle) for m in messages]
        try:
            r = self.stub.AckMessage(spb.AckMessageRequest(group=pb.Resource(name=self.group),
                                                           topic=pb.Resource(name=self.topic), entries=entries),
                                     metadata=self._metadata(), timeout=10)
            failed = [e for e in r.entries if e.status.code != pb.Code.OK]
            if r.status.code not in (pb.Code.OK, pb.Code.MULTIPLE_RESULTS) or failed:
                self._error("AckMessage", f"{pb.Code.Name(r.status.code)} {r.status.message} {failed[:1]}")
            with self._lock:
                self.report.acked += len(entries) - len(failed)
        except grpc.RpcError as exc:
            self._error("AckMessage", f"{exc.code().name} {exc.details()}")

    def _halt(self, drain_s: float) -> None:
        """Stops sending, waits (at most ``drain_s``) until every message sent was received, then ends the
        receives and the Telemetry stream."""
        if not self._running:
            return
        self._running = False
        self._sending.clear()
        self._stopping.set()
        deadline = time.monotonic() + drain_s
        while self.report.missing and time.monotonic() < deadline:
            time.sleep(0.2)
        self._receiving.clear()
        self._telemetry.put(None)
        for thread in self._threads:
            if thread.name != "grpc-load-_drain":
                thread.join(POLLING_MS / 1000 + 15)
        self._threads = []

    @contextmanager
    def paused(self, drain_s: float = 30.0) -> Iterator[None]:
        """The load halted (drained: what it sent is received) while a test stops a server, e.g. a
        broker's kill -9 and restart, and started again, with a new session, after it."""
        self._halt(drain_s)
        try:
            yield
        finally:
            self.start()

    def stop(self, drain_s: float = 30.0) -> LoadReport:
        """Stops the load and closes the client: the report of the whole run."""
        self._halt(drain_s)
        self.channel.close()
        return self.report
