"""grpcio's asyncio server on a loop of its own thread, and the hop from its coroutines to the reactor.

The gRPC endpoint serves its calls as coroutines of ``grpc.aio`` (issue 31 case 2): an open stream (a
client's Telemetry stream, a long-polling receive) costs a coroutine and a few kilobytes, not a thread,
as the proxy's calls cost no thread of its executor while they wait. The loop runs on one daemon thread
beside the reactor; Twisted keeps its own reactor (``grpc.aio`` on the reactor's thread would need
Twisted's asyncio reactor installed before anything imports the reactor, for the whole broker).

A call's work still runs on the reactor, where broker state lives: :class:`ReactorHop` queues it for
the reactor (``callFromThread``) and the coroutine awaits the Deferred's result, which comes back through
``call_soon_threadsafe``; both ways, one wake-up serves every call queued by then.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from asyncio import iscoroutine
from collections import deque
from typing import Any, Awaitable, Callable, TypeVar

from twisted.internet import defer
from twisted.python.failure import Failure

T = TypeVar("T")


class AioThread:
    """An asyncio loop on a daemon thread: ``submit`` a coroutine from any thread, ``stop`` ends it."""

    def __init__(self, name: str = "grpc-aio") -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            try:
                loop.run_forever()
            finally:
                loop.close()

        self.loop = loop
        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        ready.wait()

    def submit(self, coro: Awaitable[T]) -> "concurrent.futures.Future[T]":
        assert self.loop is not None, "the loop is not started"
        return asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]

    def stop(self, timeout: float = 5.0) -> None:
        """Cancels what still runs on the loop, stops it and waits for its thread (blocking)."""
        loop, thread = self.loop, self._thread
        if loop is None or thread is None:
            return

        async def cancel_rest() -> None:
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_rest(), loop).result(timeout)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        self.loop = self._thread = None


class ReactorHop:
    """The hop from the loop's coroutines to the reactor and back, batched both ways.

    A call's work goes into a queue that one reactor wake-up drains (``callFromThread`` only when no
    drain is already scheduled), and its result into a queue per loop that one ``call_soon_threadsafe``
    drains: with many calls in flight, one wake-up of each thread serves every call ready by then,
    rather than a wake-up (a pipe write and a read) per call each way. The work runs in the order the
    calls were made, as ``callFromThread`` would run it; a result that is not a Deferred goes back at
    once, without a Deferred made for it."""

    def __init__(self, reactor: Any) -> None:
        self.reactor = reactor
        self._calls: deque[tuple[asyncio.Future[Any], Callable[..., Any], tuple[Any, ...]]] = deque()
        self._scheduled = False  # a drain of _calls is scheduled on the reactor
        self._back: dict[asyncio.AbstractEventLoop, _Back] = {}

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` run on the reactor, its result (a Deferred's, if it returns one) awaited here.

        The call's coroutine may be cancelled meanwhile (the client went away, the server stops): the
        reactor's answer then finds the future done and is dropped."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if loop not in self._back:
            self._back[loop] = _Back(loop)
        self._calls.append((future, fn, args))
        if not self._scheduled:
            self._scheduled = True
            self.reactor.callFromThread(self._drain)
        return await future

    def _drain(self) -> None:
        """On the reactor: every call queued by now (one queued later has scheduled its own drain)."""
        self._scheduled = False
        calls = self._calls
        for _ in range(len(calls)):
            future, fn, args = calls.popleft()
            back = self._back[future.get_loop()]
            try:
                result = fn(*args)
            except BaseException:  # noqa: BLE001 (handed to the call, as maybeDeferred would)
                back.put(future, Failure())
                continue
            if isinstance(result, defer.Deferred):
                result.addBoth(back.put_result, future)
            elif iscoroutine(result):
                defer.ensureDeferred(result).addBoth(back.put_result, future)
            else:
                back.put(future, result)


class _Back:
    """The results going back to one loop, drained by one ``call_soon_threadsafe`` at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.results: deque[tuple[asyncio.Future[Any], Any]] = deque()
        self.scheduled = False

    def put_result(self, result: Any, future: asyncio.Future[Any]) -> None:
        """A Deferred's callback and errback: the result handed back, the Deferred left with None."""
        self.put(future, result)

    def put(self, future: asyncio.Future[Any], result: Any) -> None:
        self.results.append((future, result))
        if not self.scheduled:
            self.scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # the loop is closed: the endpoint stopped, nobody waits any longer
                pass

    def _drain(self) -> None:
        self.scheduled = False
        results = self.results
        for _ in range(len(results)):
            future, result = results.popleft()
            if future.done():
                continue
            if isinstance(result, Failure):
                future.set_exception(result.value)
            else:
                future.set_result(result)
