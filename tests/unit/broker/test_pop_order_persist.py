"""Orderly pop state in config/consumerOrderInfo.json (Java's ConsumerOrderInfoManager file): a batch
in flight before a crash still blocks its queue after the restart, and Java's file reads back."""
from __future__ import annotations

from rmqpy.broker.pop.order import ConsumerOrderInfoManager
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.pop import PopMessageRequestHeader, PopMessageResponseHeader
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request
from tests.unit.broker.test_pop import ack, msgs

# as 5.3.3 writes it (fastjson: Long map keys unquoted; "o" holds the first offset, then distances)
JAVA_FILE = """{"table":{"T@G":{1:{"a":"att-1","cm":1,"i":60000,"l":1700000000000,"o":[5,1,2],
"oc":{5:1},"ot":{6:1700000090000},"popTime":1700000000000}}}}"""


def _opop(broker, ch, invisible=60_000):
    h = PopMessageRequestHeader(consumerGroup="G", topic="T", queueId=1, maxMsgNums=32, invisibleTime=invisible,
                                pollTime=0, bornTime=broker.now_ms(), initMode=0, order=True)
    return call(broker, ch, RemotingCommand.request(RequestCode.POP_MESSAGE, h))


def test_a_batch_in_flight_still_blocks_its_queue_after_a_crash(tmp_path):
    b, _ = make_broker(tmp_path)
    ch = FakeChannel()
    for i in range(3):
        assert call(b, ch, send_request("T", f"o{i}".encode(), queue_id=1)).code == ResponseCode.SUCCESS
    first = _opop(b, ch)
    got = msgs(first)
    h = first.decode_header(PopMessageResponseHeader)
    extra = " ".join(str(v) for v in (0, h.popTime, h.invisibleTime, 999, 0, "broker-a", 1, got[0].queue_offset))
    assert ack(b, ch, "T", got[0], extra).code == ResponseCode.SUCCESS  # o0 done; o1, o2 in flight for 60 s
    b.persist_offsets()
    b.persist_order_info()  # the periodic writes ran (every 5 s and 10 s); then the process dies
    b.pop_revive_service.stop()
    saved = fastjson.loads((tmp_path / "store" / "config" / "consumerOrderInfo.json").read_text())
    assert saved["table"]["T@G"][1]["o"] == [0, 1, 2] and saved["table"]["T@G"][1]["cm"] == 1

    b2, clock2 = make_broker(tmp_path)
    try:
        assert b2.consumer_offset_manager.query_offset("G", "T", 1) == 1
        # without the file the restarted broker hands o1 and o2 out at once, while the first consumer
        # may still be working on them: the message group's order broken
        assert _opop(b2, ch).code == ResponseCode.POLLING_TIMEOUT
        clock2.advance(61)
        again = _opop(b2, ch)
        assert [m.body for m in msgs(again)] == [b"o1", b"o2"]
        assert again.decode_header(PopMessageResponseHeader).orderCountInfo == "0 qo1%1 1;0 qo1%2 1;0 1 1"
    finally:
        b2.shutdown()


def test_javas_file_reads_back_and_is_written_in_its_shape():
    m = ConsumerOrderInfoManager(None, lambda: 1_700_000_001_000)
    m.decode(fastjson.loads(JAVA_FILE))
    info = m.table[("T", "G", 1)]
    assert (info.offsets, info.commit_bits, info.attempt_id, info.invisible_time) == ([5, 6, 7], 1, "att-1", 60_000)
    assert info.next_visible == {6: 1_700_000_090_000} and info.consumed == {5: 1}
    assert info.next_offset() == 6
    assert m.check_block(None, "T", "G", 1, 1_700_000_001_000)  # offset 6 invisible until ...090000
    assert fastjson.loads(fastjson.dumps(m.encode())) == fastjson.loads(JAVA_FILE)


def test_stale_and_vanished_queues_are_dropped_when_written():
    now = 1_700_000_000_000 + 25 * 3600 * 1000
    m = ConsumerOrderInfoManager(None, lambda: now, lambda topic, group, queue_id: queue_id < 4)
    m.decode(fastjson.loads(JAVA_FILE))  # last popped 25 h ago
    m.update(None, "T", "G", 9, now, 1000, [1], [])  # a queue the topic no longer has
    m.update(None, "T", "G", 2, now, 1000, [1], [])
    assert list(m.encode()["table"]["T@G"]) == [2] and list(m.table) == [("T", "G", 2)]


def test_a_malformed_file_entry_is_skipped():
    m = ConsumerOrderInfoManager(None)
    m.decode({"table": {"T@G": {"x": {}, "1": {"o": "bad"}, "2": {"o": [3]}}, "nogroup": {}, "U@G": []}})
    assert list(m.table) == [("T", "G", 2)]
