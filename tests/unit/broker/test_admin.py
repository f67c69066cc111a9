"""AdminBrokerProcessor: what mqadmin asks a broker."""
from __future__ import annotations

import pytest

from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import (
    ConsumerGroupRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    ResetOffsetRequestHeader,
    TopicRequestHeader,
)
from rmqpy.protocol.headers.broker import UpdateConsumerOffsetRequestHeader
from tests.unit.broker.helpers import FakeChannel, call, send_request
from tests.unit.broker.test_processors import heartbeat


@pytest.fixture
def broker(broker, tmp_path):
    broker.settings.config_file = str(tmp_path / "broker.conf")  # UPDATE_BROKER_CONFIG persists here
    return broker


def req(code, header=None, body=None):
    return RemotingCommand.request(code, header, body)


def test_create_topic_stats_and_delete(broker):
    ch = FakeChannel()
    h = CreateTopicRequestHeader(topic="AT", defaultTopic="TBW102", readQueueNums=2, writeQueueNums=2, perm=6,
                                 topicFilterType="SINGLE_TAG", topicSysFlag=0, order=False)
    assert call(broker, ch, req(RequestCode.UPDATE_AND_CREATE_TOPIC, h)).code == ResponseCode.SUCCESS
    tc = broker.topic_config_manager.select("AT")
    assert (tc.readQueueNums, tc.writeQueueNums) == (2, 2)
    h.topic = "SCHEDULE_TOPIC_XXXX"
    resp = call(broker, ch, req(RequestCode.UPDATE_AND_CREATE_TOPIC, h))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "The topic[SCHEDULE_TOPIC_XXXX] is conflict with system topic."
    call(broker, ch, send_request("AT", b"x", queue_id=1))
    resp = call(broker, ch, req(RequestCode.GET_TOPIC_STATS_INFO, TopicRequestHeader(topic="AT")))
    table = fastjson.loads(resp.body)["offsetTable"]
    by_q = {k["queueId"]: v for k, v in table.items()}
    assert by_q[1]["maxOffset"] == 1 and by_q[0]["maxOffset"] == 0 and by_q[1]["lastUpdateTimestamp"] > 0
    assert b'{{"brokerName":"broker-a","queueId":0,"topic":"AT"}:' in resp.body
    resp = call(broker, ch, req(RequestCode.GET_TOPIC_STATS_INFO, TopicRequestHeader(topic="None")))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST and resp.remark == "topic[None] not exist"
    resp = call(broker, ch, req(RequestCode.GET_ALL_TOPIC_CONFIG))
    assert "AT" in fastjson.loads(resp.body)["topicConfigTable"]
    assert call(broker, ch, req(RequestCode.DELETE_TOPIC_IN_BROKER, TopicRequestHeader(topic="AT"))).code == 0
    assert broker.topic_config_manager.select("AT") is None


def _java_runtime_info() -> dict[str, str]:
    """The GET_BROKER_RUNTIME_INFO answer of a Java 5.3.3 broker, from the golden frames."""
    from pathlib import Path

    from rmqpy.protocol.command import decode
    from tests.interop.recorder import read_frames
    golden = Path(__file__).resolve().parents[2] / "data" / "golden" / "java-5.3.3.frames"
    for _tag, _conn, _direction, frame in read_frames(golden):
        cmd = decode(frame[4:])
        if cmd.body and b'"brokerActive"' in cmd.body:
            return fastjson.loads(cmd.body)["table"]
    raise AssertionError("no runtime info in the golden frames")


