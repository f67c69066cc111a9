"""Name server processors driven in memory, timers by task.Clock."""
from __future__ import annotations

import zlib

import pytest
from twisted.internet import task
from twisted.internet.testing import StringTransport

from rmqpy.namesrv.config import NamesrvConfig, NettyServerConfig
from rmqpy.namesrv.controller import NamesrvController
from rmqpy.protocol import command as codec
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.topic import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode, SerializeType
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers import namesrv as h


class Harness:
    def __init__(self, tmp_path) -> None:
        self.clock = task.Clock()
        cfg = NamesrvConfig(kvConfigPath=str(tmp_path / "kvConfig.json"),
                            configStorePath=str(tmp_path / "namesrv.properties"))
        self.ctl = NamesrvController(cfg, NettyServerConfig(listenPort=0), reactor=object(), clock=self.clock)
        self.ctl.kv.load()
        self.ctl._scan.start(cfg.scanNotActiveBrokerInterval / 1000, now=False)

    def connect(self):
        proto = self.ctl.factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        return proto, transport

    def call(self, request: RemotingCommand, conn=None) -> RemotingCommand:
        proto, transport = conn or self.connect()
        transport.clear()
        proto.dataReceived(codec.encode(request))
        out = transport.value()
        assert out, "no response"
        return codec.decode(out[4:])

    def register(self, name="broker-a", addr="10.0.0.1:10911", broker_id=0, topics=("T",), conn=None,
                 compressed=False, version=None, counter=1):
        body = RegisterBrokerBody(TopicConfigSerializeWrapper(
            {t: TopicConfig(t, 4, 4) for t in topics}, DataVersion(1000, counter)))
        raw = body.encode(compressed)
        hdr = h.RegisterBrokerRequestHeader(brokerName=name, brokerAddr=addr, clusterName="DefaultCluster",
                                            haServerAddr="10.0.0.1:10912", brokerId=broker_id,
                                            compressed=compressed, bodyCrc32=zlib.crc32(raw) & 0x7FFFFFFF)
        req = RemotingCommand.request(RequestCode.REGISTER_BROKER, hdr, raw)
        if version is not None:
            req.version = version
        return self.call(req, conn)

    def route(self, topic: str, version: int = MQVersion.V4_9_8) -> RemotingCommand:
        req = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader(topic=topic))
        req.version = version
        return self.call(req)


@pytest.fixture
def ns(tmp_path) -> Harness:
    return Harness(tmp_path)


def test_registered_master_topics_are_routed(ns: Harness) -> None:
    assert ns.register().code == ResponseCode.SUCCESS
    resp = ns.route("T")
    assert resp.code == ResponseCode.SUCCESS
    route = fastjson.loads(resp.body)
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911"}
    assert route["queueDatas"] == [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 4,
                                    "topicSysFlag": 0, "writeQueueNums": 4}]


def test_old_clients_get_unquoted_broker_ids(ns: Harness) -> None:
    ns.register()
    assert b'"brokerAddrs":{0:"10.0.0.1:10911"}' in ns.route("T", version=MQVersion.V4_9_3).body


def test_unknown_topic_is_topic_not_exist_with_java_remark(ns: Harness) -> None:
    resp = ns.route("nope")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert resp.remark.startswith("No topic route info in name server for the topic: nope")


def test_compressed_registration_body(ns: Harness) -> None:
    assert ns.register(compressed=True, topics=("A", "B")).code == ResponseCode.SUCCESS
    assert ns.route("B").code == ResponseCode.SUCCESS


def test_crc_mismatch_is_rejected(ns: Harness) -> None:
    raw = RegisterBrokerBody().encode()
    hdr = h.RegisterBrokerRequestHeader(brokerName="b", brokerAddr="1.1.1.1:1", clusterName="c",
                                        haServerAddr="x", brokerId=0, bodyCrc32=12345)
    resp = ns.call(RemotingCommand.request(RequestCode.REGISTER_BROKER, hdr, raw))
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")


def test_slave_topics_do_not_create_routes_and_slave_learns_master(ns: Harness) -> None:
    ns.register(broker_id=1, addr="10.0.0.2:10911", topics=("S",))
    assert ns.route("S").code == ResponseCode.TOPIC_NOT_EXIST
    ns.register()
    resp = ns.register(broker_id=1, addr="10.0.0.2:10911", topics=("S",))
    assert resp.ext_fields["masterAddr"] == "10.0.0.1:10911"


def test_broker_expires_after_120s_of_silence(ns: Harness) -> None:
    proto, transport = ns.connect()
    ns.register(conn=(proto, transport))
    ns.clock.advance(110)
    assert ns.route("T").code == ResponseCode.SUCCESS
    ns.clock.advance(20)
    assert ns.route("T").code == ResponseCode.TOPIC_NOT_EXIST
    assert transport.disconnecting, "the expired broker's channel is closed"


def test_broker_dropped_at_once_when_its_connection_closes(ns: Harness) -> None:
    proto, transport = ns.connect()
    ns.register(conn=(proto, transport))
    proto.connectionLost(None)
    assert ns.route("T").code == ResponseCode.TOPIC_NOT_EXIST
    cluster = fastjson.loads(ns.call(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)).body)
    assert cluster == {"brokerAddrTable": {}, "clusterAddrTable": {}}


def test_unregister_removes_routes(ns: Harness) -> None:
    ns.register()
    hdr = h.UnRegisterBrokerRequestHeader(brokerName="broker-a", brokerAddr="10.0.0.1:10911",
                                          clusterName="DefaultCluster", brokerId=0)
    assert ns.call(RemotingCommand.request(RequestCode.UNREGISTER_BROKER, hdr)).code == ResponseCode.SUCCESS
    assert ns.route("T").code == ResponseCode.TOPIC_NOT_EXIST


