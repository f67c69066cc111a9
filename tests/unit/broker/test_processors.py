from __future__ import annotations

import json

import pytest

from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import (
    GetConsumerListByGroupRequestHeader,
    GetMaxOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmqpy.protocol.message import decode_records
from tests.unit.broker.helpers import FakeChannel, call, make_broker, pull_request, send_request


def heartbeat(client_id: str, group: str, topic: str, sub: str = "*", etype: str = "TAG",
              model: str = "CLUSTERING") -> RemotingCommand:
    data = HeartbeatData(clientID=client_id, producerDataSet=[ProducerData("CLIENT_INNER_PRODUCER")],
                         consumerDataSet=[ConsumerData(group, messageModel=model, subscriptionDataSet=[
                             SubscriptionData.build(topic, sub, etype, 1)])])
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=data.encode())


# ---------------------------------------------------------------------- send
def test_send_autocreates_topic_and_answers_like_java(broker):
    ch = FakeChannel()
    resp = call(broker, ch, send_request("T1", b"abc", queue_id=1, tags="A"))
    assert resp.code == ResponseCode.SUCCESS and resp.remark is None
    ext = resp.ext_fields
    assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"
    assert ext["queueId"] == "1" and ext["queueOffset"] == "0"
    assert len(ext["msgId"]) == 32 and ext["msgId"].startswith("7F00000100002A9F")  # 127.0.0.1:10911
    tc = broker.topic_config_manager.select("T1")
    assert (tc.readQueueNums, tc.writeQueueNums, tc.perm) == (4, 4, 6)
    resp = call(broker, ch, send_request("T1", b"def", queue_id=1))
    assert resp.ext_fields["queueOffset"] == "1"


def test_send_errors(tmp_path):
    broker, _ = make_broker(tmp_path, autoCreateTopicEnable=False, maxMessageSize=1024)
    try:
        ch = FakeChannel()
        resp = call(broker, ch, send_request("Nope"))
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        assert resp.remark == ("topic[Nope] not exist, apply first please!\n"
                               "See http://rocketmq.apache.org/docs/faq/ for further details.")
        from rmqpy.protocol.bodies.topic import TopicConfig
        broker.topic_config_manager.update_topic_config(TopicConfig("T", 4, 4))
        resp = call(broker, ch, send_request("T", queue_id=7))
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark == ("request queueId[7] is illegal, TopicConfig [topicName=T, readQueueNums=4, "
                               "writeQueueNums=4, perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, "
                               f"order=false] Producer: {ch.remote_address}")
        resp = call(broker, ch, send_request("T", body=b"x" * 1025))
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL
        assert "msg body length limit 1024B" in resp.remark
        resp = call(broker, ch, send_request("bad topic!"))
        assert resp.code == ResponseCode.SYSTEM_ERROR and "illegal characters" in resp.remark
        resp = call(broker, ch, send_request("SCHEDULE_TOPIC_XXXX"))
        assert resp.code == ResponseCode.NO_PERMISSION
        # a header without a required field: SYSTEM_ERROR, connection kept
        bad = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext_fields={"a": "PG"}, body=b"x")
        resp = call(broker, ch, bad)
        assert resp.code == ResponseCode.SYSTEM_ERROR and not ch.closed
    finally:
        broker.shutdown()


def test_batch_send_and_pull_back(broker):
    from rmqpy.protocol.message import encode_batch_body
    ch = FakeChannel()
    body = encode_batch_body([(0, f"m{i}".encode(), {"TAGS": "B", "UNIQ_KEY": f"U{i}"}) for i in range(3)])
    req = send_request("TB", body, code=RequestCode.SEND_BATCH_MESSAGE)
    resp = call(broker, ch, req)
    assert resp.code == 0
    assert len(resp.ext_fields["msgId"].split(",")) == 3 and resp.ext_fields["queueOffset"] == "0"
    resp = call(broker, ch, pull_request("TB", "G", sys_flag=0x4))
    msgs = list(decode_records(resp.body))
    assert [m.body for m in msgs] == [b"m0", b"m1", b"m2"]
    assert msgs[0].properties["CLUSTER"] == "DefaultCluster" and msgs[0].properties["TAGS"] == "B"


@pytest.mark.parametrize("version", [MQVersion.V4_9_8, MQVersion.V5_3_3])
def test_a_single_send_answers_its_unique_key_as_transaction_id_to_5x_clients(broker, version):
    """5.3.3's SendMessageProcessor puts the message's UNIQ_KEY in the answer's transactionId (4.9.7 does
    not): Apache's proxy passes it to a gRPC producer, whose EndTransaction it refuses when empty."""
    req = send_request("TX", b"half", props={"UNIQ_KEY": "U-TX-1", "TRAN_MSG": "true", "PGROUP": "PG"})
    req.version = version
    resp = call(broker, FakeChannel(), req)
    assert resp.code == 0
    expected = "U-TX-1" if version >= MQVersion.V5_0_0 else None
    assert (resp.ext_fields or {}).get("transactionId") == expected, resp.ext_fields


