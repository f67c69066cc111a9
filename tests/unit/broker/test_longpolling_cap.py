"""Held pulls are bounded (issue 11 row 7): in all (maxPullPollingSize) and per connection
(maxPullPollingSizePerChannel); a pull that cannot be held is answered PULL_NOT_FOUND at once,
as Java answers a pull it does not suspend."""
from __future__ import annotations

from rmqpy.protocol.codes import ResponseCode
from tests.unit.broker.helpers import FakeChannel, call, make_broker, pull_request, send_request


def test_held_pulls_are_capped_per_connection_and_in_all(tmp_path):
    broker, clock = make_broker(tmp_path, maxPullPollingSize=3, maxPullPollingSizePerChannel=2)
    try:
        greedy, other, late = FakeChannel(), FakeChannel(), FakeChannel()
        call(broker, greedy, send_request("TH", b"first"))
        for ch in (greedy, greedy, greedy, other, late):
            broker.dispatcher.dispatch(ch, pull_request("TH", "G", offset=1, suspend_ms=15000))
        hold = broker.pull_hold_service
        assert hold.held_count() == 3 and hold.refused == 2
        # greedy's third pull and late's (all 3 slots taken) are answered now, "no new message"
        assert [r.code for r in greedy.sent] == [ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND]
        assert [r.code for r in late.sent] == [ResponseCode.PULL_NOT_FOUND] and other.sent == []
        call(broker, FakeChannel(), send_request("TH", b"second"))  # wakes the three held pulls
        assert hold.held_count() == 0
        assert greedy.sent[-1].code == other.sent[-1].code == ResponseCode.SUCCESS
        broker.dispatcher.dispatch(late, pull_request("TH", "G", offset=2, suspend_ms=15000))
        assert hold.held_count() == 1 and len(late.sent) == 1  # slots are given back
        clock.advance(20)
        assert hold.held_count() == 0 and late.sent[-1].code == ResponseCode.PULL_NOT_FOUND
    finally:
        broker.shutdown()


def test_held_pulls_of_a_closed_connection_give_their_slots_back(tmp_path):
    broker, clock = make_broker(tmp_path, maxPullPollingSize=1)
    try:
        gone, next_one = FakeChannel(), FakeChannel()
        broker.dispatcher.dispatch(gone, pull_request("TG", "G", offset=0, suspend_ms=60000))
        broker.topic_config_manager.create_topic_in_send_message_back_method("TG", 4, 6)
        broker.dispatcher.dispatch(gone, pull_request("TG", "G", offset=0, suspend_ms=60000))
        assert broker.pull_hold_service.held_count() == 1
        gone.close()
        clock.advance(5)  # the periodic check drops it
        broker.dispatcher.dispatch(next_one, pull_request("TG", "G", offset=0, suspend_ms=60000))
        assert broker.pull_hold_service.held_count() == 1 and next_one.sent == []
    finally:
        broker.shutdown()
