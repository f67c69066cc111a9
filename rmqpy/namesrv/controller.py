"""NamesrvController: the name server as a Twisted service tree."""
from __future__ import annotations

import os
from typing import Any

from twisted.application import service
from twisted.internet import defer, task, threads
from twisted.internet.interfaces import IReactorThreads
from twisted.logger import Logger

from rmqpy.common.filewrite import LatestWriter, write_file_atomically
from rmqpy.common.metrics import exporter_enabled, metrics_service
from rmqpy.common.properties import (
    PropertiesError,
    apply_properties,
    config_items,
    format_properties,
    load_properties,
    store_properties,
)
from rmqpy.namesrv.config import NamesrvConfig, NettyServerConfig
from rmqpy.namesrv.kvconfig import KVConfigManager, KVLimits
from rmqpy.namesrv.metrics import NamesrvMetrics
from rmqpy.namesrv.processor import NamesrvRequestProcessor
from rmqpy.namesrv.routeinfo import RouteInfoManager
from rmqpy.protocol.codes import RequestCode
from rmqpy.remoting.connection_limits import remoting_cap
from rmqpy.remoting.dispatch import RequestDispatcher
from rmqpy.remoting.limits import ChannelSweeper, ConnectionLimits
from rmqpy.remoting.protocol import RemotingServerFactory
from rmqpy.remoting.server import FactoryWrapper, RemotingServerService


class NamesrvController(service.MultiService):
    log = Logger()

    def __init__(self, config: NamesrvConfig, netty: NettyServerConfig, reactor: Any = None,
                 clock: Any = None, wrap_factory: FactoryWrapper | None = None) -> None:
        super().__init__()
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.reactor = reactor
        self.clock = clock or reactor
        self.config = config
        self.netty = netty
        self.routes = RouteInfoManager(now_ms=lambda: self.clock.seconds() * 1000,
                                       broker_channel_expired_ms=config.brokerChannelExpiredTime, clock=self.clock)
        self.kv = KVConfigManager(config.kvConfigPath, KVLimits(
            config.kvConfigMaxKeyLength, config.kvConfigMaxValueLength, config.kvConfigMaxKeys), self._in_thread, clock=self.clock)
        # UPDATE_NAMESRV_CONFIG persists every config as Java's Configuration.persist does
        self.config_writer = LatestWriter(self._persist_config, self._in_thread, self._config_write_failed)
        self.dispatcher = RequestDispatcher()
        self.processor = NamesrvRequestProcessor(self)
        self.dispatcher.register(self.processor.handlers, self.processor)
        # route answers depend on the request and the tables alone: kept and replayed until they change
        self.dispatcher.replay_answers([RequestCode.GET_ROUTEINFO_BY_TOPIC], self.processor.route_stamp)
        self.dispatcher.add_channel_listener(self)
        limits = ConnectionLimits.from_config(netty)
        self.factory = RemotingServerFactory(self.dispatcher, self.clock, netty.frameMaxLength, limits,
                                             remoting_cap(netty, self.clock, "name server"))
        self.sweeper = ChannelSweeper(self.clock, limits, [self.factory], netty)  # idle, half-sent connections
        self.server = RemotingServerService(reactor, netty.listenPort, self.factory, netty.bindAddress,
                                            wrap_factory, eager_writes=True)
        self.server.setServiceParent(self)
        self._scan = task.LoopingCall(self.routes.scan_not_active_brokers)
        self._scan.clock = self.clock
        self.metrics: NamesrvMetrics | None = None
        if exporter_enabled(config.metricsExporterType, "name server", self.log):
            self.metrics = NamesrvMetrics(self.routes, f"{netty.bindAddress}:{netty.listenPort}",
                                          config.metricsLabel, self.clock)
            self.dispatcher.rpc_observer = self.metrics.rpc
            host = config.metricsPromExporterHost or netty.bindAddress
            metrics_service(self.metrics.registry, host, config.metricsPromExporterPort,
                            "name server metrics", reactor).setServiceParent(self)

    def _in_thread(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in the reactor's thread pool (file writes); inline on a reactor without one."""
        if not IReactorThreads.providedBy(self.reactor):
            return defer.maybeDeferred(fn, *args)
        return threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), fn, *args)

    def startService(self) -> None:
        self.kv.load()
        super().startService()
        interval = self.config.scanNotActiveBrokerInterval / 1000.0
        self._scan.start(interval, now=False)
        self.sweeper.start()
        if self.metrics is not None:
            self.metrics.reactor_lag.start()
        self.log.info("The Name Server boot success. serializeType=JSON, port {port}", port=self.server.port_number)

    def stopService(self) -> Any:
        if self._scan.running:
            self._scan.stop()
        self.sweeper.stop()
        if self.metrics is not None:
            self.metrics.reactor_lag.stop()
        for channel in list(self.factory.channels):
            channel.close()
        stopped = super().stopService()
        return defer.gatherResults([defer.maybeDeferred(lambda: stopped), self.config_writer.when_idle()])

    # channel listener
    def channel_connected(self, channel: Any) -> None:
        pass

    def channel_closed(self, channel: Any) -> None:
        self.routes.on_channel_destroy(channel)

    # runtime config, as Java's Configuration object
    def config_objects(self) -> list[Any]:
        return [self.config, self.netty]

    def update_config(self, props: dict[str, str]) -> None:
        """Java ``Configuration.update``: the known keys are set, then every config is written to
        ``configStorePath`` (the ``-c`` file when there is one, as NamesrvStartup sets it), off the
        reactor and coalesced (:class:`LatestWriter`)."""
        unknown = apply_properties(self.config_objects(), props)
        if unknown:   # one line per request, not one per key: a body may hold thousands
            self.log.warn("UPDATE_NAMESRV_CONFIG: {n} unknown config keys ignored, e.g. {k}",
                          n=len(unknown), k=ascii(unknown[0])[:80])
        items = [(k, v) for c in self.config_objects() for k, v in config_items(c) if v is not None]
        self.config_writer.write((self.config.configStorePath, items))

    @staticmethod
    def _persist_config(job: tuple[str, list[tuple[str, Any]]]) -> None:
        """Every config into ``path``, keeping the keys the file has that no config object knows
        (``tls.*`` of a ``-c`` file: Java keeps them too); escaped as the broker writes its file."""
        path, items = job
        props: dict[str, str] = {}
        if os.path.exists(path):
            try:
                props.update(load_properties(path))
            except PropertiesError as exc:  # rewriting it would drop the keys we cannot read
                raise OSError(f"not rewriting {path}, it cannot be read back: {exc}") from None
        for key, value in items:
            props[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        write_file_atomically(path, store_properties(props.items()))

    def _config_write_failed(self, failure: Any) -> None:
        self.log.error("persist {path} failed: {err}", path=self.config.configStorePath,
                       err=failure.getErrorMessage())

    def all_configs_text(self) -> str:
        return "".join(format_properties(config_items(c)) for c in self.config_objects())
