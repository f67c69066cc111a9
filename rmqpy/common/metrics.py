"""The Prometheus endpoint of both servers, and what the broker and name server share in it.

RocketMQ 5 exports its metrics through OpenTelemetry (``metricsExporterType=PROM``:
``PrometheusHttpServer`` on ``metricsPromExporterHost:metricsPromExporterPort``, 5557).
OpenTelemetry's Prometheus exporter adds the unit to a sample's name and ``_total`` to a
counter's, and labels every sample with ``otel_scope_name="broker-meter"`` and the broker's
``cluster``, ``node_type`` and ``node_id``. rmqpy serves the same sample names and labels, so
that RocketMQ's Grafana dashboards (which query the sample names) work unchanged. One
difference: the Java exporter's ``# TYPE`` line names the family without its unit
(``rocketmq_rpc_latency``) while its samples carry it (``rocketmq_rpc_latency_milliseconds_count``);
prometheus-client names the family as the samples are named.

How it stays cheap: nothing on a request's path touches a prometheus-client metric (a lock
and a label lookup each). The hooks keep plain counters in dicts; :class:`CallbackCollector`
turns them into metric families when Prometheus scrapes, as Java's observable gauges are
read at collection time. The endpoint is a ``twisted.web`` resource run on the reactor
thread (``prometheus_client.twisted.MetricsResource`` would run the collectors in a thread
pool, beside the reactor changing the same dicts).
"""
from __future__ import annotations

import time
from bisect import bisect_left
from typing import Any, Callable, Iterable, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from twisted.internet import task
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import http, resource, server

from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RPC_ONEWAY, RemotingCommand
from rmqpy.remoting.connection_limits import ConnectionCap

#: Java ``RemotingMetricsManager.getMetricsView``: rocketmq_rpc_latency buckets (ms)
RPC_LATENCY_BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
#: rmqpy: the reactor's lateness and the store's put/flush latency (ms)
LATENCY_BUCKETS_MS = (1, 5, 10, 50, 100, 200, 500, 1000, 2000, 5000)

EXPORTER_TYPES = ("DISABLE", "OTLP_GRPC", "PROM", "LOG")


class Histogram:
    """Cumulative bucket counts and a sum, without a lock: updated on the reactor thread only."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        acc = 0
        for bound, n in zip((*(float(b) for b in self.bounds), float("inf")), self.counts):
            acc += n
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), acc))
        return out


def histogram_family(name: str, doc: str, labels: Sequence[str],
                     series: Iterable[tuple[Sequence[str], Histogram]]) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=list(labels))
    for values, hist in series:
        family.add_metric(list(values), hist.buckets(), hist.sum)
    return family


class CallbackCollector:
    """A prometheus-client collector whose ``collect`` asks callables for metric families."""

    def __init__(self, *sources: Callable[[], Iterable[Metric]]) -> None:
        self.sources = list(sources)

    def add(self, source: Callable[[], Iterable[Metric]]) -> None:
        self.sources.append(source)

    def collect(self) -> Iterable[Metric]:
        for source in self.sources:
            yield from source()


class BaseLabels:
    """The labels Java puts on every sample (``newAttributesBuilder``), in Java's order."""

    def __init__(self, cluster: str, node_type: str, node_id: str, extra: str = "", delta: bool = False) -> None:
        pairs: list[tuple[str, str]] = [("otel_scope_name", f"{node_type}-meter")]
        for item in (s for s in extra.split(",") if s):  # metricsLabel: "k:v,k2:v2"
            k, sep, v = item.partition(":")
            if sep and k and ":" not in v:
                pairs.append((k, v))
        if delta:
            pairs.append(("aggregation", "delta"))
        pairs += [("cluster", cluster), ("node_id", node_id), ("node_type", node_type)]
        self.names = [k for k, _ in pairs]
        self.values = [v for _, v in pairs]

    def gauge(self, name: str, doc: str, labels: Sequence[str] = (),
              series: Iterable[tuple[Sequence[str], float]] = ()) -> GaugeMetricFamily:
        family = GaugeMetricFamily(name, doc, labels=self.names + list(labels))
        for values, value in series:
            family.add_metric(self.values + list(values), value)
        return family

    def one(self, name: str, doc: str, value: float) -> GaugeMetricFamily:
        return self.gauge(name, doc, (), [((), value)])

    def histogram(self, name: str, doc: str, labels: Sequence[str],
                  series: Iterable[tuple[Sequence[str], Histogram]]) -> HistogramMetricFamily:
        return histogram_family(name, doc, self.names + list(labels),
                                ((self.values + list(v), h) for v, h in series))


