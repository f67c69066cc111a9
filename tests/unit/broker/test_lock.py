"""LOCK_BATCH_MQ / UNLOCK_BATCH_MQ with the 60 s expiry, on a task.Clock."""
from __future__ import annotations

import pytest

from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from tests.unit.broker.helpers import FakeChannel, call


def mqs(*ids):
    return [{"brokerName": "broker-a", "queueId": i, "topic": "T"} for i in ids]


def lock(broker, client, ids, code=RequestCode.LOCK_BATCH_MQ):
    body = fastjson.dumps({"clientId": client, "consumerGroup": "G", "mqSet": mqs(*ids), "onlyThisBroker": False})
    return call(broker, FakeChannel(), RemotingCommand.request(code, body=body.encode()))


def locked_ids(resp):
    assert resp.code == ResponseCode.SUCCESS
    return sorted(m["queueId"] for m in fastjson.loads(resp.body)["lockOKMQSet"])


def test_lock_refuses_other_clients_until_expiry(broker):
    assert locked_ids(lock(broker, "c1", [0, 1])) == [0, 1]
    assert locked_ids(lock(broker, "c2", [1, 2])) == [2]
    assert locked_ids(lock(broker, "c1", [0, 1, 2])) == [0, 1]
    broker.clock.advance(59)
    assert locked_ids(lock(broker, "c2", [0])) == []
    broker.clock.advance(2)   # c1's last renewal was 61 s ago
    assert locked_ids(lock(broker, "c2", [0, 1])) == [0, 1]
    assert locked_ids(lock(broker, "c1", [0])) == []


def test_renewal_keeps_the_lock_and_unlock_releases(broker):
    assert locked_ids(lock(broker, "c1", [0])) == [0]
    for _ in range(5):
        broker.clock.advance(20)
        assert locked_ids(lock(broker, "c1", [0])) == [0]
    assert locked_ids(lock(broker, "c2", [0])) == []
    resp = lock(broker, "c2", [0], RequestCode.UNLOCK_BATCH_MQ)   # not the holder: ignored
    assert resp.code == ResponseCode.SUCCESS and resp.body is None
    assert locked_ids(lock(broker, "c2", [0])) == []
    lock(broker, "c1", [0], RequestCode.UNLOCK_BATCH_MQ)
    assert locked_ids(lock(broker, "c2", [0])) == [0]


def test_response_body_is_fastjson(broker):
    resp = lock(broker, "c1", [3])
    assert resp.body == b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":3,"topic":"T"}]}'


def test_a_client_that_left_the_group_holds_no_lock(broker):
    """UNREGISTER_CLIENT drops the client's locks in the group before the other members are told,
    and a LOCK_BATCH_MQ it sends afterwards on the same connection (its rebalance thread still
    running while it shuts down) gets nothing; a HEART_BEAT brings it back."""
    from rmqpy.protocol.headers.broker import UnregisterClientRequestHeader
    from tests.unit.broker.test_processors import heartbeat
    survivor, leaver = FakeChannel(), FakeChannel()
    call(broker, survivor, heartbeat("c1", "G", "T"))
    call(broker, leaver, heartbeat("c2", "G", "T"))

    def lock_on(channel, client, ids):
        body = fastjson.dumps({"clientId": client, "consumerGroup": "G", "mqSet": mqs(*ids)})
        return locked_ids(call(broker, channel, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ,
                                                                        body=body.encode())))

    assert lock_on(leaver, "c2", [0, 1]) == [0, 1]
    survivor.oneway.clear()
    resp = call(broker, leaver, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT,
                                                        UnregisterClientRequestHeader("c2", None, "G")))
    assert resp.code == ResponseCode.SUCCESS
    assert [r.code for r in survivor.oneway] == [RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]
    from rmqpy.protocol.headers.broker import GetConsumerListByGroupRequestHeader
    ids = call(broker, survivor, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                         GetConsumerListByGroupRequestHeader("G")))
    assert fastjson.loads(ids.body)["consumerIdList"] == ["c1"]  # what the notified member reads next
    assert lock_on(leaver, "c2", [2]) == []          # late lock of the leaving client: refused
    assert lock_on(survivor, "c1", [0, 1, 2]) == [0, 1, 2]  # at once, not after 60 s
    call(broker, leaver, heartbeat("c2", "G", "T"))  # back in the group
    assert lock_on(leaver, "c2", [3]) == [3]


