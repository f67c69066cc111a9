"""Broker fast failure (Java BrokerFastFailure): SYSTEM_BUSY instead of queuing without bound."""
import itertools

import pytest
from twisted.internet import task

from rmqpy.broker.fast_failure import INITIAL_DELAY, PERIOD, BrokerFastFailure
from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.store import message_store as ms_mod

from .helpers import FakeChannel, call, make_broker, send_request

TIMEOUT = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: "
PCBUSY = "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: "


class Stats:
    slow_puts = 0
    slow_put_ms = 0


def _req():
    return RemotingCommand.request(310)


@pytest.fixture
def ff():
    clock = task.Clock()
    f = BrokerFastFailure(clock, True, 200, 1000, Stats())
    f.start()
    clock.advance(INITIAL_DELAY)  # first heartbeat
    f.clock = clock
    yield f
    f.stop()


def test_on_time_reactor_refuses_nothing(ff):
    for _ in range(50):
        ff.clock.advance(PERIOD)
        assert ff.check(_req()) is None
    assert ff.refused == 0


def test_long_turn_refuses_sends_handled_late(ff):
    ff.clock.rightNow += 0.150  # a reactor turn still running: the heartbeat is not back yet
    assert ff.check(_req()) is None
    ff.clock.rightNow += 0.100
    r = ff.check(_req())
    assert r.code == ResponseCode.SYSTEM_BUSY == 2
    assert r.remark.startswith(TIMEOUT) and r.remark.endswith("size of queue: 1")
    assert 230 <= int(r.remark[len(TIMEOUT):].split("ms")[0]) <= 250


def test_backlog_after_a_stall_is_refused_until_the_next_beat(ff):
    ff.clock.advance(0.5)  # the heartbeat runs 0.49 s late
    r = ff.check(_req())
    assert r.code == 2 and r.remark.startswith(TIMEOUT + "49")
    assert ff.check(_req()).remark.endswith("size of queue: 2")
    ff.clock.advance(PERIOD)  # on time again
    assert ff.check(_req()) is None


def test_slow_put_is_page_cache_busy(ff):
    ff.stats.slow_puts += 1  # a put held the writer over osPageCacheBusyTimeOutMills
    ff.clock.rightNow += 1.2
    r = ff.check(_req())
    assert r.code == 2 and r.remark.startswith(PCBUSY)
    assert ff.check(_req()).remark.startswith(PCBUSY)
    ff.clock.advance(PERIOD)
    ff.clock.advance(PERIOD)
    assert ff.check(_req()) is None


def test_disabled_never_refuses():
    clock = task.Clock()
    f = BrokerFastFailure(clock, False, 200, 1000, Stats())
    f.start()
    clock.advance(10)
    clock.rightNow += 5
    assert f.check(_req()) is None


def test_broker_answers_busy_and_stores_nothing(tmp_path, monkeypatch):
    broker, clock = make_broker(tmp_path, brokerFastFailureEnable=True)
    try:
        assert broker.broker_config.waitTimeMillsInSendQueue == 200
        assert broker.store_config.osPageCacheBusyTimeOutMills == 1000
        ch = FakeChannel()
        clock.advance(INITIAL_DELAY)
        assert call(broker, ch, send_request("TFF")).code == ResponseCode.SUCCESS
        store = broker.message_store
        max_phy = store.get_max_phy_offset()
        clock.advance(0.3)  # the reactor was blocked 0.3 s; the sends read now waited as long
        resp = call(broker, ch, send_request("TFF"))
        assert resp.code == ResponseCode.SYSTEM_BUSY and resp.remark.startswith(TIMEOUT)
        assert store.get_max_phy_offset() == max_phy
        clock.advance(PERIOD)
        assert call(broker, ch, send_request("TFF")).code == ResponseCode.SUCCESS
        # a put that took 1.5 s (the store's writer busy): the sends right after it are refused
        ticks = itertools.count()

        def slow_clock():  # the put takes 1.5 s, on the reactor's clock too
            clock.rightNow += 0.75
            return next(ticks) * 1.5
        monkeypatch.setattr(ms_mod, "_perf_counter", slow_clock)
        assert call(broker, ch, send_request("TFF")).code == ResponseCode.SUCCESS
        monkeypatch.undo()
        resp = call(broker, ch, send_request("TFF"))
        assert resp.code == ResponseCode.SYSTEM_BUSY and resp.remark.startswith(PCBUSY)
        clock.advance(PERIOD)
        clock.advance(PERIOD)
        assert call(broker, ch, send_request("TFF")).code == ResponseCode.SUCCESS
    finally:
        broker.shutdown()


def test_send_back_is_failed_fast_too(tmp_path):
    from rmqpy.protocol.codes import RequestCode
    broker, clock = make_broker(tmp_path, brokerFastFailureEnable=True)
    try:
        clock.advance(INITIAL_DELAY)
        clock.advance(0.3)
        resp = call(broker, FakeChannel(), RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK))
        assert resp.code == ResponseCode.SYSTEM_BUSY and resp.remark.startswith(TIMEOUT)
    finally:
        broker.shutdown()
