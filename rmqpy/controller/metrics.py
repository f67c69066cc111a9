"""The controller's Prometheus metrics: Apache 5.3.3's ``ControllerMetricsManager``, same names,
labels and buckets.

Java's controller (``metricsExporterType=PROM``, ``metricsPromExporterHost``:``metricsPromExporterPort``,
5557) has its own OpenTelemetry meter, ``controller``. Every sample is labelled
``otel_scope_name="controller"``, ``address`` (this peer's ``controllerDLegerPeers`` address), ``group``
(``controllerDLegerGroup``), ``peer_id`` (``controllerDLegerSelfId``), the ``metricsLabel`` pairs
(``k:v,k2:v2``; an item that is not exactly two ``:``-separated parts is skipped) and, with
``metricsInDelta``, ``aggregation="delta"``. The samples, as Java's endpoint serves them (measured
against Apache's 5.3.3 name server with its controller embedded; a family appears once it has data):

- ``request_total{request_type, request_handle_status}``: every request the controller processor
  handles (``ControllerRequestProcessor.processRequest``); ``request_type`` is the name in Java's
  ``RequestType`` enum (``CONTROLLER_ELECT_MASTER``, ``CONTROLLER_BROKER_HEARTBEAT``...). The status is
  ``success`` whenever an answer was made (whatever its response code, CONTROLLER_NOT_LEADER
  included), ``timeout`` when the log did not commit in 5 s, ``failed`` on any other error.
- ``request_latency_microseconds_{bucket,count,sum}{request_type}``: the time processRequest took
  (waiting for the commit included), for the answered requests only.
- ``election_total{cluster, broker_set, election_result}``: each master election the leader computes
  (a broker's or admin's CONTROLLER_ELECT_MASTER, and the controller's own after a master died):
  ``new_master_elected``, ``keep_current_master`` or ``no_master_elected``. ``cluster`` is the
  request's (blank for the controller's own elections, as Java's ``ofControllerTrigger``).
- ``dledger_op_total{dledger_operation="append", dLedger_operation_status}`` and
  ``dledger_op_latency_microseconds_*{dledger_operation, dLedger_operation_status}`` (the
  latency of the successful ones): Java counts DLedger appends; rmqpy keeps the names and
  counts **PySyncObj's log appends** (a request's events, and the empty entry a new leader
  commits first, as Java's ``appendToDLedgerAndWait`` counts its initial one).
- ``role``: Java's up-down counter, to which each role change adds the new role's value less
  the old's (unknown 0, candidate 1, follower 2, leader 3), starting from follower: a leader
  shows 1, a follower 0. rmqpy serves it from the start (Java once the role first changed) and
  knows leader and follower only (PySyncObj's candidate state is not watched).
- ``active_broker_num{cluster, broker_set}``: the live brokers of each set by this controller's
  own heartbeat table.
- ``dledger_disk_usage_bytes``: the size of the files under ``controllerStorePath`` (PySyncObj's
  journal and dump here).
- ``target_info`` and ``otel_scope_info{otel_scope_name="controller"}``, 1, as OpenTelemetry's exporter.

The latency buckets are Java's view: 1, 3, 5, 10, 30, 50, 100, 300, 500 us, the same in ms, and 1,
3, 5, 10 s (in microseconds). Differences: Java's samples carry a timestamp, and its ``# TYPE``
lines name a family without its unit (prometheus-client names it as its samples) and keep a
counter's ``_total``. The ``le`` values are written as Java writes them (``le="1.0E7"``).

Nothing here runs a timer; the hooks update plain dicts on the reactor, and
:class:`~rmqpy.common.metrics.CallbackCollector` makes the families when Prometheus scrapes.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric

from rmqpy.common.metrics import CallbackCollector, Histogram, histogram_family
from rmqpy.controller.config import ControllerConfig
from rmqpy.protocol.codes import RequestCode, ResponseCode

#: Java ``ControllerMetricsManager.registerMetricsView``: request_latency and dledger_op_latency (us)
LATENCY_BUCKETS_US = (1, 3, 5, 10, 30, 50, 100, 300, 500,
                      1_000, 3_000, 5_000, 10_000, 30_000, 50_000, 100_000, 300_000, 500_000,
                      1_000_000, 3_000_000, 5_000_000, 10_000_000)

#: Java ``ControllerMetricsConstant.RequestType``: request code -> ``request_type``
REQUEST_TYPES: dict[int, str] = {
    int(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET): "CONTROLLER_ALTER_SYNC_STATE_SET",
    int(RequestCode.CONTROLLER_ELECT_MASTER): "CONTROLLER_ELECT_MASTER",
    int(RequestCode.CONTROLLER_REGISTER_BROKER): "CONTROLLER_REGISTER_BROKER",
    int(RequestCode.CONTROLLER_GET_REPLICA_INFO): "CONTROLLER_GET_REPLICA_INFO",
    int(RequestCode.CONTROLLER_GET_METADATA_INFO): "CONTROLLER_GET_METADATA_INFO",
    int(RequestCode.CONTROLLER_GET_SYNC_STATE_DATA): "CONTROLLER_GET_SYNC_STATE_DATA",
    int(RequestCode.GET_BROKER_EPOCH_CACHE): "CONTROLLER_GET_BROKER_EPOCH_CACHE",
    int(RequestCode.NOTIFY_BROKER_ROLE_CHANGED): "CONTROLLER_NOTIFY_BROKER_ROLE_CHANGED",
    int(RequestCode.BROKER_HEARTBEAT): "CONTROLLER_BROKER_HEARTBEAT",
    int(RequestCode.UPDATE_CONTROLLER_CONFIG): "CONTROLLER_UPDATE_CONTROLLER_CONFIG",
    int(RequestCode.GET_CONTROLLER_CONFIG): "CONTROLLER_GET_CONTROLLER_CONFIG",
    int(RequestCode.CLEAN_BROKER_DATA): "CONTROLLER_CLEAN_BROKER_DATA",
    int(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID): "CONTROLLER_GET_NEXT_BROKER_ID",
    int(RequestCode.CONTROLLER_APPLY_BROKER_ID): "CONTROLLER_APPLY_BROKER_ID",
}

#: Java ``ControllerMetricsManager.getRoleValue``
ROLE_VALUES = {"unknown": 0, "candidate": 1, "follower": 2, "leader": 3}

#: Java ``DLedgerController.electMaster``: election response code -> ``election_result``
ELECTION_RESULTS = {
    int(ResponseCode.SUCCESS): "new_master_elected",
    int(ResponseCode.CONTROLLER_MASTER_STILL_EXIST): "keep_current_master",
    int(ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE): "no_master_elected",
    int(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED): "no_master_elected",
}

SUCCESS, FAILED, TIMEOUT = "success", "failed", "timeout"


def java_double(value: float) -> str:
    """Java ``Double.toString`` for the bucket bounds: ``1000000.0``, ``1.0E7`` from 10^7 up."""
    if value == float("inf"):
        return "+Inf"
    if abs(value) < 1e7:
        return repr(float(value))
    mantissa, _, exponent = f"{value:e}".partition("e")
    return f"{float(mantissa)!r}E{int(exponent)}"


class JavaHistogram(Histogram):
    """A :class:`~rmqpy.common.metrics.Histogram` whose ``le`` values are written as Java's exporter
    writes them (``le="1.0E7"``)."""

    __slots__ = ()

    def buckets(self) -> list[tuple[str, float]]:
        return [(java_double(float(le)), n) for le, n in super().buckets()]


def base_labels(address: str, group: str, peer_id: str, metrics_label: str = "",
                delta: bool = False) -> dict[str, str]:
    """Java's ``LABEL_MAP`` (``newAttributesBuilder``), ``otel_scope_name`` first."""
    labels = {"address": address, "group": group, "peer_id": peer_id}
    for item in (s for s in metrics_label.split(",") if s):
        parts = item.split(":")
        while parts and not parts[-1]:  # Java's String.split drops trailing empty strings
            parts.pop()
        if len(parts) == 2 and parts[0]:
            labels[parts[0]] = parts[1]
    if delta:
        labels["aggregation"] = "delta"
    return {"otel_scope_name": "controller", **{k: v for k, v in labels.items() if k != "otel_scope_name"}}


