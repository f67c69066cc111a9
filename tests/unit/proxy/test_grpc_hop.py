"""The hop from grpcio's loop to the reactor and back (rmqpy.proxy.grpc.aioloop.ReactorHop): calls queued
while a drain is scheduled share its one reactor wake-up and run in the order they were made; a plain
result, a Deferred's, a raised exception and a Deferred's failure each reach the awaiting coroutine;
a coroutine cancelled meanwhile drops its answer."""
from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any, Callable, Iterator

import pytest
from twisted.internet import defer

from rmqpy.proxy.grpc.aioloop import AioThread, ReactorHop


class ThreadReactor:
    """``callFromThread`` into a queue that a thread of its own runs, counting the wake-ups."""

    def __init__(self) -> None:
        self.calls: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.wakeups = 0
        self.held = threading.Event()
        self.held.set()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def callFromThread(self, f: Callable[..., Any], *args: Any, **kw: Any) -> None:  # noqa: N802 (Twisted's name)
        self.wakeups += 1
        self.calls.put(lambda: f(*args, **kw))

    def _run(self) -> None:
        while (call := self.calls.get()) is not None:
            self.held.wait()
            call()

    def stop(self) -> None:
        self.held.set()
        self.calls.put(None)
        self._thread.join(5)


@pytest.fixture
def hop() -> Iterator[tuple[ReactorHop, ThreadReactor, AioThread]]:
    reactor = ThreadReactor()
    aio = AioThread()
    aio.start()
    yield ReactorHop(reactor), reactor, aio
    aio.stop()
    reactor.stop()


def test_calls_queued_meanwhile_share_one_wakeup_in_order(hop: tuple[ReactorHop, ThreadReactor, AioThread]) -> None:
    h, reactor, aio = hop
    ran: list[int] = []
    reactor.held.clear()  # the reactor is busy: the calls queue behind the first one's drain

    async def calls() -> list[int]:
        tasks = [asyncio.ensure_future(h.run(lambda i=i: ran.append(i) or i * 10)) for i in range(50)]
        await asyncio.sleep(0.05)
        reactor.held.set()
        return list(await asyncio.gather(*tasks))

    assert aio.submit(calls()).result(10) == [i * 10 for i in range(50)]
    assert ran == list(range(50))
    assert reactor.wakeups == 1


def test_results_and_failures_reach_the_caller(hop: tuple[ReactorHop, ThreadReactor, AioThread]) -> None:
    h, _reactor, aio = hop

    def later(value: Any) -> defer.Deferred[Any]:
        d: defer.Deferred[Any] = defer.Deferred()
        threading.Timer(0.01, lambda: _reactor.callFromThread(d.callback, value)).start()
        return d

    def raises() -> None:
        raise KeyError("raised")

    async def coroutine() -> str:
        return "coroutine"

    async def calls() -> list[Any]:
        out: list[Any] = [await h.run(lambda: "plain"), await h.run(later, "deferred"), await h.run(coroutine)]
        for fn in (raises, lambda: defer.fail(ValueError("failed"))):
            try:
                await h.run(fn)
            except Exception as exc:  # noqa: BLE001
                out.append(type(exc).__name__)
        return out

    assert aio.submit(calls()).result(10) == ["plain", "deferred", "coroutine", "KeyError", "ValueError"]


def test_a_cancelled_call_drops_its_answer(hop: tuple[ReactorHop, ThreadReactor, AioThread]) -> None:
    h, reactor, aio = hop
    d: defer.Deferred[str] = defer.Deferred()

    async def calls() -> str:
        task = asyncio.ensure_future(h.run(lambda: d))
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.sleep(0)
        reactor.callFromThread(d.callback, "too late")  # finds the future done: dropped, no error
        return await h.run(lambda: "next")

    assert aio.submit(calls()).result(10) == "next"
