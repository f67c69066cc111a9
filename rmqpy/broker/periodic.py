"""One periodic job of the broker as a Twisted service (Java: a ``scheduleAtFixedRate`` task).

Twisted's ``TimerService`` runs its call at once when started; Java's broker waits an initial
delay first (10 s for most jobs), so this service waits ``first`` seconds, then runs every
``interval`` seconds. A failure is logged and the job keeps its schedule; a Deferred the job
returns is not waited for (a registration that hangs does not delay the next one).
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.application import service
from twisted.internet import task
from twisted.logger import Logger


class PeriodicJob(service.Service):
    log = Logger()

    def __init__(self, name: str, clock: Any, first: float, interval: Callable[[], float] | float,
                 job: Callable[[], Any]) -> None:
        self.setName(name)
        self.clock = clock
        self.first = first
        self.interval = interval
        self.job = job
        self._first_call: Any = None
        self._loop: task.LoopingCall | None = None

    def startService(self) -> None:  # noqa: N802 (Twisted's name)
        super().startService()
        self._first_call = self.clock.callLater(self.first, self._begin)

    def _begin(self) -> None:
        self._first_call = None
        interval = self.interval() if callable(self.interval) else self.interval
        self._loop = task.LoopingCall(self._run)
        self._loop.clock = self.clock
        self._loop.start(interval, now=True)

    def _run(self) -> None:
        try:
            self.job()
        except Exception:
            self.log.failure("periodic task {name} failed", name=self.name)

    def stopService(self) -> None:  # noqa: N802 (Twisted's name)
        super().stopService()
        if self._first_call is not None and self._first_call.active():
            self._first_call.cancel()
        self._first_call = None
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
