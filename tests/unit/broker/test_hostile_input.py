"""Issue 11 rows 1 and 2 in the broker: names validated with RocketMQ's rules, queue counts bounded."""
from __future__ import annotations

import json
import os
import time

import pytest

from rmqpy.broker.validation import is_group_auto_creatable, is_topic_or_group_illegal, validate_group, validate_queue_nums, validate_topic
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import CreateTopicRequestHeader, GetConsumeStatsRequestHeader, TopicRequestHeader
from rmqpy.protocol.headers.broker import ConsumerSendMsgBackRequestHeader
from rmqpy.protocol.message import decode_offset_msg_id
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request
from tests.unit.broker.test_processors import heartbeat

TRAVERSAL = "../../../../../../some/dir/x"


def req(code, header=None, body=None):
    return RemotingCommand.request(code, header, body)


def create_topic(broker, topic, read, write=None):
    h = CreateTopicRequestHeader(topic=topic, defaultTopic="TBW102", readQueueNums=read,
                                 writeQueueNums=read if write is None else write, perm=6,
                                 topicFilterType="SINGLE_TAG", topicSysFlag=0, order=False)
    return call(broker, FakeChannel(), req(RequestCode.UPDATE_AND_CREATE_TOPIC, h))


def files_outside(root, store_dir) -> list[str]:
    store_dir = os.path.realpath(store_dir)
    out = []
    for d, _dirs, files in os.walk(root):
        for f in files + _dirs:
            p = os.path.realpath(os.path.join(d, f))
            if os.path.commonpath([store_dir, p]) != store_dir:
                out.append(p)
    return out


# ---------------------------------------------------------------------- rules
@pytest.mark.parametrize("name,illegal", [("Abc_1-2%|x", False), ("a.b", True), ("a/b", True), ("..", True),
                                          ("a b", True), ("é", True), ("a\n", True), ("", False)])
def test_topic_or_group_illegal_is_javas_character_set(name, illegal):
    assert is_topic_or_group_illegal(name) is illegal


def test_validate_topic_remarks_are_javas():
    assert validate_topic("T") is None
    assert validate_topic("  ") == "The specified topic is blank."
    assert validate_topic("x\n") == ("The specified topic contains illegal characters, allowing only "
                                     "^[%|a-zA-Z0-9_-]+$")
    assert validate_topic("t" * 128) == "The specified topic is longer than topic max length."
    assert validate_topic("t" * 127) is None


def test_validate_group_follows_validators_check_group():
    assert validate_group("G") is None
    assert validate_group("") == "the specified group is blank"
    assert validate_group("g" * 256) == "the specified group is longer than group max length 255."
    assert validate_group(TRAVERSAL) == (f"the specified group[{TRAVERSAL}] contains illegal characters, "
                                         "allowing only ^[%|a-zA-Z0-9_-]+$")
    assert is_group_auto_creatable("g" * 255) and not is_group_auto_creatable("g" * 256)


def test_queue_nums_bounds():
    assert validate_queue_nums(0, 1024, 1024) is None
    assert "readQueueNums 2000000000 is out of range [0, 1024]" in validate_queue_nums(2_000_000_000, 1, 1024)
    assert "writeQueueNums -1" in validate_queue_nums(1, -1, 1024)


# ---------------------------------------------------------------------- row 1
def test_huge_queue_counts_are_refused_and_stats_stay_fast(broker):
    resp = create_topic(broker, "Huge", 2_000_000_000)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == ("readQueueNums 2000000000 is out of range [0, 1024] (broker setting maxTopicQueueNums)")
    assert broker.topic_config_manager.select("Huge") is None
    assert create_topic(broker, "Max", 1024).code == ResponseCode.SUCCESS
    t0 = time.monotonic()
    resp = call(broker, FakeChannel(), req(RequestCode.GET_TOPIC_STATS_INFO, TopicRequestHeader(topic="Max")))
    assert resp.code == ResponseCode.SUCCESS
    assert len(fastjson.loads(resp.body)["offsetTable"]) == 1024
    assert time.monotonic() - t0 < 5


