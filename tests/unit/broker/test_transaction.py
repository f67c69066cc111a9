"""Transactions: half messages, END_TRANSACTION, op records and the check-back, on a task.Clock."""
from __future__ import annotations

import pytest

from rmqpy.broker.clients import ClientChannelInfo
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import EndTransactionRequestHeader
from rmqpy.protocol.message import decode_offset_msg_id, decode_record
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request

HALF, OP, MAXT = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC"
OPTS = dict(transactionCheckInterval=1000, transactionTimeOut=2000, transactionCheckMax=3)


@pytest.fixture
def broker_overrides():
    return OPTS


def messages(broker, topic, queue_id=0):
    store = broker.message_store
    return [store.look_message_by_offset(store.get_commit_log_offset_in_queue(topic, queue_id, off))
            for off in range(store.get_max_offset_in_queue(topic, queue_id))]


def send_half(broker, ch, body=b"tx", group="PG"):
    req = send_request("TxT", body, queue_id=1, props={"TRAN_MSG": "true", "PGROUP": group, "UNIQ_KEY": "U" + body.hex()})
    req.ext_fields["f"] = "4"  # sysflag PREPARED
    resp = call(broker, ch, req)
    assert resp.code == ResponseCode.SUCCESS, resp
    _, phy = decode_offset_msg_id(resp.ext_fields["msgId"])
    return phy, int(resp.ext_fields["queueOffset"])


def end_tx(broker, ch, phy, qoff, state, group="PG", from_check=False, oneway=False):
    h = EndTransactionRequestHeader(producerGroup=group, tranStateTableOffset=qoff, commitLogOffset=phy,
                                    commitOrRollback=state, fromTransactionCheck=from_check, msgId="X")
    req = RemotingCommand.request(RequestCode.END_TRANSACTION, h, oneway=oneway)
    return call(broker, ch, req)


def register_producer(broker, group="PG"):
    ch = FakeChannel()
    broker.producer_manager.register_producer(group, ClientChannelInfo(ch, "cid-" + group, 0, 399))
    return ch


def test_half_message_is_parked_and_commit_delivers_it(broker):
    ch = FakeChannel()
    phy, qoff = send_half(broker, ch)
    assert messages(broker, "TxT", 1) == []
    (half,) = messages(broker, HALF)
    assert half.properties["REAL_TOPIC"] == "TxT" and half.properties["REAL_QID"] == "1"
    assert half.sys_flag & 0xC == 0
    resp = end_tx(broker, ch, phy, qoff, 8)
    assert resp.code == ResponseCode.SUCCESS
    (real,) = messages(broker, "TxT", 1)
    assert real.body == b"tx" and real.sys_flag & 0xC == 8 and real.prepared_transaction_offset == phy
    (op,) = messages(broker, OP)
    assert op.body == str(qoff).encode() and op.tags == "d"


def test_rollback_writes_only_the_op_record(broker):
    ch = FakeChannel()
    phy, qoff = send_half(broker, ch)
    assert end_tx(broker, ch, phy, qoff, 12).code == ResponseCode.SUCCESS
    assert messages(broker, "TxT", 1) == []
    assert len(messages(broker, OP)) == 1


def test_oneway_end_transaction_gets_no_answer_and_unknown_changes_nothing(broker):
    ch = FakeChannel()
    phy, qoff = send_half(broker, ch)
    assert end_tx(broker, ch, phy, qoff, 8, oneway=True) is None
    assert len(messages(broker, "TxT", 1)) == 1
    phy2, qoff2 = send_half(broker, ch, b"u")
    assert end_tx(broker, ch, phy2, qoff2, 0) is None
    assert len(messages(broker, OP)) == 1


def test_bad_end_transaction_requests_get_java_remarks(broker):
    ch = FakeChannel()
    phy, qoff = send_half(broker, ch)
    resp = end_tx(broker, ch, 987654321, qoff, 8)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
    resp = end_tx(broker, ch, phy, qoff, 8, group="other")
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "The producer group wrong")
    resp = end_tx(broker, ch, phy, qoff + 5, 12)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
    assert messages(broker, "TxT", 1) == [] and messages(broker, OP) == []
    # the half message is still there and can be committed
    assert end_tx(broker, ch, phy, qoff, 8).code == ResponseCode.SUCCESS


