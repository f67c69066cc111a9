"""A broker driven on a task.Clock leaves nothing behind when it stops: no DelayedCall, no thread."""
from __future__ import annotations

import threading

from tests.unit.broker.helpers import make_broker


def test_shutdown_leaves_no_delayed_call(tmp_path) -> None:
    threads = set(threading.enumerate())
    b, clock = make_broker(tmp_path)
    clock.advance(61)  # every periodic job has run once and rescheduled itself
    assert clock.getDelayedCalls()
    b.ids_notifier.changed("a_large_group", 1000)  # a round gathered for a group over 64 members
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


def test_the_tree_starts_in_order_and_stops_in_reverse_one_after_the_other(tmp_path) -> None:
    from twisted.internet import defer

    b, clock = make_broker(tmp_path)
    core = b.service()
    names = [s.name for s in core]
    assert names[:2] == ["store", "config-files"] and names.index("name-server-registration") < names.index("role")
    stopped: list[str] = []
    registration = core.getServiceNamed("name-server-registration")
    unregistered: defer.Deferred[None] = defer.Deferred()
    step = registration.getServiceNamed("register")
    step._stop = lambda: unregistered.addCallback(lambda _: stopped.append("unregistered"))
    store_step = core.getServiceNamed("store")
    store_step._stop = lambda: (stopped.append("store closed"), b.close_store())
    done = b.shutdown()
    assert stopped == [] and not done.called  # the store waits for the name servers' answers
    unregistered.callback(None)
    assert stopped == ["unregistered", "store closed"] and done.called
    assert not b.started and [c for c in clock.getDelayedCalls() if c.active()] == []