def dir_size(path: str) -> int | None:
    """Java ``UtilAll.calculateFileSizeInPath``: the bytes of the files under ``path``; None if
    it does not exist."""
    if not os.path.exists(path):
        return None
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass  # a file PySyncObj just replaced
    return total


class ControllerMetrics:
    """The controller's instruments; ``clock.seconds()`` times requests and appends.

    ``active_brokers`` gives ``{cluster: {broker set: live brokers}}`` when scraped;
    ``store_path`` is measured when scraped."""

    def __init__(self, config: ControllerConfig, address: str, store_path: str, clock: Any,
                 active_brokers: Callable[[], dict[str, dict[str, int]]] = dict) -> None:
        self.clock = clock
        self.store_path = store_path
        self.active_brokers = active_brokers
        labels = base_labels(address, config.controllerDLegerGroup, config.controllerDLegerSelfId,
                             config.metricsLabel, config.metricsInDelta)
        self.label_names, self.label_values = list(labels), list(labels.values())
        self.requests: dict[tuple[str, str], int] = {}
        self.request_latency: dict[str, JavaHistogram] = {}
        self.elections: dict[tuple[str, str, str], int] = {}
        self.appends: dict[str, int] = {}
        self.append_latency = JavaHistogram(LATENCY_BUCKETS_US)
        self.role = "follower"
        self.collector = CallbackCollector(self.families)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)

    # ------------------------------------------------------------------ hooks
    def request_done(self, code: int, status: str, started: float) -> None:
        """A request handled (success: its latency too) or failed, as processRequest records it."""
        request_type = REQUEST_TYPES.get(code)
        if request_type is None:  # Java's getLowerCaseNameByCode: null, and OpenTelemetry drops the label
            request_type = ""
        key = (request_type, status)
        self.requests[key] = self.requests.get(key, 0) + 1
        if status == SUCCESS:
            hist = self.request_latency.get(request_type)
            if hist is None:
                hist = self.request_latency[request_type] = JavaHistogram(LATENCY_BUCKETS_US)
            hist.observe(self._micros(started))

    def election(self, cluster: str | None, broker_set: str | None, response_code: int) -> None:
        result = ELECTION_RESULTS.get(int(response_code))
        if result is None:
            return
        key = (cluster or "", broker_set or "", result)
        if key not in self.elections and len(self.elections) >= 10_000:  # names come from requests
            return
        self.elections[key] = self.elections.get(key, 0) + 1

    def append_done(self, status: str, started: float) -> None:
        self.appends[status] = self.appends.get(status, 0) + 1
        if status == SUCCESS:
            self.append_latency.observe(self._micros(started))

    def record_role(self, role: str) -> None:
        self.role = role

    def _micros(self, started: float) -> int:
        return max(0, int((self.clock.seconds() - started) * 1_000_000))

    # ------------------------------------------------------------------ scrape
    def _gauge(self, name: str, doc: str, labels: Sequence[str],
               series: Iterable[tuple[Sequence[str], float]]) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=self.label_names + list(labels))
        for values, value in series:
            family.add_metric(self.label_values + list(values), value)
        return family

    def _counter(self, name: str, doc: str, labels: Sequence[str],
                 series: Iterable[tuple[Sequence[str], float]]) -> CounterMetricFamily:
        family = CounterMetricFamily(name, doc, labels=self.label_names + list(labels))
        for values, value in series:
            family.add_metric(self.label_values + list(values), value)
        return family

    def families(self) -> Iterable[Metric]:
        yield InfoMetricFamily("target", "Target metadata", value={})
        yield InfoMetricFamily("otel_scope", "Scope metadata", value={"otel_scope_name": "controller"})
        if self.requests:
            yield self._counter("request", "total request num", ("request_type", "request_handle_status"),
                                (((t, s), n) for (t, s), n in list(self.requests.items())))
        if self.request_latency:
            yield histogram_family("request_latency_microseconds", "request latency",
                                   self.label_names + ["request_type"],
                                   ((self.label_values + [t], h) for t, h in list(self.request_latency.items())))
        if self.elections:
            yield self._counter("election", "total elect num", ("cluster", "broker_set", "election_result"),
                                (((c, b, r), n) for (c, b, r), n in list(self.elections.items())))
        if self.appends:
            yield self._counter("dledger_op", "total dledger operation num",
                                ("dledger_operation", "dLedger_operation_status"),
                                ((("append", s), n) for s, n in list(self.appends.items())))
        if any(self.append_latency.counts):
            yield histogram_family("dledger_op_latency_microseconds", "dledger operation latency",
                                   self.label_names + ["dledger_operation", "dLedger_operation_status"],
                                   [(self.label_values + ["append", SUCCESS], self.append_latency)])
        yield self._gauge("role", "role of current node", (),
                          [((), ROLE_VALUES[self.role] - ROLE_VALUES["follower"])])
        active = self.active_brokers()
        if active:
            yield self._gauge("active_broker_num", "now active brokers num", ("cluster", "broker_set"),
                              (((c, b), n) for c, sets in active.items() for b, n in sets.items()))
        size = dir_size(self.store_path)
        if size is not None:
            yield self._gauge("dledger_disk_usage_bytes", "disk usage of dledger", (), [((), size)])