@pytest.mark.parametrize("version", [MQVersion.V4_9_8, MQVersion.V5_3_3])
def test_stored_properties_are_those_of_the_producers_broker_generation(broker, version):
    """4.9.7 stores a message without WAIT; 5.3.3 keeps WAIT and adds MSG_REGION and TRACE_ON (the 5.x
    client's consume trace hook reads them). Batches: both append the batch's properties to each message,
    but never the batch's own UNIQ_KEY (the 5.x client sets one; Java 5.3.3 then consumes every message
    of the batch with that one id, apache/rocketmq #9416)."""
    from rmqpy.protocol.message import encode_batch_body
    ch = FakeChannel()
    req = send_request("TS", b"one", props={"UNIQ_KEY": "U0", "KEYS": "k"})
    req.version = version
    assert call(broker, ch, req).code == 0
    body = encode_batch_body([(0, f"m{i}".encode(), {"UNIQ_KEY": f"U{i + 1}"}) for i in range(2)])
    req = send_request("TS", body, code=RequestCode.SEND_BATCH_MESSAGE, props={"UNIQ_KEY": "BATCH"})
    req.version = version
    assert call(broker, ch, req).code == 0
    msgs = list(decode_records(call(broker, ch, pull_request("TS", "G", sys_flag=0x4)).body))
    five = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"} if version >= MQVersion.V5_0_0 else {}
    single = {"UNIQ_KEY": "U0", "KEYS": "k", "CLUSTER": "DefaultCluster", **five}
    if five:
        single["WAIT"] = "true"
    assert msgs[0].properties == single
    for i, m in enumerate(msgs[1:]):  # WAIT of the batch appended by both generations
        assert m.properties == {"UNIQ_KEY": f"U{i + 1}", "WAIT": "true", "CLUSTER": "DefaultCluster", **five}


# ---------------------------------------------------------------------- pull
def test_pull_found_and_status_mapping(broker):
    ch = FakeChannel()
    resp = call(broker, ch, pull_request("TP", "G", offset=0, sys_flag=0x4))
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    call(broker, ch, send_request("TP", b"one", tags="A"))
    call(broker, ch, send_request("TP", b"two", tags="B"))
    resp = call(broker, ch, pull_request("TP", "G", offset=0, sys_flag=0x4))
    assert resp.code == ResponseCode.SUCCESS and resp.remark == "FOUND"
    assert {k: resp.ext_fields[k] for k in ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset")} \
        == {"suggestWhichBrokerId": "0", "nextBeginOffset": "2", "minOffset": "0", "maxOffset": "2"}
    assert [m.body for m in decode_records(resp.body)] == [b"one", b"two"]
    assert "topicSysFlag" not in resp.ext_fields and "groupSysFlag" not in resp.ext_fields  # 4.9's header
    for bound, bodies in (("-1", [b"one", b"two"]), ("0", [b"one", b"two"]), ("1", [b"one"])):
        bounded = pull_request("TP", "G", offset=0, sys_flag=0x4)
        bounded.ext_fields["maxMsgBytes"] = bound  # not positive: no bound (Java reads none at all)
        assert [m.body for m in decode_records(call(broker, ch, bounded).body)] == bodies, bound
    five = pull_request("TP", "G", offset=2, sys_flag=0x4)
    five.version = MQVersion.V5_3_3  # 5.x's answer adds both (PullMessageProcessor), found or not
    resp = call(broker, ch, five)
    assert (resp.code, resp.ext_fields["topicSysFlag"], resp.ext_fields["groupSysFlag"]) == \
        (ResponseCode.PULL_NOT_FOUND, "0", "0")
    # TAG filter by tag hash
    resp = call(broker, ch, pull_request("TP", "G", offset=0, sys_flag=0x4, subscription="B"))
    assert [m.body for m in decode_records(resp.body)] == [b"two"]
    resp = call(broker, ch, pull_request("TP", "G", offset=0, sys_flag=0x4, subscription="C"))
    assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY and resp.ext_fields["nextBeginOffset"] == "2"
    # offset == max: not found (no suspend flag); > max: moved; empty queue with offset != 0: moved
    resp = call(broker, ch, pull_request("TP", "G", offset=2, sys_flag=0x4))
    assert resp.code == ResponseCode.PULL_NOT_FOUND and resp.ext_fields["nextBeginOffset"] == "2"
    resp = call(broker, ch, pull_request("TP", "G", offset=9, sys_flag=0x4))
    assert resp.code == ResponseCode.PULL_OFFSET_MOVED and resp.ext_fields["nextBeginOffset"] == "2"
    resp = call(broker, ch, pull_request("TP", "G", queue_id=3, offset=5, sys_flag=0x4))
    assert resp.code == ResponseCode.PULL_OFFSET_MOVED and resp.ext_fields["nextBeginOffset"] == "0"
    resp = call(broker, ch, pull_request("TP", "G", queue_id=3, offset=0, sys_flag=0x4))
    assert resp.code == ResponseCode.PULL_NOT_FOUND
    # no subscription flag and no heartbeat: SUBSCRIPTION_NOT_EXIST
    resp = call(broker, ch, pull_request("TP", "G2", offset=0, sys_flag=0))
    assert resp.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    resp = call(broker, ch, pull_request("TP", "G", queue_id=4, sys_flag=0x4))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == (f"queueId[4] is illegal, topic:[TP] topicConfig.readQueueNums:[4] "
                           f"consumer:[/{ch.remote_address}]")


def test_long_polling_wakes_up_on_arrival(broker):
    ch = FakeChannel()
    call(broker, ch, send_request("TL", b"first"))
    resp = call(broker, ch, pull_request("TL", "G", offset=1))
    assert resp is None and broker.pull_hold_service.held_count() == 1
    broker.clock.advance(1)
    assert ch.sent == []
    other = FakeChannel()
    call(broker, other, send_request("TL", b"second"))
    assert broker.pull_hold_service.held_count() == 0
    resp = ch.sent[-1]
    assert resp.code == ResponseCode.SUCCESS and resp.is_response
    assert [m.body for m in decode_records(resp.body)] == [b"second"]


def test_long_polling_ignores_other_tags_until_the_periodic_check(broker):
    ch = FakeChannel()
    call(broker, ch, send_request("TT", b"x", tags="A"))
    out: list = []
    ch.sent = out
    broker.dispatcher.dispatch(ch, pull_request("TT", "G", offset=1, subscription="B", suspend_ms=15000))
    call(broker, FakeChannel(), send_request("TT", b"y", tags="A"))  # another tag: stays parked
    assert broker.pull_hold_service.held_count() == 1 and out == []
    broker.clock.advance(5)  # the 5 s check re-runs it (as Java's, without a tag): scanned, nothing matched
    assert broker.pull_hold_service.held_count() == 0
    assert out[-1].code == ResponseCode.PULL_RETRY_IMMEDIATELY and out[-1].ext_fields["nextBeginOffset"] == "2"


def test_long_polling_timeout_answers_not_found(broker):
    ch = FakeChannel()
    out = []
    ch.sent = out
    broker.dispatcher.dispatch(ch, pull_request("TN", "G", offset=0, suspend_ms=15000))
    broker.topic_config_manager.create_topic_in_send_message_back_method("TN", 4, 6)
    broker.dispatcher.dispatch(ch, pull_request("TN", "G", offset=0, suspend_ms=15000))
    assert out[0].code == ResponseCode.TOPIC_NOT_EXIST  # first request, before the topic existed
    assert broker.pull_hold_service.held_count() == 1
    broker.clock.advance(15)
    assert out[-1].code == ResponseCode.PULL_NOT_FOUND
    assert set(out[-1].ext_fields) >= {"suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"}


def test_pull_commits_offset_only_on_first_execution(broker):
    ch = FakeChannel()
    call(broker, ch, send_request("TC", b"a"))
    call(broker, ch, pull_request("TC", "G", offset=1, sys_flag=0x1 | 0x2 | 0x4, commit_offset=1))
    assert broker.consumer_offset_manager.query_offset("G", "TC", 0) == 1


# ---------------------------------------------------------------------- offsets
def _query(broker, ch, group, topic, qid=0, version=MQVersion.V5_3_3, zero=None):
    req = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET,
                                  QueryConsumerOffsetRequestHeader(group, topic, qid, zero))
    req.version = version
    return call(broker, ch, req)