def _code_names(enum: Any) -> dict[int, str]:
    """Java ``RemotingHelper.REQUEST_CODE_MAP``: a code's field name, lower case."""
    return {int(member): name.lower() for name, member in enum.__members__.items()}


_REQUEST_NAMES = _code_names(RequestCode)
_RESPONSE_NAMES = _code_names(ResponseCode)


class RpcLatency:
    """``rocketmq_rpc_latency``: per request code, response code, long polling and result, the
    time from reading a request to writing its answer, as Java's ``writeResponse`` records it.

    The dispatcher calls :meth:`record` with the request's read time; a series is a plain
    :class:`Histogram` in a dict keyed by the label values' codes (names are made at scrape).
    """

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.series: dict[tuple[int, int, bool, bool], Histogram] = {}

    def record(self, request: RemotingCommand, response: RemotingCommand, read_at: float | None,
               deferred: bool) -> None:
        if read_at is None:
            return
        code = request.code
        # a held pull is answered later (Java: request.isSuspended())
        long_polling = deferred and code in _PULL_CODES
        key = (code, response.code, long_polling, bool(request.flag & RPC_ONEWAY))
        hist = self.series.get(key)
        if hist is None:
            if len(self.series) >= 10000:  # codes come from clients: bounded label sets
                return
            hist = self.series[key] = Histogram(RPC_LATENCY_BUCKETS_MS)
        ms = int((self.clock.seconds() - read_at) * 1000)  # Java records whole milliseconds
        hist.counts[bisect_left(hist.bounds, ms)] += 1
        hist.sum += ms

    def families(self, base: BaseLabels) -> Iterable[Metric]:
        def series() -> Iterable[tuple[Sequence[str], Histogram]]:
            for (code, rcode, long_polling, oneway), hist in list(self.series.items()):
                yield ((_bool(long_polling), "remoting", _REQUEST_NAMES.get(code, str(code)),
                        _RESPONSE_NAMES.get(rcode, str(rcode)), "oneway" if oneway else "success"), hist)
        yield base.histogram("rocketmq_rpc_latency_milliseconds", "Rpc latency",
                             ("is_long_polling", "protocol_type", "request_code", "response_code", "result"),
                             series())


_PULL_CODES = frozenset((int(RequestCode.PULL_MESSAGE), int(RequestCode.LITE_PULL_MESSAGE)))


def _bool(v: bool) -> str:
    return "true" if v else "false"


class ReactorLag:
    """rmqpy: how late the reactor runs a timer due every ``interval`` seconds (the time a
    request waits behind other work), as a histogram and the last value."""

    def __init__(self, clock: Any, interval: float = 1.0) -> None:
        self.clock, self.interval = clock, interval
        self.hist = Histogram(LATENCY_BUCKETS_MS)
        self.last_ms = 0.0
        self._due = 0.0
        self._loop: task.LoopingCall | None = None

    def start(self) -> None:
        self._loop = task.LoopingCall(self._tick)
        self._loop.clock = self.clock
        self._due = self.clock.seconds()
        self._loop.start(self.interval, now=True)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def _tick(self) -> None:
        now = self.clock.seconds()
        late = max(0.0, (now - self._due) * 1000.0)
        self.last_ms = late
        self.hist.observe(late)
        self._due = now + self.interval

    def families(self, base: BaseLabels) -> Iterable[Metric]:
        yield base.histogram("rmqpy_reactor_lag_milliseconds",
                             "How late the reactor ran a timer due every second", (), [((), self.hist)])
        yield base.one("rmqpy_reactor_lag_last_milliseconds", "The reactor's lateness at the last tick",
                       self.last_ms)


class MetricsPage(resource.Resource):
    """``GET /metrics`` (and ``/``): the registry in Prometheus' text format, on the reactor."""

    isLeaf = True

    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__()
        self.registry = registry

    def render_GET(self, request: Any) -> bytes:  # noqa: N802 (twisted.web's name)
        if request.path not in (b"/metrics", b"/"):
            request.setResponseCode(404)
            return b"not found\n"
        request.setHeader(b"Content-Type", CONTENT_TYPE_LATEST.encode())
        return generate_latest(self.registry)


