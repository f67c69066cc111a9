"""Watching configuration files for changes: inotify on their directories plus a steady poll.

Used by TLS (certificates, keys, trust files: :mod:`rmqpy.remoting.tls`) and by the broker's
ACL files (:mod:`rmqpy.acl.manager`). The watcher only says *when to look*: it calls
``check()`` every ``poll_interval`` seconds on ``clock`` and, with inotify, 50 ms after a
burst of events in any watched directory; ``check`` decides by content (a hash) whether
anything changed, so a touched file, an editor's temporary file or a missed event costs a
look, never a reload. inotify needs the real reactor; tests drive the poll with
``twisted.internet.task.Clock``.
"""
from __future__ import annotations

import hashlib
from typing import Any, Callable, Iterable

from twisted.internet import task
from twisted.logger import Logger

log = Logger(namespace="rmqpy.remoting.filewatch")

POLL_INTERVAL = 0.5
_COALESCE = 0.05


def digest(files: dict[str, bytes]) -> dict[str, str]:
    """A content hash per path: what tells a change from a touch."""
    return {p: hashlib.sha256(b).hexdigest() for p, b in files.items()}


class FileWatcher:
    """Calls ``check()`` on a poll and on inotify events in ``dirs()``."""

    def __init__(self, name: str, check: Callable[[], Any], dirs: Callable[[], Iterable[str]], clock: Any,
                 reactor: Any = None, use_inotify: bool | None = None, poll_interval: float = POLL_INTERVAL) -> None:
        self.name = name
        self._check = check
        self._dirs = dirs
        self.clock = clock
        self.reactor = reactor
        self.poll_interval = poll_interval
        if use_inotify is None:
            use_inotify = reactor is not None and clock is reactor
        self.use_inotify = use_inotify
        self._poll: task.LoopingCall | None = None
        self._notifier: Any = None
        self._pending: Any = None

    @property
    def running(self) -> bool:
        return self._poll is not None

    def check(self) -> None:
        self._pending = None
        self._check()

    def start(self) -> None:
        if self._poll is not None:
            return
        self._poll = task.LoopingCall(self.check)
        self._poll.clock = self.clock
        self._poll.start(self.poll_interval, now=False)
        if self.use_inotify:
            self._start_inotify()

    def _start_inotify(self) -> None:
        try:
            from twisted.internet import inotify
            from twisted.python.filepath import FilePath
            notifier = inotify.INotify(self.reactor)  # type: ignore[no-untyped-call]  # Twisted: unannotated
            notifier.startReading()  # type: ignore[no-untyped-call]
            mask = (inotify.IN_CLOSE_WRITE | inotify.IN_MOVED_TO | inotify.IN_CREATE | inotify.IN_DELETE
                    | inotify.IN_MODIFY | inotify.IN_ATTRIB | inotify.IN_DELETE_SELF | inotify.IN_MOVE_SELF)
            for d in sorted(set(self._dirs())):
                notifier.watch(FilePath(d), mask=mask, callbacks=[self._event])  # type: ignore[no-untyped-call]
            self._notifier = notifier
        except Exception as exc:  # no inotify here: the poll is enough
            log.info("{name}: inotify unavailable ({err}); polling every {s}s", name=self.name,
                     err=exc, s=self.poll_interval)
            self._notifier = None

    def _event(self, _watch: Any, _path: Any, _mask: int) -> None:
        if self._pending is None or not self._pending.active():
            self._pending = self.clock.callLater(_COALESCE, self.check)  # coalesce a burst of events

    def stop(self) -> None:
        if self._poll is not None and self._poll.running:
            self._poll.stop()
        self._poll = None
        if self._pending is not None and self._pending.active():
            self._pending.cancel()
        self._pending = None
        if self._notifier is not None:
            self._notifier.loseConnection()
            self._notifier = None
