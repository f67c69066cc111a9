"""Issue 31 case 5: registration with the name servers for any number of topics, and topic creation
whose cost does not grow with the number of topics (rmqpy/broker/registration.py)."""
from __future__ import annotations

import struct
import time
import zlib
from typing import Any

import pytest
from twisted.internet import defer, task

from rmqpy.broker.registration import BODY_LIMIT, registration_bodies
from rmqpy.namesrv.config import NamesrvConfig, NettyServerConfig
from rmqpy.namesrv.controller import NamesrvController
from rmqpy.protocol import command as codec
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.topic import DataVersion, RegisterBrokerBody, TopicConfig
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import DEFAULT_MAX_FRAME, RemotingCommand
from rmqpy.protocol.headers.admin import CreateTopicRequestHeader
from rmqpy.protocol.headers.namesrv import GetRouteInfoRequestHeader
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request


def _table(n: int) -> dict[str, TopicConfig]:
    return {f"topic-{i:06d}": TopicConfig(f"topic-{i:06d}", 8, 8) for i in range(n)}


class _NameServers:
    """The broker's name server client: records what is sent and answers SUCCESS. Its
    ``open_connection`` is a token per address, changed by :meth:`reconnect`."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, RemotingCommand]] = []
        self.links: dict[str, object] = {}

    def invoke(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> defer.Deferred:
        self.sent.append((addr, request))
        return defer.succeed(request.response(ResponseCode.SUCCESS))

    def open_connection(self, addr: str) -> object:
        return self.links.setdefault(addr, object())

    def reconnect(self, addr: str) -> None:
        self.links[addr] = object()

    def close(self) -> None:
        pass

    def topics(self, request: RemotingCommand) -> set[str]:
        compressed = request.ext_fields["compressed"] == "true"
        body = RegisterBrokerBody.decode(request.body, compressed, request.version)
        return set(body.topicConfigSerializeWrapper.topicConfigTable)


@pytest.fixture
def registered(tmp_path):
    broker, clock = make_broker(tmp_path)
    ns = _NameServers()
    broker.namesrv_client = ns
    broker.broker_config.namesrvAddr = "10.0.0.1:9876;10.0.0.2:9876"
    broker.register_broker_all()
    try:
        yield broker, clock, ns
    finally:
        broker.shutdown()


def test_100000_topics_register_in_one_frame_compressed_though_the_key_is_false() -> None:
    bodies = registration_bodies(_table(100_000), DataVersion(1_700_000_000_000, 3), DataVersion(1, 0),
                                 compressed=False)
    assert [c for _, c in bodies] == [True]
    body = bodies[0][0]
    # 227 KB, where the JSON is 15.2 MB (17.6 MB with the names: over the 16 MiB frame)
    assert len(body) < 1024 * 1024 < BODY_LIMIT < DEFAULT_MAX_FRAME
    raw = zlib.decompress(body)
    (version_len,) = struct.unpack_from(">i", raw, 0)
    assert struct.unpack_from(">i", raw, 4 + version_len) == (100_000,)  # every topic in it


def test_small_tables_stay_json_and_the_key_compresses_them() -> None:
    table = _table(10)
    assert [c for _, c in registration_bodies(table, DataVersion(1, 1))] == [False]
    assert [c for _, c in registration_bodies(table, DataVersion(1, 1), compressed=True)] == [True]


def test_a_compressed_body_over_the_limit_is_split_until_each_part_fits() -> None:
    table = _table(20_000)
    bodies = registration_bodies(table, DataVersion(1, 1), limit=16 * 1024)  # ~45 KB compressed whole
    assert len(bodies) > 2 and all(len(b) <= 16 * 1024 and c for b, c in bodies)
    seen: list[str] = []
    for body, _ in bodies:
        seen += list(RegisterBrokerBody.decode(body, True).topicConfigSerializeWrapper.topicConfigTable)
    assert seen == list(table)  # each topic once, in order


def test_enable_split_registration_sends_parts_of_split_registration_size() -> None:
    table = _table(2_000)
    bodies = registration_bodies(table, DataVersion(1, 1), split_size=800)
    sizes = [len(fastjson.loads(b)["topicConfigSerializeWrapper"]["topicConfigTable"]) for b, _ in bodies]
    assert sizes == [800, 800, 400]
    assert [len(registration_bodies(_table(1_600), DataVersion(1, 1), split_size=800))] == [3]  # 800, 800, 0


def test_a_split_registration_is_routed_whole_by_the_name_server(tmp_path) -> None:
    """5.x's per-topic check: the parts after the first carry the same data version and are taken
    too (rmqpy's name server compared versions only, and took the first part alone)."""
    clock = task.Clock()
    cfg = NamesrvConfig(kvConfigPath=str(tmp_path / "kv.json"), configStorePath=str(tmp_path / "ns.properties"))
    ctl = NamesrvController(cfg, NettyServerConfig(listenPort=0), reactor=object(), clock=clock)
    from twisted.internet.testing import StringTransport
    proto = ctl.factory.buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)

    def send(request: RemotingCommand) -> RemotingCommand:
        transport.clear()
        proto.dataReceived(codec.encode(request))
        return codec.decode(transport.value()[4:])

    from rmqpy.protocol.headers.namesrv import RegisterBrokerRequestHeader
    table = _table(3_000)
    bodies = registration_bodies(table, DataVersion(1_000, 1), split_size=1_000)
    assert len(bodies) == 4
    for body, compressed in bodies:
        hdr = RegisterBrokerRequestHeader(brokerName="broker-a", brokerAddr="10.0.0.1:10911",
                                          clusterName="DefaultCluster", haServerAddr="10.0.0.1:10912", brokerId=0,
                                          compressed=compressed, bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF)
        req = RemotingCommand.request(RequestCode.REGISTER_BROKER, hdr, body, version=MQVersion.V5_3_3)
        assert send(req).code == ResponseCode.SUCCESS
    for topic in ("topic-000000", "topic-001500", "topic-002999"):
        route = send(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                             GetRouteInfoRequestHeader(topic=topic)))
        assert route.code == ResponseCode.SUCCESS, topic


