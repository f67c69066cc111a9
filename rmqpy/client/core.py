"""What the producer and the pull consumer do, written once as *plans*: generators that yield a
:class:`Call` (send this request to that address within that time) and are resumed with the
answer, or have a :class:`TransportError` thrown in when none came. The blocking, Twisted and
asyncio forms only differ in how they run a plan (:mod:`rmqpy.client.blocking`,
:mod:`rmqpy.client.deferred`, :mod:`rmqpy.client.aio`), so retries, route choice and fault
tolerance behave the same in all three.
"""
from __future__ import annotations

import itertools
import os
import socket
import time
from dataclasses import dataclass
from typing import Callable, Generator, TypeVar

from rmqpy.acl.client_hook import AclClientHook
from rmqpy.client import requests as R
from rmqpy.client.errors import ClientError, TransportError
from rmqpy.client.model import Message, MessageQueue, PullResult, SendResult, SendStatus
from rmqpy.client.route import AUTO_CREATE_TOPIC, FaultTolerance, QueueSelector, TopicRoute
from rmqpy.protocol.bodies.route import MASTER_ID
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.message import create_uniq_id

T = TypeVar("T")

MQ_CLIENT_API_TIMEOUT = 3.0      # ClientConfig.mqClientApiTimeout (s)
POLL_NAME_SERVER_INTERVAL = 30.0  # ClientConfig.pollNameServerInterval (s): how long a route is used


@dataclass
class Call:
    """One request for the runner: ``oneway`` calls are resumed with None once written."""
    addr: str
    request: RemotingCommand
    timeout: float
    oneway: bool = False


Plan = Generator[Call, "RemotingCommand | None", T]

_instances = itertools.count()


def local_ip() -> str:
    """The address Java's ``RemotingUtil.getLocalAddress`` would pick: the one of the default route."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def parse_name_servers(name_server: str) -> list[str]:
    """``a:9876;b:9876`` as Java's namesrvAddr; ClientError for anything that is not host:port."""
    if not isinstance(name_server, str):
        raise ClientError(f"name_server must be a string like 'host:9876;host2:9876', not {name_server!r}")
    addrs = [a.strip() for a in name_server.split(";") if a.strip()]
    if not addrs:
        raise ClientError("name_server is empty: give 'host:port' (several separated by ';')")
    for addr in addrs:
        host, _, port = addr.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ClientError(f"name server address {addr!r} is not host:port")
    return addrs


def _credentials_hook(credentials: tuple[str, str] | None) -> AclClientHook | None:
    if credentials is None:
        return None
    if not isinstance(credentials, tuple) or len(credentials) != 2 or \
            not all(isinstance(c, str) and c for c in credentials):
        raise ClientError("credentials must be (access_key, secret_key), two non-empty strings")
    return AclClientHook(credentials[0], credentials[1])


class ClientCore:
    """Name servers, routes and request signing, shared by one producer or consumer."""

    def __init__(self, name_server: str, credentials: tuple[str, str] | None, clock: Callable[[], float],
                 api_timeout: float = MQ_CLIENT_API_TIMEOUT,
                 route_ttl: float = POLL_NAME_SERVER_INTERVAL) -> None:
        self.name_servers = parse_name_servers(name_server)
        self.hook = _credentials_hook(credentials)
        self.clock = clock
        self.api_timeout = api_timeout
        self.route_ttl = route_ttl
        self.client_id = f"{local_ip()}@{os.getpid()}#{next(_instances)}"
        self._ns_index = 0
        self._routes: dict[str, tuple[TopicRoute, float]] = {}

    def call(self, addr: str, request: RemotingCommand, timeout: float, oneway: bool = False) -> Call:
        """The Call for ``request``, signed first when there are credentials (AclClientRPCHook)."""
        if self.hook is not None:
            self.hook(addr, request)
        return Call(addr, request, max(timeout, 0.001), oneway)

    def name_server_plan(self, request: RemotingCommand) -> Plan[RemotingCommand]:
        """Ask the name server last used; on no answer the next ones (NettyRemotingClient's choice)."""
        errors = []
        n = len(self.name_servers)
        for i in range(n):
            index = (self._ns_index + i) % n
            addr = self.name_servers[index]
            try:
                resp = yield self.call(addr, request, self.api_timeout)
            except TransportError as exc:
                errors.append(f"{addr}: {exc.message}")
                continue
            assert resp is not None
            self._ns_index = index
            return resp
        raise TransportError("no name server answered (" + "; ".join(errors) + ")")

    def route_plan(self, topic: str, refresh: bool = False) -> Plan[TopicRoute | None]:
        """The topic's route (None: unknown to the name servers), cached for ``route_ttl``;
        while no name server answers, the last route known is used, as Java keeps its tables."""
        cached = self._routes.get(topic)
        now = self.clock()
        if cached is not None and not refresh and now - cached[1] < self.route_ttl:
            return cached[0]
        try:
            resp = yield from self.name_server_plan(R.route_request(topic))
        except TransportError:
            if cached is not None:
                return cached[0]
            raise
        data = R.parse_route(resp, topic)
        if data is None:    # not cached: a topic just created is routed as soon as its broker registers it
            return None
        route = TopicRoute(topic, data)
        self._routes[topic] = (route, self.clock())
        return route

    def drop_route(self, topic: str) -> None:
        self._routes.pop(topic, None)