def test_runtime_info_has_every_key_of_java_5_3_3(broker):
    """mqadmin 5.x reads brokerActive (clusterList's #ACTIVATED), the ack/litePull pools and the timer
    keys; a 4.9.8 mqadmin reads getTransferedTps, kept beside 5.3.3's spelling (issue 33)."""
    ours = fastjson.loads(call(broker, FakeChannel(), req(RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
    java = _java_runtime_info()
    per_path = "commitLogDiskRatio_"  # one key per commit-log directory
    assert {k for k in java if not k.startswith(per_path)} <= set(ours)
    assert "getTransferedTps" in ours and "remainHowManyDataToCommit" not in ours
    assert ours["brokerActive"] == java["brokerActive"] == "true"
    assert ours["remainHowManyDataToFlush"] == java["remainHowManyDataToFlush"] == "0 B"
    assert ours["remainTransientStoreBufferNumbs"] == java["remainTransientStoreBufferNumbs"]


def test_runtime_info_and_config(broker):
    ch = FakeChannel()
    resp = call(broker, ch, req(RequestCode.GET_BROKER_RUNTIME_INFO))
    table = fastjson.loads(resp.body)["table"]
    for key in ("brokerVersionDesc", "msgPutTotalTodayNow", "putTps", "getTransferedTps", "commitLogDiskRatio",
                "pageCacheLockTimeMills", "earliestMessageTimeStamp", "sendThreadPoolQueueSize",
                "sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueSize", "msgGetTotalYesterdayMorning",
                "commitLogMaxOffset", "bootTimestamp"):
        assert key in table and isinstance(table[key], str)
    assert (table["brokerVersionDesc"], table["brokerVersion"], table["brokerActive"]) == ("V5_3_3", "479", "true")
    resp = call(broker, ch, req(RequestCode.GET_BROKER_CONFIG))
    assert b"brokerName=broker-a" in resp.body and "version" in resp.ext_fields
    resp = call(broker, ch, req(RequestCode.UPDATE_BROKER_CONFIG, body=b"autoCreateTopicEnable=false\n"))
    assert resp.code == 0 and broker.broker_config.autoCreateTopicEnable is False
    resp = call(broker, ch, req(RequestCode.UPDATE_BROKER_CONFIG, body=b"rocketmqHome=/x\n"))
    assert resp.code == ResponseCode.NO_PERMISSION and resp.remark == "Can not update config in black list."


def test_groups_connections_and_consume_stats(broker):
    ch = FakeChannel()
    body = fastjson.dumps({"groupName": "SG", "retryMaxTimes": 3, "consumeEnable": True}).encode()
    assert call(broker, ch, req(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)).code == 0
    assert broker.subscription_group_manager.table["SG"].retryMaxTimes == 3
    all_groups = fastjson.loads(call(broker, ch, req(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
    assert "SG" in all_groups["subscriptionGroupTable"]
    resp = call(broker, ch, req(RequestCode.GET_CONSUMER_CONNECTION_LIST, ConsumerGroupRequestHeader("SG")))
    assert resp.code == ResponseCode.CONSUMER_NOT_ONLINE and resp.remark == "the consumer group[SG] not online"
    call(broker, ch, heartbeat("cid1", "SG", "T"))
    resp = call(broker, ch, req(RequestCode.GET_CONSUMER_CONNECTION_LIST, ConsumerGroupRequestHeader("SG")))
    conn = fastjson.loads(resp.body)
    assert conn["connectionSet"][0]["clientId"] == "cid1" and conn["connectionSet"][0]["language"] == "JAVA"
    assert "T" in conn["subscriptionTable"] and conn["messageModel"] == "CLUSTERING"
    call(broker, ch, send_request("T", b"a", queue_id=0))
    call(broker, ch, send_request("T", b"b", queue_id=0))
    call(broker, ch, req(RequestCode.UPDATE_CONSUMER_OFFSET, UpdateConsumerOffsetRequestHeader("SG", "T", 0, 1)))
    resp = call(broker, ch, req(RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader("SG", "T")))
    stats = {k["queueId"]: v for k, v in fastjson.loads(resp.body)["offsetTable"].items()}
    assert stats[0]["brokerOffset"] == 2 and stats[0]["consumerOffset"] == 1 and stats[0]["lastTimestamp"] > 0
    resp = call(broker, ch, req(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, TopicRequestHeader("T")))
    assert fastjson.loads(resp.body)["groupList"] == ["SG"]
    resp = call(broker, ch, req(RequestCode.GET_ALL_CONSUMER_OFFSET))
    assert "T@SG" in fastjson.loads(resp.body)["offsetTable"]
    # reset to the beginning (timestamp 0, force): pushed to the consumer as RESET_CONSUMER_CLIENT_OFFSET
    for q in range(1, 4):
        call(broker, ch, req(RequestCode.UPDATE_CONSUMER_OFFSET, UpdateConsumerOffsetRequestHeader("SG", "T", q, 0)))
    resp = call(broker, ch, req(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                ResetOffsetRequestHeader(topic="T", group="SG", timestamp=0, isForce=True)))
    assert resp.code == 0, resp.remark
    pushed = [c for c in ch.oneway if c.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET]
    assert pushed and pushed[-1].ext_fields["isForce"] == "true"
    table = {k["queueId"]: v for k, v in fastjson.loads(pushed[-1].body)["offsetTable"].items()}
    assert table[0] == 0
    h = DeleteSubscriptionGroupRequestHeader(groupName="SG", removeOffset=True)
    assert call(broker, ch, req(RequestCode.DELETE_SUBSCRIPTIONGROUP, h)).code == 0
    assert "SG" not in broker.subscription_group_manager.table
    assert broker.consumer_offset_manager.query_offsets("SG", "T") == {}


def test_system_topics_and_running_info_offline(broker):
    ch = FakeChannel()
    resp = call(broker, ch, req(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))
    topics = fastjson.loads(resp.body)["topicList"]
    assert "SCHEDULE_TOPIC_XXXX" in topics and "broker-a" in topics
    from rmqpy.protocol.headers.admin import GetConsumerRunningInfoRequestHeader
    resp = call(broker, ch, req(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                GetConsumerRunningInfoRequestHeader(consumerGroup="G", clientId="c")))
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "The Consumer <G> <c> not online"


def test_topic_and_group_config_bodies_carry_5x_defaults(broker):
    """GET_TOPIC_CONFIG and GET_SUBSCRIPTIONGROUP_CONFIG (5.x requests): an empty attributes map and the
    default retry policy are written, as Java 5.3.3's beans write them (found by
    tests/interop/remoting_diff.py); set ones are kept."""
    ch = FakeChannel()
    h = CreateTopicRequestHeader(topic="AT", defaultTopic="TBW102", readQueueNums=2, writeQueueNums=2, perm=6,
                                 topicFilterType="SINGLE_TAG", topicSysFlag=0, order=False)
    assert call(broker, ch, req(RequestCode.UPDATE_AND_CREATE_TOPIC, h)).code == ResponseCode.SUCCESS
    body = fastjson.loads(call(broker, ch, req(RequestCode.GET_TOPIC_CONFIG, TopicRequestHeader(topic="AT"))).body)
    assert body["attributes"] == {} and body["topicName"] == "AT"
    group = {"groupName": "GC", "groupRetryPolicy": {"type": "EXPONENTIAL", "exponentialRetryPolicy": {
        "initial": 1000, "max": 8000, "multiplier": 2}}}
    for name, policy in (("G0", {"type": "CUSTOMIZED"}), ("GC", group["groupRetryPolicy"])):
        created = req(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                      body=fastjson.dumps(group if name == "GC" else {"groupName": name}).encode())
        assert call(broker, ch, created).code == ResponseCode.SUCCESS
        get = RemotingCommand.request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, ext_fields={"group": name})
        body = fastjson.loads(call(broker, ch, get).body)
        assert (body["groupName"], body["attributes"], body["groupRetryPolicy"]) == (name, {}, policy)
