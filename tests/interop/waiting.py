"""Polling until a condition holds, and waits run side by side: the helpers the interop tests use for them."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(pred: Callable[[], T], timeout: float, step: float = 0.5, *, what: str | None = None,
               diag: Callable[[], str] | None = None) -> T:
    """Calls ``pred()`` every ``step`` seconds until it returns something true or ``timeout``
    seconds have passed (the last call comes after the deadline), and returns its last value.

    With ``what`` (what is waited for), a false last value raises AssertionError
    ``"{what} not within {timeout} s"``, followed by the text of ``diag()`` when given.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value or time.monotonic() > deadline:
            break
        time.sleep(step)
    if not value and what is not None:
        raise AssertionError(f"{what} not within {timeout} s" + (f"\n{diag()}" if diag is not None else ""))
    return value


def concurrently(*scenarios) -> None:
    """Run scenarios (callables) side by side: each mostly waits on the broker's timers (an invisible
    time, a transaction check), so together they take about as long as the longest. Every failure
    is raised (the first one, the others chained in its message)."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(len(scenarios)) as pool:
        futures = [pool.submit(f) for f in scenarios]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        if len(errors) > 1:
            raise AssertionError(f"{len(errors)} scenarios failed: " + " | ".join(repr(e)[:2000] for e in errors))
        raise errors[0]
