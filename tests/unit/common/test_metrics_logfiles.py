"""rmqpy/common/metrics.py, rmqpy/broker/metrics.py's counting and rmqpy/common/logfiles.py."""
from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from twisted.internet import task
from twisted.logger import LogLevel

from rmqpy.broker.metrics import BrokerMetricsHook, message_type
from rmqpy.common import logfiles
from rmqpy.common.metrics import BaseLabels, CallbackCollector, ReactorLag, RpcLatency
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand


def test_message_type_as_java_reads_the_properties() -> None:
    assert message_type(None) == "normal"
    assert message_type("KEYS\x01k\x02WAIT\x01true") == "normal"
    assert message_type("TRAN_MSG\x01true\x02PGROUP\x01p") == "transaction"
    assert message_type("__SHARDINGKEY\x01a") == "fifo"
    assert message_type("DELAY\x013") == "delay"
    assert message_type("TIMER_DELIVER_MS\x011700000000000") == "delay"
    assert message_type("MY_DELAY_NOTE\x01x") == "normal"  # a user key that only contains the word


def _scrape(*sources) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CallbackCollector(*sources))
    return generate_latest(registry).decode()


def test_rpc_latency_series_by_code_with_java_names_and_buckets() -> None:
    clock = task.Clock()
    clock.advance(100)
    rpc = RpcLatency(clock)
    req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2)
    rpc.record(req, req.response(ResponseCode.SUCCESS), 100 - 0.004, False)  # 4 ms
    rpc.record(req, req.response(ResponseCode.SUCCESS), 100 - 2.5, False)  # 2500 ms
    base = BaseLabels("C", "broker", "b1")
    text = _scrape(lambda: rpc.families(base))
    pairs = dict(cluster="C", is_long_polling="false", node_id="b1", node_type="broker",
                 otel_scope_name="broker-meter", protocol_type="remoting", request_code="send_message_v2",
                 response_code="success", result="success")

    def line(name: str, value: float, **extra: str) -> str:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted({**pairs, **extra}.items()))
        return f"{name}{{{labels}}} {value}"

    assert line("rocketmq_rpc_latency_milliseconds_count", 2.0) in text
    assert line("rocketmq_rpc_latency_milliseconds_bucket", 0.0, le="3.0") in text
    assert line("rocketmq_rpc_latency_milliseconds_bucket", 1.0, le="5.0") in text
    assert line("rocketmq_rpc_latency_milliseconds_bucket", 2.0, le="3000.0") in text
    assert line("rocketmq_rpc_latency_milliseconds_sum", 2504.0) in text


def test_send_and_pull_hooks_count_messages_bytes_and_pull_offsets() -> None:
    hook = BrokerMetricsHook(lambda topic: topic.startswith("rmq_sys_"))
    req = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, body=b"x" * 100,
                                  ext_fields={"b": "T", "i": "KEYS\x01k"})
    ok = req.response(ResponseCode.SUCCESS)
    assert hook.send_message_after(ok, req, "T") is ok
    hook.send_message_after(req.response(ResponseCode.SYSTEM_ERROR), req, "T")  # not stored: not counted
    hook.send_message_after(ok, req, "%RETRY%g")  # Java leaves retry/DLQ topics out
    series = hook.messages_in[("T", "normal")]
    assert series.nums == 1 and series.bytes > 100 and sum(series.size.counts) == 1
    assert list(hook.messages_in) == [("T", "normal")]
    record = (8).to_bytes(4, "big") + b"\0" * 4
    pull = RemotingCommand.request(RequestCode.PULL_MESSAGE).response(
        ResponseCode.SUCCESS, ext_fields={"nextBeginOffset": "7"})
    pull.body = record * 3
    hook.consume_message_after("g", "T", 2, pull)
    assert hook.messages_out[("T", "g")] == [3, 24]
    assert hook.pull_offsets[("g", "T", 2)] == 7


def test_reactor_lag_measures_how_late_the_timer_ran() -> None:
    clock = task.Clock()
    lag = ReactorLag(clock, interval=1.0)
    lag.start()
    clock.advance(1.25)  # due at 1.0, run at 1.25
    assert lag.last_ms == pytest.approx(250.0)
    assert sum(lag.hist.counts) == 2
    lag.stop()