NOT_FOUND = "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


@pytest.mark.parametrize("version", [MQVersion.V4_9_8, MQVersion.V5_3_3])
def test_query_consumer_offset_empty_queue_answers_zero_for_every_client(broker, version):
    """A queue that never had a message: 0 (Java 5.3.3 answers QUERY_NOT_FOUND, and the client then
    starts at a max offset read later, skipping what arrived in between)."""
    ch = FakeChannel()
    for topic in ("%RETRY%G", "NEVER_CREATED"):
        resp = _query(broker, ch, "G", topic, version=version)
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "0"
    call(broker, ch, send_request("TO", b"a"))
    resp = _query(broker, ch, "G", "TO", qid=1, version=version)  # queue 1 of the same topic is empty
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "0"
    # setZeroIfNotFound=false (a 5.x broker forwarding a static-topic query): never 0 for "no offset"
    resp = _query(broker, ch, "G", "TO", qid=1, version=version, zero=False)
    assert resp.code == ResponseCode.QUERY_NOT_FOUND
    assert resp.remark == "Not found, do not set to zero, maybe this group boot first"
    assert "offset" not in (resp.ext_fields or {})


@pytest.mark.parametrize("start, v5_code", [("CONSUME_FROM_LAST_OFFSET", ResponseCode.QUERY_NOT_FOUND),
                                             ("CONSUME_FROM_FIRST_OFFSET", ResponseCode.QUERY_NOT_FOUND),
                                             ("CONSUME_FROM_TIMESTAMP", ResponseCode.SUCCESS)])
def test_query_consumer_offset_never_used_retry_queue_of_a_member(broker, start, v5_code):
    """A member's never-used %RETRY% queue: the generation's rule (5.3.3: not found, as the Java 5.3.3
    broker, so the 5.3.3 client starts it at 0 by itself and commits no offset, and consumerProgress has no
    %RETRY% row; 4.9.x: 0), except for a group consuming from a timestamp, which on not found would start
    at a max offset read later: 0 for it, as for every never-used queue."""
    ch = FakeChannel()
    hb = heartbeat("c1", "GR", "TR")
    data = HeartbeatData.decode(hb.body)
    data.consumerDataSet[0].consumeFromWhere = start
    hb.body = data.encode()
    assert call(broker, ch, hb).code == ResponseCode.SUCCESS
    resp = _query(broker, ch, "GR", "%RETRY%GR", version=MQVersion.V5_3_3)
    assert resp.code == v5_code
    if v5_code == ResponseCode.QUERY_NOT_FOUND:
        assert resp.remark == NOT_FOUND
    else:
        assert resp.ext_fields["offset"] == "0"
    resp = _query(broker, ch, "GR", "%RETRY%GR", version=MQVersion.V4_9_8)
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "0"
    # the group's plain topic keeps rule 3 for every client
    assert _query(broker, ch, "GR", "TR", version=MQVersion.V5_3_3).ext_fields["offset"] == "0"


