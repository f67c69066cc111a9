"""PullRequestHoldService's periodic check: a LoopingCall on the injected clock that a failing check does not end."""
from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from rmqpy.broker.longpolling import PullRequestHoldService


@pytest.mark.parametrize("long_polling, interval", [(True, 5.0), (False, 1.0)])
def test_checks_every_interval_on_the_clock_until_stopped(long_polling: bool, interval: float) -> None:
    clock, ticks = Clock(), []
    svc = PullRequestHoldService(clock, lambda: int(clock.seconds() * 1000), lambda topic, queue_id: 0,
                                 lambda req: None, long_polling=long_polling, short_polling_ms=1000)

    def check() -> None:
        ticks.append(clock.seconds())
        if len(ticks) == 1:
            raise RuntimeError("a failing check")

    svc.check_hold_requests = check  # type: ignore[method-assign]
    svc.start()
    clock.pump([interval / 2] * 8)
    assert ticks == [interval * n for n in (1, 2, 3, 4)]  # the failure in the first did not end the loop
    svc.stop()
    clock.advance(interval * 10)
    assert len(ticks) == 4 and not clock.getDelayedCalls()