def test_limit_is_a_broker_setting(tmp_path):
    b, _ = make_broker(tmp_path, maxTopicQueueNums=4)
    try:
        assert create_topic(b, "Five", 5).code == ResponseCode.SYSTEM_ERROR
        assert create_topic(b, "Four", 4).code == ResponseCode.SUCCESS
    finally:
        b.shutdown()


def test_absurd_counts_in_topics_json_are_clamped_and_loops_bounded(tmp_path):
    b, _ = make_broker(tmp_path)
    b.shutdown()
    path = os.path.join(b.config_dir, "topics.json")
    with open(path) as fh:
        data = json.load(fh)
    data["topicConfigTable"]["Disk"] = {"topicName": "Disk", "readQueueNums": 2_000_000_000,
                                        "writeQueueNums": 2_000_000_000, "perm": 6, "order": False,
                                        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0}
    with open(path, "w") as fh:
        json.dump(data, fh)
    b, _ = make_broker(tmp_path)
    try:
        tc = b.topic_config_manager.select("Disk")
        assert (tc.readQueueNums, tc.writeQueueNums) == (1024, 1024)
        # even a config changed in memory behind the manager's back is visited only up to the bound
        tc.readQueueNums = tc.writeQueueNums = 2_000_000_000
        t0 = time.monotonic()
        resp = call(b, FakeChannel(), req(RequestCode.GET_TOPIC_STATS_INFO, TopicRequestHeader(topic="Disk")))
        assert resp.code == ResponseCode.SUCCESS and len(fastjson.loads(resp.body)["offsetTable"]) == 1024
        resp = call(b, FakeChannel(), req(RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader("G", "Disk")))
        assert resp.code == ResponseCode.SUCCESS
        assert time.monotonic() - t0 < 10
    finally:
        b.shutdown()


