"""``twistd rmq-broker``: options as BrokerStartup has them (-c, -n, -p, -m).

``-c broker.conf`` reads RocketMQ's keys (unknown keys warn, a malformed file is an error
naming the line), ``-D key=value`` sets any key on top of it (an unknown key is an error),
``-n`` overrides namesrvAddr (``;``-separated), ``-p`` prints every config item and exits,
``-m`` prints the important ones and exits, ``--version`` prints the versions. The service is the
broker's tree (rmqpy/broker/lifecycle.py): the broker's core first, then the main port (listenPort),
the fast port (listenPort - 2), the HA port, the gRPC endpoint of 5.x clients (grpcServerPort, 8081;
-1: none) and the metrics endpoint; stopping closes them, then unregisters from the name servers and
flushes the config files and the store, one after the other.
"""
from __future__ import annotations

import sys
from typing import Any

from twisted.application import service, strports

from rmqpy.broker.config import load_settings
from rmqpy.common.properties import PropertiesError
from rmqpy.common.startup import ServerOptions, check_ports_free
from rmqpy.remoting.tls_hook import tls_properties


class Options(ServerOptions):
    tap_name = "rmq-broker"
    synopsis = "[-c broker.conf] [-n 'ns1:9876;ns2:9876'] [-D key=value ...] [-p | -m | --version]"
    longdesc = ("Apache RocketMQ-compatible broker (listens on listenPort 10911 and the fast port 10909). "
                "-D key=value sets any config key on top of the -c file (repeatable).")
    optParameters = [
        ["configFile", "c", None, "Broker config properties file"],
        ["namesrvAddr", "n", None, "Name server address list, e.g. '192.168.0.1:9876;192.168.0.2:9876'"],
    ]
    optFlags = [
        ["printConfigItem", "p", "Print all config items and exit"],
        ["printImportantConfig", "m", "Print important config items and exit"],
    ]


