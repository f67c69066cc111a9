"""Admin codes of issue #4: broker consume stats, consume time span, consume queue, clone offsets,
stats data, correction offsets, consumer status and consume-directly (forwarded to the client),
and UPDATE_BROKER_CONFIG persisting to the config file."""
from __future__ import annotations

import os

import pytest
from twisted.internet import defer

from rmqpy.broker.config import load_settings
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import (
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerStatusRequestHeader,
    GetConsumeStatsInBrokerHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
    ViewBrokerStatsDataRequestHeader,
)
from rmqpy.protocol.headers.broker import UpdateConsumerOffsetRequestHeader
from tests.unit.broker.helpers import FakeChannel, call, pull_request, send_request
from tests.unit.broker.test_processors import heartbeat

T0_MS = 1_700_000_000_000


class ClientChannel(FakeChannel):
    """A consumer's channel: answers the broker's requests with ``answer(request)``."""

    def __init__(self, answer=None) -> None:
        super().__init__()
        self.asked: list[RemotingCommand] = []
        self.answer = answer

    def invoke(self, request: RemotingCommand, timeout: float):
        self.asked.append(request)
        result = self.answer(request)
        return result if isinstance(result, defer.Deferred) else defer.succeed(result)


@pytest.fixture
def broker(broker, tmp_path):
    broker.settings.config_file = str(tmp_path / "broker.conf")  # UPDATE_BROKER_CONFIG persists here
    return broker


def req(code, header=None, body=None):
    return RemotingCommand.request(code, header, body)


def create_topic(broker, topic, queues=2, order=False):
    h = CreateTopicRequestHeader(topic=topic, defaultTopic="TBW102", readQueueNums=queues, writeQueueNums=queues,
                                 perm=6, topicFilterType="SINGLE_TAG", topicSysFlag=0, order=order)
    assert call(broker, FakeChannel(), req(RequestCode.UPDATE_AND_CREATE_TOPIC, h)).code == 0


def create_group(broker, group):
    body = fastjson.dumps({"groupName": group}).encode()
    assert call(broker, FakeChannel(), req(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)).code == 0


def commit(broker, group, topic, queue_id, offset):
    h = UpdateConsumerOffsetRequestHeader(consumerGroup=group, topic=topic, queueId=queue_id, commitOffset=offset)
    assert call(broker, FakeChannel(), req(RequestCode.UPDATE_CONSUMER_OFFSET, h)).code == 0


def send(broker, topic, n, queue_id=0, tags=None):
    for i in range(n):
        resp = call(broker, FakeChannel(), send_request(topic, f"m{i}".encode(), queue_id=queue_id, tags=tags))
        assert resp.code == ResponseCode.SUCCESS, resp.remark


def body(resp):
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return fastjson.loads(resp.body)


