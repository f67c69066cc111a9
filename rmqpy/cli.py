"""Console scripts that mirror the Java distribution's ``bin/mqnamesrv`` and ``bin/mqbroker``.

Thin wrappers of the twistd taps, in the foreground as Java's scripts run, with no pidfile:
``mqbroker -c broker.conf -n 127.0.0.1:9876`` is ``twistd -n --pidfile= rmq-broker -c ...``. The
taps already take Java's ``-c``, ``-n`` (broker), ``-p`` and ``-m``, plus ``-D key=value`` and
``--version``. The arguments are parsed here first, under the script's name, so that ``--help``
(``-h``, as Java's) prints ``Usage: mqbroker ...`` and a usage error is one line naming the script,
rather than twistd's usage and every twistd option.
"""
from __future__ import annotations

import importlib
import sys

from twisted.python import usage

TAP_MODULES = {"rmq-namesrv": "rmqpy.namesrv.tap", "rmq-broker": "rmqpy.broker.tap",
               "rmq-controller": "rmqpy.controller.tap"}


def _run_tap(tap: str, program: str, argv: list[str] | None) -> None:
    args = sys.argv[1:] if argv is None else argv
    options_class = importlib.import_module(TAP_MODULES[tap]).Options
    options = options_class()
    options.program = program
    try:
        options.parseOptions(args)   # --help, -h and --version print and exit here
    except usage.UsageError as exc:
        print(f"{options.getSynopsis()}\n{program}: {exc} (see {program} --help)", file=sys.stderr)
        raise SystemExit(1) from None
    from twisted.scripts.twistd import run
    sys.argv = [tap, "-n", "--pidfile=", tap, *args]
    run()


def mqnamesrv(argv: list[str] | None = None) -> None:
    _run_tap("rmq-namesrv", "mqnamesrv", argv)


def mqbroker(argv: list[str] | None = None) -> None:
    _run_tap("rmq-broker", "mqbroker", argv)


def mqcontroller(argv: list[str] | None = None) -> None:
    """Java's ``bin/mqcontroller -c controller.conf``."""
    _run_tap("rmq-controller", "mqcontroller", argv)
