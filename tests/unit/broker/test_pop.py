"""POP consumption on a task.Clock: pop, ack, change invisible time, revive, long polling, bad receipts."""
from __future__ import annotations

import pytest

from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rmqpy.protocol.message import decode_records
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request


@pytest.fixture
def broker_overrides():
    return {"popFromRetryProbability": 0}


def pop(broker, ch, topic="T", group="G", invisible=5000, poll=0, nums=32, queue_id=-1):
    h = PopMessageRequestHeader(consumerGroup=group, topic=topic, queueId=queue_id, maxMsgNums=nums,
                                invisibleTime=invisible, pollTime=poll, bornTime=broker.now_ms(), initMode=0,
                                exp="*", expType="TAG")
    return call(broker, ch, RemotingCommand.request(RequestCode.POP_MESSAGE, h))


def msgs(resp):
    return list(decode_records(resp.body)) if resp.body else []


def receipt(resp, m):
    if "POP_CK" in m.properties:
        return m.properties["POP_CK"]
    h = resp.decode_header(PopMessageResponseHeader)
    starts = dict((f"{p.split()[0]}@{p.split()[1]}", p.split()[2]) for p in h.startOffsetInfo.split(";"))
    return " ".join(str(v) for v in (starts[f"0@{m.queue_id}"], h.popTime, h.invisibleTime, h.reviveQid, 0,
                                      "broker-a", m.queue_id, m.queue_offset))


def ack(broker, ch, topic, m, extra, group="G"):
    h = AckMessageRequestHeader(consumerGroup=group, topic=topic, queueId=int(extra.split()[6]), extraInfo=extra,
                                offset=int(extra.split()[7]))
    return call(broker, ch, RemotingCommand.request(RequestCode.ACK_MESSAGE, h))


def send(broker, ch, n, topic="T"):
    for i in range(n):
        assert call(broker, ch, send_request(topic, f"m{i}".encode(), queue_id=i % 4)).code == ResponseCode.SUCCESS


def test_pop_ack_and_revive_of_the_unacked(broker):
    ch = FakeChannel()
    send(broker, ch, 3)
    first = pop(broker, ch)
    assert first.code == ResponseCode.SUCCESS
    got = msgs(first)
    assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2"]
    assert pop(broker, ch).code == ResponseCode.POLLING_TIMEOUT  # invisible now
    unacked = [m for m in got if m.body == b"m1"][0]
    for m in got:
        if m is not unacked:
            assert ack(broker, ch, "T", m, receipt(first, m)).code == ResponseCode.SUCCESS
    broker.clock.advance(4)
    assert pop(broker, ch).code == ResponseCode.POLLING_TIMEOUT  # still invisible
    for _ in range(5):
        broker.clock.advance(1)
    again = pop(broker, ch)
    assert again.code == ResponseCode.SUCCESS
    back = msgs(again)
    assert [m.body for m in back] == [b"m1"]
    assert back[0].topic == "T" and back[0].reconsume_times == 1 and "POP_CK" in back[0].properties
    retry = back[0].properties["POP_CK"]
    assert retry.split()[4] == "1"
    assert ack(broker, ch, "%RETRY%G_T", back[0], retry).code == ResponseCode.SUCCESS
    for _ in range(10):
        broker.clock.advance(1)
    assert pop(broker, ch).code == ResponseCode.POLLING_TIMEOUT  # acked: not back


def test_change_invisible_time_extends_it(broker):
    ch = FakeChannel()
    send(broker, ch, 1)
    first = pop(broker, ch, invisible=2000)
    m = msgs(first)[0]
    extra = receipt(first, m)
    broker.clock.advance(0.5)  # a checkpoint is named by its pop time: the new one is not the old one
    h = ChangeInvisibleTimeRequestHeader(consumerGroup="G", topic="T", queueId=m.queue_id, extraInfo=extra,
                                         offset=m.queue_offset, invisibleTime=20000)
    resp = call(broker, ch, RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, h))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    for _ in range(10):
        broker.clock.advance(1)
    assert pop(broker, ch).code == ResponseCode.POLLING_TIMEOUT
    for _ in range(15):
        broker.clock.advance(1)
    assert [x.body for x in msgs(pop(broker, ch))] == [b"m0"]


