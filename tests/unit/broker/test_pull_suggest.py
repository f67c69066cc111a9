"""Where a pull answer sends the consumer next (suggestWhichBrokerId), as Java 4.9.7's
PullMessageProcessor decides it: the store says the consumer has fallen behind when the bytes
between the commit log's end and the last message it scanned exceed
``accessMessageInMemoryMaxRatio`` percent of physical memory (DefaultMessageStore.getMessage's
``diff > memory``); with ``slaveReadEnable`` the master then names the group's
``whichBrokerWhenConsumeSlowly`` (1), otherwise the group's ``brokerId`` (0). The physical memory
is patched down to a few KB so that a handful of messages cross the line."""
from __future__ import annotations

import pytest

import rmqpy.store.message_store as message_store
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import PullMessageRequestHeader
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request

MEMORY = 10_000  # "physical memory" in bytes: ratio 40 keeps the last 4000 bytes in memory
BODY = 400  # a record of this body is ~500 bytes


@pytest.fixture
def small_memory(monkeypatch):
    monkeypatch.setattr(message_store, "TOTAL_PHYSICAL_MEMORY_SIZE", MEMORY)


def _broker(tmp_path, **overrides):
    b, _clock = make_broker(tmp_path, **overrides)
    return b


def _pull(b, topic: str, offset: int, group: str = "G", max_nums: int = 1) -> RemotingCommand:
    h = PullMessageRequestHeader(consumerGroup=group, topic=topic, queueId=0, queueOffset=offset,
                                 maxMsgNums=max_nums, sysFlag=0x4, commitOffset=0, suspendTimeoutMillis=0,
                                 subscription="*", subVersion=0, expressionType="TAG")
    return call(b, FakeChannel(), RemotingCommand.request(RequestCode.PULL_MESSAGE, h))


def _send(b, topic: str, n: int) -> list[int]:
    """Send n messages; the commit log offset of each."""
    offsets = []
    for i in range(n):
        resp = call(b, FakeChannel(), send_request(topic, bytes([65 + i % 26]) * BODY))
        assert resp.code == ResponseCode.SUCCESS
        offsets.append(b.message_store.get_commit_log_offset_in_queue(topic, 0, i))
    return offsets


def _suggest(resp: RemotingCommand) -> int:
    return int(resp.ext_fields["suggestWhichBrokerId"])


def test_master_suggests_the_slave_once_the_consumer_is_behind_memory(tmp_path, small_memory):
    b = _broker(tmp_path, slaveReadEnable=True)
    try:
        offsets = _send(b, "TSlow", 20)
        end = b.message_store.commit_log.get_max_offset()
        memory = int(MEMORY * 0.40)
        for i in range(len(offsets)):
            resp = _pull(b, "TSlow", i)
            assert resp.code == ResponseCode.SUCCESS
            # as Java's loop, the last unit scanned is the one after the batch (it finds the
            # batch full there), or the queue's last
            scanned = offsets[min(i + 1, len(offsets) - 1)]
            assert _suggest(resp) == (1 if end - scanned > memory else 0), (i, end - scanned)
        assert [_suggest(_pull(b, "TSlow", i)) for i in (0, 19)] == [1, 0]
    finally:
        b.shutdown()


def test_the_batch_counts_from_its_last_message(tmp_path, small_memory):
    """A pull whose batch reaches into memory is not behind, though its first message is
    (maxPhyOffsetPulling is the last unit scanned, not the first)."""
    b = _broker(tmp_path, slaveReadEnable=True)
    try:
        offsets = _send(b, "TBatch", 20)
        end = b.message_store.commit_log.get_max_offset()
        memory = int(MEMORY * 0.40)
        # the first message whose successor is still behind memory
        start = max(i for i in range(19) if end - offsets[i + 1] > memory)
        assert _suggest(_pull(b, "TBatch", start, max_nums=1)) == 1
        resp = _pull(b, "TBatch", start, max_nums=32)  # fewer than 8 (the in-disk count) are on disk
        assert resp.ext_fields["nextBeginOffset"] == "20"
        assert _suggest(resp) == 0
    finally:
        b.shutdown()


