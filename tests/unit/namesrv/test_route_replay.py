"""Route answers replayed by the dispatcher's memo (rmqpy/remoting/replay.py) follow every change
of what they depend on: two name servers, one replaying and one not, take the same requests and
give the same bytes, and the replaying one did replay."""
from __future__ import annotations

import pytest

from rmqpy.protocol import command as codec
from rmqpy.protocol.bodies.route import QueueData, TopicRouteData
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers import namesrv as h
from tests.unit.namesrv.test_namesrv import Harness


class Pair:
    def __init__(self, tmp_path) -> None:
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        self.ours, self.plain = Harness(tmp_path / "a"), Harness(tmp_path / "b")
        self.plain.ctl.dispatcher.memo.disable()
        self.opaque = 0
        self.conns = [(self.ours.connect(), self.plain.connect()) for _ in range(2)]  # a broker's own connections

    def both(self, request: RemotingCommand, conn: int | None = None) -> bytes:
        """``request`` to both; their answers must be the same bytes."""
        raws = []
        for i, ns in enumerate((self.ours, self.plain)):
            proto, transport = ns.connect() if conn is None else self.conns[conn][i]
            transport.clear()
            proto.dataReceived(codec.encode(request))
            raws.append(transport.value())
        assert raws[0] == raws[1]
        return raws[0]

    def routes(self, topics=("T", "U", "Gone")) -> None:
        """Each topic asked for three times, by a 4.9.8 and a 4.9.3 client, opaques of growing width."""
        for _ in range(3):
            for topic in topics:
                for version in (MQVersion.V4_9_8, MQVersion.V4_9_3):
                    req = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                  h.GetRouteInfoRequestHeader(topic=topic))
                    req.version, req.opaque = version, self.opaque
                    self.opaque = self.opaque * 3 + 1
                    assert codec.decode(self.both(req)[4:]).opaque == req.opaque
                    self.opaque %= 2 ** 31

    def register(self, conn: int = 0, **kw) -> None:
        for i, ns in enumerate((self.ours, self.plain)):
            assert ns.register(conn=self.conns[conn][i], **kw).code == ResponseCode.SUCCESS


@pytest.fixture
def pair(tmp_path) -> Pair:
    p = Pair(tmp_path)
    p.register(topics=("T", "U"))
    p.routes()
    return p


def replayed(p: Pair) -> int:
    return p.ours.ctl.dispatcher.memo.replayed


def test_route_answers_are_replayed(pair: Pair) -> None:
    assert replayed(pair) > 0


def test_registrations_and_unregistrations(pair: Pair) -> None:
    pair.register(conn=1, name="broker-b", addr="10.0.0.2:10911", topics=("T",))
    pair.routes()
    pair.register(conn=1, name="broker-b", addr="10.0.0.2:10911", topics=("T", "Gone"), counter=2)
    pair.routes()
    pair.both(RemotingCommand.request(RequestCode.UNREGISTER_BROKER, h.UnRegisterBrokerRequestHeader(
        brokerName="broker-b", brokerAddr="10.0.0.2:10911", clusterName="DefaultCluster", brokerId=0)))
    before = replayed(pair)
    pair.routes()
    assert replayed(pair) > before


def test_write_perm_topics_and_deletes(pair: Pair) -> None:
    for code, header in ((RequestCode.WIPE_WRITE_PERM_OF_BROKER, h.WipeWritePermOfBrokerRequestHeader),
                         (RequestCode.ADD_WRITE_PERM_OF_BROKER, h.AddWritePermOfBrokerRequestHeader)):
        pair.both(RemotingCommand.request(code, header(brokerName="broker-a")))
        pair.routes()
    body = TopicRouteData(queueDatas=[QueueData("broker-a", 2, 2, 6, 0)]).encode(standard_json=True)
    pair.both(RemotingCommand.request(RequestCode.REGISTER_TOPIC_IN_NAMESRV,
                                      h.RegisterTopicRequestHeader(topic="Gone"), body))
    pair.routes()
    pair.both(RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV,
                                      h.DeleteTopicFromNamesrvRequestHeader(topic="T")))
    pair.routes()


def test_order_topic_config_and_its_switch(pair: Pair) -> None:
    put = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, h.PutKVConfigRequestHeader(
        namespace="ORDER_TOPIC_CONFIG", key="T", value="broker-a:4"))
    pair.both(put)
    pair.routes()  # orderMessageEnable is false: no orderTopicConf yet
    pair.both(RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n"))
    pair.routes()
    assert b"broker-a:4" in pair.both(RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader(topic="T")))
    pair.both(RemotingCommand.request(RequestCode.PUT_KV_CONFIG, h.PutKVConfigRequestHeader(
        namespace="ORDER_TOPIC_CONFIG", key="T", value="broker-a:8")))
    pair.routes()
    pair.both(RemotingCommand.request(RequestCode.DELETE_KV_CONFIG, h.DeleteKVConfigRequestHeader(
        namespace="ORDER_TOPIC_CONFIG", key="T")))
    pair.routes()
    pair.both(RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=false\n"))
    pair.routes()


def test_a_closed_broker_connection_and_an_expired_broker(pair: Pair) -> None:
    pair.register(conn=1, name="broker-b", addr="10.0.0.2:10911", topics=("T",))
    pair.routes()
    for i in range(2):
        pair.conns[1][i][0].connectionLost(None)
    pair.routes()
    for ns in (pair.ours, pair.plain):
        ns.clock.advance(130)  # past the 120 s expiry and a 10 s scan
    pair.routes()
    assert b"TOPIC_NOT_EXIST" not in b"" and codec.decode(pair.both(RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader(topic="T")))[4:]).code == \
        ResponseCode.TOPIC_NOT_EXIST