@pytest.fixture
def log_lines():
    from twisted.logger import formatEvent, globalLogPublisher
    events = []
    globalLogPublisher.addObserver(events.append)
    yield lambda: [formatEvent(e) for e in events if "rebalance_lock" in e.get("log_namespace", "")]
    globalLogPublisher.removeObserver(events.append)


def test_hostile_lock_requests_are_refused_or_logged_bounded(broker, log_lines):
    """Issue 11: a 5 MB client ID is refused (it would be kept in the lock table and quoted in
    every conflict line); conflicts on many queues write a bounded number of short lines."""
    resp = lock(broker, "c" * 5_000_000, [0])
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "bad request body: clientId is blank or longer than 1024"
    body = fastjson.dumps({"clientId": "c1", "consumerGroup": "G/../x", "mqSet": mqs(0)})
    resp = call(broker, FakeChannel(), RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=body.encode()))
    assert resp.code == ResponseCode.SYSTEM_ERROR and "illegal characters" in resp.remark
    assert locked_ids(lock(broker, "a" * 1000, list(range(500)))) == list(range(500))
    for _ in range(20):
        assert locked_ids(lock(broker, "b" * 1000, list(range(500)))) == []  # 10,000 conflicts
    lines = log_lines()
    assert len(lines) <= 45  # 20 acquired + 20 conflicts at once, then 1 a second (a Clock: no time passes)
    assert max(map(len, lines)) < 700
    assert any("locked by other client" in line and "…(1000 chars)" in line for line in lines)


def lock_in(broker, group, client, ids, code=RequestCode.LOCK_BATCH_MQ):
    body = fastjson.dumps({"clientId": client, "consumerGroup": group, "mqSet": mqs(*ids)})
    return call(broker, FakeChannel(), RemotingCommand.request(code, body=body.encode()))


def test_a_group_holds_a_bounded_number_of_locks_and_gets_a_clear_error_past_it(broker):
    manager = broker.rebalance_lock_manager
    manager.max_per_group = 8
    assert locked_ids(lock_in(broker, "G", "c1", range(8))) == list(range(8))
    resp = lock_in(broker, "G", "c2", [8, 9])
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "lock table full: group G holds 8 queue locks; 2 more would pass the bound of 8 per group"
    assert locked_ids(lock_in(broker, "G", "c1", range(8))) == list(range(8))  # renewals need no room
    assert locked_ids(lock_in(broker, "H", "c2", [8, 9])) == [8, 9]  # another group is not affected
    broker.clock.advance(61)  # c1's locks expired: they make room
    assert locked_ids(lock_in(broker, "G", "c2", range(2, 10))) == list(range(2, 10))
    assert sorted(q for _, _, q in manager.table["G"]) == list(range(2, 10)) and manager.total == 10


def test_the_whole_lock_table_is_bounded_and_empty_groups_leave_it(broker):
    manager = broker.rebalance_lock_manager
    manager.max_total = 10
    assert locked_ids(lock_in(broker, "G", "c1", range(8))) == list(range(8))
    resp = lock_in(broker, "H", "c2", range(3))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "lock table full: the broker holds 8 queue locks; 3 more would pass the bound of 10"
    assert "H" not in manager.table
    lock_in(broker, "G", "c1", range(8), RequestCode.UNLOCK_BATCH_MQ)
    assert "G" not in manager.table and manager.total == 0
    assert locked_ids(lock_in(broker, "H", "c2", range(3))) == [0, 1, 2]
    assert locked_ids(lock_in(broker, "H", "c3", [0])) == []  # held by c2
    assert locked_ids(lock_in(broker, "E", "c1", [])) == []  # locks nothing: keeps no empty table for E
    assert set(manager.table) == {"H"} and manager.total == 3
