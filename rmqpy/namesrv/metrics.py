"""The name server's Prometheus metrics (rmqpy: Java's 5.x name server exports none).

The same keys as the broker's (``metricsExporterType=PROM``, ``metricsPromExporterHost``,
``metricsPromExporterPort``, default 5558) and the same sample names where they apply:
``rocketmq_rpc_latency_milliseconds`` by request and response code, labelled
``node_type="namesrv"`` and ``node_id`` the listen address; plus the brokers and topics it
routes and the reactor's lag.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from rmqpy.common.metrics import BaseLabels, CallbackCollector, ReactorLag, RpcLatency

if TYPE_CHECKING:
    from rmqpy.namesrv.controller import NamesrvController


class NamesrvMetrics:
    def __init__(self, controller: "NamesrvController", clock: Any) -> None:
        self.controller = controller
        netty = controller.netty
        self.base = BaseLabels("", "namesrv", f"{netty.bindAddress}:{netty.listenPort}",
                               controller.config.metricsLabel)
        self.rpc = RpcLatency(clock)
        self.reactor_lag = ReactorLag(clock)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(CallbackCollector(
            lambda: self.rpc.families(self.base), self._routes, lambda: self.reactor_lag.families(self.base)))

    def _routes(self) -> Iterable[Metric]:
        routes = self.controller.routes
        yield self.base.one("rmqpy_namesrv_brokers", "Brokers registered (live broker addresses)",
                            len(routes.broker_live_table))
        yield self.base.one("rocketmq_topic_number", "Topics routed", len(routes.topic_queue_table))
