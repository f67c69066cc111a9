"""The gRPC rules of proxy 5.4.0 that 5.3.3 did not have (docs/compatibility.md, "The newest
generation"): the group bound of 120, message priority (send, broker queue, receive, route, the
topic-type check) and the receipt handle a TOO_MANY_REQUESTS ChangeInvisibleDuration gives back."""
from __future__ import annotations

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from rmqpy.protocol.bodies.topic import TopicConfig
from rmqpy.protocol.priority import java_int, message_type
from rmqpy.proxy.grpc import validate
from rmqpy.proxy.grpc.activities import Refused
from rmqpy.proxy.grpc.activity import invisible
from rmqpy.proxy.grpc.convert import status
from tests.unit.proxy.test_grpc_activities import _result


@pytest.fixture
def env(activities_on):
    _, _, acts = activities_on("GrpcT")
    for name, kind in (("GrpcPrio", "PRIORITY"), ("GrpcNormal", "NORMAL")):
        tc = TopicConfig(name)
        tc.readQueueNums = tc.writeQueueNums = 4
        tc.attributes = {"message.type": kind}
        acts.broker.topic_config_manager.update_topic_config(tc)
    return acts, acts.channel_of("client-1", "127.0.0.1:5000")


def _message(topic: str, msg_id: str = "MSGID1", **sp: object) -> pb.Message:
    m = pb.Message(topic=pb.Resource(name=topic), body=b"x")
    m.system_properties.message_id = msg_id
    for k, v in sp.items():
        setattr(m.system_properties, k, v)
    return m


def _receive(acts, ch, topic: str) -> list[pb.Message]:
    req = spb.ReceiveMessageRequest(group=pb.Resource(name="g1"), batch_size=8,
                                    message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=0))
    req.invisible_duration.seconds = 30
    req.long_polling_timeout.seconds = 0
    got = _result(acts.receive_message(req, ch, 10_000))
    return [r.message for r in got if r.WhichOneof("content") == "message"]


def test_a_group_longer_than_120_is_refused_with_5_4_0s_text() -> None:
    assert validate.check_group("g" * 120) == "g" * 120
    with pytest.raises(Refused) as err:
        validate.check_group("g" * 121)
    assert err.value.code == pb.Code.ILLEGAL_CONSUMER_GROUP
    assert err.value.message == f"the specified group[{'g' * 121}] is longer than group max length: 120."


def test_a_priority_message_goes_to_its_queue_and_comes_back_with_its_priority(env) -> None:
    acts, ch = env
    for i, p in enumerate((1, 7)):  # 7 is past the last queue: capped to 3
        sent = _result(acts.send_message(spb.SendMessageRequest(messages=[_message("GrpcPrio", f"M{i}", priority=p)]),
                                         ch))
        assert sent.status.code == pb.Code.OK, sent
    got = {m.system_properties.message_id: m for m in _receive(acts, ch, "GrpcPrio")}
    assert {k: (m.system_properties.queue_id, m.system_properties.priority) for k, m in got.items()} == \
        {"M0": (1, 1), "M1": (3, 7)}
    assert all("_SYS_MSG_PRIORITY_" not in m.user_properties for m in got.values())


def test_the_route_of_a_priority_topic_accepts_priority_messages(env) -> None:
    acts, _ = env
    resp = acts.query_route(spb.QueryRouteRequest(topic=pb.Resource(name="GrpcPrio")))
    assert {tuple(q.accept_message_types) for q in resp.message_queues} == {(pb.MessageType.PRIORITY,)}


def test_a_priority_makes_the_message_priority_for_the_topic_type_check(env) -> None:
    acts, ch = env
    with pytest.raises(Refused) as err:
        acts.send_message(spb.SendMessageRequest(messages=[_message("GrpcNormal", priority=0)]), ch)
    assert err.value.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert "the expected type is NORMAL, but actual type is PRIORITY" in err.value.message


def test_a_fifo_message_with_a_priority_loses_it_on_a_mixed_topic(env) -> None:
    """GrpcT has no message.type (MIXED to rmqpy): a FIFO message is FIFO, the broker drops the priority."""
    acts, ch = env
    sent = _result(acts.send_message(spb.SendMessageRequest(messages=[_message("GrpcT", priority=3, message_group="g")]),
                                     ch))
    assert sent.status.code == pb.Code.OK, sent
    [m] = _receive(acts, ch, "GrpcT")
    assert not m.system_properties.HasField("priority") and m.system_properties.message_group == "g"


def test_a_negative_priority_and_the_priority_property_are_refused(env) -> None:
    acts, ch = env
    with pytest.raises(Refused) as err:
        acts.send_message(spb.SendMessageRequest(messages=[_message("GrpcPrio", priority=-1)]), ch)
    assert (err.value.code, err.value.message) == (pb.Code.BAD_REQUEST, "The priority must be greater than or equal to 0")
    m = _message("GrpcPrio", priority=1)
    m.user_properties["_SYS_MSG_PRIORITY_"] = "2"
    with pytest.raises(Refused) as err:
        acts.send_message(spb.SendMessageRequest(messages=[m]), ch)
    assert err.value.message == "property is used by system: _SYS_MSG_PRIORITY_"


def test_message_type_and_java_int_are_javas() -> None:
    assert message_type({"_SYS_MSG_PRIORITY_": "1"}) == "PRIORITY"
    assert message_type({"_SYS_MSG_PRIORITY_": "1", "__SHARDINGKEY": "g"}) == "FIFO"
    assert message_type({"_SYS_MSG_PRIORITY_": "1", "TRAN_MSG": "TRUE"}) == "TRANSACTION"
    assert message_type({"_SYS_MSG_PRIORITY_": "1", "TIMER_DELAY_MS": "5"}) == "DELAY"
    assert message_type({}) == "NORMAL"
    assert [java_int(t, -1) for t in ("7", "+7", "-7", "007", "", "x", "2147483648", "-2147483648", "٣")] == \
        [7, 7, -7, 7, -1, -1, -1, -2147483648, -1]


def test_too_many_requests_gives_the_receipt_handle_back() -> None:
    req = spb.ChangeInvisibleDurationRequest(receipt_handle="rh")
    assert invisible.response(status(pb.Code.TOO_MANY_REQUESTS), req).receipt_handle == "rh"
    assert invisible.response(status(pb.Code.INTERNAL_SERVER_ERROR), req).receipt_handle == ""


def test_a_priority_topic_is_popped_highest_priority_first(env) -> None:
    """5.4.0's priority mode (the group's priority.factor 100 by default): the queues from the last
    down, whatever the random start, so one message at a time comes in priority order."""
    acts, ch = env
    for p in (0, 2, 1, 3):
        sent = _result(acts.send_message(spb.SendMessageRequest(messages=[_message("GrpcPrio", f"P{p}", priority=p)]),
                                         ch))
        assert sent.status.code == pb.Code.OK, sent
    order = []
    for _ in range(4):
        req = spb.ReceiveMessageRequest(group=pb.Resource(name="g1"), batch_size=1,
                                        message_queue=pb.MessageQueue(topic=pb.Resource(name="GrpcPrio"), id=0))
        req.invisible_duration.seconds = 30
        req.long_polling_timeout.seconds = 0
        got = _result(acts.receive_message(req, ch, 10_000))
        order += [r.message.system_properties.priority for r in got if r.WhichOneof("content") == "message"]
    assert order == [3, 2, 1, 0]
