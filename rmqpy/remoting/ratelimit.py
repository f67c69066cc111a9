"""Rate-limited log lines for what remote peers can trigger at will.

A client that sends a bad request per millisecond must not write a line per request: the
log would grow by megabytes a minute and the reactor would spend its time formatting
tracebacks. Each *kind* of line (a fixed string chosen by the caller: "bad-request",
"bad-frame", ...) has a token bucket: ``burst`` lines at once, then ``rate`` lines a second.
What is held back is counted, and one line per kind and ``summary_interval`` reports the
count. The clock is injected (``twisted.internet.task.Clock`` in tests).
"""
from __future__ import annotations

import re
import weakref
from typing import Any

from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import ILogObserver, Logger, LogLevel
from twisted.python.failure import Failure

#: Lines per second and burst per kind: enough to see what is going on, small enough that
#: a flood of bad requests writes a few hundred bytes a second per kind.
DEFAULT_RATE = 1.0
DEFAULT_BURST = 20
#: How often a kind that held lines back says so ("suppressed N similar log lines").
DEFAULT_SUMMARY_INTERVAL = 10.0
#: Longest client-supplied text a log line quotes (topic, group, client ID, remark, value):
#: a 70 KB header field must not become a 70 KB log line.
MAX_LOGGED_TEXT = 200


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def clip(value: Any, limit: int = MAX_LOGGED_TEXT) -> Any:
    """``value`` for a log line: text (``str``, ``bytes``, or anything whose ``str()`` is
    long, such as a message queue with a client's topic in it) longer than ``limit``
    characters is cut to ``limit`` with "…(N chars)" saying how long it was, and control
    characters (a newline could forge a log line) are written as ``\\xNN``; numbers, None
    and short plain values are returned as they are."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        text = bytes(value[:limit + 1]).decode("utf-8", "backslashreplace")
        full = len(value)
    else:
        text = value if isinstance(value, str) else str(value)
        full = len(text)
    if full > limit:
        return _CONTROL.sub(_escape, text[:limit]) + f"…({full} chars)"
    if _CONTROL.search(text) is not None:
        return _CONTROL.sub(_escape, text)
    return value


def _clipped(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword values of a log call through :func:`clip` (``log_*`` keys are the
    logger's own and are left alone)."""
    return {k: v if k.startswith("log_") else clip(v) for k, v in kwargs.items()}


class _Bucket:
    __slots__ = ("tokens", "stamp", "suppressed", "flush")

    def __init__(self, tokens: float, stamp: float) -> None:
        self.tokens = tokens
        self.stamp = stamp
        self.suppressed = 0
        self.flush: IDelayedCall | None = None


