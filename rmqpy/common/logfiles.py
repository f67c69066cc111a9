"""Log files as RocketMQ operators know them: one file per component, rotated, with a level.

Java's logback configs (``rmq.broker.logback.xml``, ``rmq.namesrv.logback.xml``) write
``${user.home}/logs/rocketmqlogs/{broker,store,remoting,stats,transaction}.log`` (the name
server: ``namesrv.log`` and ``remoting.log``), roll each at 128 MB into ``otherdays/`` and
keep 10 to 20. rmqpy does the same when ``logDir`` is set, with Twisted's logger: a
:class:`ComponentLogObserver` on the global log publisher routes each event by its namespace
(the store logs through stdlib logging, which :mod:`rmqpy.common.logbridge` hands to Twisted
under the stdlib logger's name, ``rmqpy.store.*``) to a :class:`RollingLogFile`, one line per
event: ``time LEVEL namespace - message``.

Why not Java's default directory: twistd already writes the whole log where its operator
asked (stdout under ``twistd -n``, which is what containers and systemd collect, or
``--logfile``); silently writing into ``~/logs`` as well would surprise both. Without
``logDir`` nothing changes; ``logDir=~/logs/rocketmqlogs`` gives Java's layout.

``logLevel`` (DEBUG, INFO, WARN, ERROR) applies to the files (INFO when unset) and, when
set, to twistd's own log too, from its first line (:func:`filter_when_logging_begins`); unset,
twistd's log keeps every level as before.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Sequence

from twisted.logger import (
    FilteringLogObserver,
    ILogObserver,
    LogLevel,
    LogLevelFilterPredicate,
    formatEvent,
    globalLogBeginner,
    globalLogPublisher,
)
from twisted.python.logfile import LogFile
from zope.interface import implementer

LEVELS = {"TRACE": LogLevel.debug, "DEBUG": LogLevel.debug, "INFO": LogLevel.info, "WARN": LogLevel.warn,
          "WARNING": LogLevel.warn, "ERROR": LogLevel.error, "FATAL": LogLevel.critical,
          "CRITICAL": LogLevel.critical, "OFF": LogLevel.critical}
_STDLIB = {LogLevel.debug: logging.DEBUG, LogLevel.info: logging.INFO, LogLevel.warn: logging.WARNING,
           LogLevel.error: logging.ERROR, LogLevel.critical: logging.CRITICAL}
_NAMES = {LogLevel.debug: "DEBUG", LogLevel.info: "INFO", LogLevel.warn: "WARN", LogLevel.error: "ERROR",
          LogLevel.critical: "ERROR"}

#: (namespace prefix, file) in order, first match wins; the last entry of a route is the default
BROKER_ROUTES: Sequence[tuple[str, str]] = (
    ("rmqpy.store", "store.log"),
    ("rmqpy.remoting", "remoting.log"),
    ("twisted", "remoting.log"),
    ("log_legacy", "remoting.log"),  # Twisted's legacy log.msg lines: ports opened and closed
    ("rmqpy.broker.stats", "stats.log"),
    ("rmqpy.broker.metrics", "stats.log"),
    ("rmqpy.broker.transaction", "transaction.log"),
    ("rmqpy.broker.processor.end_transaction", "transaction.log"),
    ("", "broker.log"),
)
NAMESRV_ROUTES: Sequence[tuple[str, str]] = (
    ("rmqpy.remoting", "remoting.log"),
    ("twisted", "remoting.log"),
    ("log_legacy", "remoting.log"),
    ("", "namesrv.log"),
)


def parse_level(text: str) -> LogLevel:
    level = LEVELS.get((text or "INFO").strip().upper())
    if level is None:
        raise ValueError(f"logLevel must be one of DEBUG, INFO, WARN, ERROR, not {text!r}")
    return level


class RollingLogFile(LogFile):
    """Twisted's ``LogFile`` (size rotation into ``name.1`` .. ``name.N``, oldest dropped) that
    also rotates at midnight with ``daily``: Java's 128 MB fixed window, or one file a day."""

    def __init__(self, name: str, directory: str, max_bytes: int, max_files: int, daily: bool,
                 now: Callable[[], float] = time.time) -> None:
        self.daily = daily
        self._now = now
        self._day = time.localtime(now())[:3]
        super().__init__(name, directory, rotateLength=max_bytes if max_bytes > 0 else None,
                         maxRotatedFiles=max_files if max_files > 0 else None)

    def shouldRotate(self) -> bool:  # noqa: N802 (Twisted's name)
        if self.daily and time.localtime(self._now())[:3] != self._day:
            return True
        return bool(super().shouldRotate())

    def rotate(self) -> None:
        self._day = time.localtime(self._now())[:3]
        super().rotate()