def test_kv_config_put_get_delete_list_and_persist(ns: Harness, tmp_path) -> None:
    put = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, h.PutKVConfigRequestHeader(namespace="NS", key="k", value="v"))
    assert ns.call(put).code == ResponseCode.SUCCESS
    get = ns.call(RemotingCommand.request(RequestCode.GET_KV_CONFIG, h.GetKVConfigRequestHeader(namespace="NS", key="k")))
    assert get.ext_fields == {"value": "v"}
    assert fastjson.loads((tmp_path / "kvConfig.json").read_text()) == {"configTable": {"NS": {"k": "v"}}}
    listing = ns.call(RemotingCommand.request(RequestCode.GET_KVLIST_BY_NAMESPACE,
                                              h.GetKVListByNamespaceRequestHeader(namespace="NS")))
    assert fastjson.loads(listing.body) == {"table": {"k": "v"}}
    ns.call(RemotingCommand.request(RequestCode.DELETE_KV_CONFIG, h.DeleteKVConfigRequestHeader(namespace="NS", key="k")))
    missing = ns.call(RemotingCommand.request(RequestCode.GET_KV_CONFIG, h.GetKVConfigRequestHeader(namespace="NS", key="k")))
    assert (missing.code, missing.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: NS Key: k")


def test_wipe_and_add_write_perm(ns: Harness) -> None:
    ns.register(topics=("T", "U"))
    wipe = ns.call(RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                           h.WipeWritePermOfBrokerRequestHeader(brokerName="broker-a")))
    assert wipe.ext_fields == {"wipeTopicCount": "2"}
    assert fastjson.loads(ns.route("T").body)["queueDatas"][0]["perm"] == 4
    add = ns.call(RemotingCommand.request(RequestCode.ADD_WRITE_PERM_OF_BROKER,
                                          h.AddWritePermOfBrokerRequestHeader(brokerName="broker-a")))
    assert add.ext_fields == {"addTopicCount": "2"}


def test_topic_lists_and_delete(ns: Harness) -> None:
    ns.register(topics=("T", "U"))
    all_topics = fastjson.loads(ns.call(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)
    assert sorted(all_topics["topicList"]) == ["T", "U"]
    by_cluster = ns.call(RemotingCommand.request(RequestCode.GET_TOPICS_BY_CLUSTER,
                                                 h.GetTopicsByClusterRequestHeader(cluster="DefaultCluster")))
    assert sorted(fastjson.loads(by_cluster.body)["topicList"]) == ["T", "U"]
    system = fastjson.loads(ns.call(RemotingCommand.request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)).body)
    assert set(system["topicList"]) == {"DefaultCluster", "broker-a"} and system["brokerAddr"] == "10.0.0.1:10911"
    ns.call(RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, h.DeleteTopicFromNamesrvRequestHeader(topic="T")))
    assert ns.route("T").code == ResponseCode.TOPIC_NOT_EXIST


def test_query_data_version(ns: Harness) -> None:
    ns.register(counter=1)
    hdr = h.QueryDataVersionRequestHeader(brokerName="broker-a", brokerAddr="10.0.0.1:10911",
                                          clusterName="DefaultCluster", brokerId=0)
    same = ns.call(RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, hdr,
                                           fastjson.dumps(DataVersion(1000, 1)).encode()))
    assert same.ext_fields["changed"] == "false"
    other = ns.call(RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, hdr,
                                            fastjson.dumps(DataVersion(1000, 2)).encode()))
    assert other.ext_fields["changed"] == "true"


def test_config_get_and_update_with_black_list(ns: Harness) -> None:
    update = RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\n")
    assert ns.call(update).code == ResponseCode.SUCCESS
    text = ns.call(RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG)).body.decode()
    assert "orderMessageEnable=true" in text and "listenPort=0" in text
    bad = RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/x\n")
    assert ns.call(bad).code == ResponseCode.NO_PERMISSION


def test_unknown_code_and_missing_header_field(ns: Harness) -> None:
    resp = ns.call(RemotingCommand.request(9999))
    assert (resp.code, resp.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, " request type 9999 not supported")
    resp = ns.call(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "topic" in resp.remark


def test_response_uses_the_request_serialize_type(ns: Harness) -> None:
    ns.register()
    req = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader(topic="T"),
                                  serialize_type=SerializeType.ROCKETMQ)
    assert ns.call(req).serialize_type == SerializeType.ROCKETMQ


def test_oneway_request_gets_no_answer(ns: Harness) -> None:
    proto, transport = ns.connect()
    req = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, oneway=True)
    proto.dataReceived(codec.encode(req))
    assert transport.value() == b""


def test_cached_routes_follow_every_change(ns: Harness) -> None:
    proto, transport = ns.connect()
    ns.register(topics=("T",), conn=(proto, transport))
    assert fastjson.loads(ns.route("T").body)["queueDatas"][0]["perm"] == 6  # now cached
    ns.call(RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                                    h.WipeWritePermOfBrokerRequestHeader(brokerName="broker-a")))
    assert fastjson.loads(ns.route("T").body)["queueDatas"][0]["perm"] == 4
    ns.register(broker_id=1, addr="10.0.0.2:10911", conn=None)
    assert set(fastjson.loads(ns.route("T").body)["brokerDatas"][0]["brokerAddrs"]) == {"0", "1"}
    proto.connectionLost(None)
    assert set(fastjson.loads(ns.route("T").body)["brokerDatas"][0]["brokerAddrs"]) == {"1"}
    ns.call(RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, h.DeleteTopicFromNamesrvRequestHeader(topic="T")))
    assert ns.route("T").code == ResponseCode.TOPIC_NOT_EXIST