def test_long_polling_pop_answers_when_a_message_arrives(broker):
    ch = FakeChannel()
    send(broker, ch, 1, topic="T")
    assert msgs(pop(broker, ch))  # the topic exists, the queue is read to its end
    out: list = []
    ch.sent = out
    h = PopMessageRequestHeader(consumerGroup="G", topic="T", queueId=-1, maxMsgNums=32, invisibleTime=5000,
                                pollTime=10000, bornTime=broker.now_ms(), initMode=0)
    broker.dispatcher.dispatch(ch, RemotingCommand.request(RequestCode.POP_MESSAGE, h))
    assert out == []
    other = FakeChannel()
    send(broker, other, 1)
    assert len(out) == 1 and out[0].code == ResponseCode.SUCCESS and msgs(out[0])[0].body == b"m0"
    assert msgs(out[0])[0].queue_id == 0 and msgs(out[0])[0].queue_offset == 1


def test_long_polling_pop_times_out(broker):
    ch = FakeChannel()
    send(broker, ch, 1, topic="T")
    assert msgs(pop(broker, ch))
    out: list = []
    ch.sent = out
    h = PopMessageRequestHeader(consumerGroup="G", topic="T", queueId=-1, maxMsgNums=32, invisibleTime=5000,
                                pollTime=3000, bornTime=broker.now_ms(), initMode=0)
    broker.dispatcher.dispatch(ch, RemotingCommand.request(RequestCode.POP_MESSAGE, h))
    broker.clock.advance(3.1)
    assert len(out) == 1 and out[0].code == ResponseCode.POLLING_TIMEOUT


@pytest.mark.parametrize("extra", ["", "x", "1 2 3", "0 1 2 3 0 b 0 0 9 9", "0 1 2 3 0 b 0 0 x", "0 1 2 77 0 b 0 0", "0 1 2 3 9 b 0 0",
                                   "-1 1 2 3 0 b 0 0", "0 1 2 3 0 b -5 0", "0 1 2 3 0 b 0 99999999999999999999999",
                                   ])
def test_forged_receipts_get_an_error_not_a_traceback(broker, extra):
    ch = FakeChannel()
    send(broker, ch, 1)
    h = AckMessageRequestHeader(consumerGroup="G", topic="T", queueId=0, extraInfo=extra, offset=0)
    resp = call(broker, ch, RemotingCommand.request(RequestCode.ACK_MESSAGE, h))
    assert resp.code != ResponseCode.SUCCESS
    assert "Traceback" not in (resp.remark or "")


@pytest.mark.parametrize("field,value", [("maxMsgNums", 33), ("maxMsgNums", 0), ("invisibleTime", 0),
                                         ("invisibleTime", 10 ** 12), ("pollTime", -1), ("queueId", 99)])
def test_pop_bounds(broker, field, value):
    ch = FakeChannel()
    send(broker, ch, 1)
    h = PopMessageRequestHeader(consumerGroup="G", topic="T", queueId=-1, maxMsgNums=32, invisibleTime=5000,
                                pollTime=0, bornTime=broker.now_ms(), initMode=0)
    setattr(h, field, value)
    resp = call(broker, ch, RemotingCommand.request(RequestCode.POP_MESSAGE, h))
    assert resp.code == ResponseCode.INVALID_PARAMETER


def test_unacked_messages_come_back_after_a_crash(tmp_path):
    b, clock = make_broker(tmp_path, popFromRetryProbability=0)
    ch = FakeChannel()
    send(b, ch, 2)
    assert len(msgs(pop(b, ch))) == 2
    b.persist_offsets()  # the 5 s flush ran; the broker then dies without shutdown
    b.pop_revive_service.stop()
    b2, clock2 = make_broker(tmp_path, popFromRetryProbability=0)
    try:
        assert pop(b2, ch).code == ResponseCode.POLLING_TIMEOUT
        clock2.advance(10)  # past the invisible time of the checkpoints read back from the store
        for _ in range(3):
            clock2.advance(1)
        assert sorted(m.body for m in msgs(pop(b2, ch))) == [b"m0", b"m1"]
    finally:
        b2.shutdown()


def _notification(broker, ch, poll=0, group="G", topic="T"):
    from rmqpy.protocol.headers.pop import NotificationRequestHeader
    h = NotificationRequestHeader(consumerGroup=group, topic=topic, queueId=-1, pollTime=poll,
                                  bornTime=broker.now_ms())
    return RemotingCommand.request(RequestCode.NOTIFICATION, h)