def test_query_consumer_offset_rule_per_client_generation(broker, monkeypatch):
    ch = FakeChannel()
    call(broker, ch, send_request("TO", b"a"))
    for version in (MQVersion.V4_9_8, MQVersion.V5_3_3):  # never committed, message 0 in memory: 0
        resp = _query(broker, ch, "G", "TO", version=version)
        assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["offset"] == "0"
    call(broker, ch, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                             UpdateConsumerOffsetRequestHeader("G", "TO", 0, 7)))
    assert _query(broker, ch, "G", "TO").ext_fields["offset"] == "7"
    assert _query(broker, ch, "G", "TO", zero=False).ext_fields["offset"] == "7"
    # message 0 swapped out of memory: both generations answer not found (the client takes the max offset)
    import rmqpy.store.message_store as ms
    monkeypatch.setattr(ms, "TOTAL_PHYSICAL_MEMORY_SIZE", 0)
    for version in (MQVersion.V4_9_8, MQVersion.V5_3_3):
        resp = _query(broker, ch, "G2", "TO", version=version)
        assert resp.code == ResponseCode.QUERY_NOT_FOUND and resp.remark == NOT_FOUND
    monkeypatch.undo()
    # queue 0 has messages but no unit 0 although it starts at 0 (unit lost): 4.9.7's
    # !checkInDiskByConsumeOffset answers 0, 5.3.3's checkInMemByConsumeOffset not found
    cq = broker.message_store.find_consume_queue("TO", 0, create=False)
    monkeypatch.setattr(cq, "get_unit", lambda offset: None)
    assert _query(broker, ch, "G2", "TO", version=MQVersion.V4_9_8).ext_fields["offset"] == "0"
    assert _query(broker, ch, "G2", "TO", version=MQVersion.V4_9_3).ext_fields["offset"] == "0"
    assert _query(broker, ch, "G2", "TO", version=MQVersion.V5_0_0).code == ResponseCode.QUERY_NOT_FOUND
    monkeypatch.undo()
    monkeypatch.setattr(broker.message_store, "get_min_offset_in_queue", lambda t, q: 5)
    for version in (MQVersion.V4_9_8, MQVersion.V5_3_3):  # queue no longer starts at 0: not found
        resp = _query(broker, ch, "G2", "TO", version=version)
        assert resp.code == ResponseCode.QUERY_NOT_FOUND and resp.remark == NOT_FOUND


def test_store_offset_requests(broker):
    ch = FakeChannel()
    for _ in range(3):
        call(broker, ch, send_request("TS", b"a"))
    resp = call(broker, ch, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader("TS", 0)))
    assert resp.ext_fields == {"offset": "3"}
    resp = call(broker, ch, RemotingCommand.request(RequestCode.GET_MIN_OFFSET, GetMaxOffsetRequestHeader("TS", 0)))
    assert resp.ext_fields == {"offset": "0"}


def test_consumer_offsets_persist_in_java_format(tmp_path):
    broker, clock = make_broker(tmp_path)
    ch = FakeChannel()
    call(broker, ch, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                             UpdateConsumerOffsetRequestHeader("G", "T", 3, 42)))
    clock.advance(10)  # the 5 s flush (first run after 10 s)
    text = (tmp_path / "store" / "config" / "consumerOffset.json").read_text()
    assert '"T@G":{3:42}' in text.replace("\n", "").replace("\t", "")
    broker.shutdown()
    broker2, _ = make_broker(tmp_path)
    assert broker2.consumer_offset_manager.query_offset("G", "T", 3) == 42
    assert "TBW102" in fastjson.loads((tmp_path / "store" / "config" / "topics.json").read_text())["topicConfigTable"]
    broker2.shutdown()


def test_an_illegal_queue_id_or_topic_name_is_answered_in_the_requesters_generation(tmp_path):
    """An illegal queue id (send, pull) or topic name (send, UPDATE_AND_CREATE_TOPIC): INVALID_PARAMETER
    to a V5_0_0 requester as 5.3.3 answers, SYSTEM_ERROR to an older one as 4.9.x answers (found by
    tests/interop/remoting_diff.py against Java 5.3.3)."""
    from rmqpy.protocol.bodies.broker import SubscriptionGroupConfig
    from rmqpy.protocol.bodies.topic import TopicConfig
    from rmqpy.protocol.headers.admin import CreateTopicRequestHeader

    broker, _ = make_broker(tmp_path, autoCreateTopicEnable=False)
    try:
        broker.topic_config_manager.update_topic_config(TopicConfig("T", 4, 4))
        broker.subscription_group_manager.update(SubscriptionGroupConfig("G"))
        ch = FakeChannel()
        create = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, CreateTopicRequestHeader(
            topic="bad name", readQueueNums=1, writeQueueNums=1, perm=6, topicFilterType="SINGLE_TAG"))
        for version, code in ((MQVersion.V4_9_8, ResponseCode.SYSTEM_ERROR),
                              (MQVersion.V5_3_3, ResponseCode.INVALID_PARAMETER)):
            requests = [send_request("T", queue_id=7), send_request("bad name"), pull_request("T", "G", queue_id=7),
                        create]
            for req in requests:
                req.version = version
                resp = call(broker, ch, req)
                assert resp.code == code, (version, req, resp)
                assert "illegal" in resp.remark, resp.remark
            # the send's remark ends with TopicConfig.toString(): 5.x's names the attributes
            tail = "order=false, attributes={}]" if version >= MQVersion.V5_0_0 else "order=false]"
            assert call(broker, ch, requests[0]).remark.endswith(f"{tail} Producer: {ch.remote_address}")
    finally:
        broker.shutdown()