# ---------------------------------------------------------------------- GET_BROKER_CONSUME_STATS
def test_broker_consume_stats_lists_groups_topics_and_total_diff(broker):
    create_topic(broker, "CT", 2)
    create_topic(broker, "OT", 1, order=True)
    create_group(broker, "CG")
    send(broker, "CT", 3, queue_id=0)
    send(broker, "CT", 2, queue_id=1)
    send(broker, "OT", 1)
    commit(broker, "CG", "CT", 0, 2)
    commit(broker, "CG", "CT", 1, 0)
    commit(broker, "CG", "OT", 0, 1)
    out = body(call(broker, FakeChannel(), req(RequestCode.GET_BROKER_CONSUME_STATS,
                                               GetConsumeStatsInBrokerHeader(isOrder=False))))
    assert out["brokerAddr"] == "127.0.0.1:10911"
    assert out["totalDiff"] == (3 - 2) + (2 - 0) + 0
    groups = {g: stats for entry in out["consumeStatsList"] for g, stats in entry.items()}
    assert "CG" in groups and groups["TOOLS_CONSUMER"] == [] if "TOOLS_CONSUMER" in groups else True
    tables = {next(iter(s["offsetTable"]))["topic"]: s["offsetTable"] for s in groups["CG"]}
    ct = {k["queueId"]: v for k, v in tables["CT"].items()}
    assert ct[0]["brokerOffset"] == 3 and ct[0]["consumerOffset"] == 2 and ct[0]["lastTimestamp"] > 0
    assert ct[1] == {"brokerOffset": 2, "consumerOffset": 0, "lastTimestamp": 0}
    assert set(tables) == {"CT", "OT"}
    # isOrder=true keeps only order topics
    out = body(call(broker, FakeChannel(), req(RequestCode.GET_BROKER_CONSUME_STATS,
                                               GetConsumeStatsInBrokerHeader(isOrder=True))))
    groups = {g: stats for entry in out["consumeStatsList"] for g, stats in entry.items()}
    assert [next(iter(s["offsetTable"]))["topic"] for s in groups["CG"]] == ["OT"]
    assert out["totalDiff"] == 0
    # isOrder is @CFNotNull
    resp = call(broker, FakeChannel(), req(RequestCode.GET_BROKER_CONSUME_STATS))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "isOrder" in resp.remark


def test_broker_consume_stats_skips_topics_an_online_group_does_not_subscribe(broker):
    create_topic(broker, "ST1", 1)
    create_topic(broker, "ST2", 1)
    create_group(broker, "SG1")
    send(broker, "ST1", 1)
    send(broker, "ST2", 1)
    commit(broker, "SG1", "ST1", 0, 1)
    commit(broker, "SG1", "ST2", 0, 0)
    call(broker, FakeChannel(), heartbeat("cid-1", "SG1", "ST1"))
    out = body(call(broker, FakeChannel(), req(RequestCode.GET_BROKER_CONSUME_STATS,
                                               GetConsumeStatsInBrokerHeader(isOrder=False))))
    groups = {g: stats for entry in out["consumeStatsList"] for g, stats in entry.items()}
    assert [next(iter(s["offsetTable"]))["topic"] for s in groups["SG1"]] == ["ST1"]


# ---------------------------------------------------------------------- QUERY_CONSUME_TIME_SPAN
def test_consume_time_span(broker):
    resp = call(broker, FakeChannel(), req(RequestCode.QUERY_CONSUME_TIME_SPAN,
                                           QueryConsumeTimeSpanRequestHeader(topic="NoSuch", group="G")))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST and resp.remark == "topic[NoSuch] not exist"
    create_topic(broker, "TS", 2)
    send(broker, "TS", 3, queue_id=0)
    commit(broker, "TG", "TS", 0, 1)
    broker.clock.advance(5)
    out = body(call(broker, FakeChannel(), req(RequestCode.QUERY_CONSUME_TIME_SPAN,
                                               QueryConsumeTimeSpanRequestHeader(topic="TS", group="TG"))))
    spans = out["consumeTimeSpanSet"]
    assert [s["messageQueue"] for s in spans] == [{"brokerName": "broker-a", "queueId": q, "topic": "TS"}
                                                  for q in (0, 1)]
    q0, q1 = spans
    store = broker.message_store
    ts = [store.get_message_store_timestamp("TS", 0, i) for i in range(3)]
    assert q0["minTimeStamp"] == ts[0] and q0["maxTimeStamp"] == ts[2] and q0["consumeTimeStamp"] == ts[0]
    assert q0["delayTime"] == broker.now_ms() - ts[1] and q0["delayTime"] >= 5000
    assert q0["minTimeStampStr"].count("#") == 1 and q0["minTimeStampStr"].endswith(f":{ts[0] % 1000:03d}")
    # an empty queue: no times; Java's delay for a group without offset (-1 < max 0) is now - (-1)
    assert q1["maxTimeStamp"] == -1 and q1["minTimeStamp"] == q1["consumeTimeStamp"]
    assert q1["delayTime"] == broker.now_ms() + 1
    commit(broker, "TG", "TS", 1, 0)
    out = body(call(broker, FakeChannel(), req(RequestCode.QUERY_CONSUME_TIME_SPAN,
                                               QueryConsumeTimeSpanRequestHeader(topic="TS", group="TG"))))
    assert out["consumeTimeSpanSet"][1]["delayTime"] == 0


