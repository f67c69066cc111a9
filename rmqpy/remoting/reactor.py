"""An epoll reactor without a log context per event: ``twistd -r rmqpy-epoll rmq-namesrv``.

Twisted's reactors run every read and write event through ``log.callWithLogger``: it asks the
connection for its ``logPrefix()`` and copies and pushes a context dict, so that a legacy
``twisted.python.log.msg`` line written while the event is handled carries that prefix as its
``system``. That costs 1.5 us a call, and a name server lookup is one read event: measured live
(``namesrv_bench.py``'s load, this reactor against Twisted's epoll reactor, alternating), about
3 us of the 14-17 us of CPU a lookup takes. rmqpy logs through ``twisted.logger``, which does not
read that context; only Twisted's own legacy lines written inside an event show ``-`` as their
system here. An exception that escapes an event is logged as before, with the prefix.

Opt-in (``twistd --reactor rmqpy-epoll``, dropin ``twisted/plugins/rmqpy_reactor.py``): the
default reactor is Twisted's choice.
"""
from __future__ import annotations

import errno
from typing import Any

from twisted.internet import epollreactor
from twisted.internet.main import installReactor
from twisted.python import log


class EPollReactor(epollreactor.EPollReactor):
    """Twisted's epoll reactor whose events are dispatched without ``log.callWithLogger``."""

    def doPoll(self, timeout: float | None) -> None:  # noqa: N802
        if timeout is None:
            timeout = -1  # wait for ever
        try:
            events = self._poller.poll(timeout, len(self._selectables))
        except OSError as err:
            if err.errno == errno.EINTR:
                return
            raise
        handle = self._doReadOrWrite
        selectables = self._selectables
        for fd, event in events:
            selectable = selectables.get(fd)
            if selectable is None:
                continue
            try:
                handle(selectable, fd, event)  # type: ignore[no-untyped-call]  # Twisted: unannotated
            except BaseException:  # as callWithLogger logs what _doReadOrWrite let through
                log.err(system=_prefix(selectable))  # type: ignore[no-untyped-call]

    doIteration = doPoll


def _prefix(selectable: Any) -> str:
    try:
        return str(selectable.logPrefix())
    except BaseException:
        return "(buggy logPrefix method)"


def install() -> EPollReactor:
    """Install this reactor (what ``twistd -r rmqpy-epoll`` calls)."""
    reactor = EPollReactor()  # type: ignore[no-untyped-call]  # Twisted's __init__: unannotated
    installReactor(reactor)  # type: ignore[no-untyped-call]
    return reactor