class ProducerCore(ClientCore):
    """``DefaultMQProducerImpl``: publish routes with the TBW102 fallback, sends with retries."""

    def __init__(self, name_server: str, group: str, send_timeout_ms: int, retries: int,
                 credentials: tuple[str, str] | None, clock: Callable[[], float], *,
                 compress_over: int = R.COMPRESS_OVER, max_message_size: int = R.MAX_MESSAGE_SIZE,
                 send_latency_fault_enable: bool = False,
                 retry_another_broker_when_not_store_ok: bool = False) -> None:
        super().__init__(name_server, credentials, clock)
        if not isinstance(group, str) or not group:
            raise ClientError("group must be a non-empty string")
        if not isinstance(retries, int) or retries < 0:
            raise ClientError(f"retries must be an int >= 0, not {retries!r}")
        if not isinstance(send_timeout_ms, int) or send_timeout_ms <= 0:
            raise ClientError(f"send_timeout_ms must be an int > 0, not {send_timeout_ms!r}")
        self.group = group
        self.send_timeout = send_timeout_ms / 1000.0
        self.retries = retries
        self.compress_over = compress_over
        self.max_message_size = max_message_size
        self.retry_not_stored = retry_another_broker_when_not_store_ok
        self.faults = FaultTolerance(send_latency_fault_enable)
        self.selector = QueueSelector(self.faults)
        self._ip = local_ip()
        self._publish: dict[str, tuple[TopicRoute, float]] = {}

    def publish_route_plan(self, topic: str, refresh: bool = False) -> Plan[TopicRoute]:
        """``tryToFindTopicPublishInfo``: the topic's route, else TBW102's (brokers with
        autoCreateTopicEnable create the topic on the first send), else ClientError."""
        cached = self._publish.get(topic)
        if cached is not None and not refresh and self.clock() - cached[1] < self.route_ttl:
            return cached[0]
        route = yield from self.route_plan(topic, refresh)
        if route is None or not route.publish_queues():
            default = yield from self.route_plan(AUTO_CREATE_TOPIC, refresh)
            if default is not None and default.publish_queues():
                route = TopicRoute(topic, default.data, from_default=True)
        if route is None or not route.publish_queues():
            raise ClientError(f"No route info of this topic: {topic} (no name server knows it, and no broker "
                              "offers to create it: autoCreateTopicEnable is off)")
        self._publish[topic] = (route, self.clock())
        return route

    def _prepare(self, msg: Message) -> tuple[bytes, dict[str, str], int, str]:
        R.check_message(msg, self.max_message_size)
        uniq = create_uniq_id(self._ip)
        body, sys_flag = R.compress(msg.body, self.compress_over)
        return body, R.message_properties(msg, uniq), sys_flag, uniq

    def send_plan(self, msg: Message, queue: MessageQueue | None = None,
                  oneway: bool = False) -> Plan[SendResult | None]:
        body, props, sys_flag, uniq = self._prepare(msg)
        if queue is not None and queue.topic != msg.topic:
            raise ClientError(f"message topic {msg.topic} is not the queue's topic {queue.topic}")
        return (yield from self._send_with_retries(
            msg.topic, queue, oneway, uniq,
            lambda mq, batch_oneway: R.send_request(self.group, mq, body, props, sys_flag, msg.flag,
                                                    oneway=batch_oneway)))

    def batch_plan(self, msgs: list[Message], queue: MessageQueue | None = None) -> Plan[SendResult | None]:
        """``DefaultMQProducer.batch``: one SEND_BATCH_MESSAGE of messages of one topic."""
        if not isinstance(msgs, (list, tuple)) or not msgs:
            raise ClientError("send_batch needs a non-empty list of messages")
        for m in msgs:
            R.check_message(m, self.max_message_size)
            if m.topic != msgs[0].topic:
                raise ClientError("the topic of the messages in one batch should be the same")
            if m.properties.get("DELAY"):
                raise ClientError("TimeDelayLevel is not supported for batching")
        topic = msgs[0].topic
        if topic.startswith("%RETRY%"):
            raise ClientError("Retry Group is not supported for batching")
        if queue is not None and queue.topic != topic:
            raise ClientError(f"message topic {topic} is not the queue's topic {queue.topic}")
        uniqs = [create_uniq_id(self._ip) for _ in msgs]
        body = R.batch_body(list(msgs), uniqs)
        if len(body) > self.max_message_size:
            raise ClientError(f"the batch is {len(body)} bytes, over max value, MAX: {self.max_message_size}")
        # no UNIQ_KEY of the batch itself (4.9.8 sets none; 5.3.3 does): Java brokers append the
        # batch's properties to each message's, so it would replace every message's own id
        batch_props = {"WAIT": "true"}
        return (yield from self._send_with_retries(
            topic, queue, False, ",".join(uniqs),
            lambda mq, _oneway: R.send_request(self.group, mq, body, batch_props, 0, 0, batch=True)))

    def _send_with_retries(self, topic: str, queue: MessageQueue | None, oneway: bool, msg_id: str,
                           build: Callable[[MessageQueue, bool], RemotingCommand]) -> Plan[SendResult | None]:
        """``sendDefaultImpl``: 1 + retries attempts for a sync send to a chosen queue (one for oneway
        or a given queue), each on another broker than the last when there is one, all within
        ``send_timeout``; broker answers in RETRY_RESPONSE_CODES and no answer are retried."""
        begin = self.clock()
        route = yield from self.publish_route_plan(topic)
        total = 1 if oneway or queue is not None else 1 + self.retries
        tried: list[str] = []
        last_error: ClientError | None = None
        result: SendResult | None = None
        mq: MessageQueue | None = None
        for _ in range(total):
            if queue is not None:
                mq = queue
            else:
                mq = self.selector.select(route.publish_queues(), mq.broker_name if mq else None, self.clock())
            tried.append(mq.broker_name)
            started = self.clock()
            if started - begin > self.send_timeout:
                raise ClientError(f"send to topic {topic} timed out after {len(tried) - 1} attempts "
                                  f"(send_timeout_ms={int(self.send_timeout * 1000)}): {last_error}")
            addr = route.master(mq.broker_name)
            if addr is None:
                route = yield from self.publish_route_plan(topic, refresh=True)
                addr = route.master(mq.broker_name)
            if addr is None:
                last_error = ClientError(f"The broker[{mq.broker_name}] not exist")
                continue
            request = build(mq, oneway)
            try:
                resp = yield self.call(addr, request, self.send_timeout - (started - begin), oneway)
            except TransportError as exc:
                self.faults.update(mq.broker_name, (self.clock() - started) * 1000, True, self.clock())
                last_error = exc
                continue
            if oneway:
                return None
            assert resp is not None
            try:
                result = R.parse_send_response(resp, mq, msg_id)
            except ClientError as exc:
                self.faults.update(mq.broker_name, (self.clock() - started) * 1000, True, self.clock())
                last_error = exc
                if exc.code in R.RETRY_RESPONSE_CODES:
                    continue
                raise
            self.faults.update(mq.broker_name, (self.clock() - started) * 1000, False, self.clock())
            if result.status != SendStatus.SEND_OK and self.retry_not_stored:
                continue
            return result
        if result is not None:
            return result
        assert last_error is not None
        raise type(last_error)(f"Send [{len(tried)}] times, still failed, topic {topic}, brokers tried "
                               f"{tried}: {last_error.message}", last_error.code)