# ---------------------------------------------------------------------- QUERY_CONSUME_QUEUE
def test_query_consume_queue(broker):
    ch = FakeChannel()
    resp = call(broker, ch, req(RequestCode.QUERY_CONSUME_QUEUE,
                                QueryConsumeQueueRequestHeader(topic="NoCq", queueId=3, index=0, count=10)))
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "3@NoCq is not exist!"
    send(broker, "CQ", 4, queue_id=1, tags="TagA")
    out = body(call(broker, ch, req(RequestCode.QUERY_CONSUME_QUEUE,
                                    QueryConsumeQueueRequestHeader(topic="CQ", queueId=1, index=1, count=2))))
    assert out["maxQueueIndex"] == 4 and out["minQueueIndex"] == 0
    assert "subscriptionData" not in out and "filterData" not in out
    units = [broker.message_store.find_consume_queue("CQ", 1).get_unit(i) for i in (1, 2)]
    assert [(d["physicOffset"], d["physicSize"], d["tagsCode"]) for d in out["queueData"]] == \
        [tuple(u) for u in units]
    assert out["queueData"][0]["tagsCode"] == _java_string_hash("TagA") and out["queueData"][0]["eval"] is False
    # a group that is not online
    out = body(call(broker, ch, req(RequestCode.QUERY_CONSUME_QUEUE, QueryConsumeQueueRequestHeader(
        topic="CQ", queueId=1, index=0, count=10, consumerGroup="Off"))))
    assert out["filterData"] == "Off@CQ is not online!" and len(out["queueData"]) == 4
    # online: its subscription, and "null" filter data for a TAG subscription
    call(broker, ch, heartbeat("cid-q", "On", "CQ", "TagA"))
    out = body(call(broker, ch, req(RequestCode.QUERY_CONSUME_QUEUE, QueryConsumeQueueRequestHeader(
        topic="CQ", queueId=1, index=0, count=1, consumerGroup="On"))))
    assert out["subscriptionData"]["subString"] == "TagA" and out["filterData"] == "null"
    assert len(out["queueData"]) == 1
    # past the end: SUCCESS, a remark and no body (as Java)
    resp = call(broker, ch, req(RequestCode.QUERY_CONSUME_QUEUE,
                                QueryConsumeQueueRequestHeader(topic="CQ", queueId=1, index=4, count=10)))
    assert resp.code == ResponseCode.SUCCESS and resp.remark == "Index 4 of 1@CQ is not exist!" and not resp.body


def _java_string_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