def makeService(options: Options, reactor=None) -> service.MultiService:  # noqa: N802 (Twisted's name)
    try:
        settings = load_settings(options["configFile"], options["namesrvAddr"], defines=options["defines"],
                                 warn=lambda m: print(f"rmq-broker: warning: {m}", file=sys.stderr))
    except PropertiesError as exc:
        raise SystemExit(f"rmq-broker: {exc}") from None
    if options["printConfigItem"] or options["printImportantConfig"]:
        sys.stdout.write(settings.format(important_only=bool(options["printImportantConfig"])))
        sys.stdout.flush()
        raise SystemExit(0)

    if reactor is None:
        grpc_port = settings.broker.grpcServerPort
        check_ports_free(Options.tap_name, settings.netty.bindAddress,
                         (settings.netty.listenPort, settings.netty.listenPort - 2) + ((grpc_port,) if grpc_port > 0 else ()))
        bc = settings.broker
        if bc.metricsExporterType.strip().upper() == "PROM":  # the metrics endpoint too (Java's host default)
            check_ports_free(Options.tap_name, bc.metricsPromExporterHost or bc.brokerIP1,
                             (bc.metricsPromExporterPort,))
        from twisted.internet import reactor as default_reactor
        reactor = default_reactor
        _raise_open_file_limit()  # the process's own: tests that pass a reactor leave theirs alone
    from rmqpy.broker.controller import BrokerController
    from rmqpy.broker.lifecycle import build_broker_service
    from rmqpy.remoting import tls_hook
    from rmqpy.remoting.client import RemotingClient
    try:  # TLS: tls.* keys of the -c file, then -D overrides
        file_props: dict[str, str] = {}
        if options["configFile"]:
            from rmqpy.common.properties import load_properties
            file_props = load_properties(options["configFile"])
        tls_props = tls_properties(file_props, options)
        wrap = tls_hook.server_wrapper(tls_props)
        client_endpoints = tls_hook.client_endpoint_factory(tls_props)
    except (ValueError, PropertiesError) as exc:  # tls.TlsConfigError is a ValueError
        raise SystemExit(f"rmq-broker: {exc}") from None

    from rmqpy.common import logbridge, logfiles
    logbridge.install()  # the store logs through stdlib logging: into the twistd log, before it loads
    bc = settings.broker
    try:  # the component log files, before the store loads: its recovery lines go to store.log
        log_files = logfiles.setup(bc.logDir, bc.logLevel, logfiles.BROKER_ROUTES, bc.logMaxFileSize, bc.logMaxIndex,
                       bc.logRollingPolicy, reactor)
    except (ValueError, OSError) as exc:
        raise SystemExit(f"rmq-broker: {exc}") from None
    stats_log = log_files.printer("stats.log", "rmqpy.broker.stats") if log_files is not None else None
    controller = BrokerController(settings, reactor, stats_log=stats_log)
    ha_tls_ = None
    if settings.store.haUseTLS:  # rmqpy only: TLS on the HA port, both ways (rmqpy/store/ha/tls.py)
        from rmqpy.store.ha.tls import ha_tls
        try:
            ha_tls_ = ha_tls(tls_props, reactor)
        except ValueError as exc:  # TlsConfigError
            raise SystemExit(f"rmq-broker: haUseTLS: {exc}") from None
        controller.ha_connect = ha_tls_.connect
    controller.acl_plain_file = options.get("tlsProps", {}).get("rocketmq.acl.plain.file") or controller.acl_plain_file
    if client_endpoints is not None:  # tls.enable=true: register with the name servers over TLS too
        controller.namesrv_client = RemotingClient(reactor, connect_timeout=3.0, endpoint_factory=client_endpoints)
    try:
        controller.initialize()
    except Exception as exc:  # the store or a config file cannot be loaded
        raise SystemExit(f"rmq-broker: cannot start: {type(exc).__name__}: {exc}") from None

    listeners: list[service.Service] = []  # the listening sides, started after the broker's core
    host = settings.netty.bindAddress.replace(":", "\\:")
    port = settings.netty.listenPort
    for p in (port, port - 2):  # the main port and the fast ("VIP") port
        factory = controller.server_factory()
        listeners.append(strports.service(f"tcp:{p}:interface={host}", wrap(factory) if wrap else factory))
    # the HA port (Java listens on haListenPort = listenPort + 1, plain TCP, every role, every interface):
    # classic HA's HAService, or in controller mode AutoSwitch HA's service (rmqpy/broker/replicas/autoswitch.py);
    # haListenAddress (rmqpy) puts it on one address, haAllowedReplicaAddresses (the services' gate) limits who,
    # haUseTLS (rmqpy) makes it TLS only
    if controller.replication.service is not None:  # None: a store that cannot replicate
        ha_host = (settings.store.haListenAddress or settings.netty.bindAddress).replace(":", "\\:")
        ha_factory = controller.replication.service
        listeners.append(strports.service(f"tcp:{settings.store.haListenPort}:interface={ha_host}",
                                          ha_tls_.wrap(ha_factory) if ha_tls_ is not None else ha_factory))
    if bc.grpcServerPort >= 0:  # RocketMQ 5 clients' gRPC endpoint (rmqpy/proxy/grpc/)
        from rmqpy.proxy.grpc.activities import MessagingActivities
        from rmqpy.proxy.grpc.auth import GrpcAuth
        from rmqpy.proxy.grpc.server import GrpcServerService
        from rmqpy.proxy.grpc.tls import grpc_tls
        try:
            grpc_tls_ = grpc_tls(tls_props)
        except ValueError as exc:  # TlsConfigError
            raise SystemExit(f"rmq-broker: {exc}") from None
        listeners.append(GrpcServerService(
            MessagingActivities(controller, controller.dispatcher, bc.grpcServerPort), reactor,
            settings.netty.bindAddress, bc.grpcServerPort, max_calls=bc.grpcThreadPoolQueueCapacity,
            max_inbound=bc.grpcMaxInboundMessageSize, tls=grpc_tls_,
            auth=GrpcAuth(controller.auth_pipeline) if controller.auth_pipeline else None,
            idle_ms=bc.grpcClientIdleTimeMills, cap=_grpc_cap(bc, reactor), max_pending=bc.grpcFrontMaxPendingBytes))
    if controller.metrics_manager is not None:  # metricsExporterType=PROM
        from rmqpy.common.metrics import metrics_service
        host, mport = controller.metrics_manager.address()
        where = "" if bc.metricsPromExporterHost else " (brokerIP1, as Java; metricsPromExporterHost sets another address)"
        listeners.append(metrics_service(controller.metrics_manager.registry, host, mport, f"broker metrics{where}",
                                         reactor))
    return build_broker_service(controller, Options.tap_name, listeners)


def _raise_open_file_limit() -> None:
    """Soft RLIMIT_NOFILE to the hard limit before the store opens its files (issue 31: a flood of
    sockets under the default 1,024/4,096 left no descriptor for the next commit-log file)."""
    from twisted.logger import Logger

    from rmqpy.common import fdlimit
    got = fdlimit.raise_open_file_limit()
    log = Logger(namespace="rmqpy.broker.startup")
    if got.error:
        log.warn("open files: the soft limit stays {soft} (hard {hard}): {e}", soft=got.soft, hard=got.hard,
                 e=got.error)
    else:
        log.info("open files: soft limit {before} -> {soft} (hard {hard}; -1: unlimited)", before=got.before,
                 soft=got.soft, hard=got.hard)


def _grpc_cap(bc: Any, reactor: Any) -> Any:
    """The gRPC port's ConnectionCap: relayed through the front, a connection holds 3 descriptors."""
    from twisted.logger import Logger

    from rmqpy.common import fdlimit
    from rmqpy.remoting.connection_limits import ConnectionCap
    total, per_address, how = fdlimit.port_caps(bc.grpcMaxConnections, bc.grpcMaxConnectionsPerAddress,
                                                bc.openFileReserve, 3)
    Logger(namespace="rmqpy.broker.startup").info(
        "gRPC port: at most {n} connections, {m} per address where the front holds the port "
        "(tls.server.mode=permissive; 0: no cap; {how})", n=total, m=per_address, how=how)
    return ConnectionCap("gRPC port", reactor, total, per_address, ("grpcMaxConnections",
                                                                     "grpcMaxConnectionsPerAddress"))
