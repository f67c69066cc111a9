"""grpcio's asyncio server on a loop of its own thread, and the hop from its coroutines to the reactor.

The gRPC endpoint serves its calls as coroutines of ``grpc.aio`` (issue 31 case 2): an open stream (a
client's Telemetry stream, a long-polling receive) costs a coroutine and a few kilobytes, not a thread,
as the proxy's calls cost no thread of its executor while they wait. The loop runs on one daemon thread
beside the reactor; Twisted keeps its own reactor (``grpc.aio`` on the reactor's thread would need
Twisted's asyncio reactor installed before anything imports the reactor, for the whole broker).

A call's work still runs on the reactor, where broker state lives: :func:`on_reactor` schedules it
with ``callFromThread`` and the coroutine awaits the Deferred's result, which comes back through
``call_soon_threadsafe``.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
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


async def on_reactor(reactor: Any, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` run on the reactor, its result (a Deferred's, if it returns one) awaited here.

    The call's coroutine may be cancelled meanwhile (the client went away, the server stops): the
    reactor's answer then finds the future done and is dropped."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any) -> None:
        if future.done():
            return
        if isinstance(result, Failure):
            future.set_exception(result.value)
        else:
            future.set_result(result)

    def run() -> None:
        d = defer.maybeDeferred(fn, *args)
        d.addBoth(lambda result: _call_soon(loop, settle, result))

    reactor.callFromThread(run)
    return await future


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[[Any], None], arg: Any) -> None:
    try:
        loop.call_soon_threadsafe(fn, arg)
    except RuntimeError:  # the loop is closed: the endpoint stopped, nobody waits any longer
        pass
