"""The rate-limited log lines of the broker and the name server run on their injected clock."""
from __future__ import annotations

from twisted.internet import task

from rmqpy.namesrv.config import NamesrvConfig, NettyServerConfig
from rmqpy.namesrv.controller import NamesrvController
from rmqpy.remoting.ratelimit import DEFAULT_BURST, DEFAULT_SUMMARY_INTERVAL, RateLimitedLogger, limiter_for
from tests.unit.broker.helpers import make_broker


def test_every_rate_limited_logger_of_a_broker_is_on_its_clock_which_drives_the_limits(tmp_path):
    broker, clock = make_broker(tmp_path)
    try:
        owners = [broker, broker.topic_config_manager, broker.subscription_group_manager, broker.producer_manager,
                  broker.consumer_manager, broker.slave_synchronize, broker.pop_service, broker.pop_revive_service,
                  broker.schedule_message_service, broker.timer_message_service,
                  broker.transactional_message_service, *broker.processors.values()]
        limited = [o for o in owners if isinstance(getattr(o, "log", None), RateLimitedLogger)]
        assert len(limited) >= 20
        assert [type(o).__name__ for o in limited if o.log.clock is not clock] == []
        log = broker.topic_config_manager.log
        for n in range(DEFAULT_BURST + 3):
            log.warn("flooded {n}", n=n)
        kind = f"{log.namespace}: flooded {{n}}"
        assert limiter_for(clock).suppressed(kind) == 3
        clock.advance(DEFAULT_SUMMARY_INTERVAL)  # the summary ran on the broker's clock
        assert limiter_for(clock).suppressed(kind) == 0
    finally:
        broker.shutdown()


def test_the_name_servers_rate_limited_loggers_are_on_its_clock(tmp_path):
    clock = task.Clock()
    ctl = NamesrvController(NamesrvConfig(kvConfigPath=str(tmp_path / "kv.json")), NettyServerConfig(listenPort=0),
                            reactor=object(), clock=clock)
    assert ctl.routes.log.clock is ctl.kv.log.clock is ctl.processor.log.clock is clock