def test_check_back_asks_a_live_producer_and_its_commit_settles(broker):
    prod = register_producer(broker)
    ch = FakeChannel()
    phy, qoff = send_half(broker, ch)
    broker.clock.advance(1.5)
    assert prod.oneway == []  # younger than transactionTimeOut
    for _ in range(5):
        broker.clock.advance(1.0)
        if prod.oneway:
            break
    assert len(prod.oneway) == 1  # one check per transactionCheckInterval
    check = prod.oneway[0]
    assert check.code == RequestCode.CHECK_TRANSACTION_STATE and check.is_oneway
    f = check.ext_fields
    msg = decode_record(check.body, 0, check_crc=False)
    assert msg.topic == "TxT" and msg.queue_id == 1 and msg.body == b"tx"
    assert msg.properties["TRANSACTION_CHECK_TIMES"] == "1"
    assert f["msgId"] == f["transactionId"] == msg.properties["UNIQ_KEY"]
    new_phy, new_qoff = int(f["commitLogOffset"]), int(f["tranStateTableOffset"])
    assert new_qoff == qoff + 1 and new_phy > phy
    resp = end_tx(broker, prod, new_phy, new_qoff, 8, from_check=True)
    assert resp.code == ResponseCode.SUCCESS
    assert [m.body for m in messages(broker, "TxT", 1)] == [b"tx"]
    for _ in range(5):
        broker.clock.advance(1.0)
    assert len(prod.oneway) == 1  # settled: no more checks


def test_check_back_without_an_answer_is_discarded_after_max_checks(broker):
    prod = register_producer(broker)
    send_half(broker, FakeChannel())
    for _ in range(30):
        broker.clock.advance(1.0)
    assert len(prod.oneway) == 3  # transactionCheckMax
    (discarded,) = messages(broker, MAXT)
    assert discarded.properties["TRANSACTION_CHECK_TIMES"] == "3" and discarded.body == b"tx"
    assert messages(broker, "TxT", 1) == []


def test_no_producer_no_check_but_later_producer_is_asked(broker):
    send_half(broker, FakeChannel())
    for _ in range(2):  # one check with nobody to ask (it still counts, as in Java)
        broker.clock.advance(1.0)
    prod = register_producer(broker)
    for _ in range(3):
        broker.clock.advance(1.0)
    assert len(prod.oneway) >= 1


def test_restart_keeps_decisions_and_pending_half_messages(tmp_path):
    b, clock = make_broker(tmp_path, **OPTS)
    ch = FakeChannel()
    phy1, q1 = send_half(b, ch, b"one")
    phy2, q2 = send_half(b, ch, b"two")
    assert end_tx(b, ch, phy1, q1, 8).code == ResponseCode.SUCCESS
    b.shutdown()
    b, clock = make_broker(tmp_path, **OPTS)
    prod = register_producer(b)
    for _ in range(5):
        clock.advance(1.0)
        if prod.oneway:
            break
    bodies = [decode_record(c.body, 0, check_crc=False).body for c in prod.oneway]
    assert bodies == [b"two"]  # the committed one is not checked again
    f = prod.oneway[0].ext_fields
    assert end_tx(b, prod, int(f["commitLogOffset"]), int(f["tranStateTableOffset"]), 12,
                  from_check=True).code == ResponseCode.SUCCESS
    b.shutdown()
    b, clock = make_broker(tmp_path, **OPTS)
    prod = register_producer(b)
    for _ in range(6):
        clock.advance(1.0)
    assert prod.oneway == []
    assert [m.body for m in messages(b, "TxT", 1)] == [b"one"]
    b.shutdown()


