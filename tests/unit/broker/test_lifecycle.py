"""A broker driven on a task.Clock leaves nothing behind when it stops: no DelayedCall, no thread."""
from __future__ import annotations

import threading

from tests.unit.broker.helpers import make_broker


def test_shutdown_leaves_no_delayed_call(tmp_path) -> None:
    threads = set(threading.enumerate())
    b, clock = make_broker(tmp_path)
    clock.advance(61)  # every periodic job has run once and rescheduled itself
    assert clock.getDelayedCalls()
    b.shutdown()
    assert [c for c in clock.getDelayedCalls() if c.active()] == []
    assert set(threading.enumerate()) <= threads


def test_nothing_is_scheduled_before_start(tmp_path) -> None:
    from twisted.internet import task

    from rmqpy.broker.config import BrokerSettings
    from rmqpy.broker.controller import BrokerController
    clock = task.Clock()
    settings = BrokerSettings()
    settings.store.storePathRootDir = str(tmp_path / "store")
    settings.broker.namesrvAddr = None
    BrokerController(settings, clock)
    assert clock.getDelayedCalls() == []