# ---------------------------------------------------------------------- CLONE_GROUP_OFFSET
def test_clone_group_offset(broker):
    create_topic(broker, "CLT", 2)
    commit(broker, "src", "CLT", 0, 5)
    commit(broker, "src", "CLT", 1, 7)
    ch = FakeChannel()
    h = CloneGroupOffsetRequestHeader(srcGroup="src", destGroup="dst", topic="CLT", offline=False)
    resp = call(broker, ch, req(RequestCode.CLONE_GROUP_OFFSET, h))
    assert resp.code == ResponseCode.SUCCESS and resp.remark is None
    assert broker.consumer_offset_manager.query_offsets("dst", "CLT") == {0: 5, 1: 7}
    # the copy is a copy
    commit(broker, "src", "CLT", 0, 6)
    assert broker.consumer_offset_manager.query_offset("dst", "CLT", 0) == 5
    # a topic the broker does not have: nothing cloned, still SUCCESS
    h = CloneGroupOffsetRequestHeader(srcGroup="src", destGroup="dst2", topic="NoTopic", offline=False)
    assert call(broker, ch, req(RequestCode.CLONE_GROUP_OFFSET, h)).code == ResponseCode.SUCCESS
    assert broker.consumer_offset_manager.query_offsets("dst2", "NoTopic") == {}
    # an online source group not subscribed to the topic is skipped unless offline=true
    call(broker, ch, heartbeat("cid-c", "src", "OtherTopic"))
    h = CloneGroupOffsetRequestHeader(srcGroup="src", destGroup="dst3", topic="CLT", offline=False)
    call(broker, ch, req(RequestCode.CLONE_GROUP_OFFSET, h))
    assert broker.consumer_offset_manager.query_offsets("dst3", "CLT") == {}
    h.offline = True
    call(broker, ch, req(RequestCode.CLONE_GROUP_OFFSET, h))
    assert broker.consumer_offset_manager.query_offsets("dst3", "CLT") == {0: 6, 1: 7}
    resp = call(broker, ch, req(RequestCode.CLONE_GROUP_OFFSET, body=None))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "srcGroup" in resp.remark