def test_notification_and_polling_info(broker):
    from rmqpy.protocol.headers.pop import NotificationResponseHeader, PollingInfoRequestHeader, PollingInfoResponseHeader
    ch = FakeChannel()
    send(broker, ch, 1)
    resp = call(broker, ch, _notification(broker, ch))
    assert resp.code == ResponseCode.SUCCESS and resp.decode_header(NotificationResponseHeader).hasMsg
    assert msgs(pop(broker, ch))
    resp = call(broker, ch, _notification(broker, ch))
    assert not resp.decode_header(NotificationResponseHeader).hasMsg
    # a held pop and a held notification; one message wakes both, the pop takes it
    pop_ch, note_ch = FakeChannel(), FakeChannel()
    pop_out: list = []
    note_out: list = []
    pop_ch.sent, note_ch.sent = pop_out, note_out
    h = PopMessageRequestHeader(consumerGroup="G", topic="T", queueId=-1, maxMsgNums=32, invisibleTime=5000,
                                pollTime=10000, bornTime=broker.now_ms(), initMode=0)
    broker.dispatcher.dispatch(note_ch, _notification(broker, note_ch, poll=10000))
    broker.dispatcher.dispatch(pop_ch, RemotingCommand.request(RequestCode.POP_MESSAGE, h))
    info = call(broker, ch, RemotingCommand.request(RequestCode.POLLING_INFO, PollingInfoRequestHeader(
        consumerGroup="G", topic="T", queueId=-1)))
    assert info.decode_header(PollingInfoResponseHeader).pollingNum == 2
    send(broker, ch, 1)
    assert len(note_out) == 1 and note_out[0].decode_header(NotificationResponseHeader).hasMsg
    assert len(pop_out) == 1 and pop_out[0].code == ResponseCode.SUCCESS
    info = call(broker, ch, RemotingCommand.request(RequestCode.POLLING_INFO, PollingInfoRequestHeader(
        consumerGroup="G", topic="T", queueId=-1)))
    assert info.decode_header(PollingInfoResponseHeader).pollingNum == 0


def test_query_assignment_pop_mode(broker):
    from rmqpy.protocol import fastjson
    ch = FakeChannel()
    send(broker, ch, 1)

    def query(model="CLUSTERING"):
        body = {"topic": "T", "consumerGroup": "G", "clientId": "c1", "strategyName": "AVG", "messageModel": model}
        resp = call(broker, ch, RemotingCommand.request(RequestCode.QUERY_ASSIGNMENT, None,
                                                         fastjson.dumps(body).encode()))
        assert resp.code == ResponseCode.SUCCESS
        return fastjson.loads(resp.body)

    assert "messageQueueAssignments" not in query()  # no consumer of G here: Java answers null
    mode = {"topic": "T", "consumerGroup": "G", "mode": "POP", "popShareQueueNum": 0}
    resp = call(broker, ch, RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, None,
                                                     fastjson.dumps(mode).encode()))
    assert resp.code == ResponseCode.SUCCESS
    got = query("BROADCASTING")["messageQueueAssignments"]
    assert {a["mode"] for a in got} == {"POP"} and len(got) == 4
    bad = call(broker, ch, RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, None, b"{\"topic\":1}"))
    assert bad.code == ResponseCode.SYSTEM_ERROR


def test_orderly_pop_blocks_the_queue_until_acked_or_invisible(broker):
    ch = FakeChannel()
    for i in range(3):
        assert call(broker, ch, send_request("T", f"o{i}".encode(), queue_id=1)).code == ResponseCode.SUCCESS

    def opop():
        h = PopMessageRequestHeader(consumerGroup="G", topic="T", queueId=1, maxMsgNums=32, invisibleTime=5000,
                                    pollTime=0, bornTime=broker.now_ms(), initMode=0, order=True)
        return call(broker, ch, RemotingCommand.request(RequestCode.POP_MESSAGE, h))

    first = opop()
    got = msgs(first)
    assert [m.body for m in got] == [b"o0", b"o1", b"o2"]
    h = first.decode_header(PopMessageResponseHeader)
    assert h.reviveQid == 999 and h.orderCountInfo == "0 1 0"
    assert opop().code == ResponseCode.POLLING_TIMEOUT  # in flight: the queue is blocked
    for m in got[:2]:
        extra = " ".join(str(v) for v in (0, h.popTime, h.invisibleTime, 999, 0, "broker-a", 1, m.queue_offset))
        assert ack(broker, ch, "T", m, extra).code == ResponseCode.SUCCESS
    assert broker.consumer_offset_manager.query_offset("G", "T", 1) == 2
    assert opop().code == ResponseCode.POLLING_TIMEOUT  # o2 still in flight
    broker.clock.advance(5.1)
    again = opop()
    assert [m.body for m in msgs(again)] == [b"o2"]
    assert again.decode_header(PopMessageResponseHeader).orderCountInfo == "0 qo1%2 1;0 1 1"
    h2 = again.decode_header(PopMessageResponseHeader)
    extra = " ".join(str(v) for v in (2, h2.popTime, h2.invisibleTime, 999, 0, "broker-a", 1, 2))
    assert ack(broker, ch, "T", msgs(again)[0], extra).code == ResponseCode.SUCCESS
    assert broker.consumer_offset_manager.query_offset("G", "T", 1) == 3


