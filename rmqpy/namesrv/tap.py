"""``twistd rmq-namesrv``: options as NamesrvStartup has them (-c, -p, -m), plus ``-D key=value``
for any key (an unknown key is an error) and ``--version``."""
from __future__ import annotations

import sys

from rmqpy.common.properties import PropertiesError, load_properties
from rmqpy.common.startup import (
    ServerOptions,
    ServerRoot,
    apply_file_and_defines,
    check_ports_free,
    print_config_if_asked,
)
from rmqpy.controller.config import ControllerConfig
from rmqpy.controller.tap import without_jraft_keys
from rmqpy.namesrv.config import IMPORTANT_KEYS, NamesrvConfig, NettyServerConfig, netty_server_config
from rmqpy.remoting.tls_hook import tls_properties


class Options(ServerOptions):
    tap_name = "rmq-namesrv"
    synopsis = "[-c namesrv.conf] [-D key=value ...] [-p | -m | --version]"
    longdesc = ("Apache RocketMQ-compatible name server (listens on 9876 unless listenPort is set). "
                "-D key=value sets any config key on top of the -c file (repeatable).")
    optParameters = [
        ["configFile", "c", None, "Name server config properties file"],
        ["listenPort", None, None, "Override listenPort (handy for tests)"],
    ]
    optFlags = [
        ["printConfigItem", "p", "Print all config items and exit"],
        ["printImportantConfig", "m", "Print important config items and exit"],
    ]


def build_configs(options: Options) -> tuple[NamesrvConfig, NettyServerConfig]:
    """The name server's configs; the controller's keys (Java's ControllerConfig, read from the same
    file as NamesrvStartup reads them) go to ``options["controllerConfig"]``."""
    config, netty, controller = NamesrvConfig(), netty_server_config(), ControllerConfig()
    options["controllerConfig"] = controller
    props: dict[str, str] = {}
    if options["configFile"]:
        props = load_properties(options["configFile"])
    if options["listenPort"]:
        props["listenPort"] = options["listenPort"]

    def warn(message: str) -> None:
        print(f"rmq-namesrv: warning: {message}", file=sys.stderr)

    props = without_jraft_keys(props, warn)
    apply_file_and_defines([config, netty, controller], props, without_jraft_keys(options.get("defines", {}), warn),
                           options["configFile"], warn)
    if options["configFile"]:  # NamesrvStartup: UPDATE_NAMESRV_CONFIG writes back to the -c file
        config.configStorePath = options["configFile"]
    # TLS (issue 6): tls.* keys of the -c file, then -D overrides
    options["tlsProps"] = tls_properties(props, options)
    return config, netty


def makeService(options: Options):  # noqa: N802 (Twisted's name)
    from rmqpy.namesrv.controller import NamesrvController
    try:
        config, netty = build_configs(options)
    except PropertiesError as exc:
        raise SystemExit(f"rmq-namesrv: {exc}") from None
    print_config_if_asked(options, [config, netty], IMPORTANT_KEYS)
    check_ports_free(Options.tap_name, netty.bindAddress, (netty.listenPort,))
    if config.metricsExporterType.strip().upper() == "PROM":
        check_ports_free(Options.tap_name, config.metricsPromExporterHost or netty.bindAddress,
                         (config.metricsPromExporterPort,))
    from rmqpy.common import logbridge, logfiles
    logbridge.install()  # stdlib logging (libraries, shared modules) into the twistd log
    from twisted.internet import reactor
    try:
        logfiles.setup(config.logDir, config.logLevel, logfiles.NAMESRV_ROUTES, config.logMaxFileSize,
                       config.logMaxIndex, config.logRollingPolicy, reactor)
    except (ValueError, OSError) as exc:
        raise SystemExit(f"rmq-namesrv: {exc}") from None
    from rmqpy.remoting import tls_hook
    try:
        wrap = tls_hook.server_wrapper(options.get("tlsProps", {}))
    except ValueError as exc:  # TLS (issue 6): tls.TlsConfigError
        raise SystemExit(f"rmq-namesrv: {exc}") from None
    top = ServerRoot(Options.tap_name)
    top.controller = NamesrvController(config, netty, wrap_factory=wrap)  # type: ignore[attr-defined]
    top.controller.setServiceParent(top)  # type: ignore[attr-defined]
    if config.enableControllerInNamesrv:  # NamesrvStartup: the controller beside the name server
        from rmqpy.controller.service import ConfigError, ControllerService
        try:
            # one metrics endpoint: the name server's serves the controller's samples too (Java's name
            # server exports none; its controller's exporter reads the same metrics* keys)
            ns_metrics = top.controller.metrics  # type: ignore[attr-defined]
            embedded = ControllerService(options["controllerConfig"], netty, wrap_factory=wrap,
                                         serve_metrics=ns_metrics is None)
            if ns_metrics is not None and embedded.metrics is not None:
                ns_metrics.registry.register(embedded.metrics.collector)
        except ConfigError as exc:
            raise SystemExit(f"rmq-namesrv: {exc}") from None
        check_ports_free(Options.tap_name, netty.bindAddress, (embedded.server.port,))
        top.embedded_controller = embedded  # type: ignore[attr-defined]
        embedded.setServiceParent(top)
    return top