# ---------------------------------------------------------------------- clients
def test_heartbeat_answers_is_sub_change_as_java_5(broker):
    """IS_SUB_CHANGE: a heartbeat without a fingerprint (v1) is always answered true, as 5.3.3's
    ClientManageProcessor.heartBeat does (found by tests/interop/remoting_diff.py); a v2 one without its
    subscriptions is answered true only when the group's fingerprint changed."""
    a = FakeChannel()
    for _ in range(2):
        resp = call(broker, a, heartbeat("c1", "G", "T"))
        assert resp.ext_fields["IS_SUB_CHANGE"] == "true"
    data = HeartbeatData(clientID="c1", consumerDataSet=[ConsumerData("G", subscriptionDataSet=[
        SubscriptionData.build("T", "*", "TAG", 1)])], heartbeatFingerprint=7, withoutSub=False)
    resp = call(broker, a, RemotingCommand.request(RequestCode.HEART_BEAT, body=data.encode()))
    assert resp.ext_fields["IS_SUB_CHANGE"] == "false"
    data.withoutSub, data.consumerDataSet[0].subscriptionDataSet = True, []
    resp = call(broker, a, RemotingCommand.request(RequestCode.HEART_BEAT, body=data.encode()))
    assert resp.ext_fields["IS_SUB_CHANGE"] == "false"
    data.heartbeatFingerprint = 8
    resp = call(broker, a, RemotingCommand.request(RequestCode.HEART_BEAT, body=data.encode()))
    assert resp.ext_fields["IS_SUB_CHANGE"] == "true"


def test_a_5x_heartbeat_of_a_group_without_config_registers_no_consumer(tmp_path):
    """Without the group's subscription config (autoCreateSubscriptionGroup off): a V5_0_0 requester's
    consumer is not registered, as 5.3.3's heartBeat skips it; an older one's is, as 4.9.x does (found by
    tests/interop/remoting_diff.py against Java 5.3.3)."""
    broker, _ = make_broker(tmp_path, autoCreateSubscriptionGroup=False)
    try:
        for version, registered in ((MQVersion.V5_3_3, False), (MQVersion.V4_9_8, True)):
            req = heartbeat(f"c{version}", "NoConfig", "T")
            req.version = version
            assert call(broker, FakeChannel(), req).code == ResponseCode.SUCCESS
            assert (broker.consumer_manager.get("NoConfig") is not None) is registered, version
    finally:
        broker.shutdown()


def test_heartbeat_registers_and_notifies_group_members(broker):
    a, b = FakeChannel(), FakeChannel()
    resp = call(broker, a, heartbeat("c1", "G", "T"))
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["IS_SUPPORT_HEART_BEAT_V2"] == "true"
    assert broker.topic_config_manager.select("%RETRY%G").readQueueNums == 1
    assert [r.code for r in a.oneway] == [RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]
    call(broker, b, heartbeat("c2", "G", "T"))
    assert len(a.oneway) == 2 and len(b.oneway) == 1
    assert b.oneway[0].ext_fields == {"consumerGroup": "G"} and b.oneway[0].is_oneway
    call(broker, a, heartbeat("c1", "G", "T"))  # nothing changed: no notification
    assert len(a.oneway) == 2
    resp = call(broker, a, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                   ext_fields={"consumerGroup": "G"}))
    assert sorted(json.loads(resp.body)["consumerIdList"]) == ["c1", "c2"]
    broker.channel_closed(b)
    assert len(a.oneway) == 3
    resp = call(broker, a, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                   ext_fields={"consumerGroup": "nobody"}))
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "no consumer for this group, nobody"
    # an unregister removes the client
    call(broker, a, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT,
                                            ext_fields={"clientID": "c1", "consumerGroup": "G"}))
    assert broker.consumer_manager.get("G") is None


def test_silent_channels_are_dropped(broker):
    a = FakeChannel()
    call(broker, a, heartbeat("c1", "G", "T"))
    broker.clock.advance(100)
    assert not a.closed
    broker.clock.advance(30)
    assert a.closed and broker.consumer_manager.get("G") is None
    assert broker.producer_manager.groups == {}