def test_no_delivery_without_a_stored_checkpoint(broker, monkeypatch):
    from rmqpy.store.message_store import PutMessageResult, PutMessageStatus
    ch = FakeChannel()
    send(broker, ch, 2)
    svc = broker.pop_service
    real = svc.put_revive
    monkeypatch.setattr(svc, "put_revive", lambda msg: PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE))
    assert pop(broker, ch).code == ResponseCode.POLLING_TIMEOUT
    assert all(broker.consumer_offset_manager.query_offset("G", "T", q) <= 0 for q in range(4))
    monkeypatch.setattr(svc, "put_revive", real)
    assert sorted(m.body for m in msgs(pop(broker, ch))) == [b"m0", b"m1"]


def test_peek_reads_without_hiding_and_checks_its_count(broker):
    """PEEK_MESSAGE shows what a pop would get and changes nothing: the pop after it gets the same."""
    from rmqpy.protocol.headers.pop import PeekMessageRequestHeader

    ch = FakeChannel()

    def peek(nums):
        h = PeekMessageRequestHeader(consumerGroup="G", topic="T", queueId=-1, maxMsgNums=nums)
        return call(broker, ch, RemotingCommand.request(RequestCode.PEEK_MESSAGE, h))

    from rmqpy.protocol.bodies.topic import TopicConfig

    broker.topic_config_manager.update_topic_config(TopicConfig("E", 4, 4))
    empty = call(broker, ch, RemotingCommand.request(RequestCode.PEEK_MESSAGE, PeekMessageRequestHeader(
        consumerGroup="G", topic="E", queueId=-1, maxMsgNums=1)))
    # nothing there: PULL_NOT_FOUND, as PeekMessageProcessor answers (a pop's is POLLING_TIMEOUT)
    assert (empty.code, empty.remark) == (ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE")
    send(broker, ch, 3)
    first = peek(32)
    assert first.code == ResponseCode.SUCCESS and sorted(m.body for m in msgs(first)) == [b"m0", b"m1", b"m2"]
    assert sorted(m.body for m in msgs(peek(32))) == [b"m0", b"m1", b"m2"]  # still there
    assert sorted(m.body for m in msgs(pop(broker, ch))) == [b"m0", b"m1", b"m2"]  # and not hidden from a pop
    assert peek(0).code == ResponseCode.INVALID_PARAMETER
    assert peek(33).code == ResponseCode.INVALID_PARAMETER


def test_batch_ack_acks_the_bits_it_sets_and_only_those(broker):
    """BATCH_ACK_MESSAGE (5.x BatchAckMessageRequestBody): one entry per checkpoint, a bit per offset
    from its start offset; the acked messages stay gone, the unacked one comes back after the invisible time."""
    import base64

    from rmqpy.protocol import fastjson

    ch = FakeChannel()
    for i in range(3):
        assert call(broker, ch, send_request("T", f"q{i}".encode(), queue_id=0)).code == ResponseCode.SUCCESS
    popped = pop(broker, ch, queue_id=0)
    got = msgs(popped)
    assert [m.queue_offset for m in got] == [0, 1, 2]
    start, pop_time, invisible, revive_qid = receipt(popped, got[0]).split()[:4]
    bits = 0b101  # offsets 0 and 2
    body = {"brokerName": "broker-a", "acks": [{
        "c": "G", "t": "T", "r": "0", "so": int(start), "q": 0, "rq": int(revive_qid), "pt": int(pop_time),
        "it": int(invisible), "b": base64.b64encode(bits.to_bytes(1, "little")).decode()}]}
    resp = call(broker, ch, RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, None, fastjson.dumps(body).encode()))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    for _ in range(8):
        broker.clock.advance(1)
    assert [m.body for m in msgs(pop(broker, ch))] == [b"q1"]  # q0 and q2 were acked by the batch
