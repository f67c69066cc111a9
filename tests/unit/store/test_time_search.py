"""SEARCH_OFFSET_BY_TIMESTAMP's store search against Java 5.3.3's rule (rmqpy/store/time_search.py).

The reference here is the rule Java's steps give on a queue whose store times never go down: LOWER,
the first offset whose store time is at or after the time, else the max offset; UPPER, the last
offset at or before it, else the min offset. The store's consume queue files hold 50 units
(tests/unit/store/conftest.py), so searches cross file boundaries."""
from __future__ import annotations

import os

import pytest

from rmqpy.store.time_search import Boundary

from .conftest import T0, msg

LOWER, UPPER = Boundary.LOWER, Boundary.UPPER


def put_at(harness, steps_ms: list[int]) -> list[int]:
    """One message per step: the clock moves ``step`` ms before each put; returns the store times."""
    times = []
    for step in steps_ms:
        harness.clock.advance(step / 1000)
        harness.put(msg())
        times.append(harness.store.get_message_store_timestamp("T", 0, len(times)))
    return times


def expected(times: list[int], lo: int, ts: int, boundary: Boundary) -> int:
    """The rule, on the live offsets ``lo..len(times)-1``."""
    live = range(lo, len(times))
    if boundary is LOWER:
        return next((i for i in live if times[i] >= ts), len(times))
    return next((i for i in reversed(live) if times[i] <= ts), lo)


def probes(times: list[int]) -> list[int]:
    return sorted({0, -1, *times, *(t - 1 for t in times), *(t + 1 for t in times), times[-1] + 10**6})


def test_three_messages_as_java_answered(harness):
    """The queue measured against Java 5.3.3 (docs/dashboard.md): store times t1 < t2 < t3."""
    s = harness.open()
    t1, _t2, t3 = put_at(harness, [0, 5, 5])
    asked = {ts: (s.get_offset_in_queue_by_time("T", 0, ts), s.get_offset_in_queue_by_time("T", 0, ts, UPPER))
             for ts in (t1 - 1, t1, t1 + 1, t3, t3 + 1)}
    assert asked == {t1 - 1: (0, 0), t1: (0, 0), t1 + 1: (1, 0), t3: (2, 2), t3 + 1: (3, 2)}


def test_an_empty_or_unknown_queue_answers_0(harness):
    s = harness.open()
    for b in (LOWER, UPPER):
        assert s.get_offset_in_queue_by_time("T", 0, 0, b) == 0
        assert s.get_offset_in_queue_by_time("Nope", 3, int(T0 * 1000), b) == 0
    s.find_consume_queue("T", 1)  # made, no file yet
    assert s.get_offset_in_queue_by_time("T", 1, int(T0 * 1000), UPPER) == 0


@pytest.mark.parametrize("boundary", [LOWER, UPPER])
def test_many_files_every_time_as_the_rule(harness, boundary):
    """140 messages over three consume queue files, times spaced unevenly and some equal (runs of
    one time cross the boundaries of files 0/1 and 1/2): every time before, at, between and after them."""
    s = harness.open()
    steps = [3 if i % 7 else 0 for i in range(140)]
    for i in range(44, 57):  # offsets 43..56: one time across the first file boundary (50)
        steps[i] = 0
    for i in range(96, 130):  # 95..129: one time across the second (100)
        steps[i] = 0
    times = put_at(harness, steps)
    assert len(s.find_consume_queue("T", 0).queue.files) == 3
    got = {ts: s.get_offset_in_queue_by_time("T", 0, ts, boundary) for ts in probes(times)}
    assert got == {ts: expected(times, 0, ts, boundary) for ts in got}
    assert got[times[50]] == (43 if boundary is LOWER else 56)
    assert got[times[100]] == (95 if boundary is LOWER else 129)


@pytest.mark.parametrize("boundary", [LOWER, UPPER])
def test_all_one_time(harness, boundary):
    s = harness.open()
    (t, *_rest) = put_at(harness, [0] * 60)
    assert s.get_offset_in_queue_by_time("T", 0, t, boundary) == (0 if boundary is LOWER else 59)
    assert s.get_offset_in_queue_by_time("T", 0, t - 1, boundary) == 0
    assert s.get_offset_in_queue_by_time("T", 0, t + 1, boundary) == (60 if boundary is LOWER else 59)


@pytest.mark.parametrize("boundary", [LOWER, UPPER])
def test_the_head_of_the_queue_deleted(harness, boundary):
    """Retention dropped the first commit log files: times of the dropped messages answer the min
    offset (the first message left), the others as the rule on what is left."""
    s = harness.open(fileReservedTime=1)
    times = put_at(harness, [1000] * 800)
    for f in s.commit_log.queue.files[:-1]:
        f.flushed_position = f.wrote_position
    old = os.path.getmtime(s.commit_log.queue.files[0].path) - 7200
    for f in s.commit_log.queue.files[:2]:
        os.utime(f.path, (old, old))
    done: list[int] = []
    s.delete_expired_files(force_time=True).addCallback(done.append)
    assert done == [2]
    lo = s.get_min_offset_in_queue("T", 0)
    assert 50 < lo < 800  # the first consume queue file is below it
    got = {ts: s.get_offset_in_queue_by_time("T", 0, ts, boundary) for ts in probes(times)}
    assert got == {ts: expected(times, lo, ts, boundary) for ts in got}
    assert got[times[0]] == lo


def test_boundary_of_a_header_value():
    """Java's BoundaryType.getType: "upper" in any case, else LOWER (a 5.x client sends the enum's name)."""
    assert [Boundary.of(v) for v in ("UPPER", "upper", "Upper")] == [UPPER] * 3
    assert [Boundary.of(v) for v in ("LOWER", None, "", "up", "UPPER ")] == [LOWER] * 5