def test_sql92_pull_and_check_client_config(tmp_path):
    broker, clock = make_broker(tmp_path, enablePropertyFilter=True)
    try:
        ch = FakeChannel()
        for i in range(5):
            call(broker, ch, send_request("TQ", f"m{i}".encode(), props={"a": str(i)}))
        resp = call(broker, ch, pull_request("TQ", "G", sys_flag=0x4, subscription="a >= 3",
                                             expression_type="SQL92"))
        assert [m.body for m in decode_records(resp.body)] == [b"m3", b"m4"]
        resp = call(broker, ch, pull_request("TQ", "G", sys_flag=0x4, subscription="a >>= 3",
                                             expression_type="SQL92"))
        assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert resp.remark == "parse the consumer's subscription failed"
        # push consumers: the filter comes from the heartbeat
        call(broker, ch, heartbeat("c1", "GP", "TQ", "a < 2", "SQL92"))
        resp = call(broker, ch, pull_request("TQ", "GP", sys_flag=0x2, sub_version=1))
        assert [m.body for m in decode_records(resp.body)] == [b"m0", b"m1"]
        body = fastjson.dumps({"clientId": "c", "group": "G", "subscriptionData":
                               SubscriptionData.build("TQ", "a = ", "SQL92")}).encode()
        resp = call(broker, ch, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=body))
        assert resp.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    finally:
        broker.shutdown()


def test_sql92_refused_without_property_filter(broker):
    ch = FakeChannel()
    call(broker, ch, send_request("TQ2", b"x"))
    resp = call(broker, ch, pull_request("TQ2", "G", sys_flag=0x4, subscription="a > 1", expression_type="SQL92"))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "The broker does not support consumer to filter message by SQL92"


def test_unknown_code_is_not_supported(broker):
    resp = call(broker, FakeChannel(), RemotingCommand.request(9999))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def test_idle_connections_are_closed(broker):
    from twisted.internet.testing import StringTransport
    factory = broker.server_factory()
    quiet, chatty = factory.buildProtocol(None), factory.buildProtocol(None)
    for p in (quiet, chatty):
        p.makeConnection(StringTransport())
    for _ in range(100):  # the sweep runs every second
        broker.clock.advance(1)
    chatty.dataReceived(b"")
    for _ in range(30):  # quiet has been idle for 130 s, chatty for 30 s
        broker.clock.advance(1)
    assert quiet.transport.disconnecting and not chatty.transport.disconnecting


def test_send_message_v1_header(broker):
    from rmqpy.protocol.headers.broker import SendMessageRequestHeader
    h = SendMessageRequestHeader(producerGroup="PG", topic="TV1", defaultTopic="TBW102", defaultTopicQueueNums=4,
                                 queueId=0, sysFlag=0, bornTimestamp=1, flag=3, properties="KEYS\x01k1\x02",
                                 reconsumeTimes=0, unitMode=False, batch=False)
    ch = FakeChannel()
    resp = call(broker, ch, RemotingCommand.request(RequestCode.SEND_MESSAGE, h, b"v1"))
    assert resp.code == 0
    msg = next(decode_records(call(broker, ch, pull_request("TV1", "G", sys_flag=0x4)).body))
    assert (msg.body, msg.flag, msg.properties["KEYS"]) == (b"v1", 3, "k1")
    assert msg.born_host == ("127.0.0.1", ch.remote_port) and msg.store_host == ("127.0.0.1", 10911)


def test_delay_level_goes_to_schedule_topic(broker):
    ch = FakeChannel()
    call(broker, ch, send_request("TD", b"later", props={"DELAY": "3"}))
    resp = call(broker, ch, pull_request("SCHEDULE_TOPIC_XXXX", "G", queue_id=2, sys_flag=0x4))
    msg = next(decode_records(resp.body))
    assert msg.properties["REAL_TOPIC"] == "TD" and msg.properties["REAL_QID"] == "0"
    unit = broker.message_store.find_consume_queue("SCHEDULE_TOPIC_XXXX", 2).get_unit(0)
    assert unit[2] == msg.store_timestamp + 10_000  # tagsCode = delivery time (level 3 = 10 s)


def test_registration_request(broker):
    sent = []

    class FakeClient:
        def invoke(self, addr, request, timeout):
            from twisted.internet import defer
            sent.append((addr, request))
            return defer.succeed(request.response(ResponseCode.SUCCESS))

        def close(self):
            pass

    broker.namesrv_client = FakeClient()
    broker.broker_config.namesrvAddr = "10.0.0.1:9876;10.0.0.2:9876"
    broker.register_broker_all()
    assert [a for a, _ in sent] == ["10.0.0.1:9876", "10.0.0.2:9876"]
    req = sent[0][1]
    assert req.code == RequestCode.REGISTER_BROKER
    assert req.ext_fields["brokerAddr"] == "127.0.0.1:10911" and req.ext_fields["brokerId"] == "0"
    assert req.ext_fields["haServerAddr"] == "127.0.0.1:10912" and req.ext_fields["compressed"] == "false"
    # as a 5.3.3 broker registers (golden frames): its version, enableActingMaster, and the mapping keys
    assert req.version == MQVersion.V5_3_3 and req.ext_fields["enableActingMaster"] == "false"
    assert "heartbeatTimeoutMillis" not in req.ext_fields
    wrapper = fastjson.loads(req.body)["topicConfigSerializeWrapper"]
    assert "TBW102" in wrapper["topicConfigTable"]
    assert set(wrapper) == {"dataVersion", "mappingDataVersion", "topicConfigTable", "topicQueueMappingDetailMap",
                            "topicQueueMappingInfoMap"}
    assert wrapper["topicQueueMappingDetailMap"] == wrapper["topicQueueMappingInfoMap"] == {}
    # a topic created on demand is registered promptly
    sent.clear()
    call(broker, FakeChannel(), send_request("TNew", b"x"))
    broker.clock.advance(0)
    assert len(sent) == 2 and "TNew" in fastjson.loads(sent[0][1].body)["topicConfigSerializeWrapper"]["topicConfigTable"]
    # and the broker unregisters on shutdown
    sent.clear()
    broker.shutdown()
    assert [r.code for _, r in sent] == [RequestCode.UNREGISTER_BROKER] * 2