# ---------------------------------------------------------------------- VIEW_BROKER_STATS_DATA
def tick(broker, seconds):
    """Advance the clock 10 s at a time, so each sampling tick runs (Clock fires a re-armed call once)."""
    for _ in range(int(seconds // 10)):
        broker.clock.advance(10)


def stats(broker, name, key):
    return call(broker, FakeChannel(), req(RequestCode.VIEW_BROKER_STATS_DATA,
                                           ViewBrokerStatsDataRequestHeader(statsName=name, statsKey=key)))


def test_view_broker_stats_data_counts_puts_and_gets_per_window(broker):
    resp = stats(broker, "TOPIC_PUT_NUMS", "VS")
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "The stats <TOPIC_PUT_NUMS> <VS> not exist"
    assert stats(broker, "NO_SUCH_STATS", "x").remark == "The stats <NO_SUCH_STATS> <x> not exist"
    send(broker, "VS", 3)
    # before the next 10 s tick the item has no snapshot: every window is empty
    out = body(stats(broker, "TOPIC_PUT_NUMS", "VS"))
    assert out == {"statsDay": {"avgpt": 0.0, "sum": 0, "tps": 0.0}, "statsHour": {"avgpt": 0.0, "sum": 0, "tps": 0.0},
                   "statsMinute": {"avgpt": 0.0, "sum": 0, "tps": 0.0}}
    broker.clock.advance(10)
    out = body(stats(broker, "TOPIC_PUT_NUMS", "VS"))
    assert out["statsMinute"] == {"avgpt": 1.0, "sum": 3, "tps": 0.3}
    assert out["statsHour"]["sum"] == 0 and out["statsDay"]["sum"] == 0
    # pulls count per topic@group
    ch = FakeChannel()
    resp = call(broker, ch, pull_request("VS", "VG", queue_id=0, offset=0))
    assert resp.code == ResponseCode.SUCCESS
    broker.clock.advance(10)
    out = body(stats(broker, "GROUP_GET_NUMS", "VS@VG"))
    assert out["statsMinute"]["sum"] == 3 and out["statsMinute"]["avgpt"] == 3.0
    assert body(stats(broker, "BROKER_GET_NUMS", "DefaultCluster"))["statsMinute"]["sum"] == 3
    assert body(stats(broker, "BROKER_PUT_NUMS", "DefaultCluster"))["statsMinute"]["sum"] == 3
    assert body(stats(broker, "TOPIC_PUT_SIZE", "VS"))["statsMinute"]["sum"] == len(b"m0") * 3
    # the minute window keeps 7 snapshots: a minute later with no new puts it reads 0
    tick(broker, 70)
    assert body(stats(broker, "TOPIC_PUT_NUMS", "VS"))["statsMinute"]["sum"] == 0
    # the hour window samples every 10 min from the broker's start
    tick(broker, 600)
    assert body(stats(broker, "TOPIC_PUT_NUMS", "VS"))["statsHour"]["sum"] == 3
    tick(broker, 3600)
    assert body(stats(broker, "TOPIC_PUT_NUMS", "VS"))["statsDay"]["sum"] == 3
    # deleting the group drops its get stats
    call(broker, ch, req(RequestCode.DELETE_SUBSCRIPTIONGROUP, DeleteSubscriptionGroupRequestHeader(groupName="VG")))
    assert stats(broker, "GROUP_GET_NUMS", "VS@VG").code == ResponseCode.SYSTEM_ERROR


def test_held_pull_is_counted_when_it_wakes_up(broker):
    create_topic(broker, "HP", 1)
    ch = FakeChannel()
    assert call(broker, ch, pull_request("HP", "HG", queue_id=0, offset=0)) is None  # held
    send(broker, "HP", 1)
    broker.clock.advance(0.1)
    assert ch.sent and ch.sent[-1].code == ResponseCode.SUCCESS
    broker.clock.advance(10)
    assert body(stats(broker, "GROUP_GET_NUMS", "HP@HG"))["statsMinute"]["sum"] == 1


# ---------------------------------------------------------------------- QUERY_CORRECTION_OFFSET
def test_query_correction_offset(broker):
    create_topic(broker, "CO", 2)
    send(broker, "CO", 10, queue_id=0)
    send(broker, "CO", 10, queue_id=1)
    commit(broker, "g1", "CO", 0, 4)
    commit(broker, "g1", "CO", 1, 9)
    commit(broker, "g2", "CO", 0, 6)
    commit(broker, "g2", "CO", 1, 2)
    commit(broker, "cmp", "CO", 0, 8)
    commit(broker, "cmp", "CO", 1, 1)
    h = QueryCorrectionOffsetHeader(compareGroup="cmp", topic="CO", filterGroups="g2")
    out = body(call(broker, FakeChannel(), req(RequestCode.QUERY_CORRECTION_OFFSET, h)))
    # queue 0: min(g1=4, cmp=8) = 4, cmp (8) is not behind it; queue 1: min(9, 1) = 1, cmp (1) not behind
    assert out == {"correctionOffsets": {0: 4, 1: 1}}
    h = QueryCorrectionOffsetHeader(compareGroup="g1", topic="CO", filterGroups="cmp")
    out = body(call(broker, FakeChannel(), req(RequestCode.QUERY_CORRECTION_OFFSET, h)))
    # queue 0: min(g1=4, g2=6) = 4; queue 1: min(9, 2) = 2 > g1's 9? no: 2 <= 9 keeps 2
    assert out["correctionOffsets"] == {0: 4, 1: 2}
    h = QueryCorrectionOffsetHeader(compareGroup="g2", topic="CO", filterGroups="g1,cmp")
    raw = call(broker, FakeChannel(), req(RequestCode.QUERY_CORRECTION_OFFSET, h)).body
    assert fastjson.loads(raw)["correctionOffsets"] == {0: 6, 1: 2}
    # the compare group behind the others' minimum: Long.MAX_VALUE
    h = QueryCorrectionOffsetHeader(compareGroup="cmp", topic="CO", filterGroups="cmp")
    raw = call(broker, FakeChannel(), req(RequestCode.QUERY_CORRECTION_OFFSET, h)).body
    assert raw == b'{"correctionOffsets":{0:4,1:9223372036854775807}}'
    # the filtered groups' offsets are left in place (Java deletes them as a side effect)
    assert broker.consumer_offset_manager.query_offset("cmp", "CO", 0) == 8


# ---------------------------------------------------------------------- consumer status (forwarded)
def test_consumer_status_asks_each_client_and_gathers_by_client_id(broker):
    resp = call(broker, FakeChannel(), req(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                           GetConsumerStatusRequestHeader(topic="CS", group="CSG")))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "No Any Consumer online in the consumer group: [CSG]"

    def answer_for(offset):
        def answer(request):
            table = {fastjson.ObjectKey(brokerName="broker-a", queueId=0, topic="CS"): offset}
            return request.response(ResponseCode.SUCCESS, None,
                                    body=fastjson.dumps({"messageQueueTable": table, "consumerTable": {}}).encode())
        return answer

    a, b = ClientChannel(answer_for(3)), ClientChannel(answer_for(5))
    call(broker, a, heartbeat("cid-a", "CSG", "CS"))
    call(broker, b, heartbeat("cid-b", "CSG", "CS"))
    out = body(call(broker, FakeChannel(), req(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                               GetConsumerStatusRequestHeader(topic="CS", group="CSG"))))
    assert {cid: list(t.values()) for cid, t in out["consumerTable"].items()} == {"cid-a": [3], "cid-b": [5]}
    (asked,) = a.asked
    assert asked.code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT
    assert asked.ext_fields == {"topic": "CS", "group": "CSG"}
    # only the client named by clientAddr (a client id)
    out = body(call(broker, FakeChannel(), req(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                               GetConsumerStatusRequestHeader(topic="CS", group="CSG",
                                                                              clientAddr="cid-b"))))
    assert list(out["consumerTable"]) == ["cid-b"] and len(a.asked) == 1
    # a client that fails is left out
    a.answer = lambda request: defer.fail(RuntimeError("boom"))
    out = body(call(broker, FakeChannel(), req(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                               GetConsumerStatusRequestHeader(topic="CS", group="CSG"))))
    assert list(out["consumerTable"]) == ["cid-b"]


# ---------------------------------------------------------------------- CONSUME_MESSAGE_DIRECTLY (forwarded)
def test_consume_message_directly_forwards_the_stored_message(broker):
    resp = call(broker, FakeChannel(), send_request("CD", b"direct", queue_id=0))
    offset_msg_id = resp.ext_fields["msgId"]
    h = ConsumeMessageDirectlyResultRequestHeader(consumerGroup="CDG", clientId="cid-d", msgId=offset_msg_id,
                                                  topic="CD")
    resp = call(broker, FakeChannel(), req(RequestCode.CONSUME_MESSAGE_DIRECTLY, h))
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "The Consumer <CDG> <cid-d> not online"

    result = fastjson.dumps({"order": False, "autoCommit": True, "consumeResult": "CR_SUCCESS",
                             "remark": None, "spentTimeMills": 3}).encode()
    client = ClientChannel(lambda request: request.response(ResponseCode.SUCCESS, None, body=result))
    call(broker, client, heartbeat("cid-d", "CDG", "CD"))
    create_group(broker, "CDG")
    resp = call(broker, FakeChannel(), req(RequestCode.CONSUME_MESSAGE_DIRECTLY, h))
    assert resp.code == ResponseCode.SUCCESS and resp.body == result
    (asked,) = client.asked
    assert asked.code == RequestCode.CONSUME_MESSAGE_DIRECTLY
    assert asked.ext_fields["brokerName"] == "broker-a" and asked.ext_fields["msgId"] == offset_msg_id
    assert asked.ext_fields["topicSysFlag"] == "0" and asked.ext_fields["groupSysFlag"] == "0"
    from rmqpy.protocol.message import decode_offset_msg_id
    _, phy = decode_offset_msg_id(offset_msg_id)
    assert asked.body == broker.message_store.select_one_message_by_offset(phy) and b"direct" in asked.body
    # the client's error and remark come back unchanged
    client.answer = lambda request: request.response(ResponseCode.SYSTEM_ERROR, "listener threw")
    resp = call(broker, FakeChannel(), req(RequestCode.CONSUME_MESSAGE_DIRECTLY, h))
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "listener threw")


# ---------------------------------------------------------------------- UPDATE_BROKER_CONFIG persists
def test_update_broker_config_persists_to_the_config_file_and_survives_a_reload(broker, tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=broker-a\ntls.server.mode=disabled\nlistenPort=10911\n")
    resp = call(broker, FakeChannel(), req(RequestCode.UPDATE_BROKER_CONFIG,
                                           body=b"fileReservedTime=7\nslaveReadEnable=true\n"))
    assert resp.code == ResponseCode.SUCCESS
    text = conf.read_text()
    assert "fileReservedTime=7\n" in text and "slaveReadEnable=true\n" in text
    assert "tls.server.mode=disabled\n" in text  # keys of the file no config object has stay
    assert (tmp_path / "broker.conf.bak").read_text().startswith("brokerName=broker-a\ntls.server.mode")
    reloaded = load_settings(str(conf))
    assert reloaded.store.fileReservedTime == 7 and reloaded.broker.slaveReadEnable is True
    assert reloaded.broker.brokerName == "broker-a" and reloaded.unknown_keys == []
    # GET_BROKER_CONFIG shows the new values
    got = call(broker, FakeChannel(), req(RequestCode.GET_BROKER_CONFIG)).body.decode()
    assert "fileReservedTime=7\n" in got
    # a refused update writes nothing
    before = conf.read_text()
    resp = call(broker, FakeChannel(), req(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerConfigPath=/tmp/x\n"))
    assert resp.code == ResponseCode.NO_PERMISSION and conf.read_text() == before
    assert not os.path.exists(str(conf) + ".tmp")


def test_update_broker_permission_registers_again(broker):
    registered = []
    broker.register_broker_all = lambda: registered.append(broker.broker_config.brokerPermission)
    version = broker.topic_config_manager.data_version.counter
    resp = call(broker, FakeChannel(), req(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4\n"))
    assert resp.code == ResponseCode.SUCCESS and registered == [4]
    assert broker.topic_config_manager.data_version.counter == version + 1


def test_stats_count_v1_v2_and_batch_sends_and_skip_failures(broker):
    from rmqpy.protocol.headers.broker import SendMessageRequestHeader
    from rmqpy.protocol.message import encode_batch_body, properties_to_string
    ch = FakeChannel()
    assert call(broker, ch, send_request("SC", b"abc")).code == ResponseCode.SUCCESS  # V2: topic in "b"
    v1 = SendMessageRequestHeader(producerGroup="PG", topic="SC", defaultTopic="TBW102", defaultTopicQueueNums=4,
                                  queueId=0, sysFlag=0, bornTimestamp=T0_MS, flag=0,
                                  properties=properties_to_string({"WAIT": "true"}))
    assert call(broker, ch, req(RequestCode.SEND_MESSAGE, v1, b"defgh")).code == ResponseCode.SUCCESS
    batch = encode_batch_body([(0, f"m{i}".encode(), {"UNIQ_KEY": f"U{i}"}) for i in range(4)])
    resp = call(broker, ch, send_request("SC", batch, code=RequestCode.SEND_BATCH_MESSAGE))
    assert resp.code == ResponseCode.SUCCESS
    # a refused send (queue id out of range) is not counted
    assert call(broker, ch, send_request("SC", b"x", queue_id=99)).code == ResponseCode.SYSTEM_ERROR
    broker.clock.advance(10)
    assert body(stats(broker, "TOPIC_PUT_NUMS", "SC"))["statsMinute"] == {"avgpt": 2.0, "sum": 6, "tps": 0.6}
    assert body(stats(broker, "TOPIC_PUT_SIZE", "SC"))["statsMinute"]["sum"] == 3 + 5 + len(batch)
    assert body(stats(broker, "BROKER_PUT_NUMS", "DefaultCluster"))["statsMinute"]["sum"] == 6
