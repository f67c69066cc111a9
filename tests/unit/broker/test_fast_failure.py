"""Broker fast failure (Java BrokerFastFailure): SYSTEM_BUSY instead of queuing without bound."""
import itertools

import pytest
from twisted.internet import task

from rmqpy.broker.fast_failure import PERIOD, BrokerFastFailure
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
    clock.advance(100)
    f = BrokerFastFailure(clock, True, 200, 1000, Stats())
    f.clock = clock
    return f


def test_sends_read_just_now_are_never_refused(ff):
    for _ in range(50):
        ff.clock.advance(PERIOD)
        assert ff.check(_req(), ff.clock.seconds()) is None
    assert ff.refused == 0


def test_a_stall_before_the_read_is_not_a_wait(ff):
    # the broker was descheduled 0.5 s; what it reads afterwards waited in the kernel, as in Java
    # (Netty stamps a request when it has read it), not in the broker's queue
    ff.clock.advance(0.5)
    assert ff.check(_req(), ff.clock.seconds()) is None
    assert ff.check(_req(), None) is None


def test_a_send_queued_behind_a_long_read_is_refused(ff):
    read_at = ff.clock.seconds()
    ff.clock.advance(0.150)  # the frames before it in the same read took 150 ms
    assert ff.check(_req(), read_at) is None
    ff.clock.advance(0.100)
    r = ff.check(_req(), read_at)
    assert r.code == ResponseCode.SYSTEM_BUSY == 2
    assert r.remark == TIMEOUT + "250ms, size of queue: 1"
    assert ff.check(_req(), read_at).remark.endswith("size of queue: 2")
    ff.clock.advance(1)
    assert ff.check(_req(), read_at).remark.endswith("size of queue: 1")  # a new busy spell


def test_slow_put_is_page_cache_busy(ff):
    ff.stats.slow_puts += 1  # a put held the writer over osPageCacheBusyTimeOutMills
    now = ff.clock.seconds()
    r = ff.check(_req(), now)
    assert r.code == 2 and r.remark.startswith(PCBUSY)
    assert ff.check(_req(), now).remark.startswith(PCBUSY)
    ff.clock.advance(PERIOD)
    assert ff.check(_req(), ff.clock.seconds()) is None


def test_disabled_never_refuses():
    clock = task.Clock()
    f = BrokerFastFailure(clock, False, 200, 1000, Stats())
    clock.advance(10)
    assert f.check(_req(), 0.0) is None


def test_broker_answers_busy_and_stores_nothing(tmp_path, monkeypatch):
    broker, clock = make_broker(tmp_path, brokerFastFailureEnable=True)
    try:
        assert broker.broker_config.waitTimeMillsInSendQueue == 200
        assert broker.store_config.osPageCacheBusyTimeOutMills == 1000
        ch = FakeChannel()
        ch.read_at = clock.seconds()
        assert call(broker, ch, send_request("TFF")).code == ResponseCode.SUCCESS
        store = broker.message_store
        max_phy = store.get_max_phy_offset()
        clock.advance(0.3)  # this send was read 0.3 s ago: it queued behind the frames before it
        resp = call(broker, ch, send_request("TFF"))
        assert resp.code == ResponseCode.SYSTEM_BUSY and resp.remark.startswith(TIMEOUT + "300ms")
        assert store.get_max_phy_offset() == max_phy
        ch.read_at = clock.seconds()
        assert call(broker, ch, send_request("TFF")).code == ResponseCode.SUCCESS
        # a put that took 1.5 s (the store's writer busy): the sends right after it are refused
        ticks = itertools.count()

        def slow_clock():  # the put takes 1.5 s
            return next(ticks) * 1.5
        monkeypatch.setattr(ms_mod, "_perf_counter", slow_clock)
        assert call(broker, ch, send_request("TFF")).code == ResponseCode.SUCCESS
        monkeypatch.undo()
        ch.read_at = clock.seconds()
        resp = call(broker, ch, send_request("TFF"))
        assert resp.code == ResponseCode.SYSTEM_BUSY and resp.remark.startswith(PCBUSY)
        clock.advance(PERIOD)
        ch.read_at = clock.seconds()
        assert call(broker, ch, send_request("TFF")).code == ResponseCode.SUCCESS
    finally:
        broker.shutdown()


def test_send_back_is_failed_fast_too(tmp_path):
    from rmqpy.protocol.codes import RequestCode
    broker, clock = make_broker(tmp_path, brokerFastFailureEnable=True)
    try:
        ch = FakeChannel()
        ch.read_at = clock.seconds()
        clock.advance(0.3)
        resp = call(broker, ch, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK))
        assert resp.code == ResponseCode.SYSTEM_BUSY and resp.remark.startswith(TIMEOUT)
    finally:
        broker.shutdown()


def test_remoting_stamps_when_a_request_was_read():
    from twisted.internet.testing import StringTransport

    from rmqpy.protocol import command as codec
    from rmqpy.remoting.protocol import RemotingProtocol

    class Recorder:
        def __init__(self):
            self.seen = []

        def dispatch(self, channel, request):
            self.seen.append(channel.read_at)

        def channel_connected(self, channel):
            pass

        def channel_closed(self, channel):
            pass

    clock = task.Clock()
    clock.advance(42)
    rec = Recorder()
    proto = RemotingProtocol(rec, clock)
    proto.makeConnection(StringTransport())
    proto.dataReceived(codec.encode(RemotingCommand.request(310)))
    assert rec.seen == [42.0]
