"""Writing a config or state file so that a crash never leaves it half-written (Java's
``MixAll.string2File``): the text goes to ``<path>.tmp`` and is fsynced, the current file is
copied to ``<path>.bak``, and the temporary file replaces it. Copied, not renamed: the file
itself never disappears (a ``-c`` file is read without a ``.bak`` fallback)."""
from __future__ import annotations

import os
from typing import Any, Callable

from twisted.internet import defer
from twisted.python.failure import Failure


def write_file_atomically(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    if os.path.exists(path):
        with open(path, "rb") as src, open(path + ".bak", "wb") as bak:
            bak.write(src.read())
    os.replace(tmp, path)


class LatestWriter:
    """Runs ``write(value)`` with ``in_thread`` (off the reactor) for the newest value handed over,
    one write at a time.

    Values handed over while a write runs collapse into one later write of the last of them, so
    a client repeating a request costs at most one write under way and one waiting, never a
    queue of them, and the file always ends with the newest value. A failed write is reported
    to ``on_error`` (the next value is still written). :meth:`write` returns a Deferred that fires
    (with None, whether it failed or not) once a write of that value or of a newer one ended."""

    def __init__(self, write: Callable[[Any], None], in_thread: Callable[..., defer.Deferred],
                 on_error: Callable[[Failure], None]) -> None:
        self._write = write
        self.in_thread = in_thread
        self.on_error = on_error
        self._next: Any = None
        self._pending = False
        self._busy = False
        self._next_waiters: list[defer.Deferred] = []  # for the value waiting
        self._running_waiters: list[defer.Deferred] = []  # for the write under way
        self._idle_waiters: list[defer.Deferred] = []

    def write(self, value: Any) -> defer.Deferred:
        self._next, self._pending = value, True
        d: defer.Deferred = defer.Deferred()
        self._next_waiters.append(d)
        if not self._busy:
            self._start()
        return d

    def when_idle(self) -> defer.Deferred:
        """Fires once no write is under way or waiting."""
        if not self._busy:
            return defer.succeed(None)
        d: defer.Deferred = defer.Deferred()
        self._idle_waiters.append(d)
        return d

    def _start(self) -> None:
        value, self._next, self._pending = self._next, None, False
        self._running_waiters, self._next_waiters = self._next_waiters, []
        self._busy = True
        done = self.in_thread(self._write, value)
        done.addErrback(self.on_error)
        done.addBoth(self._done)

    def _done(self, _: Any) -> None:
        self._busy = False
        written, self._running_waiters = self._running_waiters, []
        if self._pending:
            self._start()
        else:
            idle, self._idle_waiters = self._idle_waiters, []
            written += idle
        for d in written:
            d.callback(None)
