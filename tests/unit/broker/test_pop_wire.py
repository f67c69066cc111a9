"""POP_MESSAGE answers on the wire: the frames a remoting client reads, byte for byte.

The processor formats the typed pop result (``rmqpy.broker.pop.result``) into the response
header (``startOffsetInfo``, ``msgOffsetInfo``, ``orderCountInfo``, ...) at the edge. The digests
below are of the frames rmqpy wrote before the result was typed (72bcd57, where the service built
the header texts itself): the same scenario must give the same bytes."""
from __future__ import annotations

import hashlib

import pytest

from rmqpy.protocol.codes import RequestCode, ResponseCode, SerializeType
from rmqpy.protocol.command import RemotingCommand, decode, encode
from rmqpy.protocol.headers.pop import PopMessageRequestHeader
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request


def _scenario(tmp_path, **overrides) -> list[bytes]:
    """Normal, empty, revived (retry and normal queues in one answer) and orderly pops, JSON and
    ROCKETMQ headers; every number in them comes from the clock and the seeded queue choice."""
    broker, clock = make_broker(tmp_path, popFromRetryProbability=0, **overrides)
    broker.pop_service.random.seed(7)
    ch = FakeChannel("127.0.0.1", 5555)
    frames = []

    def pop(order: bool = False, qid: int = -1, st: int = SerializeType.JSON) -> RemotingCommand:
        h = PopMessageRequestHeader(consumerGroup="G", topic="T", queueId=qid, maxMsgNums=32, invisibleTime=5000,
                                    pollTime=0, bornTime=broker.now_ms(), initMode=0, exp="*", expType="TAG",
                                    order=order)
        request = RemotingCommand.request(RequestCode.POP_MESSAGE, h, serialize_type=st)
        request.opaque = 42
        resp = call(broker, ch, request)
        frames.append(encode(resp))
        return resp

    try:
        for i in range(6):
            assert call(broker, ch, send_request("T", f"m{i}".encode(), queue_id=i % 4)).code == ResponseCode.SUCCESS
        pop()
        pop()  # nothing visible: POLLING_TIMEOUT, empty offset infos
        clock.advance(22)  # past the revive time: the six come back through the retry topic
        for i in range(2):
            assert call(broker, ch, send_request("T", f"n{i}".encode(), queue_id=2)).code == ResponseCode.SUCCESS
        pop(st=SerializeType.ROCKETMQ)
        for i in range(3):
            assert call(broker, ch, send_request("T", f"o{i}".encode(), queue_id=1)).code == ResponseCode.SUCCESS
        pop(order=True, qid=1)
        clock.advance(5.1)
        pop(order=True, qid=1)  # delivered again: the count of each offset
    finally:
        broker.shutdown()
    return frames


BEFORE = {  # sha256 of each frame as 72bcd57 wrote it (first 16 hex digits)
    "v1": ["669d5756bf12451f", "655e19e7643b4d7c", "98ee2ad05819bb9b", "9e7ff68b5de14bc0", "337fb6aa56f00e90"],
    "v2": ["669d5756bf12451f", "655e19e7643b4d7c", "44a08c270057e19a", "9e7ff68b5de14bc0", "337fb6aa56f00e90"],
}


@pytest.mark.parametrize("retry", ["v1", "v2"])
def test_pop_frames_are_the_bytes_written_before_the_result_was_typed(tmp_path, retry) -> None:
    frames = _scenario(tmp_path, enableRetryTopicV2=retry == "v2")
    third = decode(frames[2][4:]).ext_fields or {}  # the revived ones: a normal queue and the retry topic
    mark = "2" if retry == "v2" else "1"
    assert (third["startOffsetInfo"], third["msgOffsetInfo"]) == (f"0 2 1;{mark} 0 0", f"0 2 1,2;{mark} 0 0,1,2,3,4,5")
    assert (decode(frames[4][4:]).ext_fields or {})["orderCountInfo"] == "0 qo1%2 1;0 qo1%3 1;0 qo1%4 1;0 1 1"
    assert [hashlib.sha256(f).hexdigest()[:16] for f in frames] == BEFORE[retry]


def test_the_typed_result_is_formatted_as_javas_extra_info_texts() -> None:
    """``ExtraInfoUtil``'s texts: one ``mark queueId value`` item per queue, ``;``-separated, the
    offsets of a queue ``,``-separated; the order counts per message (``qo<queueId>%<offset>``) and
    per queue; no orderCountInfo field for a pop that is not orderly or found nothing in order."""
    from rmqpy.broker.pop.result import OrderCount, PoppedQueue, PopResult
    from rmqpy.broker.processor.pop import pop_response_header

    result = PopResult(records=[b"r"], pop_time=1700000000123, invisible_time=60000, revive_qid=3, rest_num=7,
                       queues=[PoppedQueue("0", 2, 10, (10, 12)), PoppedQueue("1", 0, 0, (0,)),
                               PoppedQueue("2", 1, 5, (5, 6, 7))])
    h = pop_response_header(result)
    assert (h.popTime, h.invisibleTime, h.reviveQid, h.restNum) == (1700000000123, 60000, 3, 7)
    assert h.startOffsetInfo == "0 2 10;1 0 0;2 1 5"
    assert h.msgOffsetInfo == "0 2 10,12;1 0 0;2 1 5,6,7"
    assert h.orderCountInfo is None and "orderCountInfo" not in h.encode()
    result.order_counts = []
    assert pop_response_header(result).orderCountInfo is None
    result.order_counts = [OrderCount("0", 1, 2, 1), OrderCount("0", 1, 3, 2), OrderCount("0", 1, None, 1)]
    assert pop_response_header(result).orderCountInfo == "0 qo1%2 1;0 qo1%3 2;0 1 1"
    assert result.delivery_counts() == {("0", 1, 2): 1, ("0", 1, 3): 2, ("0", 1, None): 1}
    assert PopResult(queues=[]).start_offsets() == {} and pop_response_header(PopResult()).startOffsetInfo == ""


def test_a_pop_answer_carries_its_typed_result_for_a_caller_in_the_process(tmp_path) -> None:
    """The remoting answer's ``typed_result`` is the PopResult its header was formatted from (what
    the gRPC layer reads); it is no part of the frame."""
    from rmqpy.broker.pop.result import PopResult
    from rmqpy.broker.processor.pop import pop_response_header

    broker, _ = make_broker(tmp_path, popFromRetryProbability=0)
    try:
        ch = FakeChannel()
        assert call(broker, ch, send_request("T", b"x", queue_id=0)).code == ResponseCode.SUCCESS
        h = PopMessageRequestHeader(consumerGroup="G", topic="T", queueId=-1, maxMsgNums=32, invisibleTime=5000,
                                    pollTime=0, bornTime=broker.now_ms(), initMode=0)
        resp = call(broker, ch, RemotingCommand.request(RequestCode.POP_MESSAGE, h))
        result = resp.typed_result
        assert isinstance(result, PopResult) and result.found and resp.body == b"".join(result.records)
        assert resp.ext_fields == pop_response_header(result).encode()
        assert [(q.retry, q.queue_id, q.offsets) for q in result.queues] == [("0", 0, (0,))]
        frame = encode(resp)
        resp.typed_result = None
        assert encode(resp) == frame
    finally:
        broker.shutdown()
