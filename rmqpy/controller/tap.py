"""``twistd rmq-controller``: ControllerStartup's options (``-c controller.conf``, ``-p``, ``-m``), plus
``-D key=value`` for any key and ``--version``. Keys of Java's ControllerConfig that rmqpy does not
act on are read and reported on stderr, one line each, as the other taps report unknown keys."""
from __future__ import annotations

import sys
from typing import Callable

from rmqpy.common.properties import PropertiesError, load_properties
from rmqpy.common.startup import (
    ServerOptions,
    ServerRoot,
    apply_file_and_defines,
    check_ports_free,
    print_config_if_asked,
)
from rmqpy.controller.config import IMPORTANT_KEYS, NOT_APPLIED, ControllerConfig, netty_server_config
from rmqpy.remoting.netty_config import NettyServerConfig
from rmqpy.remoting.tls_hook import tls_properties


class Options(ServerOptions):
    tap_name = "rmq-controller"
    synopsis = "[-c controller.conf] [-D key=value ...] [-p | -m | --version]"
    longdesc = ("Apache RocketMQ 5-compatible controller on PySyncObj (Raft): serves brokers and mqadmin on its "
                "own controllerDLegerPeers address. -D key=value sets any config key on top of the -c file.")
    optParameters = [
        ["configFile", "c", None, "Controller config properties file"],
    ]
    optFlags = [
        ["printConfigItem", "p", "Print all config items and exit"],
        ["printImportantConfig", "m", "Print important config items and exit"],
    ]


def _warn(message: str) -> None:
    print(f"rmq-controller: warning: {message}", file=sys.stderr)


NOT_APPLIED_WARNING = "config key {key!r} is not used: {why}"
_JRAFT_KEYS = frozenset(k for k in NOT_APPLIED if k.startswith("jRaft"))


def without_jraft_keys(props: dict[str, str], warn: Callable[[str], None]) -> dict[str, str]:
    """``props`` less Java's JraftConfig keys (no rmqpy class has them), each key of Java's
    ControllerConfig that rmqpy does not act on reported through ``warn``."""
    for key in sorted(props):
        if key in NOT_APPLIED:
            warn(NOT_APPLIED_WARNING.format(key=key, why=NOT_APPLIED[key]))
    return {k: v for k, v in props.items() if k not in _JRAFT_KEYS}


def build_configs(options: Options) -> tuple[ControllerConfig, NettyServerConfig]:
    config, netty = ControllerConfig(), netty_server_config()
    props: dict[str, str] = {}
    if options["configFile"]:
        props = load_properties(options["configFile"])
    props = without_jraft_keys(props, _warn)
    if "listenPort" in props or "listenPort" in options.get("defines", {}):
        _warn("config key 'listenPort' is not used: a controller listens on its own controllerDLegerPeers "
              "address, as Java's DLedger controller")
    apply_file_and_defines([config, netty], props, without_jraft_keys(options.get("defines", {}), _warn),
                           options["configFile"], _warn)
    if config.controllerType.strip().lower() not in ("dledger", "jraft"):
        raise PropertiesError(f"controllerType {config.controllerType!r} is neither DLedger nor jRaft")
    if config.controllerType.strip().lower() == "jraft":
        _warn("controllerType jRaft: rmqpy's controller runs on PySyncObj and reads controllerDLeger* keys")
    if options["configFile"]:
        config.configStorePath = options["configFile"]
    options["tlsProps"] = tls_properties(props, options)
    return config, netty


def makeService(options: Options):  # noqa: N802 (Twisted's name)
    from rmqpy.controller.service import ConfigError, ControllerService
    try:
        config, netty = build_configs(options)
    except PropertiesError as exc:
        raise SystemExit(f"rmq-controller: {exc}") from None
    print_config_if_asked(options, [config, netty], IMPORTANT_KEYS)
    from rmqpy.common import logbridge
    logbridge.install()  # PySyncObj logs through stdlib logging
    from rmqpy.remoting import tls_hook
    try:
        wrap = tls_hook.server_wrapper(options.get("tlsProps", {}))
    except ValueError as exc:
        raise SystemExit(f"rmq-controller: {exc}") from None
    try:
        controller = ControllerService(config, netty, wrap_factory=wrap)
    except ConfigError as exc:
        raise SystemExit(f"rmq-controller: {exc}") from None
    host = netty.bindAddress
    check_ports_free(Options.tap_name, host, (controller.server.port,))
    if controller.metrics is not None:
        check_ports_free(Options.tap_name, config.metricsPromExporterHost or host, (config.metricsPromExporterPort,))
    top = ServerRoot(Options.tap_name)
    top.controller = controller  # type: ignore[attr-defined]
    controller.setServiceParent(top)
    return top
