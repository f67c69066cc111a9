"""Run a coroutine on a reactor of its own, for tests that need real sockets.

The global reactor cannot be restarted, so each call makes a new (non-global) select reactor,
runs ``await coro_fn(reactor)`` until it finishes or ``timeout`` passes, and returns its result
or raises what it raised. No pytest plugin is needed, and the tests stay independent.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable

from twisted.internet import defer
from twisted.internet.selectreactor import SelectReactor
from twisted.python.failure import Failure


def run_in_fresh_reactor(coro_fn: Callable[[Any], Awaitable[Any]], timeout: float = 20.0) -> Any:
    r = SelectReactor()
    out: dict[str, Any] = {}

    def go() -> None:
        d = defer.ensureDeferred(coro_fn(r))  # type: ignore[arg-type]
        d.addBoth(lambda x: (out.setdefault("result", x), r.stop()))

    r.callWhenRunning(go)
    r.callLater(timeout, lambda: (out.setdefault("result", TimeoutError(f"still running after {timeout}s")),
                                  r.stop()))
    r.run(installSignalHandlers=False)
    for reader in list(r.getReaders()):  # what the coroutine left open must not outlive the test
        if reader is not r.waker:
            r.removeReader(reader)
    res = out["result"]
    if isinstance(res, Failure):
        res.raiseException()
    if isinstance(res, BaseException):
        raise res
    return res
