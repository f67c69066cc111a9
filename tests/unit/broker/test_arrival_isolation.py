"""Issue 31 case 4: a message's arrival wakes every waiter whatever one of them does.

A long-polling consumer whose SQL92 filter failed (a 700-term expression overflowed Python's
recursion) ended the wake-up loop of its queue: the other consumers held there waited for the
5 s check, and every message sent logged a ~135 KB traceback. Now a failing filter is no match
(Java's ``catch (Throwable)``), each held request and each arrive listener is on its own, and
every traceback on this path is rate-limited.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet.task import Clock
from twisted.logger import globalLogPublisher

from rmqpy.broker.longpolling import PullRequest, PullRequestHoldService
from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.message import decode_records
from tests.unit.broker.helpers import FakeChannel, call, make_broker, pull_request, send_request


class _Filter:
    def __init__(self, fails: bool) -> None:
        self.fails = fails

    def is_matched_by_consume_queue(self, tags_code: Any, cq_ext: Any = None) -> bool:
        if self.fails:
            raise RecursionError("maximum recursion depth exceeded")
        return True

    def is_matched_by_commit_log(self, data: Any, properties: Any) -> bool:
        return True


def _failures(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if "log_failure" in e and "held pull" in (e.get("log_format") or "")]


def test_a_held_request_whose_filter_raises_does_not_keep_the_others_waiting() -> None:
    clock = Clock()
    clock.advance(1000)
    woken: list[PullRequest] = []
    svc = PullRequestHoldService(clock, lambda: int(clock.seconds() * 1000), lambda topic, queue_id: 0,
                                 woken.append)
    reqs = [PullRequest(request=i, channel=FakeChannel(), timeout_ms=15000, suspend_ts=int(clock.seconds() * 1000),
                        pull_from_offset=0, message_filter=_Filter(fails=i == 1)) for i in range(3)]
    for req in reqs:
        svc.suspend("T", 0, req)
    svc.start()
    events: list[dict[str, Any]] = []
    globalLogPublisher.addObserver(events.append)
    try:
        svc.notify_message_arriving("T", 0, 1, properties={})
        assert [r.request for r in woken] == [0, 2]  # the one after the failing one too
        assert svc.held_count() == 1 and svc.table[("T", 0)] == [reqs[1]]
        assert len(_failures(events)) == 1
        for offset in range(2, 102):  # the failing filter meets 100 more messages: 1 line a second at most
            svc.notify_message_arriving("T", 0, offset, properties={})
        assert len(_failures(events)) <= 20
        clock.pump([5] * 4)  # the failing one is answered at its timeout (the 5 s check), once
        assert [r.request for r in woken] == [0, 2, 1] and svc.held_count() == 0
    finally:
        svc.stop()
        globalLogPublisher.removeObserver(events.append)


def test_a_failing_arrive_listener_does_not_stop_the_others_and_is_rate_limited(tmp_path, caplog) -> None:
    broker, clock = make_broker(tmp_path)
    try:
        seen: list[int] = []

        def failing(*args: Any) -> None:
            raise RecursionError("maximum recursion depth exceeded")

        store = broker.message_store
        store.arrive_listeners.insert(0, failing)
        store.add_arrive_listener(lambda topic, queue_id, offset, *rest: seen.append(offset))
        ch = FakeChannel()
        with caplog.at_level(logging.ERROR, logger="rmqpy.store.dispatch"):
            for i in range(60):
                assert call(broker, ch, send_request("TA", f"m{i}".encode())).code == ResponseCode.SUCCESS
        assert seen == list(range(1, 61))
        lines = [r for r in caplog.records if "arrive listener" in r.getMessage()]
        assert 1 <= len(lines) <= 20 and lines[0].exc_info is not None
    finally:
        broker.shutdown()


def test_a_700_term_sql92_consumer_is_served_and_wakes_with_the_others(tmp_path) -> None:
    """The issue's case: one consumer long-polls with 700 ANDed terms, another with a tag, on
    one queue; a message wakes both at once, and the SQL92 pull is answered, not SYSTEM_ERROR."""
    broker, clock = make_broker(tmp_path, enablePropertyFilter=True)
    try:
        props = {f"p{i}": str(i) for i in range(700)}
        expression = " AND ".join(f"p{i} = {i}" for i in range(700))
        sql, tag, sender = FakeChannel(), FakeChannel(), FakeChannel()
        call(broker, sender, send_request("TS", b"first", props={"p0": "-1"}))  # not for the SQL92 consumer
        resp = call(broker, sql, pull_request("TS", "GS", sys_flag=0x4, subscription=expression,
                                              expression_type="SQL92", suspend_ms=15000))
        assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY  # evaluated: no match (was SYSTEM_ERROR)
        assert resp.remark == "NO_MATCHED_MESSAGE" and resp.ext_fields["nextBeginOffset"] == "1"
        resp = call(broker, sql, pull_request("TS", "GS", offset=1, sys_flag=0x6, subscription=expression,
                                              expression_type="SQL92", suspend_ms=15000))
        assert resp is None and broker.pull_hold_service.held_count() == 1  # nothing new: held
        broker.dispatcher.dispatch(tag, pull_request("TS", "GT", offset=1, suspend_ms=15000))
        assert tag.sent == [] and broker.pull_hold_service.held_count() == 2
        call(broker, sender, send_request("TS", b"second", props=props))
        # both answered without the 5 s check (the clock has not moved)
        assert [m.body for m in decode_records(sql.sent[-1].body)] == [b"second"]
        assert [m.body for m in decode_records(tag.sent[-1].body)] == [b"second"]
        assert broker.pull_hold_service.held_count() == 0
    finally:
        broker.shutdown()


def test_a_batch_put_wakes_held_pulls_once_its_units_are_all_written(tmp_path) -> None:
    """Issue 29: a batch put writes its consume queue units together, then tells each listener.
    A pull held on the queue is woken (by the first record its filter takes) and answered with the
    whole batch; one held with a tag the batch's last message alone carries is woken by that one;
    nothing is held on another queue, which the batch does not touch."""
    from rmqpy.protocol.codes import RequestCode
    from rmqpy.protocol.message import encode_batch_body
    broker, clock = make_broker(tmp_path)
    try:
        every, tagged, other, sender = FakeChannel(), FakeChannel(), FakeChannel(), FakeChannel()
        assert call(broker, sender, send_request("TQ", b"topic", queue_id=3)).code == ResponseCode.SUCCESS
        for ch, group, sub, qid in ((every, "GA", "*", 0), (tagged, "GB", "late", 0), (other, "GC", "*", 1)):
            assert call(broker, ch, pull_request("TQ", group, queue_id=qid, subscription=sub)) is None
        assert broker.pull_hold_service.held_count() == 3
        items = [(0, f"m{i}".encode(), {"TAGS": "late" if i == 4 else "early", "UNIQ_KEY": f"U{i}"})
                 for i in range(5)]
        resp = call(broker, sender, send_request("TQ", encode_batch_body(items), code=RequestCode.SEND_BATCH_MESSAGE))
        assert resp.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_records(every.sent[-1].body)] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
        assert [m.body for m in decode_records(tagged.sent[-1].body)] == [b"m4"]
        assert other.sent == [] and broker.pull_hold_service.held_count() == 1
    finally:
        broker.shutdown()