@implementer(ILogObserver)
class ComponentLogObserver:
    """Writes each event at ``level`` or above to the file its namespace routes to."""

    def __init__(self, directory: str, routes: Sequence[tuple[str, str]], level: LogLevel,
                 max_bytes: int = 128 * 1024 * 1024, max_files: int = 10, daily: bool = False) -> None:
        os.makedirs(directory, exist_ok=True)
        self.directory, self.routes, self.level = directory, routes, level
        self.files: dict[str, RollingLogFile] = {}
        for _, name in routes:
            if name not in self.files:
                self.files[name] = RollingLogFile(name, directory, max_bytes, max_files, daily)
        self._route_cache: dict[str, RollingLogFile] = {}
        # events seen before twistd begins logging: its LogBeginner then replays its buffer of them
        # to the whole publisher, this observer included (see running())
        self._early: dict[int, dict[str, Any]] | None = {}

    def running(self) -> None:
        """The reactor runs, so twistd's replay is over: stop remembering early events."""
        self._early = None

    def file_for(self, namespace: str) -> RollingLogFile:
        f = self._route_cache.get(namespace)
        if f is None:
            for prefix, name in self.routes:
                if namespace.startswith(prefix):
                    f = self.files[name]
                    break
            else:
                f = self.files[self.routes[-1][1]]
            if len(self._route_cache) < 10000:
                self._route_cache[namespace] = f
        return f

    def __call__(self, event: dict[str, Any]) -> None:
        early = self._early
        if early is not None:
            if id(early.get(id(event))) == id(event):
                return  # the replay of an event already written
            if len(early) < 100000:
                early[id(event)] = event
        level = event.get("log_level", LogLevel.info)
        if level < self.level:
            return
        namespace = event.get("log_namespace") or "-"
        text = formatEvent(event).replace("\n", "\\n")
        failure = event.get("log_failure")
        stamp = event.get("log_time") or time.time()
        line = (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) + f",{int(stamp * 1000) % 1000:03d} "
                f"{_NAMES.get(level, 'INFO')} {namespace} - {text}\n")
        if failure is not None:
            try:
                line += failure.getTraceback()
            except Exception:  # noqa: BLE001 - a log line must not raise
                pass
        f = self.files.get(event.get("rmqpy_log_file") or "") or self.file_for(namespace)
        try:
            f.write(line)
            f.flush()
        except OSError:
            pass  # a full disk must not take the server down through its log

    def printer(self, file: str, namespace: str) -> Callable[[str], None]:
        """Lines for ``file`` only, not the global log (Java's stats.log): stats every minute
        would flood twistd's log."""
        def print_line(text: str) -> None:
            self({"log_namespace": namespace, "log_level": LogLevel.info, "log_format": "{text}", "text": text,
                  "log_time": time.time(), "rmqpy_log_file": file})
        return print_line

    def close(self) -> None:
        for f in self.files.values():
            f.close()


def filter_global_observers(level: LogLevel) -> None:
    """Put a level filter in front of the observers twistd gave the global publisher (its
    stdout or ``--logfile`` observer), once they are there: call it when the reactor runs."""
    publisher: Any = globalLogPublisher
    for observer in list(publisher._observers):  # twistd offers no hook for its own observer's level
        if isinstance(observer, (ComponentLogObserver, FilteringLogObserver)):
            continue
        publisher.removeObserver(observer)
        publisher.addObserver(FilteringLogObserver(observer, [LogLevelFilterPredicate(level)]))


def setup(log_dir: str, log_level: str, routes: Sequence[tuple[str, str]], max_bytes: int, max_files: int,
          rolling: str, reactor: Any = None) -> ComponentLogObserver | None:
    """What a tap calls before it builds its service: the stdlib level of ``rmqpy``, the
    component files under ``log_dir`` (none when it is empty) and, once the reactor runs,
    the level of twistd's own observer. Raises ValueError for a bad level or policy."""
    level = parse_level(log_level)
    policy = (rolling or "size").strip().lower()
    if policy not in ("size", "daily"):
        raise ValueError(f"logRollingPolicy must be size or daily, not {rolling!r}")
    logging.getLogger("rmqpy").setLevel(_STDLIB[level])
    observer = None
    if log_dir:
        directory = os.path.abspath(os.path.expanduser(log_dir))
        observer = ComponentLogObserver(directory, routes, level, max_bytes, max_files, policy == "daily")
        globalLogPublisher.addObserver(observer)
        if reactor is not None:
            reactor.callWhenRunning(observer.running)
    if reactor is not None and log_level and level > LogLevel.debug:  # only when asked: stdout as before
        filter_when_logging_begins(level)
        reactor.callWhenRunning(filter_global_observers, level)
    return observer


#: the level :func:`filter_when_logging_begins` filters twistd's observers at, while it waits for them
_begin_level: LogLevel | None = None


def filter_when_logging_begins(level: LogLevel) -> None:
    """Filter twistd's own observer at ``level`` from its first line on.

    twistd hands its observer (stdout under ``-n``, or ``--logfile``) to
    ``globalLogBeginner.beginLoggingTo`` after the tap's ``makeService``, and then replays to it
    what was logged before (the TLS set-up lines) and logs ``twistd ... starting up``; the ports
    log ``... starting on`` before the reactor runs. A filter added when the reactor runs is too
    late for all of these, so with ``logLevel=WARN`` six info lines printed at start. The observers
    given to that one call are wrapped in the filter instead (twistd offers no other hook; the
    beginner's own attribute is replaced until that call, then removed). When logging has begun
    already (not under twistd) the observers there are filtered now.
    """
    global _begin_level
    beginner: Any = globalLogBeginner
    if beginner._temporaryObserver is None:  # beginLoggingTo was called: nothing to wait for
        filter_global_observers(level)
        return
    waiting = _begin_level is not None
    _begin_level = level  # the last tap's level, should a process set up twice
    if waiting:
        return
    begin = beginner.beginLoggingTo

    def filtered_begin(observers: Any, *args: Any, **kwargs: Any) -> Any:
        global _begin_level
        wanted, _begin_level = _begin_level, None
        del beginner.beginLoggingTo
        if wanted is not None:
            observers = [FilteringLogObserver(o, [LogLevelFilterPredicate(wanted)]) for o in observers]
        return begin(observers, *args, **kwargs)

    beginner.beginLoggingTo = filtered_begin