def _create(broker: Any, topic: str) -> RemotingCommand:
    header = CreateTopicRequestHeader(topic=topic, readQueueNums=8, writeQueueNums=8, perm=6)
    return call(broker, FakeChannel(), RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header))


def test_a_created_topic_is_registered_alone(registered) -> None:
    broker, clock, ns = registered
    assert len(ns.sent) == 2 and len(ns.topics(ns.sent[0][1])) > 5  # the full registration, at start
    for i in range(5_000):  # a large table: what an increment must not carry
        broker.topic_config_manager.table[f"bulk-{i}"] = TopicConfig(f"bulk-{i}", 8, 8)
    ns.sent.clear()
    assert _create(broker, "NewTopic").code == ResponseCode.SUCCESS
    assert [a for a, _ in ns.sent] == ["10.0.0.1:9876", "10.0.0.2:9876"]
    request = ns.sent[0][1]
    assert request.code == RequestCode.REGISTER_BROKER and ns.topics(request) == {"NewTopic"}
    assert len(request.body) < 1024
    version = fastjson.loads(request.body)["topicConfigSerializeWrapper"]["dataVersion"]
    assert version["counter"] == broker.topic_config_manager.data_version.counter  # the version it bumped
    # on demand (a send to a new topic): the same, coalesced within one reactor turn
    ns.sent.clear()
    call(broker, FakeChannel(), send_request("Auto1", b"x"))
    call(broker, FakeChannel(), send_request("Auto2", b"x"))
    clock.advance(0)
    assert len(ns.sent) == 2 and ns.topics(ns.sent[0][1]) == {"Auto1", "Auto2"}


def test_a_name_server_reached_over_a_new_connection_gets_the_whole_table(registered) -> None:
    """It may have restarted: a 4.9 name server would take an increment's one topic for the table."""
    broker, clock, ns = registered
    ns.reconnect("10.0.0.2:9876")
    ns.sent.clear()
    _create(broker, "AfterRestart")
    by_addr = {a: ns.topics(r) for a, r in ns.sent}
    assert by_addr["10.0.0.1:9876"] == {"AfterRestart"}
    assert "AfterRestart" in by_addr["10.0.0.2:9876"] and "TBW102" in by_addr["10.0.0.2:9876"]
    ns.sent.clear()
    _create(broker, "Next")
    assert [ns.topics(r) for _, r in ns.sent] == [{"Next"}, {"Next"}]
    # a refused registration (5.3.3: "register broker failed" for a broker it does not know): full next
    refuse = ns.invoke
    ns.invoke = lambda addr, request, timeout=3.0: defer.succeed(  # type: ignore[method-assign]
        request.response(ResponseCode.SYSTEM_ERROR, "register broker failed"))
    _create(broker, "Refused")
    ns.invoke = refuse  # type: ignore[method-assign]
    ns.sent.clear()
    _create(broker, "AfterRefusal")
    assert all("TBW102" in ns.topics(r) for _, r in ns.sent) and len(ns.sent) == 2


def test_enable_single_topic_register_sends_the_topic_route(registered) -> None:
    broker, clock, ns = registered
    broker.broker_config.enableSingleTopicRegister = True
    ns.sent.clear()
    _create(broker, "Single")
    assert [r.code for _, r in ns.sent] == [RequestCode.REGISTER_TOPIC_IN_NAMESRV] * 2
    request = ns.sent[0][1]
    assert request.ext_fields["topic"] == "Single"
    assert fastjson.loads(request.body)["queueDatas"] == [
        {"brokerName": "broker-a", "perm": 6, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 8}]