def test_search_offset_and_earliest_store_time(broker):
    from rmqpy.protocol.headers.broker import GetEarliestMsgStoretimeRequestHeader, SearchOffsetRequestHeader
    ch = FakeChannel()
    stamps = []
    for i in range(4):
        call(broker, ch, send_request("TSO", f"m{i}".encode()))
        stamps.append(broker.now_ms())
        broker.clock.advance(1)
    resp = call(broker, ch, RemotingCommand.request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                                    SearchOffsetRequestHeader("TSO", 0, stamps[2])))
    assert resp.code == 0 and resp.ext_fields == {"offset": "2"}

    def search(ts: int, boundary: str | None) -> str:
        h = SearchOffsetRequestHeader("TSO", 0, ts, boundary)
        return call(broker, ch, RemotingCommand.request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, h)).ext_fields["offset"]
    # Java 5.3.3: the header's boundaryType (the enum's name from a 5.x client), LOWER without one (4.x)
    after = stamps[3] + 1
    assert [search(after, b) for b in (None, "LOWER", "UPPER", "upper")] == ["4", "4", "3", "3"]
    assert [search(stamps[1] - 1, b) for b in (None, "UPPER")] == ["1", "0"]
    resp = call(broker, ch, RemotingCommand.request(RequestCode.GET_EARLIEST_MSG_STORETIME,
                                                    GetEarliestMsgStoretimeRequestHeader("TSO", 0)))
    assert resp.ext_fields == {"timestamp": str(stamps[0])}


def test_max_msg_bytes_limits_a_pull(broker):
    ch = FakeChannel()
    for _i in range(5):
        call(broker, ch, send_request("TMB", b"x" * 100))
    req = pull_request("TMB", "G", sys_flag=0x4)
    req.ext_fields["maxMsgBytes"] = "300"
    resp = call(broker, ch, req)
    assert resp.code == 0 and len(list(decode_records(resp.body))) == 1


def test_tbw102_from_file_is_not_used_when_auto_create_is_off(tmp_path):
    from rmqpy.protocol.bodies.topic import TopicConfig
    broker, _ = make_broker(tmp_path, autoCreateTopicEnable=False)
    try:
        broker.topic_config_manager.update_topic_config(TopicConfig("TBW102", 8, 8, 7))  # as if from topics.json
        resp = call(broker, FakeChannel(), send_request("Missing"))
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        assert broker.topic_config_manager.select("TBW102").perm == 7
        assert broker.topic_config_manager.select("Missing") is None
    finally:
        broker.shutdown()


def test_prepared_message_is_parked_in_the_half_topic(broker):
    ch = FakeChannel()
    resp = call(broker, ch, send_request("TX", b"half", props={"TRAN_MSG": "true", "PGROUP": "PG"}))
    assert resp.code == 0
    assert broker.topic_config_manager.select("RMQ_SYS_TRANS_HALF_TOPIC").readQueueNums == 1
    resp = call(broker, ch, pull_request("RMQ_SYS_TRANS_HALF_TOPIC", "G", sys_flag=0x4))
    msg = next(decode_records(resp.body))
    assert msg.properties["REAL_TOPIC"] == "TX" and msg.properties["REAL_QID"] == "0" and msg.sys_flag & 0xC == 0
    assert broker.message_store.get_max_offset_in_queue("TX", 0) == 0


def test_send_to_retry_topic_past_max_reconsume_goes_to_the_dlq(broker):
    from rmqpy.protocol.headers.broker import SendMessageRequestHeaderV2
    from rmqpy.protocol.message import properties_to_string
    ch = FakeChannel()
    call(broker, ch, heartbeat("c1", "RG", "T"))  # creates the group and %RETRY%RG
    props = properties_to_string({"UNIQ_KEY": "U1", "DELAY": "3", "WAIT": "true"})

    def retry_send(reconsume, queue_id=0):
        h = SendMessageRequestHeaderV2(a="PG", b="%RETRY%RG", c="TBW102", d=4, e=queue_id, f=0,
                                       g=1_700_000_000_000, h=0, i=props, j=reconsume, k=False, l=2, m=False)
        return call(broker, ch, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, h, b"retry-body"))

    resp = retry_send(2)
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["queueId"] == "0"
    assert broker.message_store.get_max_offset_in_queue("%DLQ%RG", 0) == 1
    assert broker.message_store.get_max_offset_in_queue("%RETRY%RG", 0) == 0
    resp = call(broker, ch, pull_request("%DLQ%RG", "X", sys_flag=0x4))
    (m,) = list(decode_records(resp.body))
    assert m.topic == "%DLQ%RG" and m.body == b"retry-body" and m.reconsume_times == 2
    assert "DELAY" not in m.properties and "WAIT" not in m.properties and m.properties["UNIQ_KEY"] == "U1"
    # under the limit: stored in the retry topic itself (DELAY 3 parks it in the schedule topic)
    assert retry_send(1).code == ResponseCode.SUCCESS
    assert broker.message_store.get_max_offset_in_queue("%DLQ%RG", 0) == 1
    assert broker.message_store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 1


