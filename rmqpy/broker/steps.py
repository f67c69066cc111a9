"""Small pieces of the broker's service tree: a step with its own start and stop, and a
MultiService whose children stop one after the other (rmqpy/broker/lifecycle.py)."""
from __future__ import annotations

from typing import Any, Callable

from twisted.application import service
from twisted.internet import defer


class SequentialMultiService(service.MultiService):
    """A MultiService whose children stop one after the other, last started first."""

    def stopService(self) -> defer.Deferred[None]:  # noqa: N802 (Twisted's name)
        service.Service.stopService(self)
        return defer.ensureDeferred(self._stop_children())

    async def _stop_children(self) -> None:
        for child in reversed(list(self)):
            await defer.maybeDeferred(child.stopService)


class Step(service.Service):
    """One start step and one stop step; the stop may return a Deferred the tree waits for."""

    def __init__(self, name: str, start: Callable[[], Any] | None = None,
                 stop: Callable[[], Any] | None = None) -> None:
        self.setName(name)
        self._start = start
        self._stop = stop

    def startService(self) -> None:  # noqa: N802 (Twisted's name)
        super().startService()
        if self._start is not None:
            self._start()

    def stopService(self) -> Any:  # noqa: N802 (Twisted's name)
        super().stopService()
        return self._stop() if self._stop is not None else None