class ConsumerCore(ClientCore):
    """``DefaultMQPullConsumerImpl`` with a ``RemoteBrokerOffsetStore``: pulls by queue and offset,
    offsets of the group on the broker that owns the queue."""

    def __init__(self, name_server: str, group: str, credentials: tuple[str, str] | None,
                 clock: Callable[[], float], *, timeout_ms: int = 3000) -> None:
        super().__init__(name_server, credentials, clock)
        if not isinstance(group, str) or not group:
            raise ClientError("group must be a non-empty string")
        self.group = group
        self.timeout = timeout_ms / 1000.0
        self._suggested: dict[MessageQueue, int] = {}
        self._registered: set[str] = set()

    def fetch_queues_plan(self, topic: str) -> Plan[list[MessageQueue]]:
        R.check_topic(topic)
        route = yield from self.route_plan(topic)
        if route is None:
            raise ClientError(f"Can not find Message Queue for this topic, {topic}: the name servers do not know it")
        return route.subscribe_queues()

    def _route_for(self, mq: MessageQueue) -> Plan[TopicRoute]:
        if not isinstance(mq, MessageQueue):
            raise ClientError(f"expected a MessageQueue, not {type(mq).__name__}")
        route = yield from self.route_plan(mq.topic)
        if route is None or mq.broker_name not in route.brokers:
            route = yield from self.route_plan(mq.topic, refresh=True)
        if route is None or mq.broker_name not in route.brokers:
            raise ClientError(f"The broker[{mq.broker_name}] not exist in the route of topic {mq.topic}")
        return route

    def _master_plan(self, mq: MessageQueue) -> Plan[str]:
        """``findBrokerAddressInPublish``: the master's address (offset queries go there)."""
        route = yield from self._route_for(mq)
        addr = route.master(mq.broker_name)
        if addr is None:
            raise ClientError(f"The broker[{mq.broker_name}] has no master in the route of topic {mq.topic}")
        return addr

    def _subscribe_plan(self, mq: MessageQueue, broker_id: int = MASTER_ID) -> Plan[str]:
        route = yield from self._route_for(mq)
        found = route.subscribe_addr(mq.broker_name, broker_id)
        if found is None:
            raise ClientError(f"The broker[{mq.broker_name}] not exist")
        addr = found[0]
        if addr not in self._registered:
            # as MQClientInstance's heartbeat: the broker learns the group (5.x refuses
            # UPDATE_CONSUMER_OFFSET for a group it has not seen)
            resp = yield self.call(addr, R.heartbeat_request(self.client_id, None, self.group), self.timeout)
            assert resp is not None
            R.check_success(resp, f"heartbeat to {addr}")
            self._registered.add(addr)
        return addr

    def min_offset_plan(self, mq: MessageQueue) -> Plan[int]:
        addr = yield from self._master_plan(mq)
        resp = yield self.call(addr, R.min_offset_request(mq), self.timeout)
        assert resp is not None
        return R.parse_offset(resp, f"min offset of {mq}")

    def max_offset_plan(self, mq: MessageQueue) -> Plan[int]:
        addr = yield from self._master_plan(mq)
        resp = yield self.call(addr, R.max_offset_request(mq), self.timeout)
        assert resp is not None
        return R.parse_offset(resp, f"max offset of {mq}")

    def pull_plan(self, mq: MessageQueue, offset: int, max_nums: int, sub_expression: str | None,
                  timeout_ms: int, suspend_ms: int = 0, decode: bool = True) -> Plan[PullResult]:
        if not isinstance(offset, int) or offset < 0:
            raise ClientError(f"offset < 0: {offset!r}")
        if not isinstance(max_nums, int) or not 0 < max_nums <= 1024:
            raise ClientError(f"max_nums must be an int in 1..1024, not {max_nums!r}")
        if not isinstance(timeout_ms, int) or timeout_ms <= 0:
            raise ClientError(f"timeout_ms must be an int > 0, not {timeout_ms!r}")
        if suspend_ms < 0 or suspend_ms >= timeout_ms:
            raise ClientError("suspend_ms must be >= 0 and below timeout_ms")
        sub = R.subscription(mq.topic if isinstance(mq, MessageQueue) else "", sub_expression)
        addr = yield from self.pull_addr_plan(mq)
        resp = yield self.call(addr, R.pull_request(self.group, mq, offset, max_nums, sub, suspend_ms),
                               timeout_ms / 1000.0)
        assert resp is not None
        result, suggested = R.parse_pull_response(resp, mq, sub, decode=decode)
        self._suggested[mq] = suggested
        return result

    def pull_addr_plan(self, mq: MessageQueue) -> Plan[str]:
        """Where the next pull of ``mq`` goes: the broker the last answer suggested (master first)."""
        return (yield from self._subscribe_plan(mq, self._suggested.get(mq, MASTER_ID)))

    def suggest(self, mq: MessageQueue, broker_id: int) -> None:
        """A pull answer's suggestWhichBrokerId: where the next pull of ``mq`` goes."""
        self._suggested[mq] = broker_id

    def commit_offset_plan(self, mq: MessageQueue, offset: int) -> Plan[None]:
        if not isinstance(offset, int) or offset < 0:
            raise ClientError(f"offset < 0: {offset!r}")
        addr = yield from self._subscribe_plan(mq)
        resp = yield self.call(addr, R.update_offset_request(self.group, mq, offset), self.timeout)
        assert resp is not None
        R.check_success(resp, f"commit offset of {mq}")

    def query_offset_plan(self, mq: MessageQueue) -> Plan[int]:
        addr = yield from self._subscribe_plan(mq)
        resp = yield self.call(addr, R.query_offset_request(self.group, mq), self.timeout)
        assert resp is not None
        return R.parse_query_offset(resp, f"offset of group {self.group} in {mq}")

    def shutdown_plan(self) -> Plan[None]:
        """UNREGISTER_CLIENT at every broker this consumer sent a heartbeat to (best effort)."""
        for addr in sorted(self._registered):
            try:
                yield self.call(addr, R.unregister_request(self.client_id, None, self.group), self.timeout)
            except TransportError:
                pass
        self._registered.clear()


def monotonic() -> float:
    return time.monotonic()
