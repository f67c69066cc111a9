"""The name server's Prometheus metrics (rmqpy: Java's 5.x name server exports none).

The same keys as the broker's (``metricsExporterType=PROM``, ``metricsPromExporterHost``,
``metricsPromExporterPort``, default 5558) and the same sample names where they apply:
``rocketmq_rpc_latency_milliseconds`` by request and response code, labelled
``node_type="namesrv"`` and ``node_id`` the listen address; plus the brokers and topics it
routes and the reactor's lag.
"""
from __future__ import annotations

from typing import Any, Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from rmqpy.common.metrics import BaseLabels, CallbackCollector, ReactorLag, RpcLatency
from rmqpy.namesrv.routeinfo import RouteInfoManager


class NamesrvMetrics:
    """Reads the route tables it is given when scraped; knows nothing of the controller."""

    def __init__(self, routes: RouteInfoManager, node_id: str, metrics_label: str, clock: Any) -> None:
        self.routes = routes
        self.base = BaseLabels("", "namesrv", node_id, metrics_label)
        self.rpc = RpcLatency(clock)
        self.reactor_lag = ReactorLag(clock)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(CallbackCollector(
            lambda: self.rpc.families(self.base), self._routes, lambda: self.reactor_lag.families(self.base)))

    def _routes(self) -> Iterable[Metric]:
        routes = self.routes
        yield self.base.one("rmqpy_namesrv_brokers", "Brokers registered (live broker addresses)",
                            len(routes.broker_live_table))
        yield self.base.one("rocketmq_topic_number", "Topics routed", len(routes.topic_queue_table))