def test_creating_a_topic_costs_the_same_at_20000_topics(registered) -> None:
    """Measured with a name server stub: 28 ms at 1,000 topics, 450 ms at 10,000 and 6.4 s at
    100,000 before (the whole table's JSON on each create); the registration part is now one topic."""
    broker, clock, ns = registered
    ns.sent.clear()
    started = time.perf_counter()
    _create(broker, "Small")
    small = time.perf_counter() - started
    for i in range(20_000):
        broker.topic_config_manager.table[f"bulk-{i}"] = TopicConfig(f"bulk-{i}", 8, 8)
    started = time.perf_counter()
    registered_at = len(ns.sent)
    broker.register_topics([broker.topic_config_manager.table["bulk-1"]])
    cost = time.perf_counter() - started
    assert all(len(r.body) < 1024 for _, r in ns.sent[registered_at:])
    assert cost < max(0.05, 5 * small)


def test_topics_json_from_cached_texts_is_what_fastjson_writes(tmp_path) -> None:
    """Each save wrote the JSON of every topic anew (100,000 topics: 2.5 s of Python in the writer
    thread, holding the GIL, before the create was answered); only changed topics are written now."""
    from rmqpy.broker.config import BrokerConfig
    from rmqpy.broker.topic import TopicConfigManager
    tcm = TopicConfigManager(BrokerConfig(), str(tmp_path))

    def expected() -> str:
        return fastjson.dumps(tcm.encode(), pretty=True)

    assert tcm.persist_text() == expected()
    tcm.update_topic_config(TopicConfig("Zeta", 3, 2, 4, "MULTI_TAG", 1, True, {"+message.type": "FIFO"}))
    tcm.update_topic_config(TopicConfig("alpha\u00e9\"q", 1, 1))
    assert tcm.snapshot_text(tcm.snapshot()) == expected()
    tcm.update_topic_config(TopicConfig("Zeta", 5, 5))  # replaced: written anew
    tcm.delete_topic_config("alpha\u00e9\"q")
    assert tcm.snapshot_text(tcm.snapshot()) == expected()
    same = tcm.select("Zeta")
    same.perm = 2  # changed in place and handed back: written anew all the same
    tcm.update_topic_config(same)
    assert tcm.snapshot_text(tcm.snapshot()) == expected() and '"perm":2' in expected()
    same.perm = 4  # again, and a newer save replaces this one before it is written (LatestWriter)
    tcm.update_topic_config(same)
    tcm.snapshot()
    tcm.update_topic_config(TopicConfig("Other", 1, 1))
    assert tcm.snapshot_text(tcm.snapshot()) == expected() and '"perm":4' in expected()
    fastjson.loads(expected())


def test_a_create_at_20000_topics_writes_topics_json_from_cached_texts(registered) -> None:
    broker, clock, ns = registered
    tcm = broker.topic_config_manager
    for i in range(20_000):
        tcm.table[f"bulk-{i}"] = TopicConfig(f"bulk-{i}", 8, 8)
    tcm.persist()  # as at start: every topic's text made once
    written: list[float] = []
    encode = fastjson.dumps_nested

    def counting(*args: Any, **kwargs: Any) -> str:
        written.append(1)
        return encode(*args, **kwargs)

    import rmqpy.broker.topic as topic_module
    topic_module.fastjson.dumps_nested = counting  # type: ignore[assignment]
    try:
        assert _create(broker, "OneMore").code == ResponseCode.SUCCESS
        clock.advance(0)
    finally:
        topic_module.fastjson.dumps_nested = encode  # type: ignore[assignment]
    assert len(written) <= 3  # the new topic and the data version, not 20,000 topics
    text = (tmp_path_of(broker) / "topics.json").read_text()
    assert '"OneMore":' in text and text == fastjson.dumps(tcm.encode(), pretty=True)


def tmp_path_of(broker: Any) -> Any:
    from pathlib import Path
    return Path(broker.config_dir)


def test_an_unchanged_table_reuses_its_registration_bodies(registered) -> None:
    broker, clock, ns = registered
    ns.sent.clear()
    broker.register_broker_all()
    broker.register_broker_all()
    first, second = ns.sent[0][1], ns.sent[2][1]
    assert first.body is second.body  # not encoded again
    broker.topic_config_manager.update_topic_config(TopicConfig("Changed", 1, 1))
    broker.register_broker_all()
    assert "Changed" in ns.topics(ns.sent[-1][1])
    broker.broker_config.brokerPermission = 4  # read-only: every topic registered with it
    broker.register_broker_all()
    table = fastjson.loads(ns.sent[-1][1].body)["topicConfigSerializeWrapper"]["topicConfigTable"]
    assert {t["perm"] for t in table.values()} == {4}
