"""The metrics port's connection cap (rmqpy.common.metrics.metrics_site): a Prometheus server scrapes
with a connection or two; a flood of connections is closed at once, and a closed one frees its slot."""
from __future__ import annotations

from prometheus_client import CollectorRegistry
from twisted.internet import task
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from rmqpy.common import metrics


def _connect(site, host: str):
    channel = site.buildProtocol(IPv4Address("TCP", host, 40000))
    if channel is not None:
        channel.makeConnection(StringTransport())
    return channel


def test_the_metrics_port_caps_connections_per_address_and_in_all() -> None:
    site = metrics.metrics_site(CollectorRegistry(), task.Clock())
    per_address, total = metrics.MAX_METRICS_CONNECTIONS_PER_ADDRESS, metrics.MAX_METRICS_CONNECTIONS
    held = [_connect(site, "10.0.0.1") for _ in range(per_address)]
    assert all(c is not None for c in held)
    assert _connect(site, "10.0.0.1") is None  # past the cap per address
    held[0].connectionLost(None)
    assert _connect(site, "10.0.0.1") is not None  # the closed one's slot
    others = [_connect(site, f"10.0.1.{i}") for i in range(total - per_address)]
    assert all(c is not None for c in others)
    assert _connect(site, "10.0.2.1") is None  # past the cap of the port
    assert site.cap is not None and site.cap.refused == 2
