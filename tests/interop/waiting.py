"""Polling until a condition holds: the one helper the interop tests use for it."""
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