class LogRateLimiter:
    """Token buckets per kind of log line, and the "suppressed N similar lines" summaries."""

    summary_log = Logger(namespace="rmqpy.remoting.ratelimit")

    def __init__(self, clock: IReactorTime, rate: float = DEFAULT_RATE, burst: int = DEFAULT_BURST,
                 summary_interval: float = DEFAULT_SUMMARY_INTERVAL) -> None:
        self.clock = clock
        self.rate = float(rate)
        self.burst = float(burst)
        self.summary_interval = float(summary_interval)
        self._buckets: dict[str, _Bucket] = {}

    def allow(self, kind: str) -> bool:
        """Whether a line of ``kind`` may be written now; if not, it is counted for the summary."""
        now = self.clock.seconds()
        bucket = self._buckets.get(kind)
        if bucket is None:
            bucket = self._buckets[kind] = _Bucket(self.burst, now)
        else:
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.stamp) * self.rate)
            bucket.stamp = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return True
        bucket.suppressed += 1
        if bucket.flush is None:
            bucket.flush = self.clock.callLater(self.summary_interval, self._summarise, kind)
        return False

    def suppressed(self, kind: str) -> int:
        """How many lines of ``kind`` are held back and not yet reported."""
        bucket = self._buckets.get(kind)
        return bucket.suppressed if bucket is not None else 0

    def _summarise(self, kind: str) -> None:
        bucket = self._buckets[kind]
        bucket.flush = None
        count, bucket.suppressed = bucket.suppressed, 0
        if count:
            self.summary_log.warn("suppressed {count} similar log lines ({kind}) in the last {interval:.0f} s",
                                  count=count, kind=kind, interval=self.summary_interval)

    # -------------------------------------------------------------- logging helpers
    def emit(self, kind: str, log: Logger, level: LogLevel, fmt: str, **kwargs: Any) -> bool:
        """``log.emit(level, fmt, **kwargs)`` unless ``kind`` is over its rate; True if written.
        Every keyword value goes through :func:`clip`."""
        if not self.allow(kind):
            return False
        log.emit(level, fmt, **_clipped(kwargs))
        return True

    def warn(self, kind: str, log: Logger, fmt: str, **kwargs: Any) -> bool:
        return self.emit(kind, log, LogLevel.warn, fmt, **kwargs)

    def info(self, kind: str, log: Logger, fmt: str, **kwargs: Any) -> bool:
        return self.emit(kind, log, LogLevel.info, fmt, **kwargs)

    def error(self, kind: str, log: Logger, fmt: str, **kwargs: Any) -> bool:
        return self.emit(kind, log, LogLevel.error, fmt, **kwargs)

    def failure(self, kind: str, log: Logger, fmt: str, failure: Failure, **kwargs: Any) -> bool:
        """``log.failure`` (the traceback: for real bugs) unless ``kind`` is over its rate."""
        if not self.allow(kind):
            return False
        log.failure(fmt, failure, **_clipped(kwargs))
        return True


_limiters: "weakref.WeakKeyDictionary[Any, LogRateLimiter]" = weakref.WeakKeyDictionary()


def limiter_for(clock: IReactorTime | None = None) -> LogRateLimiter:
    """The process's limiter for ``clock`` (the global reactor when None): every connection
    and dispatcher on one reactor shares one set of buckets, so N connections cannot log N
    times as much."""
    if clock is None:
        from twisted.internet import reactor as clock
    limiter = _limiters.get(clock)
    if limiter is None:
        limiter = _limiters[clock] = LogRateLimiter(clock)  # type: ignore[arg-type]
    return limiter


class RateLimitedLogger(Logger):
    """A ``twisted.logger.Logger`` for code whose lines any client can trigger at will
    (processors, the name server's tables): each call site's format string is a kind of
    :class:`LogRateLimiter` on the global reactor (``burst`` at once, then ``rate`` a second,
    the rest counted in the "suppressed" summaries), and every keyword value is clipped to
    :data:`MAX_LOGGED_TEXT`. The format string must be a literal: text that varies goes in
    keyword values (``log.warn("{text}", text=remark)``), or each variant is a bucket.

    Used as a class attribute like ``Logger`` (``log = RateLimitedLogger()``): its buckets are then
    on the global reactor; ``RateLimitedLogger(clock=...)`` puts them on an injected clock (a
    ``task.Clock`` in unit tests), kept when it is a class attribute too."""

    def __init__(self, namespace: str | None = None, source: object | None = None,
                 observer: ILogObserver | None = None, clock: IReactorTime | None = None) -> None:
        super().__init__(namespace, source, observer)
        self.clock = clock

    def on(self, clock: IReactorTime | None) -> RateLimitedLogger:
        """This logger (same namespace and source) with its buckets on ``clock``: a class whose
        instances get the reactor injected writes ``self.log = self.log.on(reactor)`` in ``__init__``,
        so that a ``task.Clock`` in unit tests drives its rate limits and summaries."""
        return RateLimitedLogger(self.namespace, self.source, self.observer, clock)

    def __get__(self, instance: object, owner: type | None = None) -> RateLimitedLogger:
        bound = super().__get__(instance, owner)
        assert isinstance(bound, RateLimitedLogger)
        bound.clock = self.clock
        return bound

    def emit(self, level: LogLevel, format: str | None = None, **kwargs: Any) -> None:  # noqa: A002
        if not limiter_for(self.clock).allow(f"{self.namespace}: {format}"):
            return
        super().emit(level, format, **_clipped(kwargs))
