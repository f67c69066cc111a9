"""5.x timer messages (TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS) on a task.Clock."""
from __future__ import annotations

import pytest

from rmqpy.protocol.codes import ResponseCode
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request

NOW_MS = 1_700_000_000_000


@pytest.fixture
def broker_overrides():
    return {"messageDelayLevel": "1s 2s 3s"}


def messages(broker, topic, queue_id=0):
    store = broker.message_store
    return [store.look_message_by_offset(store.get_commit_log_offset_in_queue(topic, queue_id, off))
            for off in range(store.get_max_offset_in_queue(topic, queue_id))]


def send(broker, props, body=b"t", queue_id=1):
    return call(broker, FakeChannel(), send_request("TimerT", body, queue_id=queue_id, props=props))


def test_deliver_ms_message_arrives_at_its_time_not_before(broker):
    resp = send(broker, {"TIMER_DELIVER_MS": str(NOW_MS + 5500), "KEYS": "k"})
    assert resp.code == ResponseCode.SUCCESS
    (parked,) = messages(broker, "rmq_sys_wheel_timer")
    assert parked.properties["REAL_TOPIC"] == "TimerT" and parked.properties["TIMER_OUT_MS"] == str(NOW_MS + 5000)
    broker.clock.advance(5.4)
    assert messages(broker, "TimerT", 1) == []
    broker.clock.advance(0.7)
    (got,) = messages(broker, "TimerT", 1)
    assert got.body == b"t" and got.properties["KEYS"] == "k"
    assert got.store_timestamp >= NOW_MS + 5500
    broker.clock.advance(10)
    assert len(messages(broker, "TimerT", 1)) == 1


def test_delay_sec_and_delay_ms(broker):
    assert send(broker, {"TIMER_DELAY_SEC": "3"}, b"sec").code == ResponseCode.SUCCESS
    assert send(broker, {"TIMER_DELAY_MS": "1500"}, b"ms").code == ResponseCode.SUCCESS
    broker.clock.advance(1.4)
    assert messages(broker, "TimerT", 1) == []
    broker.clock.advance(0.7)
    assert [m.body for m in messages(broker, "TimerT", 1)] == [b"ms"]
    broker.clock.advance(1.0)
    assert [m.body for m in messages(broker, "TimerT", 1)] == [b"ms", b"sec"]


def test_past_deliver_time_is_immediate(broker):
    assert send(broker, {"TIMER_DELIVER_MS": str(NOW_MS - 10)}).code == ResponseCode.SUCCESS
    assert len(messages(broker, "TimerT", 1)) == 1


def test_beyond_max_delay_and_bad_numbers_are_refused_as_java(broker):
    remark = ("timer message illegal, the delay time should not be bigger than the max delay 259200000ms; or if "
              "set del msg, the delay time should be bigger than the current time")
    resp = send(broker, {"TIMER_DELAY_SEC": str(3 * 24 * 3600 + 10)})
    assert (resp.code, resp.remark) == (ResponseCode.MESSAGE_ILLEGAL, remark)
    resp = send(broker, {"TIMER_DELIVER_MS": "soon"})
    assert (resp.code, resp.remark) == (ResponseCode.MESSAGE_ILLEGAL, remark)
    assert messages(broker, "rmq_sys_wheel_timer") == [] and messages(broker, "TimerT", 1) == []
    assert send(broker, {}).code == ResponseCode.SUCCESS  # nothing else disturbed


def test_delay_level_wins_over_timer_properties(broker):
    assert send(broker, {"DELAY": "1", "TIMER_DELAY_SEC": "100"}).code == ResponseCode.SUCCESS
    assert messages(broker, "rmq_sys_wheel_timer") == []
    broker.clock.advance(1.5)
    (got,) = messages(broker, "TimerT", 1)
    assert "TIMER_DELAY_SEC" not in got.properties


def test_pending_timer_survives_restart_and_is_delivered_once(tmp_path):
    b, clock = make_broker(tmp_path)
    send(b, {"TIMER_DELIVER_MS": str(NOW_MS + 2500)}, b"early")
    send(b, {"TIMER_DELIVER_MS": str(NOW_MS + 60500)}, b"late")
    clock.advance(3.1)
    assert [m.body for m in messages(b, "TimerT", 1)] == [b"early"]
    b.shutdown()
    b, clock = make_broker(tmp_path)
    clock.advance(1.0)
    assert [m.body for m in messages(b, "TimerT", 1)] == [b"early"]
    clock.advance(58.5)  # the new broker's clock starts again at NOW_MS
    assert [m.body for m in messages(b, "TimerT", 1)] == [b"early"]
    clock.advance(2.0)
    assert [m.body for m in messages(b, "TimerT", 1)] == [b"early", b"late"]
    b.shutdown()
    b, clock = make_broker(tmp_path)
    clock.advance(100)
    assert len(messages(b, "TimerT", 1)) == 2
    b.shutdown()


