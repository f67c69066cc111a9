"""What both taps share on the command line: ``-D key=value``, ``--version``, the pidfile, and
start-up errors as one line.

Java's ``mqnamesrv``/``mqbroker`` take settings from ``-c file``; rmqpy's ``-D key=value`` sets any
key of the config classes on top of the file (as ``-Dtls.*`` JVM properties do in Java), so a
typo is an error naming the key rather than a setting silently ignored. ``twistd``'s own
``--pidfile`` default (``twistd.pid``) is renamed after the tap, so a name server and a broker
can run as daemons in one directory.
"""
from __future__ import annotations

import errno
import os
import socket
from typing import Any, Iterable

from twisted.application import service
from twisted.internet.error import CannotListenError
from twisted.python import usage

import rmqpy
from rmqpy import speedups
from rmqpy.common.properties import PropertiesError, convert_properties
from rmqpy.protocol.codes import MQVersion
from rmqpy.remoting.tls_hook import TlsOptions

TWISTD_DEFAULT_PIDFILE = "twistd.pid"
#: ``-D`` keys that are JVM system properties in Java rather than config keys: kept in
#: ``options["tlsProps"]`` for the code that reads them, never "unknown"
SYSTEM_PROPERTIES = frozenset({"rocketmq.acl.plain.file"})


def is_system_property(key: str) -> bool:
    return key.startswith("tls.") or key in SYSTEM_PROPERTIES


def rocketmq_version() -> str:
    """``V4_9_8`` style name of the version rmqpy announces (``MQVersion.CURRENT``) as ``4.9.8``."""
    name = MQVersion.name_of(MQVersion.CURRENT)
    return name[1:].replace("_", ".") if name is not None else str(MQVersion.CURRENT)


def version_line(program: str) -> str:
    """``--version``: rmqpy's and RocketMQ's versions, then which path the store's batch loops take
    (compiled or pure Python, rmqpy.speedups), since the same install may run either."""
    return (f"{program} (rmqpy {rmqpy.__version__}): Apache RocketMQ {rocketmq_version()} "
            f"wire protocol and store, for RocketMQ 4.9.x and 5.x clients; {speedups.describe()}")


class ServerOptions(TlsOptions):
    """Options every tap has; ``tap_name`` names the pidfile and error lines."""

    tap_name = "rmqpy"
    synopsis = ""
    #: the console script that parses these options (rmqpy/cli.py: ``mqbroker``), for the usage line;
    #: None under twistd, whose usage line names twistd and the tap
    program: str | None = None

    def __init__(self) -> None:
        super().__init__()
        self["defines"] = {}

    def getSynopsis(self) -> str:  # noqa: N802 (Twisted's name)
        if self.program:
            return f"Usage: {self.program} {self.synopsis}".rstrip()
        return super().getSynopsis()

    def opt_help(self) -> None:
        """Display this help and exit."""
        super().opt_help()

    opt_h = opt_help  # Java's mqnamesrv/mqbroker -h; Twisted leaves -h to taps (twistd's own has none)

    def opt_D(self, value: str) -> None:  # noqa: N802 (twistd option name)
        """Set a config key, as in the -c file (repeatable; wins over the file): -D listenPort=30911"""
        key, sep, val = value.partition("=")
        key = key.strip()
        if not sep or not key:
            raise usage.UsageError(f"-D {value!r}: expected key=value")
        if is_system_property(key):
            super().opt_D(value)
        else:
            self["defines"][key] = val.strip()

    def opt_version(self) -> None:
        """Print rmqpy's version and the RocketMQ version it emulates, and exit."""
        print(version_line(self.tap_name))
        raise SystemExit(0)

    def postOptions(self) -> None:  # noqa: N802 (Twisted's name)
        parent = getattr(self, "parent", None)
        if parent is not None and parent.get("pidfile") in (TWISTD_DEFAULT_PIDFILE,
                                                            os.path.abspath(TWISTD_DEFAULT_PIDFILE)):
            parent["pidfile"] = f"{self.tap_name}.pid"


def check_defines(configs: Iterable[Any], defines: dict[str, str]) -> None:
    """PropertiesError naming every ``-D`` key none of ``configs`` has (system properties excepted)."""
    _, unknown = convert_properties(configs, {k: v for k, v in defines.items() if not is_system_property(k)})
    if unknown:
        raise PropertiesError(", ".join(repr(k) for k in unknown)
                              + (": unknown config key" if len(unknown) == 1 else ": unknown config keys"))


def apply_file_and_defines(configs: list[Any], props: dict[str, str], defines: dict[str, str],
                           config_file: str | None, warn: Any) -> None:
    """A tap's configuration: the ``-c`` file's keys (unknown ones warned about), then the ``-D``
    overrides, which must each name a key of ``configs``; a PropertiesError names where it came from."""
    from rmqpy.common.properties import apply_properties
    try:
        apply_properties(configs, props, warn=warn)
    except PropertiesError as exc:
        raise PropertiesError(f"{config_file}: {exc}" if config_file else str(exc)) from None
    if defines:
        try:
            check_defines(configs, defines)
            apply_properties(configs, defines)
        except PropertiesError as exc:
            raise PropertiesError(f"-D {exc}") from None


def print_config_if_asked(options: Any, configs: list[Any], important_keys: Iterable[str]) -> None:
    """``-p`` (every key) or ``-m`` (the important ones): the configuration on stdout, then exit 0,
    as Java's startups do."""
    if not (options["printConfigItem"] or options["printImportantConfig"]):
        return
    import sys

    from rmqpy.common.properties import config_items, format_properties
    items = [item for config in configs for item in config_items(config)]
    if options["printImportantConfig"]:
        important = set(important_keys)
        items = [(k, v) for k, v in items if k in important]
    sys.stdout.write(format_properties(items))
    sys.stdout.flush()
    raise SystemExit(0)


class StartupError(SystemExit, Exception):
    """Ends the process with its one-line message and exit code 1. An ``Exception`` too, so that a
    ``twistd`` daemon reports it to the waiting parent (which also exits 1) instead of hanging."""


def _listen_message(tap: str, host: str, port: int, err: OSError) -> str:
    reason = err.strerror or str(err)
    if err.errno == errno.EADDRINUSE:
        reason = "address already in use (is another name server or broker running?)"
    return f"{tap}: cannot listen on {host or '0.0.0.0'}:{port}: {reason}"


def _listen_error(tap: str, exc: CannotListenError) -> StartupError:
    err = exc.socketError if isinstance(exc.socketError, OSError) else OSError(str(exc.socketError))
    return StartupError(_listen_message(tap, exc.interface, exc.port, err))


def check_ports_free(tap: str, host: str, ports: Iterable[int]) -> None:
    """Bind each port as Twisted will (SO_REUSEADDR) and let it go: a busy port is one line and exit
    code 1 before the store is opened or the log is started. :class:`ServerRoot` still catches
    a port taken between this check and the listen."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for port in ports:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as err:
                raise StartupError(_listen_message(tap, host, port, err)) from None


class ServerRoot(service.MultiService):
    """The tap's top service: a port that cannot be opened ends the start with one line, exit code 1."""

    def __init__(self, tap_name: str) -> None:
        super().__init__()
        self.tap_name = tap_name

    def privilegedStartService(self) -> None:  # noqa: N802 (Twisted's name)
        try:
            super().privilegedStartService()
        except CannotListenError as exc:
            raise _listen_error(self.tap_name, exc) from None

    def startService(self) -> None:  # noqa: N802 (Twisted's name)
        try:
            super().startService()
        except CannotListenError as exc:
            raise _listen_error(self.tap_name, exc) from None
