"""INVOKE_BROKER_TO_RESET_OFFSET (mqadmin resetOffsetByTime) answered as Java's Broker2Client.resetOffset."""
from __future__ import annotations

import pytest

from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import ResetOffsetRequestHeader
from rmqpy.protocol.headers.broker import UpdateConsumerOffsetRequestHeader
from tests.unit.broker.helpers import FakeChannel, call, send_request


def reset(broker, ch, topic, version=MQVersion.V4_9_8):
    r = RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                ResetOffsetRequestHeader(topic=topic, group="G", timestamp=0, isForce=True))
    r.version = version
    return call(broker, ch, r)


@pytest.mark.parametrize("version", [MQVersion.V4_9_8, MQVersion.V5_3_3])
def test_offline_group_answers_consumer_not_online(broker, version):
    """206, so that mqadmin falls back to the offline reset (ResetOffsetByTimeOldCommand); code 1 made it give up."""
    ch = FakeChannel()
    call(broker, ch, send_request("T", b"a", queue_id=0))
    for q in range(3):
        call(broker, ch, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                 UpdateConsumerOffsetRequestHeader("G", "T", q, 1)))
    # an offset missing for a queue (3): Java's SYSTEM_ERROR comes before the online check
    resp = reset(broker, ch, "T", version)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "THe consumer group <G> not exist")
    call(broker, ch, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                             UpdateConsumerOffsetRequestHeader("G", "T", 3, 0)))
    resp = reset(broker, ch, "T", version)
    assert resp.code == ResponseCode.CONSUMER_NOT_ONLINE == 206
    assert resp.remark == "Consumer not online, so can not reset offset, Group: G Topic: T Timestamp: 0"
    assert broker.consumer_offset_manager.query_offsets("G", "T") == {0: 1, 1: 1, 2: 1, 3: 0}  # untouched


def test_missing_topic_per_generation(broker):
    ch = FakeChannel()
    remark = "[reset-offset] reset offset failed, no topic in this broker. topic=Nope"
    assert (reset(broker, ch, "Nope", MQVersion.V4_9_8).code, reset(broker, ch, "Nope").remark) == \
        (ResponseCode.SYSTEM_ERROR, remark)
    resp = reset(broker, ch, "Nope", MQVersion.V5_3_3)
    assert (resp.code, resp.remark) == (ResponseCode.TOPIC_NOT_EXIST, remark)
