"""Log lines a peer can trigger are rate-limited (issue 11, row 6): a flood of bad requests
or bad frames writes a bounded number of lines, without tracebacks, and says what it held back."""
from __future__ import annotations

from twisted.internet import task
from twisted.internet.testing import StringTransport
from twisted.logger import LogLevel, globalLogPublisher

from rmqpy.protocol import command as codec
from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.command import HeaderError, RemotingCommand
from rmqpy.remoting.dispatch import RequestDispatcher
from rmqpy.remoting.protocol import RemotingServerFactory
from rmqpy.remoting.ratelimit import DEFAULT_BURST, DEFAULT_SUMMARY_INTERVAL, LogRateLimiter, limiter_for

CODE = 4243


def _texts(events: list[dict]) -> list[str]:
    from twisted.logger import formatEvent
    return [formatEvent(e) for e in events]


def test_burst_then_rate_then_summary() -> None:
    clock = task.Clock()
    limiter = LogRateLimiter(clock, rate=2, burst=3)
    assert [limiter.allow("k") for _ in range(5)] == [True, True, True, False, False]
    assert limiter.suppressed("k") == 2
    clock.advance(0.5)  # one token back at 2 per second
    assert limiter.allow("k") and not limiter.allow("k")
    assert limiter.allow("other")  # each kind has its own bucket


def test_summary_line_reports_what_was_held_back(logged) -> None:
    clock = task.Clock()
    limiter = LogRateLimiter(clock, rate=1, burst=1, summary_interval=10)
    for _ in range(11):
        limiter.allow("bad-request")
    clock.advance(9.0)
    assert not logged
    clock.advance(1.0)
    assert _texts(logged) == ["suppressed 10 similar log lines (bad-request) in the last 10 s"]
    assert limiter.suppressed("bad-request") == 0
    clock.advance(5.0)  # nothing held back: no further summary
    assert len(logged) == 1


def test_limiter_for_is_one_per_clock() -> None:
    a, b = task.Clock(), task.Clock()
    assert limiter_for(a) is limiter_for(a)
    assert limiter_for(a) is not limiter_for(b)


def _serve(clock: task.Clock, fn) -> tuple:
    dispatcher = RequestDispatcher()

    class P:
        def process_request(self, channel, request):
            return fn(channel, request)

    dispatcher.register(CODE, P())
    factory = RemotingServerFactory(dispatcher, clock)
    proto = factory.buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    return proto, transport


def _request(opaque: int) -> bytes:
    cmd = RemotingCommand.request(CODE)
    cmd.opaque = opaque
    return codec.encode(cmd)


def test_500_bad_requests_are_answered_and_log_a_bounded_number_of_lines(logged) -> None:
    clock = task.Clock()

    def bad(channel, request):
        raise HeaderError("the custom field <topic> is null")

    proto, transport = _serve(clock, bad)
    for i in range(500):
        proto.dataReceived(_request(i))
    data = transport.value()
    answers = []
    while data:
        n = int.from_bytes(data[:4], "big")
        answers.append(codec.decode(data[4:4 + n]))
        data = data[4 + n:]
    assert len(answers) == 500 and {a.code for a in answers} == {ResponseCode.SYSTEM_ERROR}
    mine = [e for e in logged if "rmqpy" in str(e.get("log_namespace"))]
    assert not [e for e in mine if e.get("log_failure") is not None]  # no traceback
    assert len(mine) == DEFAULT_BURST
    assert all(e["log_level"] == LogLevel.warn for e in mine)
    assert _texts(mine)[0] == "192.168.1.1:54321: bad 4243 request: the custom field <topic> is null"
    clock.advance(DEFAULT_SUMMARY_INTERVAL)
    assert f"suppressed {500 - DEFAULT_BURST} similar log lines (bad-request) in the last 10 s" in _texts(logged)


def test_processor_bug_keeps_its_traceback_but_rate_limited(logged) -> None:
    clock = task.Clock()
    proto, transport = _serve(clock, lambda ch, req: 1 / 0)
    for i in range(100):
        proto.dataReceived(_request(i))
    failures = [e for e in logged if e.get("log_failure") is not None]
    assert len(failures) == DEFAULT_BURST
    assert failures[0]["log_failure"].check(ZeroDivisionError)


def test_bad_frames_from_many_connections_share_one_budget(logged) -> None:
    clock = task.Clock()
    factory = RemotingServerFactory(RequestDispatcher(), clock)
    closed = 0
    for _ in range(200):
        proto = factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        header = b'{"code":1e999}'
        proto.dataReceived((4 + len(header)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header)
        closed += transport.disconnecting
    assert closed == 200
    lines = [t for t in _texts(logged) if "closing connection" in t]
    assert len(lines) == DEFAULT_BURST
    assert "cannot convert float infinity" in lines[0]
    assert not [e for e in logged if e.get("log_failure") is not None]


def test_clip_bounds_client_text_and_escapes_control_characters():
    from rmqpy.remoting.ratelimit import clip
    assert clip("T" * 8192) == "T" * 200 + "…(8192 chars)"
    assert clip(b"\x00" * 5000) == "\\x00" * 200 + "…(5000 chars)"
    # a newline in a client's text cannot start a forged log line
    assert clip("g\n2026-01-01T00:00:00+0000 [rmqpy#info] fake") == "g\\x0a2026-01-01T00:00:00+0000 [rmqpy#info] fake"
    assert clip(("T" * 300, "broker-a", 1)).endswith("…(319 chars)")  # a message queue tuple
    assert clip("short") == "short" and clip(7) == 7 and clip(None) is None


def test_rate_limited_logger_limits_per_call_site_and_clips():
    import weakref

    from twisted.logger import formatEvent

    from rmqpy.remoting import ratelimit

    saved = ratelimit._limiters
    ratelimit._limiters = weakref.WeakKeyDictionary()  # fresh buckets for the global reactor
    events = []
    globalLogPublisher.addObserver(events.append)
    try:
        class Processor:
            log = ratelimit.RateLimitedLogger()

            def bad(self, topic):
                self.log.warn("the topic {t} not exist", t=topic)

            def other(self):
                self.log.info("another call site")

        p = Processor()
        for _ in range(500):
            p.bad("X" * 10_000 + "\n")
        p.other()
    finally:
        globalLogPublisher.removeObserver(events.append)
        ratelimit._limiters = saved
    lines = [formatEvent(e) for e in events if e.get("log_namespace", "").endswith("Processor")]
    assert len(lines) == ratelimit.DEFAULT_BURST + 1  # the burst of one site, and the other site's line
    assert lines[0] == "the topic " + "X" * 200 + "…(10001 chars) not exist"
    assert lines[-1] == "another call site"
