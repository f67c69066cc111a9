"""CONSUMER_SEND_MSG_BACK and the delay-level delivery (ScheduleMessageService) on a task.Clock."""
from __future__ import annotations

import pytest

from rmqpy.broker.controller import BrokerController
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import ConsumerSendMsgBackRequestHeader
from rmqpy.protocol.message import decode_offset_msg_id
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request

LEVELS = "1s 2s 3s 4s 5s 6s"


@pytest.fixture
def broker_overrides():
    return {"messageDelayLevel": LEVELS}


def messages(broker, topic, queue_id=0):
    store = broker.message_store
    out = []
    for off in range(store.get_max_offset_in_queue(topic, queue_id)):
        phy = store.get_commit_log_offset_in_queue(topic, queue_id, off)
        out.append(store.look_message_by_offset(phy))
    return out


def send_back(broker, ch, phy, group="G", delay=0, max_times=None, version=399):
    h = ConsumerSendMsgBackRequestHeader(offset=phy, group=group, delayLevel=delay, originMsgId=None,
                                         originTopic="T", unitMode=False, maxReconsumeTimes=max_times)
    req = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, h)
    req.version = version
    return call(broker, ch, req)


def test_delay_level_message_arrives_after_its_delay_not_before(broker):
    ch = FakeChannel()
    resp = call(broker, ch, send_request("T", b"later", queue_id=2, props={"DELAY": "3", "KEYS": "k1"}))
    assert resp.code == ResponseCode.SUCCESS
    assert messages(broker, "T", 2) == []
    parked = messages(broker, "SCHEDULE_TOPIC_XXXX", 2)
    assert len(parked) == 1 and parked[0].properties["REAL_TOPIC"] == "T"
    broker.clock.advance(2.9)
    assert messages(broker, "T", 2) == []
    broker.clock.advance(0.3)
    got = messages(broker, "T", 2)
    assert len(got) == 1 and got[0].body == b"later" and got[0].properties["KEYS"] == "k1"
    assert got[0].properties["REAL_QID"] == "2"
    # DELAY stays in what is stored, as 4.9.7's and 5.3.3's messageTimeup store the schedule record's
    # properties string (only the map the store acts on drops it: it is not parked again)
    assert got[0].properties["DELAY"] == "3" and got[0].properties["REAL_TOPIC"] == "T"
    assert broker.delay_offset_manager.table[3] == 1
    broker.clock.advance(5)
    assert len(messages(broker, "T", 2)) == 1  # delivered once


def test_max_level_is_clamped_and_offsets_survive_restart(tmp_path):
    b, clock = make_broker(tmp_path, messageDelayLevel=LEVELS)
    ch = FakeChannel()
    call(b, ch, send_request("T", b"x", queue_id=0, props={"DELAY": "99"}))
    call(b, ch, send_request("T", b"y", queue_id=0, props={"DELAY": "1"}))
    clock.advance(1.5)
    assert [m.body for m in messages(b, "T")] == [b"y"]
    b.shutdown()
    # restart: level 6 (6 s) still pending, level 1 already delivered
    b2, clock2 = make_broker(tmp_path, messageDelayLevel=LEVELS)
    clock2.advance(1_700_000_000 + 10 - clock2.seconds())  # the store's clock moved on
    clock2.advance(1.5)
    assert sorted(m.body for m in messages(b2, "T")) == [b"x", b"y"]
    b2.shutdown()


def test_send_back_goes_to_retry_with_delay_then_dlq(broker):
    ch = FakeChannel()
    resp = call(broker, ch, send_request("T", b"fail", queue_id=0, tags="TG"))
    offset_msg_id = resp.ext_fields["msgId"]
    _, phy = decode_offset_msg_id(offset_msg_id)
    resp = send_back(broker, ch, phy, max_times=2)
    assert resp.code == ResponseCode.SUCCESS and resp.remark is None
    tc = broker.topic_config_manager.select("%RETRY%G")
    assert tc is not None and tc.readQueueNums == 1 and tc.perm == 6
    # level 3 + reconsumeTimes(0) = 3 s
    parked = messages(broker, "SCHEDULE_TOPIC_XXXX", 2)
    assert len(parked) == 1
    broker.clock.advance(2.5)
    assert messages(broker, "%RETRY%G") == []
    broker.clock.advance(1.0)
    (retry,) = messages(broker, "%RETRY%G")
    assert retry.body == b"fail" and retry.reconsume_times == 1
    assert retry.properties["RETRY_TOPIC"] == "T"
    assert retry.properties["ORIGIN_MESSAGE_ID"] == offset_msg_id
    assert retry.properties["TAGS"] == "TG"
    # second failure: level 4
    resp = send_back(broker, ch, retry.commit_log_offset, max_times=2)
    assert resp.code == ResponseCode.SUCCESS
    broker.clock.advance(4.5)
    retries = messages(broker, "%RETRY%G")
    assert len(retries) == 2 and retries[1].reconsume_times == 2
    assert retries[1].properties["ORIGIN_MESSAGE_ID"] == offset_msg_id
    # third failure: reconsumeTimes 2 >= max 2 => DLQ, at once
    resp = send_back(broker, ch, retries[1].commit_log_offset, max_times=2)
    assert resp.code == ResponseCode.SUCCESS
    (dlq,) = messages(broker, "%DLQ%G")
    assert dlq.reconsume_times == 3 and dlq.body == b"fail" and dlq.properties["RETRY_TOPIC"] == "T"
    assert broker.topic_config_manager.select("%DLQ%G").readQueueNums == 1


def test_send_back_negative_delay_goes_to_dlq_and_errors(broker):
    ch = FakeChannel()
    resp = call(broker, ch, send_request("T", b"m"))
    _, phy = decode_offset_msg_id(resp.ext_fields["msgId"])
    assert send_back(broker, ch, phy, delay=-1).code == ResponseCode.SUCCESS
    assert len(messages(broker, "%DLQ%G")) == 1
    resp = send_back(broker, ch, 10**9)
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == f"look message by offset failed, {10**9}"
    broker.subscription_group_manager.broker_config.autoCreateSubscriptionGroup = False
    resp = send_back(broker, ch, phy, group="Unknown")
    assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert resp.remark.startswith("subscription group not exist, Unknown ")


def test_old_client_version_uses_group_retry_max(broker):
    ch = FakeChannel()
    resp = call(broker, ch, send_request("T", b"m"))
    _, phy = decode_offset_msg_id(resp.ext_fields["msgId"])
    # version < V3_4_9: the header's maxReconsumeTimes (0) is ignored, group default 16 applies
    assert send_back(broker, ch, phy, max_times=0, version=100).code == ResponseCode.SUCCESS
    assert messages(broker, "%DLQ%G") == []
    assert send_back(broker, ch, phy, max_times=0).code == ResponseCode.SUCCESS
    assert len(messages(broker, "%DLQ%G")) == 1


def test_controller_has_schedule_service(broker):
    assert isinstance(broker, BrokerController)
    assert broker.schedule_message_service is not None and broker.schedule_message_service.started
