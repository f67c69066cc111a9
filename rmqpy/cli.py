"""Console scripts that mirror the Java distribution's ``bin/mqnamesrv`` and ``bin/mqbroker``.

Thin wrappers of the twistd taps, in the foreground as Java's scripts run, with no pidfile:
``mqbroker -c broker.conf -n 127.0.0.1:9876`` is ``twistd -n --pidfile= rmq-broker -c ...``. The
taps already take Java's ``-c``, ``-n`` (broker), ``-p`` and ``-m``, plus ``-D key=value`` and
``--version``.
"""
from __future__ import annotations

import sys


def _run_tap(tap: str, argv: list[str] | None) -> None:
    from twisted.scripts.twistd import run
    args = sys.argv[1:] if argv is None else argv
    sys.argv = [tap, "-n", "--pidfile=", tap, *args]
    run()


def mqnamesrv(argv: list[str] | None = None) -> None:
    _run_tap("rmq-namesrv", argv)


def mqbroker(argv: list[str] | None = None) -> None:
    _run_tap("rmq-broker", argv)