def exporter_enabled(exporter_type: str, what: str, log: Logger) -> bool:
    """True for PROM; DISABLE is off; Java's other exporters are not served (one warning)."""
    kind = (exporter_type or "DISABLE").strip().upper()
    if kind == "PROM":
        return True
    if kind != "DISABLE":
        log.warn("{what}: metricsExporterType={kind} is not supported by rmqpy (only PROM and DISABLE): "
                 "no metrics are exported", what=what, kind=kind)
    return False


class _MetricsRequest(server.Request):
    """A request whose body is dropped as it arrives: the endpoint serves GET only, and
    twisted.web would otherwise keep any body a client sends (spooled to a temporary file)."""

    def handleContentChunk(self, data: bytes) -> None:  # noqa: N802 (twisted.web's name)
        pass


#: connections the metrics port holds at once, in all and per source address: a Prometheus server
#: scrapes with one or two; more are closed at once (rmqpy's bound; Java's exporter has none)
MAX_METRICS_CONNECTIONS = 64
MAX_METRICS_CONNECTIONS_PER_ADDRESS = 16


class _CappedChannel(http.HTTPChannel):
    """An HTTP connection that gives its place under the port's cap back when it closes."""

    release: Callable[[], None] | None = None

    def connectionLost(self, reason: Failure = connectionDone) -> None:  # noqa: N802 (Twisted's name)
        if self.release is not None:
            self.release()
            self.release = None
        super().connectionLost(reason)


class _CappedSite(server.Site):
    """A Site whose connections count against a ConnectionCap from the accept to the close."""

    #: plain HTTP/1.1 channels (no HTTP/2 negotiation: the port has no TLS, so no ALPN)
    protocol: Callable[[], Any] = _CappedChannel
    cap: ConnectionCap | None = None

    def buildProtocol(self, addr: Any) -> Any:  # noqa: N802 (Twisted's name)
        host = str(getattr(addr, "host", "?"))
        if self.cap is not None and not self.cap.admit(host):
            return None  # Twisted closes the socket at once
        channel = super().buildProtocol(addr)
        if self.cap is not None and channel is not None:
            channel.release = lambda cap=self.cap: cap.release(host)
        return channel


def metrics_site(registry: CollectorRegistry, clock: Any = None) -> server.Site:
    """The endpoint's Site; with a ``clock`` (the reactor) its connections are capped
    (:data:`MAX_METRICS_CONNECTIONS`, :data:`MAX_METRICS_CONNECTIONS_PER_ADDRESS`)."""
    site = _CappedSite(MetricsPage(registry), timeout=30)  # idle connections closed after 30 s
    if clock is not None:
        site.cap = ConnectionCap("metrics port", clock, MAX_METRICS_CONNECTIONS, MAX_METRICS_CONNECTIONS_PER_ADDRESS,
                                 ("(rmqpy's bound)", "(rmqpy's bound)"))
    site.requestFactory = _MetricsRequest
    site.noisy = False
    site.displayTracebacks = False
    site.log = lambda request: None  # type: ignore[method-assign]  # no access log line per scrape
    return site


def wall_ms() -> int:
    return int(time.time() * 1000)


_log = Logger()


def endpoint_url(host: str, port: int) -> str:
    """``http://host:port/metrics``, an IPv6 host in brackets."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"


def metrics_service(registry: CollectorRegistry, host: str, port: int, what: str, reactor: Any) -> Any:
    """The endpoint as a Twisted service on ``reactor``: ``http://host:port/metrics``, its
    connections capped (:func:`metrics_site`).

    Once it listens it logs the address it listens on: the broker's is ``brokerIP1`` unless
    ``metricsPromExporterHost`` is set (as Java's), not 127.0.0.1, which Twisted's own
    ``Site starting on 5557`` line does not tell."""
    from twisted.application import internet

    class MetricsServer(internet.TCPServer):
        def _getPort(self) -> Any:  # noqa: N802 (Twisted's name): it listens here
            listening = super()._getPort()
            bound = listening.getHost()
            _log.info("{what}: Prometheus endpoint listening on {url}", what=what, url=endpoint_url(bound.host, bound.port))
            return listening

    return MetricsServer(port, metrics_site(registry, reactor), interface=host, reactor=reactor)