@pytest.mark.parametrize("state", [8, 12])
def test_producer_end_past_check_immunity_is_refused_and_the_check_settles_it(broker, state):
    """As 5.3.3's rejectCommitOrRollback: once a half message is older than its CHECK_IMMUNITY_TIME_IN_SECONDS,
    only the check may end it; the producer's own end gets ILLEGAL_OPERATION. rmqpy counts that time as the
    check does (5.3.3 raises it to transactionTimeOut here, 2 s, and would take the end of 'short')."""
    ch = FakeChannel()

    def half(body, immunity, age_ms):
        req = send_request("TxT", body, queue_id=1, props={"TRAN_MSG": "true", "PGROUP": "PG", "UNIQ_KEY": "U" + body.hex(),
                                                           "CHECK_IMMUNITY_TIME_IN_SECONDS": immunity})
        req.ext_fields["f"] = "4"
        req.ext_fields["g"] = str(broker.now_ms() - age_ms)
        resp = call(broker, ch, req)
        _, phy = decode_offset_msg_id(resp.ext_fields["msgId"])
        return phy, int(resp.ext_fields["queueOffset"])

    broker.clock.advance(100)
    late, young, short = half(b"late", "3", 3500), half(b"young", "3", 2500), half(b"short", "1", 1500)
    for phy, qoff in (late, short):
        resp = end_tx(broker, ch, phy, qoff, state)
        assert (resp.code, resp.remark) == (ResponseCode.ILLEGAL_OPERATION, "not set any response code")
    assert messages(broker, "TxT", 1) == []
    assert end_tx(broker, ch, *young, state).code == ResponseCode.SUCCESS
    assert end_tx(broker, ch, *late, state, from_check=True).code == ResponseCode.SUCCESS
    committed = [m.body for m in messages(broker, "TxT", 1)]
    assert committed == ([b"young", b"late"] if state == 8 else [])


def test_half_messages_metric_counts_prepared_less_ended_and_discarded(tmp_path):
    """rocketmq_half_messages (Java TransactionMetrics): +1 per prepared send, -1 per commit, rollback
    or discard after transactionCheckMax checks."""
    from prometheus_client.exposition import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    b, clock = make_broker(tmp_path, metricsExporterType="PROM", **OPTS)
    b.clock = clock
    try:
        def half() -> list[tuple[dict, float]]:
            text = generate_latest(b.metrics_manager.registry).decode()
            return [(s.labels, s.value) for f in text_string_to_metric_families(text) for s in f.samples
                    if s.name == "rocketmq_half_messages"]

        ch = FakeChannel()
        first = send_half(b, ch, b"a")
        send_half(b, ch, b"b")
        third = send_half(b, ch, b"c")
        ((labels, n),) = half()
        assert (labels["topic"], labels["node_id"], n) == ("TxT", "broker-a", 3)
        assert end_tx(b, ch, *first, 8).code == ResponseCode.SUCCESS   # commit
        assert end_tx(b, ch, *third, 12).code == ResponseCode.SUCCESS   # rollback
        assert [n for _, n in half()] == [1]
        register_producer(b)  # asked transactionCheckMax times, never answers: discarded
        for _ in range(30):
            clock.advance(1.0)
        assert len(messages(b, MAXT)) == 1
        assert [n for _, n in half()] == [0]
    finally:
        b.shutdown()


def test_default_interval_checks_an_unknown_transaction_within_5_3_3s_30_s(tmp_path):
    """With no overrides a half message left UNKNOW is checked back at the first check past its
    transactionTimeOut (6 s), on 5.3.3's 30 s cadence (4.9.7's 60 s asked first 45 s after the
    send in the Spring starter's test, after it had given up: issue 33)."""
    b, clock = make_broker(tmp_path)
    try:
        assert b.broker_config.transactionCheckInterval == 30_000
        prod = register_producer(b)
        clock.advance(4.0)  # past the first check, 3 s after start
        send_half(b, FakeChannel())
        checked = []
        for step in range(1, 241):  # 60 s in quarter seconds
            clock.advance(0.25)
            if len(prod.oneway) > len(checked):
                checked.append(step * 0.25)
        assert prod.oneway[0].code == RequestCode.CHECK_TRANSACTION_STATE
        # the checks at 33 s and 63 s after start; the send was at 4 s
        assert len(checked) == 2 and 29.0 <= checked[0] <= 30.0 and checked[1] - checked[0] == 30.0, checked
    finally:
        b.shutdown()
