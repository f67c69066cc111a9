"""ControllerService: one controller of a set as a Twisted service tree: the remoting port on its
own ``controllerDLegerPeers`` address, the request processor, PySyncObj's replicated state under
``controllerStorePath``, the manager's scans, and with ``metricsExporterType=PROM`` the metrics
(:mod:`rmqpy.controller.metrics`) on ``metricsPromExporterPort``."""
from __future__ import annotations

import os
from typing import Any

from twisted.application import service
from twisted.logger import Logger

from rmqpy.common.metrics import exporter_enabled, metrics_service
from rmqpy.common.properties import config_items, format_properties
from rmqpy.controller.config import ControllerConfig, parse_peers, raft_peers
from rmqpy.controller.manager import ControllerManager
from rmqpy.controller.metrics import ControllerMetrics
from rmqpy.controller.processor import ControllerRequestProcessor
from rmqpy.controller.raft import PySyncObjLog
from rmqpy.remoting.client import RemotingClient
from rmqpy.remoting.dispatch import RequestDispatcher
from rmqpy.remoting.netty_config import NettyServerConfig
from rmqpy.remoting.protocol import RemotingServerFactory
from rmqpy.remoting.server import FactoryWrapper, RemotingServerService


class ConfigError(ValueError):
    pass


def store_path(config: ControllerConfig) -> str:
    """Java ``ControllerConfig.getControllerStorePath``: ``~/DLedgerController`` (the
    controllerType + "Controller") when controllerStorePath is blank."""
    return config.controllerStorePath or os.path.join(os.path.expanduser("~"), f"{config.controllerType}Controller")


class ControllerService(service.MultiService):
    log = Logger()

    def __init__(self, config: ControllerConfig, netty: NettyServerConfig, reactor: Any = None,
                 wrap_factory: FactoryWrapper | None = None, serve_metrics: bool = True) -> None:
        """``serve_metrics``: with ``metricsExporterType=PROM``, listen on the metrics port; False when
        another endpoint (the name server's) serves :attr:`metrics`' registry."""
        super().__init__()
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.reactor = reactor
        self.config, self.netty = config, netty
        try:
            self.peers = parse_peers(config.controllerDLegerPeers)
            if not self.peers:
                raise ValueError("Attribute value controllerDLegerPeers of ControllerConfig is null or empty")
            if not config.controllerDLegerSelfId:
                raise ValueError("Attribute value controllerDLegerSelfId of ControllerConfig is null or empty")
            if config.controllerDLegerSelfId not in self.peers:
                raise ValueError(f"controllerDLegerSelfId {config.controllerDLegerSelfId!r} is not one of "
                                 f"controllerDLegerPeers {sorted(self.peers)}")
            self.raft_peers = raft_peers(config, self.peers)
            low, high = config.controllerRaftMinTimeoutMillis, config.controllerRaftMaxTimeoutMillis
            if not 300 < low <= high:  # PySyncObj: above 3 x its 100 ms append period
                raise ValueError(f"controllerRaftMinTimeoutMillis ({low}) must be over 300 and at most "
                                 f"controllerRaftMaxTimeoutMillis ({high})")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.self_id = config.controllerDLegerSelfId
        self.rlog = PySyncObjLog(reactor, self.self_id, self.raft_peers, store_path(config),
                                 raft_timeouts=(config.controllerRaftMinTimeoutMillis / 1000.0,
                                                config.controllerRaftMaxTimeoutMillis / 1000.0))
        self.client = RemotingClient(reactor, connect_timeout=3.0)
        self.manager = ControllerManager(config, self.rlog, reactor, send_oneway=self.client.invoke_oneway,
                                         metadata=self.metadata)
        self.manager.setServiceParent(self)
        self.metrics: ControllerMetrics | None = None
        if exporter_enabled(config.metricsExporterType, "controller", self.log):
            self.metrics = ControllerMetrics(config, self.peers[self.self_id], store_path(config), reactor,
                                             self.manager.heartbeats.active_counts)
            self.manager.metrics = self.metrics
            self.rlog.append_observer = self.metrics.append_done
            if serve_metrics:
                metrics_service(self.metrics.registry, config.metricsPromExporterHost or netty.bindAddress,
                                config.metricsPromExporterPort, "controller metrics", reactor).setServiceParent(self)
        self.dispatcher = RequestDispatcher()
        self.processor = ControllerRequestProcessor(self.manager, self.all_configs_text,
                                                    lambda: [self.config, self.netty], self.metrics)
        self.dispatcher.register(self.processor.handlers, self.processor)
        self.dispatcher.add_channel_listener(self)
        self.factory = RemotingServerFactory(self.dispatcher, reactor, netty.frameMaxLength)
        port = int(self.peers[self.self_id].rpartition(":")[2])
        self.server = RemotingServerService(reactor, port, self.factory, netty.bindAddress, wrap_factory,
                                            eager_writes=True)
        self.server.setServiceParent(self)

    def startService(self) -> None:
        super().startService()
        self.log.info("The Controller Server boot success. serializeType=JSON")
        self.log.info("controller {id} of group {group} serving on {addr}, Raft on {raft}, store {store}",
                      id=self.self_id, group=self.config.controllerDLegerGroup, addr=self.peers[self.self_id],
                      raft=self.raft_peers[self.self_id], store=store_path(self.config))

    def stopService(self) -> Any:
        for channel in list(self.factory.channels):
            channel.close()
        self.client.close()
        return super().stopService()

    # channel listener
    def channel_connected(self, channel: Any) -> None:
        pass

    def channel_closed(self, channel: Any) -> None:
        self.manager.heartbeats.on_channel_closed(channel)

    def metadata(self) -> dict[str, Any]:
        """Java ``DLedgerController.getControllerMetadata``: the group, the last known leader's id
        and address, whether this one leads, and every peer as ``id:host:port;``."""
        leader = self.rlog.leader_id()
        return {
            "group": self.config.controllerDLegerGroup or None,
            "controllerLeaderId": leader,
            "controllerLeaderAddress": self.peers.get(leader) if leader else None,
            "isLeader": self.rlog.leader_ready,
            "peers": "".join(f"{p}:{a};" for p, a in sorted(self.peers.items())),
        }

    def all_configs_text(self) -> str:
        return format_properties(config_items(self.config)) + format_properties(config_items(self.netty))
