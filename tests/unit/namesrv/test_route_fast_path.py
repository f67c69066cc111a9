"""GET_ROUTEINFO_BY_TOPIC's fast path (header read from extFields, cached answers built
directly) answers as the general code does, byte for byte."""
from __future__ import annotations

import pytest

from rmqpy.protocol import command as codec
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode, SerializeType
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers import namesrv as h
from tests.unit.namesrv.test_namesrv import Harness

QUOTED = b'"brokerAddrs":{"0":"10.0.0.1:10911"}'
UNQUOTED = b'"brokerAddrs":{0:"10.0.0.1:10911"}'


@pytest.fixture
def ns(tmp_path) -> Harness:
    harness = Harness(tmp_path)
    harness.register()
    return harness


def lookup(ns: Harness, ext: dict | None, version: int, opaque: int = 11,
           serialize_type: int = SerializeType.JSON) -> tuple[RemotingCommand, bytes]:
    req = RemotingCommand(code=RequestCode.GET_ROUTEINFO_BY_TOPIC, version=version, opaque=opaque, ext_fields=ext,
                          serialize_type=serialize_type)
    proto, transport = ns.connect()
    proto.dataReceived(codec.encode(req))
    raw = transport.value()
    return codec.decode(raw[4:]), raw


@pytest.mark.parametrize("accept,version,quoted", [
    (None, MQVersion.V4_9_8, True),
    (None, MQVersion.V4_9_4, True),
    (None, MQVersion.V4_9_3, False),
    ("true", MQVersion.V4_9_3, True),
    (" TRUE ", MQVersion.V4_9_3, True),
    ("false", MQVersion.V4_9_3, False),
    ("yes", MQVersion.V4_9_3, False),
    ("false", MQVersion.V4_9_8, True),
])
def test_standard_json_choice(ns: Harness, accept, version, quoted) -> None:
    ext = {"topic": "T"} if accept is None else {"topic": "T", "acceptStandardJsonOnly": accept}
    for _ in range(2):  # the first answer is encoded, the second comes from the cache
        resp, _raw = lookup(ns, ext, version)
        assert resp.code == ResponseCode.SUCCESS
        assert (QUOTED if quoted else UNQUOTED) in resp.body


@pytest.mark.parametrize("ext", [None, {}, {"acceptStandardJsonOnly": "true"}])
def test_missing_topic_is_the_header_error(ns: Harness, ext) -> None:
    resp, _raw = lookup(ns, ext, MQVersion.V4_9_8)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "HeaderError: the custom field <topic> is null")


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_cached_answer_is_the_same_frame_as_the_first(ns: Harness, serialize_type) -> None:
    first_resp, first = lookup(ns, {"topic": "T"}, MQVersion.V4_9_8, opaque=42, serialize_type=serialize_type)
    again_resp, again = lookup(ns, {"topic": "T"}, MQVersion.V4_9_8, opaque=42, serialize_type=serialize_type)
    assert first == again
    assert (again_resp.opaque, again_resp.is_response, again_resp.serialize_type, again_resp.remark,
            again_resp.ext_fields, again_resp.version) == (42, True, serialize_type, None, None, MQVersion.CURRENT)


def test_unknown_topic_is_not_cached(ns: Harness) -> None:
    for _ in range(2):
        resp, _raw = lookup(ns, {"topic": "Nope"}, MQVersion.V4_9_8)
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST and "Nope" in resp.remark


def test_order_topic_conf_follows_the_kv_config(ns: Harness) -> None:
    ns.ctl.config.orderMessageEnable = True
    assert "orderTopicConf" not in fastjson.loads(lookup(ns, {"topic": "T"}, MQVersion.V4_9_8)[0].body)
    ns.call(RemotingCommand.request(RequestCode.PUT_KV_CONFIG, h.PutKVConfigRequestHeader(
        namespace="ORDER_TOPIC_CONFIG", key="T", value="broker-a:4")))
    body = fastjson.loads(lookup(ns, {"topic": "T"}, MQVersion.V4_9_8)[0].body)
    assert body["orderTopicConf"] == "broker-a:4"


def test_cached_answer_changes_when_the_route_changes(ns: Harness) -> None:
    _resp, first = lookup(ns, {"topic": "T"}, MQVersion.V4_9_8, opaque=7)
    _resp, cached = lookup(ns, {"topic": "T"}, MQVersion.V4_9_8, opaque=8)
    assert cached == first.replace(b'"opaque":7', b'"opaque":8')  # the cache answered, opaque its own
    ns.register(name="broker-b", addr="10.0.0.2:10911", topics=("T",))  # a second broker serves T
    resp, changed = lookup(ns, {"topic": "T"}, MQVersion.V4_9_8, opaque=9)
    assert b"10.0.0.2:10911" in resp.body and b"10.0.0.2:10911" not in cached
    # and the new answer is what the general encoder writes for it
    plain = RemotingCommand(ResponseCode.SUCCESS, opaque=9, flag=codec.RPC_RESPONSE, body=resp.body)
    assert changed == codec.encode(plain)
    ns.call(RemotingCommand.request(RequestCode.UNREGISTER_BROKER, h.UnRegisterBrokerRequestHeader(
        brokerName="broker-b", brokerAddr="10.0.0.2:10911", clusterName="DefaultCluster", brokerId=0)))
    _resp, back = lookup(ns, {"topic": "T"}, MQVersion.V4_9_8, opaque=7)
    assert back == first
