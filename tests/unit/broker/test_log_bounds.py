"""Issue 11: the broker lines any client can trigger at will are rate-limited per call site and
quote client text (topics, groups, remarks) cut to 200 characters."""
from __future__ import annotations

import weakref

import pytest
from twisted.logger import formatEvent, globalLogPublisher

from rmqpy.protocol.codes import ResponseCode
from rmqpy.remoting import ratelimit
from tests.unit.broker.helpers import FakeChannel, call, pull_request


@pytest.fixture(autouse=True)
def full_buckets(monkeypatch):
    """Every rate limiter starts with a full bucket, whatever the tests before took."""
    monkeypatch.setattr(ratelimit, "_limiters", weakref.WeakKeyDictionary())


@pytest.fixture
def lines():
    events = []
    globalLogPublisher.addObserver(events.append)
    yield lambda ns: [formatEvent(e) for e in events if ns in e.get("log_namespace", "")]
    globalLogPublisher.removeObserver(events.append)


def test_pull_of_a_huge_unknown_topic_logs_a_short_line_a_few_times(broker, lines):
    topic = "T" * 8192
    for _ in range(300):
        resp = call(broker, FakeChannel(), pull_request(topic, "G1", suspend_ms=0))
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    pulls = [line for line in lines("PullMessageProcessor") if "not exist" in line]
    assert 1 <= len(pulls) <= 25  # the burst, then 1 a second (no time passes here)
    assert all(len(line) < 320 for line in pulls), max(map(len, pulls))
    assert "…(8192 chars)" in pulls[0]