def test_timer_metrics_count_parked_and_delivered_messages_by_due_bound(tmp_path):
    """rocketmq_timer_* / rocketmq_timing_messages (Java DefaultStoreMetricsManager) on the clock."""
    from prometheus_client.exposition import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    def value(samples, name, **labels):
        return sum(v for n, lab, v in samples if n == name and all(lab.get(k) == x for k, x in labels.items()))

    b, clock = make_broker(tmp_path, metricsExporterType="PROM")
    b.clock = clock
    try:
        def scrape():
            text = generate_latest(b.metrics_manager.registry).decode()
            return [(x.name, x.labels, x.value) for f in text_string_to_metric_families(text) for x in f.samples]

        for delay_s in (3, 30, 4000):
            assert send(b, {"TIMER_DELAY_SEC": str(delay_s)}).code == ResponseCode.SUCCESS
        s = scrape()
        store = {"storage_type": "local", "storage_medium": "disk", "node_id": "broker-a"}
        assert value(s, "rocketmq_timer_enqueue_total", topic="TimerT", **store) == 3
        assert value(s, "rocketmq_timing_messages", topic="TimerT", **store) == 3
        snapshot = {lab["timer_bound_s"]: v for n, lab, v in s if n == "rocketmq_timer_message_snapshot"}
        assert snapshot == {"5": 1, "60": 1, "300": 0, "900": 0, "3600": 0, "14400": 1, "28800": 0, "86400": 0}
        assert value(s, "rocketmq_delay_message_latency_seconds_bucket", le="60.0", topic="TimerT") == 2
        assert value(s, "rocketmq_delay_message_latency_seconds_bucket", le="3600.0", topic="TimerT") == 2
        assert value(s, "rocketmq_delay_message_latency_seconds_bucket", le="43200.0", topic="TimerT") == 3
        clock.advance(3.5)
        s = scrape()
        assert value(s, "rocketmq_timer_dequeue_total", topic="TimerT") == 1
        assert value(s, "rocketmq_timing_messages", topic="TimerT") == 2
        assert value(s, "rocketmq_timer_dequeue_lag") == 0 and value(s, "rocketmq_timer_enqueue_lag") == 0
    finally:
        b.shutdown()


def test_a_timer_pending_across_a_switch_to_slave_and_back_is_delivered_once(tmp_path):
    from rmqpy.store.role import BrokerRole

    b, clock = make_broker(tmp_path)
    try:
        send(b, {"TIMER_DELIVER_MS": str(NOW_MS + 5500)}, b"once")
        b.switch_role(BrokerRole.SLAVE)
        b.switch_role(BrokerRole.ASYNC_MASTER)
        clock.advance(10)
        assert [m.body for m in messages(b, "TimerT", 1)] == [b"once"]
    finally:
        b.shutdown()


def test_a_timer_send_is_answered_with_its_recall_handle_and_a_recall_is_forbidden(broker):
    """5.3.3's attachRecallHandle (TIMER_OUT_MS + 1, the real topic, the UNIQ_KEY) and its
    RecallMessageProcessor with recallMessageEnable at its default (false)."""
    from rmqpy.protocol import recall
    from rmqpy.protocol.codes import RequestCode
    from rmqpy.protocol.command import RemotingCommand

    resp = send(broker, {"TIMER_DELIVER_MS": str(NOW_MS + 5500), "UNIQ_KEY": "ABC123"})
    handle = recall.decode(resp.ext_fields["recallHandle"])
    assert handle == recall.RecallHandle("TimerT", broker.broker_config.brokerName, str(NOW_MS + 5001), "ABC123")
    assert "recallHandle" not in send(broker, {"UNIQ_KEY": "ABC124"}).ext_fields  # no delivery time, no handle
    ask = RemotingCommand.request(RequestCode.RECALL_MESSAGE, None)
    ask.ext_fields = {"topic": "TimerT", "recallHandle": resp.ext_fields["recallHandle"], "producerGroup": "P"}
    answer = call(broker, FakeChannel(), ask)
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
    assert answer.ext_fields == {"MSG_REGION": broker.broker_config.regionId}
    ask.ext_fields = {"topic": "TimerT"}  # no handle: the header's own refusal
    assert call(broker, FakeChannel(), ask).code != ResponseCode.SUCCESS


