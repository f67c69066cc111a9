"""The broker's registration with its name servers (Java's ``BrokerController.registerBrokerAll``,
``registerIncrementBrokerData``, ``registerSingleTopicAll`` and ``BrokerOuterAPI``).

A full registration sends the whole topic table; it runs at start, every
``registerNameServerPeriod`` and when the broker's role or permission changes. Its body is JSON
unless ``compressedRegister`` (Java's compressed form, :meth:`RegisterBrokerBody.encode`), and with
``enableSplitRegistration`` the table goes in parts of ``splitRegistrationSize`` topics, as in
Java 5. Beyond Java, whatever the keys say, no body exceeds what one frame of Java's default
``frameMaxLength`` (16 MiB) can carry: a table whose JSON would come near it is sent compressed,
and a compressed body still too large is split (halved until each part fits). Java 4.9 and 5.3.3
with their defaults send the JSON of a 100,000-topic broker (15 to 18 MB) and the name server closes
the connection: the broker is in no cluster.

A topic created or updated one at a time (admin, or on demand by a send) is registered alone, as
5.3.3's ``registerIncrementBrokerData`` does (a registration whose table holds that topic and the
broker's new data version; or ``REGISTER_TOPIC_IN_NAMESRV`` with ``enableSingleTopicRegister``):
the cost no longer grows with the number of topics. Unlike Java, an increment goes only to a name
server that had a full registration over the connection it uses now; one that may have restarted
since (a new connection) gets a full registration instead. A 4.9 name server that met the
increment first would take its one topic as the broker's whole table until the data version moves
again (it compares versions only); a 5.x or rmqpy name server would add the rest at the next
periodic registration, ``registerNameServerPeriod`` later.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterable

from twisted.internet import defer

from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.route import QueueData, TopicRouteData
from rmqpy.protocol.bodies.topic import (
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import DEFAULT_MAX_FRAME, RemotingCommand
from rmqpy.protocol.headers.namesrv import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    RegisterTopicRequestHeader,
)
from rmqpy.remoting.ratelimit import RateLimitedLogger

if TYPE_CHECKING:
    from rmqpy.broker.controller import BrokerController

#: The largest registration body rmqpy sends: Java's default frame limit (the name server's
#: ``com.rocketmq.remoting.frameMaxLength``, 16 MiB) less 1 MiB for the header and the frame's own
#: bytes. A body that would be larger as JSON is compressed, and one still larger compressed is split.
BODY_LIMIT = DEFAULT_MAX_FRAME - 1024 * 1024

#: An upper bound of the JSON of one topic besides its name (written twice, as key and as
#: ``topicName``) and attributes: ``"":{"order":false,"perm":6,"readQueueNums":16,...}``, 128 bytes
#: with one-digit numbers, 150 with room for larger ones and a longer filter type.
_JSON_BYTES_PER_TOPIC = 150


def estimated_json_size(table: dict[str, TopicConfig]) -> int:
    """At least the length of the table's JSON in a registration body, without encoding it
    (a 100,000-topic table's JSON is 15 MB and takes seconds to build in Python)."""
    size = 512  # the wrapper, its data versions and the mapping keys
    for name, tc in table.items():
        size += 2 * len(name.encode("utf-8")) + _JSON_BYTES_PER_TOPIC
        if tc.attributes:
            size += len(fastjson.dumps(tc.attributes).encode("utf-8")) + 16
    return size


def _body(table: dict[str, TopicConfig], version: DataVersion, mapping_version: DataVersion | None,
          compressed: bool) -> bytes:
    wrapper = TopicConfigSerializeWrapper(table, version, mapping_version)
    return RegisterBrokerBody(wrapper, []).encode(compressed)


def registration_bodies(table: dict[str, TopicConfig], version: DataVersion,
                        mapping_version: DataVersion | None = None, compressed: bool = False,
                        split_size: int = 0, limit: int = BODY_LIMIT) -> list[tuple[bytes, bool]]:
    """The bodies of one full registration, each with whether it is compressed.

    ``split_size`` > 0 (``enableSplitRegistration``): parts of that many topics in the table's
    order and a last part with the rest (possibly none), as Java 5's ``registerBrokerAll``. Then any
    part whose JSON would exceed ``limit`` is compressed, and any compressed part still over it is
    halved until each fits (a single topic is sent as it is)."""
    parts: list[dict[str, TopicConfig]] = []
    if split_size > 0:
        part: dict[str, TopicConfig] = {}
        for name, tc in table.items():
            part[name] = tc
            if len(part) >= split_size:
                parts.append(part)
                part = {}
        parts.append(part)
    else:
        parts.append(table)
    out: list[tuple[bytes, bool]] = []
    while parts:
        part = parts.pop(0)
        packed = compressed or estimated_json_size(part) > limit
        body = _body(part, version, mapping_version, packed)
        if len(body) > limit and not packed:  # the estimate is an upper bound: not expected
            packed = True
            body = _body(part, version, mapping_version, True)
        if len(body) > limit and len(part) > 1:
            items = list(part.items())
            half = math.ceil(len(items) / 2)
            parts[:0] = [dict(items[:half]), dict(items[half:])]
            continue
        out.append((body, packed))
    return out


def _crc32(body: bytes) -> int:
    import zlib
    return zlib.crc32(body) & 0x7FFFFFFF  # UtilAll.crc32


class NameServerRegistration:
    """Full and incremental registrations of one broker (see the module's text)."""

    log = RateLimitedLogger()  # one line per name server and registration: rate-limited per call site

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.log = self.log.on(broker.reactor)
        #: the connection each name server's last full registration went over (None: a client that
        #: does not tell its connections, as the unit tests' fakes)
        self._full_over: dict[str, Any] = {}
        self._pending: dict[str, TopicConfig] = {}
        self._pending_call: Any = None
        #: the last full registration's bodies and what they were made from (register_all)
        self._bodies_key: tuple[Any, ...] | None = None
        self._bodies: list[tuple[bytes, bool]] = []

    # ------------------------------------------------------------------ what is sent
    def _registered_config(self, tc: TopicConfig) -> TopicConfig:
        """A topic as registered: with the broker's permission when the broker is not read-write
        (4.9's registerBrokerAll; 5.x masks the topic's own)."""
        perm = self.broker.broker_config.brokerPermission
        if not (perm & PERM_WRITE) or not (perm & PERM_READ):
            return replace(tc, perm=perm)
        return tc

    def table(self, topics: Iterable[TopicConfig] | None = None) -> dict[str, TopicConfig]:
        source = self.broker.topic_config_manager.table.values() if topics is None else topics
        return {tc.topicName: self._registered_config(tc) for tc in source}

    def _header(self, body: bytes, compressed: bool) -> RegisterBrokerRequestHeader:
        b = self.broker
        bc = b.broker_config
        return RegisterBrokerRequestHeader(
            brokerName=bc.brokerName, brokerAddr=b.broker_addr, clusterName=bc.brokerClusterName,
            haServerAddr=f"{bc.brokerIP2}:{b.store_config.haListenPort}", brokerId=bc.brokerId,
            compressed=compressed, bodyCrc32=_crc32(body),
            # 5.3.3 always says whether slaves may act as master (enableSlaveActingMaster, which rmqpy
            # does not do); heartbeatTimeoutMillis only goes with true
            enableActingMaster=False)

    def _connection(self, addr: str) -> Any:
        opened = getattr(self.broker.namesrv_client, "open_connection", None)
        return opened(addr) if opened is not None else None

    # ------------------------------------------------------------------ full
    def register_all(self, addrs: list[str] | None = None) -> defer.Deferred:
        """A full registration with ``addrs`` (all name servers by default)."""
        b = self.broker
        bc = b.broker_config
        addrs = bc.namesrv_addrs if addrs is None else addrs
        if not addrs:
            return defer.succeed([])
        tcm = b.topic_config_manager
        version = tcm.data_version
        split = bc.splitRegistrationSize if bc.enableSplitRegistration else 0
        # every change of the table moves its data version: the periodic registration of an unchanged
        # table reuses its bodies (100,000 topics: 0.45 s of the reactor every 30 s otherwise)
        key = (version.timestamp, version.counter, version.stateVersion, len(tcm.table), bc.brokerPermission,
               bc.compressedRegister, split)
        if key != self._bodies_key:
            self._bodies = registration_bodies(self.table(), version, b.mapping_data_version, bc.compressedRegister,
                                               split)
            self._bodies_key = key
            if len(self._bodies) > 1 or self._bodies[0][1] != bc.compressedRegister:
                self.log.info("registering {topics} topics in {parts} part(s), {sizes} bytes, compressed: "
                              "{compressed}", topics=len(tcm.table), parts=len(self._bodies),
                              sizes=[len(body) for body, _ in self._bodies], compressed=[c for _, c in self._bodies])
        return self._send(addrs, self._bodies, full=True)

    def _send(self, addrs: list[str], bodies: list[tuple[bytes, bool]], full: bool) -> defer.Deferred:
        b = self.broker
        timeout = b.broker_config.registerBrokerTimeoutMills / 1000.0
        results = []
        for addr in addrs:
            for body, compressed in bodies:
                request = RemotingCommand.request(RequestCode.REGISTER_BROKER, self._header(body, compressed), body,
                                                  version=MQVersion.CURRENT)
                d = b.namesrv_client.invoke(addr, request, timeout)
                d.addCallback(self._registered, addr, full)
                d.addErrback(self._failed, addr)
                results.append(d)
        return defer.gatherResults(results)

    def _registered(self, response: RemotingCommand, addr: str, full: bool) -> bool:
        b = self.broker
        if response.code != ResponseCode.SUCCESS:
            self.log.warn("register broker to name server {addr} failed: {code} {remark}", addr=addr,
                          code=response.code, remark=response.remark)
            # (5.3.3 refuses a one-topic registration of a broker it does not know: the next one is full)
            self._full_over.pop(addr, None)
            return False
        if full:
            self._full_over[addr] = self._connection(addr)
        self.log.info("register broker[{name}] to name server {addr} OK", name=b.broker_config.brokerName,
                      addr=addr)
        answer = response.decode_header(RegisterBrokerResponseHeader)
        b.slave_synchronize.master_addr = answer.masterAddr
        b.replication.registered(answer.haServerAddr)
        return True

    def _failed(self, failure: Any, addr: str) -> bool:
        self._full_over.pop(addr, None)
        self.log.warn("register broker to name server {addr} failed: {err}", addr=addr,
                      err=failure.getErrorMessage())
        return False

    # ------------------------------------------------------------------ one topic at a time
    def register_topics(self, topics: list[TopicConfig]) -> defer.Deferred:
        """Register ``topics`` (just created or changed) with every name server: an increment
        where the last full registration went over today's connection, else a full one."""
        b = self.broker
        addrs = b.broker_config.namesrv_addrs
        if not addrs or not topics:
            return defer.succeed([])
        fresh = [a for a in addrs if a in self._full_over and self._full_over[a] is self._connection(a)]
        stale = [a for a in addrs if a not in fresh]
        results = [self.register_all(stale)] if stale else []
        if fresh:
            if b.broker_config.enableSingleTopicRegister:
                results.append(self._register_single(fresh, topics))
            else:
                # registerIncrementBrokerData: the topics and the data version they bumped
                bodies = registration_bodies(self.table(topics), b.topic_config_manager.data_version,
                                             b.mapping_data_version, b.broker_config.compressedRegister)
                results.append(self._send(fresh, bodies, full=False))
        return defer.gatherResults(results)

    def _register_single(self, addrs: list[str], topics: list[TopicConfig]) -> defer.Deferred:
        """``registerSingleTopicAll``: REGISTER_TOPIC_IN_NAMESRV with the topic's queue data."""
        b = self.broker
        results = []
        for tc in topics:
            tc = self._registered_config(tc)
            route = TopicRouteData(queueDatas=[QueueData(b.broker_config.brokerName, tc.readQueueNums,
                                                         tc.writeQueueNums, tc.perm, tc.topicSysFlag)])
            body = route.encode(False)
            for addr in addrs:
                request = RemotingCommand.request(RequestCode.REGISTER_TOPIC_IN_NAMESRV,
                                                  RegisterTopicRequestHeader(topic=tc.topicName), body,
                                                  version=MQVersion.CURRENT)
                d = b.namesrv_client.invoke(addr, request, 3.0)
                d.addCallback(self._single_registered, addr, tc.topicName)
                d.addErrback(self._failed, addr)
                results.append(d)
        return defer.gatherResults(results)

    def _single_registered(self, response: RemotingCommand, addr: str, topic: str) -> bool:
        if response.code != ResponseCode.SUCCESS:
            self.log.warn("register single topic {topic} to name server {addr} failed: {code} {remark}",
                          topic=topic, addr=addr, code=response.code, remark=response.remark)
            return False
        return True

    def topic_created(self, tc: TopicConfig) -> None:
        """A topic made on demand (a send, a retry topic...): registered with the others made in
        the same reactor turn."""
        self._pending[tc.topicName] = tc
        if self._pending_call is None or not self._pending_call.active():
            self._pending_call = self.broker.reactor.callLater(0, self._register_pending)

    def _register_pending(self) -> None:
        self._pending_call = None
        topics, self._pending = list(self._pending.values()), {}
        self.register_topics(topics)

    def cancel(self) -> None:
        if self._pending_call is not None and self._pending_call.active():
            self._pending_call.cancel()
        self._pending_call = None
        self._pending.clear()