def test_without_slave_read_enable_the_master_always_answers_zero(tmp_path, small_memory):
    b = _broker(tmp_path)
    try:
        _send(b, "TNoSlaveRead", 20)
        assert {_suggest(_pull(b, "TNoSlaveRead", i)) for i in range(20)} == {0}
    finally:
        b.shutdown()


def test_the_groups_own_broker_ids_are_named(tmp_path, small_memory):
    """whichBrokerWhenConsumeSlowly and brokerId come from the subscription group's config."""
    b = _broker(tmp_path, slaveReadEnable=True)
    try:
        body = fastjson.dumps({"groupName": "GOwn", "brokerId": 0, "whichBrokerWhenConsumeSlowly": 2}).encode()
        resp = call(b, FakeChannel(), RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                                              None, body))
        assert resp.code == ResponseCode.SUCCESS
        _send(b, "TOwn", 20)
        assert _suggest(_pull(b, "TOwn", 0, group="GOwn")) == 2
        assert _suggest(_pull(b, "TOwn", 19, group="GOwn")) == 0
    finally:
        b.shutdown()


def test_ratio_zero_sends_every_pull_but_the_end_to_the_slave(tmp_path):
    """accessMessageInMemoryMaxRatio=0 (the interop test's setting): memory is 0 bytes, so any
    message before the commit log's end counts as behind, the last one included."""
    b = _broker(tmp_path, slaveReadEnable=True, accessMessageInMemoryMaxRatio=0)
    try:
        _send(b, "TZero", 3)
        assert {_suggest(_pull(b, "TZero", i)) for i in range(3)} == {1}
        resp = _pull(b, "TZero", 3)  # nothing scanned: not behind
        assert resp.code == ResponseCode.PULL_NOT_FOUND and _suggest(resp) == 0
    finally:
        b.shutdown()


def test_a_slave_past_its_end_sends_the_consumer_to_the_group_broker(tmp_path):
    """On a slave (offsetCheckInSlave off) an offset beyond the queue is not corrected:
    PULL_RETRY_IMMEDIATELY with the group's brokerId (0), whatever slaveReadEnable says."""
    for read_enable in (False, True):
        b = _broker(tmp_path / str(read_enable), brokerRole="SLAVE", brokerId=1, slaveReadEnable=read_enable)
        try:
            b.topic_config_manager.create_topic_in_send_message_back_method("TSlave", 4, 6)
            resp = _pull(b, "TSlave", 5)
            assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY
            assert _suggest(resp) == 0 and resp.ext_fields["nextBeginOffset"] == "5"
        finally:
            b.shutdown()


def test_a_master_past_its_end_corrects_the_offset(tmp_path):
    b = _broker(tmp_path, slaveReadEnable=True)
    try:
        b.topic_config_manager.create_topic_in_send_message_back_method("TMaster", 4, 6)
        resp = _pull(b, "TMaster", 5)
        assert resp.code == ResponseCode.PULL_OFFSET_MOVED and resp.ext_fields["nextBeginOffset"] == "0"
    finally:
        b.shutdown()


def test_a_slave_that_is_itself_behind_keeps_the_consumer(tmp_path, small_memory):
    """The same rule on a slave (a store written by a master, reopened with brokerRole=SLAVE):
    with slaveReadEnable a pull behind memory names whichBrokerWhenConsumeSlowly (1), one in memory
    the group's brokerId (0); without it the slave still serves (4.9.7) and names 0."""
    b = _broker(tmp_path)
    try:
        _send(b, "TOnSlave", 20)
    finally:
        b.shutdown()
    for read_enable, expected in ((True, [1, 0]), (False, [0, 0])):
        s = _broker(tmp_path, brokerRole="SLAVE", brokerId=1, slaveReadEnable=read_enable)
        try:
            answers = [_pull(s, "TOnSlave", i) for i in (0, 19)]
            assert [r.code for r in answers] == [ResponseCode.SUCCESS] * 2
            assert [_suggest(r) for r in answers] == expected, read_enable
        finally:
            s.shutdown()
