"""PopReviveService's timer: a LoopingCall on the injected clock, master-only, following reviveInterval."""
from __future__ import annotations

from types import SimpleNamespace

from twisted.internet.task import Clock

from rmqpy.broker.pop.revive import PopReviveService


class CountingStore:
    """Answers every read of the revive queue with nothing, counting the reads."""

    def __init__(self) -> None:
        self.reads = 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return 0

    def get_message(self, group: str, topic: str, queue_id: int, offset: int, n: int) -> None:
        self.reads += 1
        return None


def test_revive_ticks_on_the_injected_clock_as_master_only_and_follows_the_interval() -> None:
    clock, store = Clock(), CountingStore()
    interval, master = [1000], [True]
    pop = SimpleNamespace(revive_topic="rmq_sys_REVIVE_LOG_DefaultCluster", revive_queue_num=1)
    offsets = SimpleNamespace(query_offset=lambda group, topic, queue_id: -1)
    svc = PopReviveService(pop, clock=clock, now_ms=lambda: int(clock.seconds() * 1000),  # type: ignore[arg-type]
                           store=lambda: store, offsets=offsets, topics=None, groups=None,  # type: ignore[arg-type]
                           store_host=("127.0.0.1", 10911), interval_ms=lambda: interval[0],
                           is_master=lambda: master[0], ck_buffer_size=100)
    svc.start()
    clock.advance(0.999)
    assert store.reads == 0  # the first tick comes one interval after the start
    clock.advance(0.001)
    assert store.reads == 1
    master[0] = False
    clock.advance(1)
    assert store.reads == 1  # a slave does not revive
    master[0], interval[0] = True, 3000
    clock.advance(1)
    assert store.reads == 2
    clock.advance(2.9)
    assert store.reads == 2  # the new reviveInterval applies from this tick on
    clock.advance(0.1)
    assert store.reads == 3
    svc.stop()
    clock.advance(30)
    assert store.reads == 3 and not clock.getDelayedCalls()
