"""LOCK_BATCH_MQ / UNLOCK_BATCH_MQ with the 60 s expiry, on a task.Clock."""
from __future__ import annotations

import pytest

from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from tests.unit.broker.helpers import FakeChannel, call, make_broker


@pytest.fixture
def broker(tmp_path):
    b, clock = make_broker(tmp_path)
    b.clock = clock
    yield b
    b.shutdown()


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