def test_send_refusals_repeat_and_start_accept_timestamp(broker):
    ch = FakeChannel()
    for _ in range(2):  # a name that failed validation fails again; one that passed keeps passing
        resp = call(broker, ch, send_request("bad topic!"))
        assert resp.code == ResponseCode.SYSTEM_ERROR and "illegal characters" in resp.remark
        assert call(broker, ch, send_request("GoodTopic")).code == ResponseCode.SUCCESS
    resp = call(broker, ch, send_request("x" * 128))
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "The specified topic is longer than topic max length."
    start = broker.now_ms() + 5000
    broker.broker_config.startAcceptSendRequestTimeStamp = start
    resp = call(broker, ch, send_request("GoodTopic"))
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == f"broker unable to service, until {start}"


def test_new_owner_reads_the_offset_the_previous_owner_commits_on_hand_over(broker):
    """A group grows: the member that gives a queue up commits its offset (oneway UPDATE_CONSUMER_OFFSET)
    about when the new member asks for it. The query waits until every other member holding the queue (it
    pulled it) has let go (an update sent after reading the new member list), so the new owner starts where
    the old one stopped instead of at its last periodic commit (a duplicate per message between)."""
    a, b = FakeChannel(), FakeChannel()
    call(broker, a, heartbeat("ca", "G", "T"))
    for _ in range(8):
        call(broker, a, send_request("T", b"m", queue_id=0))

    def update(ch, offset):
        call(broker, ch, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                 UpdateConsumerOffsetRequestHeader("G", "T", 0, offset)))

    def member_list(ch):
        return call(broker, ch, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                        GetConsumerListByGroupRequestHeader("G")))

    # a holds queue 0 from its first pull, before any commit (a pull without the commitOffset flag)
    member_list(a)
    assert call(broker, a, pull_request("T", "G", sys_flag=0x2)).code == ResponseCode.SUCCESS
    update(a, 3)  # a's periodic commit (it knows the current member list): it keeps the queue
    broker.clock.advance(2)
    call(broker, b, heartbeat("cb", "G", "T"))  # b joins: a and b are notified
    update(a, 4)  # a periodic commit after the change, before a read the new member list: still a's queue
    assert _query(broker, b, "G", "T") is None  # held
    held = b.sent
    broker.clock.advance(0.05)
    member_list(a)
    assert held == []
    update(a, 6)  # a read the list, drops queue 0 and commits
    assert held[-1].code == ResponseCode.SUCCESS and held[-1].ext_fields["offset"] == "6"
    # b holds it now; a member that does not let go costs the wait once: answered HANDOVER_MAX_MS later
    assert call(broker, b, pull_request("T", "G", offset=6, sys_flag=0x3, commit_offset=6)).code == 0
    broker.clock.advance(0.1)
    c = FakeChannel()
    call(broker, c, heartbeat("cc", "G", "T"))
    broker.clock.advance(3)  # a fresh client's first rebalance may come seconds after it registered
    assert _query(broker, c, "G", "T") is None
    held = c.sent
    broker.clock.advance(1.9)
    assert held == []
    broker.clock.advance(0.2)
    assert held[-1].ext_fields["offset"] == "6"
    # a holder whose connection closes lets go
    call(broker, FakeChannel(), heartbeat("cx", "G", "T"))
    assert _query(broker, c, "G", "T") is None
    held = c.sent
    broker.channel_closed(b)
    assert held[-1].ext_fields["offset"] == "6"
    # long after the change, or for a queue nobody else pulled: at once
    broker.clock.advance(10)
    assert _query(broker, c, "G", "T").ext_fields["offset"] == "6"
    call(broker, FakeChannel(), heartbeat("cd", "G", "T"))
    assert _query(broker, c, "G", "T", qid=1).ext_fields["offset"] == "0"
    assert broker.queue_handover.waiters == []


@pytest.mark.parametrize("stored, answered", [(3, "3"), ("5", "5"), ("x", "0"), ({"a": 1}, "0"), (1 << 40, "0"),
                                              (None, "0"), ("9" * 400, "0")])
def test_a_groups_sys_flag_written_by_a_client_is_read_as_a_java_int_or_0(broker, stored, answered):
    """groupSysFlag is kept among a group config's extra keys, where UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
    may put any JSON value: a 5.x pull answers it as a Java int, or 0, and never fails on it."""
    from rmqpy.broker.validation import group_sys_flag

    ch = FakeChannel()
    call(broker, ch, send_request("TG", b"one"))
    broker.subscription_group_manager.find("G").extra["groupSysFlag"] = stored
    five = pull_request("TG", "G", offset=0, sys_flag=0x4)
    five.version = MQVersion.V5_3_3
    resp = call(broker, ch, five)
    assert (resp.code, resp.ext_fields["groupSysFlag"]) == (ResponseCode.SUCCESS, answered)
    assert str(group_sys_flag({"groupSysFlag": stored})) == answered