def test_an_enabled_recall_stores_a_marker_and_the_message_never_comes(broker):
    """recallMessageEnable=true: the marker (TIMER_DEL_UNIQKEY, due with the message) is stored, and at
    their time the timer wheel delivers neither; another message due then still comes. Java's checks
    answer each bad recall with its code and remark."""
    from rmqpy.protocol import recall
    from rmqpy.protocol.codes import RequestCode
    from rmqpy.protocol.command import RemotingCommand

    broker.broker_config.recallMessageEnable = True
    gone = send(broker, {"TIMER_DELIVER_MS": str(NOW_MS + 5500), "UNIQ_KEY": "GONE"}, b"gone")
    send(broker, {"TIMER_DELIVER_MS": str(NOW_MS + 5500), "UNIQ_KEY": "KEPT"}, b"kept")

    def ask(topic: str, handle: str) -> RemotingCommand:
        req = RemotingCommand.request(RequestCode.RECALL_MESSAGE, None)
        req.ext_fields = {"topic": topic, "recallHandle": handle, "producerGroup": "P"}
        return call(broker, FakeChannel(), req)

    handle = gone.ext_fields["recallHandle"]
    h = recall.decode(handle)
    for topic, bad, code, remark in (
            ("TimerT", "junk", ResponseCode.ILLEGAL_OPERATION, "recall handle is invalid"),
            ("TimerT", recall.RecallHandle("Other", h.broker_name, h.timestamp, "X").encode(),
             ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match"),
            ("TimerT", recall.RecallHandle("TimerT", "other-broker", h.timestamp, "X").encode(),
             ResponseCode.ILLEGAL_OPERATION, "recall failed, broker service not available"),
            ("TimerT", recall.RecallHandle("TimerT", h.broker_name, str(NOW_MS - 1), "X").encode(),
             ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")):
        answer = ask(topic, bad)
        assert (answer.code, answer.remark) == (code, remark), topic
    answer = ask("NoSuchTopic", handle)
    assert (answer.code, answer.remark) == (ResponseCode.TOPIC_NOT_EXIST,
                                            "recall failed, the topic[NoSuchTopic] not exist")
    answer = ask("TimerT", handle)
    assert answer.code == ResponseCode.SUCCESS and answer.ext_fields["msgId"] == "GONE"
    parked = messages(broker, "rmq_sys_wheel_timer")
    assert [m.properties.get("TIMER_DEL_UNIQKEY") for m in parked] == [None, None, "TimerT+GONE"]
    assert len({m.properties["TIMER_OUT_MS"] for m in parked}) == 1  # due together
    broker.clock.advance(6)
    assert [m.body for m in messages(broker, "TimerT", 1)] == [b"kept"]
    assert messages(broker, "TimerT", 0) == []  # the marker itself is delivered as nothing
    broker.clock.advance(60)
    assert [m.body for m in messages(broker, "TimerT", 1)] == [b"kept"]


def test_a_recall_handle_cannot_split_the_markers_properties_nor_pass_a_loose_number(broker):
    """A forged handle: a message id with the properties' separators, or a time Python's int() would take
    ("1_7...", " 17...") and Java's toLong not: refused, nothing stored."""
    from rmqpy.protocol import recall
    from rmqpy.protocol.codes import RequestCode
    from rmqpy.protocol.command import RemotingCommand

    broker.broker_config.recallMessageEnable = True
    send(broker, {"UNIQ_KEY": "X"})  # the topic exists
    due = str(NOW_MS + 5000)
    for message_id, ts in (("A\x01TIMER_OUT_MS\x020", due), ("A", "1_" + due), ("A", " " + due)):
        req = RemotingCommand.request(RequestCode.RECALL_MESSAGE, None)
        req.ext_fields = {"topic": "TimerT", "recallHandle": recall.RecallHandle(
            "TimerT", broker.broker_config.brokerName, ts, message_id).encode()}
        assert call(broker, FakeChannel(), req).code == ResponseCode.ILLEGAL_OPERATION, (message_id, ts)
    assert messages(broker, "rmq_sys_wheel_timer") == []
