"""A consumer group's retry policy: ``groupRetryPolicy`` inside a 5.x SubscriptionGroupConfig.

5.3.3 keeps it as ``{"type": "CUSTOMIZED"|"EXPONENTIAL", "customizedRetryPolicy": {"next": [ms...]},
"exponentialRetryPolicy": {"initial": ms, "max": ms, "multiplier": n}}`` (remoting's
``GroupRetryPolicy``); ``mqadmin updateSubGroup -p`` writes it. Two readers use it: the gRPC
settings a consumer gets (the backoff of a failed consume) and the proxy's STOP_RENEW (the delay a
message held too long is given back with).

rmqpy differs from Java in one way: Java takes any numbers (an empty ``next`` fails later with an
index error, a negative delay goes to the client as is); here :func:`parse` refuses a policy that
is not well formed, so that updateSubGroup answers with the reason, and a stored one that is not
well formed reads as the default policy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CUSTOMIZED, EXPONENTIAL = "CUSTOMIZED", "EXPONENTIAL"
# CustomizedRetryPolicy's default next: 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h
DEFAULT_NEXT_MS: tuple[int, ...] = (1000, 5000, 10_000, 30_000) + tuple(
    m * 60_000 for m in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30, 60, 120))
MAX_DELAY_MS = 366 * 24 * 3600 * 1000  # rmqpy: a year; Java has no bound
MAX_NEXT = 256  # rmqpy: entries of a customized policy (they go to every consumer's settings)
MAX_MULTIPLIER = 1000


@dataclass(frozen=True)
class RetryPolicy:
    """One policy: ``next_ms`` for CUSTOMIZED, ``initial_ms``/``max_ms``/``multiplier`` for EXPONENTIAL."""

    type: str = CUSTOMIZED
    next_ms: tuple[int, ...] = DEFAULT_NEXT_MS
    initial_ms: int = 5000  # ExponentialRetryPolicy's defaults
    max_ms: int = 2 * 3600 * 1000
    multiplier: int = 2

    def next_delay_ms(self, reconsume_times: int) -> int:
        """``RetryPolicy.nextDelayDuration``: the delay before the next attempt of a message that was
        consumed ``reconsume_times`` times before (customized: ``next[times + 2]``, the old delay
        levels' offset, clamped to the last entry)."""
        times = max(reconsume_times, 0)
        if self.type == EXPONENTIAL:
            return min(self.max_ms, self.initial_ms * int(self.multiplier ** min(times, 32)))
        return self.next_ms[min(times + 2, len(self.next_ms) - 1)]


DEFAULT = RetryPolicy()


def parse(value: Any) -> RetryPolicy:
    """The policy of a ``groupRetryPolicy`` JSON value (None: the default); ValueError says what is wrong."""
    if value is None:
        return DEFAULT
    if not isinstance(value, dict):
        raise ValueError("groupRetryPolicy must be an object")
    kind = value.get("type", CUSTOMIZED)
    if kind not in (CUSTOMIZED, EXPONENTIAL):
        raise ValueError(f"groupRetryPolicy type must be {CUSTOMIZED} or {EXPONENTIAL}, not {str(kind)[:40]!r}")
    if kind == EXPONENTIAL:
        exp = value.get("exponentialRetryPolicy")
        if exp is None:
            return RetryPolicy(EXPONENTIAL)
        if not isinstance(exp, dict):
            raise ValueError("exponentialRetryPolicy must be an object")
        d = RetryPolicy()
        initial = _ms(exp.get("initial", d.initial_ms), "initial")
        return RetryPolicy(EXPONENTIAL, initial_ms=initial, max_ms=_ms(exp.get("max", d.max_ms), "max"),
                           multiplier=_int(exp.get("multiplier", d.multiplier), "multiplier", 0, MAX_MULTIPLIER))
    custom = value.get("customizedRetryPolicy")
    if custom is None:
        return DEFAULT
    if not isinstance(custom, dict):
        raise ValueError("customizedRetryPolicy must be an object")
    nxt = custom.get("next", list(DEFAULT_NEXT_MS))
    if not isinstance(nxt, list) or not 0 < len(nxt) <= MAX_NEXT:
        raise ValueError(f"customizedRetryPolicy next must be a list of 1 to {MAX_NEXT} delays")
    return RetryPolicy(CUSTOMIZED, next_ms=tuple(_ms(v, "next") for v in nxt))


def of_group(extra: dict[str, Any]) -> RetryPolicy:
    """The policy a stored group config names; the default if it names none or a malformed one."""
    try:
        return parse(extra.get("groupRetryPolicy"))
    except ValueError:
        return DEFAULT


def _ms(value: Any, what: str) -> int:
    return _int(value, what, 0, MAX_DELAY_MS)


def _int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"groupRetryPolicy {what} must be an integer in [{low}, {high}], not {str(value)[:40]}")
    return value