def test_component_files_roll_by_size_and_keep_max_index(tmp_path: Path) -> None:
    obs = logfiles.ComponentLogObserver(str(tmp_path), logfiles.BROKER_ROUTES, LogLevel.info, max_bytes=200,
                                        max_files=2)
    try:
        for i in range(30):
            obs({"log_namespace": "rmqpy.store.message_store", "log_level": LogLevel.info,
                 "log_format": "line {i}", "i": i, "log_time": 1.7e9})
        obs({"log_namespace": "rmqpy.broker.controller.BrokerController", "log_level": LogLevel.debug,
             "log_format": "hidden", "log_time": 1.7e9})
        obs({"log_namespace": "rmqpy.broker.controller.BrokerController", "log_level": LogLevel.warn,
             "log_format": "two\nlines", "log_time": 1.7e9})
    finally:
        obs.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["broker.log", "remoting.log", "stats.log", "store.log", "store.log.1", "store.log.2",
                     "transaction.log"]
    broker = (tmp_path / "broker.log").read_text().splitlines()
    assert len(broker) == 1 and broker[0].endswith(" WARN rmqpy.broker.controller.BrokerController - two\\nlines")
    assert "line 29" in (tmp_path / "store.log").read_text()


def test_daily_policy_rolls_when_the_day_changes(tmp_path: Path) -> None:
    now = [1.7e9]
    f = logfiles.RollingLogFile("x.log", str(tmp_path), 0, 3, True, now=lambda: now[0])
    f.write("day one\n")
    now[0] += 86400
    f.write("day two\n")
    f.close()
    assert (tmp_path / "x.log.1").read_text() == "day one\n"
    assert (tmp_path / "x.log").read_text() == "day two\n"


def test_bad_level_or_policy_is_an_error() -> None:
    with pytest.raises(ValueError):
        logfiles.parse_level("LOUD")
    with pytest.raises(ValueError):
        logfiles.setup("", "INFO", logfiles.BROKER_ROUTES, 1, 1, "weekly")


def test_transaction_and_dlq_hooks_count_per_topic() -> None:
    import time as _time
    hook = BrokerMetricsHook(lambda topic: False)
    born = int(_time.time() * 1000) - 7000
    hook.end_transaction_after("T", True, born)
    hook.end_transaction_after("T", False, born)
    hook.end_transaction_after("T", False, born)
    hook.send_to_dlq("g", "T")
    assert hook.committed == {"T": 1} and hook.rolled_back == {"T": 2} and hook.to_dlq == {("T", "g"): 1}
    hist = hook.finish_latency["T"]
    assert hist.counts[1] == 1 and 7 <= hist.sum <= 9  # seconds, as Java records them (bucket le=60)


def test_twistd_replay_of_early_events_is_not_written_twice(tmp_path: Path) -> None:
    obs = logfiles.ComponentLogObserver(str(tmp_path), logfiles.BROKER_ROUTES, LogLevel.info)
    try:
        event = {"log_namespace": "rmqpy.store.message_store", "log_level": LogLevel.info, "log_format": "load",
                 "log_time": 1.7e9}
        obs(event)
        obs(event)  # twistd's LogBeginner replays its buffer to every observer
        obs.running()
        obs({**event, "log_format": "later"})
    finally:
        obs.close()
    assert [line.rsplit(" - ", 1)[1] for line in (tmp_path / "store.log").read_text().splitlines()] == \
        ["load", "later"]


def test_stats_log_prints_java_minute_lines_at_each_minute(tmp_path: Path) -> None:
    from rmqpy.broker.stats import BrokerStatsManager
    obs = logfiles.ComponentLogObserver(str(tmp_path), logfiles.BROKER_ROUTES, LogLevel.info)
    clock = task.Clock()
    clock.advance(1_700_000_010)  # half a minute past a whole minute
    stats = BrokerStatsManager(clock, "C", obs.printer("stats.log", "rmqpy.broker.stats"))
    stats.start()
    try:
        stats.inc_topic_put("T", 3, 300)
        clock.advance(29)
        assert (tmp_path / "stats.log").read_text() == ""
        clock.advance(1)  # the whole minute
        lines = (tmp_path / "stats.log").read_text().splitlines()
        import re
        assert any(re.search(r" INFO rmqpy\.broker\.stats - \[TOPIC_PUT_NUMS\] \[T\] Stats In One Minute, SUM: 3 "
                             r"TPS: \d+\.\d\d AVGPT: 3\.00$", line) for line in lines), lines
        assert (tmp_path / "broker.log").read_text() == ""
        clock.advance(60)
        assert len((tmp_path / "stats.log").read_text().splitlines()) == 2 * len(lines)
    finally:
        stats.stop()
        obs.close()
