"""Stdlib ``logging`` into Twisted's logger: one logging path for the servers.

The store (:mod:`rmqpy.store`) logs through stdlib ``logging`` because it is also used
without a reactor (``python -m rmqpy.store``, the Spark reader), where Twisted's logger has
no observer and stdlib logging is what a caller configures. The servers log through
``twisted.logger``, which twistd writes to its log file. :class:`TwistedLogHandler` passes
every stdlib record on to a ``twisted.logger.Logger`` with the record's logger name as the
namespace and its level mapped, so store recovery, flush errors and file rolls appear in the
twistd log beside everything else, with the same timestamps and levels; the taps call
:func:`install` before they open the store.

(``twisted.logger.STDLibLogObserver`` is the other direction: Twisted events into stdlib.)
"""
from __future__ import annotations

import logging

from twisted.logger import Logger, LogLevel
from twisted.python.failure import Failure

#: stdlib level (at least this) -> Twisted level
_LEVELS = ((logging.CRITICAL, LogLevel.critical), (logging.ERROR, LogLevel.error),
           (logging.WARNING, LogLevel.warn), (logging.INFO, LogLevel.info))


def twisted_level(levelno: int) -> LogLevel:
    for floor, level in _LEVELS:
        if levelno >= floor:
            return level
    return LogLevel.debug


class TwistedLogHandler(logging.Handler):
    """A ``logging.Handler`` that emits each record to Twisted's global log publisher."""

    def __init__(self, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self._loggers: dict[str, Logger] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "twisted" or record.name.startswith("twisted."):
            return  # came from Twisted through STDLibLogObserver: do not send it back
        try:
            text = record.getMessage()
            logger = self._loggers.get(record.name)
            if logger is None:
                logger = self._loggers[record.name] = Logger(namespace=record.name)
            level = twisted_level(record.levelno)
            if record.exc_info and record.exc_info[1] is not None:
                _, value, tb = record.exc_info
                logger.failure("{log_stdlib_message}", Failure(value, type(value), tb), level,
                               log_stdlib_message=text)
            else:
                logger.emit(level, "{log_stdlib_message}", log_stdlib_message=text)
        except Exception:  # noqa: BLE001 - logging must never raise into the caller
            self.handleError(record)


def install(level: int = logging.INFO, logger_name: str = "rmqpy") -> TwistedLogHandler:
    """Send stdlib logging to Twisted's logger: a :class:`TwistedLogHandler` on the root
    logger (once; a second call returns the first handler), and ``logger_name``'s records
    from ``level`` up (other libraries keep the root's WARNING)."""
    root = logging.getLogger()
    for handler in root.handlers:
        if isinstance(handler, TwistedLogHandler):
            break
    else:
        handler = TwistedLogHandler()
        root.addHandler(handler)
    logging.getLogger(logger_name).setLevel(level)
    return handler


def uninstall(handler: TwistedLogHandler) -> None:
    """Undo :func:`install` (tests)."""
    logging.getLogger().removeHandler(handler)
