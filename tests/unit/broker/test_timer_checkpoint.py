"""What a master tells its slaves of its timer delivery (GET_TIMER_CHECK_POINT / GET_TIMER_METRICS,
Java 5's ``SlaveSynchronize.syncTimerCheckPoint``), and what a promoted slave does with it."""
from __future__ import annotations

import json
import struct

import pytest

from rmqpy.broker.timer_checkpoint import TimerCheckpoint
from rmqpy.protocol.bodies.topic import DataVersion
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.store.role import BrokerRole
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request

NOW_MS = 1_700_000_000_000


def send_timer(broker, deliver_ms: int, body: bytes) -> None:
    props = {"TIMER_DELIVER_MS": str(deliver_ms)}
    assert call(broker, FakeChannel(), send_request("TimerT", body, queue_id=1, props=props)).code == 0


def delivered(broker) -> list[bytes]:
    store = broker.message_store
    return [store.look_message_by_offset(store.get_commit_log_offset_in_queue("TimerT", 1, off)).body
            for off in range(store.get_max_offset_in_queue("TimerT", 1))]


def ask(broker, code: int) -> RemotingCommand:
    return call(broker, FakeChannel(), RemotingCommand.request(code))


def test_the_checkpoint_is_javas_56_bytes_big_endian() -> None:
    cp = TimerCheckpoint(NOW_MS, 0, 7, 9, DataVersion(timestamp=NOW_MS + 1, counter=3, stateVersion=2))
    body = cp.encode()
    assert body == struct.pack(">7q", NOW_MS, 0, 7, 9, 2, NOW_MS + 1, 3)
    assert TimerCheckpoint.decode(body) == cp
    with pytest.raises(ValueError):
        TimerCheckpoint.decode(body[:50])


def test_a_master_tells_the_earliest_pending_time_and_what_it_read_of_the_timer_queue(tmp_path) -> None:
    b, clock = make_broker(tmp_path)
    try:
        send_timer(b, NOW_MS + 2500, b"early")
        send_timer(b, NOW_MS + 9500, b"late")
        answer = ask(b, RequestCode.GET_TIMER_CHECK_POINT)
        assert answer.code == ResponseCode.SUCCESS and len(answer.body) == 56
        cp = TimerCheckpoint.decode(answer.body)
        # TIMER_OUT_MS is the deliver time rounded down to timerPrecisionMs (1 s)
        assert (cp.last_read_time_ms, cp.last_timer_queue_offset, cp.master_timer_queue_offset) == \
            (NOW_MS + 2000, 2, 2)
        version = cp.data_version.counter
        assert TimerCheckpoint.decode(ask(b, RequestCode.GET_TIMER_CHECK_POINT).body).data_version.counter == version
        clock.advance(3.1)
        assert delivered(b) == [b"early"]
        cp = TimerCheckpoint.decode(ask(b, RequestCode.GET_TIMER_CHECK_POINT).body)
        assert cp.last_read_time_ms == NOW_MS + 9000 and cp.data_version.counter == version + 1
        clock.advance(7.0)
        assert delivered(b) == [b"early", b"late"]
        # nothing parked: now, rounded down to the precision
        now_ms = int(clock.seconds() * 1000)
        assert TimerCheckpoint.decode(ask(b, RequestCode.GET_TIMER_CHECK_POINT).body).last_read_time_ms == \
            now_ms // 1000 * 1000
        metrics = json.loads(ask(b, RequestCode.GET_TIMER_METRICS).body)
        assert metrics["timingCount"] == {} and set(metrics["dataVersion"]) == {"counter", "stateVersion", "timestamp"}
    finally:
        b.shutdown()


def test_timer_metrics_count_what_is_parked_per_topic(tmp_path) -> None:
    b, clock = make_broker(tmp_path)
    try:
        send_timer(b, NOW_MS + 5000, b"a")
        send_timer(b, NOW_MS + 6000, b"b")
        body = json.loads(ask(b, RequestCode.GET_TIMER_METRICS).body)
        assert body["timingCount"] == {"TimerT": {"count": 2, "timeStamp": NOW_MS}}
        first = body["dataVersion"]["counter"]
        assert json.loads(ask(b, RequestCode.GET_TIMER_METRICS).body)["dataVersion"]["counter"] == first
        clock.advance(5.5)
        body = json.loads(ask(b, RequestCode.GET_TIMER_METRICS).body)
        assert body["timingCount"]["TimerT"]["count"] == 1 and body["dataVersion"]["counter"] == first + 1
    finally:
        b.shutdown()


def test_without_the_timer_wheel_both_are_refused_as_java_refuses_them(tmp_path) -> None:
    b, _clock = make_broker(tmp_path, timerWheelEnable=False)
    try:
        answer = ask(b, RequestCode.GET_TIMER_CHECK_POINT)
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        answer = ask(b, RequestCode.GET_TIMER_METRICS)
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "The timer message store is null")
    finally:
        b.shutdown()


def test_a_promoted_slave_skips_what_its_master_delivered_and_delivers_the_rest_once(tmp_path) -> None:
    b, clock = make_broker(tmp_path)
    try:
        send_timer(b, NOW_MS + 2500, b"delivered-by-the-master")
        send_timer(b, NOW_MS + 4500, b"also-delivered")
        send_timer(b, NOW_MS + 9500, b"pending")
        b.switch_role(BrokerRole.SLAVE)  # as if these had been replicated from a master
        assert "timer-checkpoint-sync" in b.role_services.names()
        # the master's answer, as the slave's 3 s job gets it: delivered up to 5 s after NOW_MS
        asked: list[str] = []

        def master(addr: str, request: RemotingCommand):
            from twisted.internet import defer
            if request.code != RequestCode.GET_TIMER_CHECK_POINT:  # syncAll's four questions
                return defer.succeed(request.response(ResponseCode.SYSTEM_ERROR, "not here"))
            asked.append(addr)
            body = TimerCheckpoint(NOW_MS + 5000, 0, 3, 3, DataVersion(timestamp=NOW_MS, counter=4)).encode()
            return defer.succeed(request.response(ResponseCode.SUCCESS, body=body))

        b.slave_synchronize.invoke = master
        b.slave_synchronize.master_addr = "10.0.0.2:10911"
        clock.advance(3.1)
        assert asked == ["10.0.0.2:10911"] and b.timer_message_service.read_time_ms == NOW_MS + 5000
        # a slave tells what it heard, as a Java slave does
        assert TimerCheckpoint.decode(ask(b, RequestCode.GET_TIMER_CHECK_POINT).body).last_read_time_ms == \
            NOW_MS + 5000
        b.switch_role(BrokerRole.ASYNC_MASTER)
        clock.advance(20)
        assert delivered(b) == [b"pending"]
        assert b.timer_message_service.progress == 3 and b.timer_message_service.read_time_ms is None
    finally:
        b.shutdown()
    b, clock = make_broker(tmp_path)  # a restart delivers nothing again
    try:
        clock.advance(30)
        assert delivered(b) == [b"pending"]
    finally:
        b.shutdown()