def test_subscription_group_name_and_retry_queue_nums_checked(broker):
    def create(body):
        return call(broker, FakeChannel(), req(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                               body=fastjson.dumps(body).encode()))

    # a config without a name ({}): refused as a blank one (Java 5.3.3 fails with a NullPointerException;
    # rmqpy answered SUCCESS and stored nothing; found by tests/interop/remoting_diff.py)
    resp = create({})
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "the specified group is blank"
    assert call(broker, FakeChannel(), req(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)).code == ResponseCode.SUCCESS
    resp = create({"groupName": TRAVERSAL})
    assert resp.code == ResponseCode.SYSTEM_ERROR and "contains illegal characters" in resp.remark
    resp = create({"groupName": "G1", "retryQueueNums": 2_000_000_000})
    assert resp.code == ResponseCode.SYSTEM_ERROR and "retryQueueNums 2000000000" in resp.remark
    assert TRAVERSAL not in broker.subscription_group_manager.table
    assert "G1" not in broker.subscription_group_manager.table
    assert create({"groupName": "G1", "retryQueueNums": 3}).code == ResponseCode.SUCCESS
    # rmqpy: a retry policy that 5.3.3 would store and fail on later is refused with the reason
    resp = create({"groupName": "G2", "groupRetryPolicy": {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": []}}})
    assert resp.code == ResponseCode.SYSTEM_ERROR and "next must be a list" in resp.remark
    assert "G2" not in broker.subscription_group_manager.table
    policy = {"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000, "max": 8000, "multiplier": 2}}
    assert create({"groupName": "G2", "groupRetryPolicy": policy}).code == ResponseCode.SUCCESS
    assert broker.subscription_group_manager.table["G2"].extra["groupRetryPolicy"] == policy


# ---------------------------------------------------------------------- row 2
def send_back(broker, phy, group, delay=-1):
    h = ConsumerSendMsgBackRequestHeader(offset=phy, group=group, delayLevel=delay, originMsgId=None,
                                         originTopic="T", unitMode=False, maxReconsumeTimes=None)
    return call(broker, FakeChannel(), req(RequestCode.CONSUMER_SEND_MSG_BACK, h))


def test_send_back_with_traversal_group_is_code_26_and_writes_nothing_outside(broker, tmp_path):
    resp = call(broker, FakeChannel(), send_request("T", b"m"))
    _, phy = decode_offset_msg_id(resp.ext_fields["msgId"])
    end = broker.message_store.commit_log.get_max_offset()
    for delay in (-1, 0):
        resp = send_back(broker, phy, TRAVERSAL, delay)
        assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert resp.remark.startswith(f"subscription group not exist, {TRAVERSAL} ")
    assert broker.message_store.commit_log.get_max_offset() == end
    assert files_outside(tmp_path, tmp_path / "store") == []
    assert not any(t.startswith(("%DLQ%..", "%RETRY%..")) for t in broker.topic_config_manager.table)


def test_send_back_refuses_a_bad_group_even_if_configured(broker, tmp_path):
    """A subscriptionGroup.json from before the checks may name one: still code 26."""
    from rmqpy.protocol.bodies.broker import SubscriptionGroupConfig
    broker.subscription_group_manager.table[TRAVERSAL] = SubscriptionGroupConfig(TRAVERSAL)
    resp = call(broker, FakeChannel(), send_request("T", b"m"))
    _, phy = decode_offset_msg_id(resp.ext_fields["msgId"])
    assert send_back(broker, phy, TRAVERSAL).code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert files_outside(tmp_path, tmp_path / "store") == []


@pytest.mark.parametrize("configured", [False, True])
def test_heartbeat_with_bad_group_creates_no_group_or_retry_topic(broker, configured):
    from rmqpy.protocol.bodies.broker import SubscriptionGroupConfig
    if configured:  # kept in a subscriptionGroup.json from before the checks
        broker.subscription_group_manager.table[TRAVERSAL] = SubscriptionGroupConfig(TRAVERSAL)
    resp = call(broker, FakeChannel(), heartbeat("c1", TRAVERSAL, "T"))
    assert resp.code == ResponseCode.SUCCESS
    assert (TRAVERSAL in broker.subscription_group_manager.table) is configured
    assert "%RETRY%" + TRAVERSAL not in broker.topic_config_manager.table


@pytest.mark.parametrize("topic", ["x\n", "../x", "a/b"])
def test_send_to_bad_topic_refused_with_javas_remark(broker, topic):
    resp = call(broker, FakeChannel(), send_request(topic, b"m"))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"


# ---------------------------------------------------------------------- offsets, pull
def test_offset_commit_with_impossible_names_refused(broker):
    from rmqpy.protocol.headers.broker import UpdateConsumerOffsetRequestHeader

    def commit(group, topic):
        h = UpdateConsumerOffsetRequestHeader(consumerGroup=group, topic=topic, queueId=0, commitOffset=5)
        return call(broker, FakeChannel(), req(RequestCode.UPDATE_CONSUMER_OFFSET, h))

    resp = commit(TRAVERSAL, "T")
    assert (resp.code, resp.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {TRAVERSAL} not exist!")
    resp = commit("G", "a@b")
    assert (resp.code, resp.remark) == (ResponseCode.TOPIC_NOT_EXIST, "Topic a@b not exist!")
    assert broker.consumer_offset_manager.query_offset("G", "a@b", 0) == -1
    assert commit("G", "T").code == ResponseCode.SUCCESS
    assert broker.consumer_offset_manager.query_offset("G", "T", 0) == 5


def test_pull_with_bad_group_is_group_not_exist(broker):
    from tests.unit.broker.helpers import pull_request
    assert call(broker, FakeChannel(), send_request("T", b"m")).code == ResponseCode.SUCCESS
    resp = call(broker, FakeChannel(), pull_request("T", TRAVERSAL, suspend_ms=0))
    assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert TRAVERSAL not in broker.subscription_group_manager.table


def test_the_limit_setting_itself_has_a_ceiling(tmp_path):
    """UPDATE_BROKER_CONFIG may raise maxTopicQueueNums; the loops still stop at 8192."""
    from rmqpy.broker.validation import queue_nums_limit
    assert queue_nums_limit(2_000_000_000) == 8192
    assert queue_nums_limit(0) == 1 and queue_nums_limit("x") == 1024 and queue_nums_limit("8") == 8
    b, _ = make_broker(tmp_path, maxTopicQueueNums=2_000_000_000)
    try:
        resp = create_topic(b, "Huge", 2_000_000_000)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "[0, 8192]" in resp.remark
    finally:
        b.shutdown()
