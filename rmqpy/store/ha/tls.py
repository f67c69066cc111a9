"""TLS on the HA port: rmqpy's ``haUseTLS`` (off by default: Java's HA, classic and AutoSwitch, is
plaintext only, so neither a Java slave nor a Java master can take part in a TLS pair).

With it on, the master's HA port takes TLS only (``tls.server.mode`` is forced to ``enforcing`` for
this port: a plaintext peer is closed unread) with the ``tls.server.*`` keys of the remoting ports,
and a slave or replica dials its master with the ``tls.client.*`` keys (``tls.enable`` need not be
set). Mutual TLS is the existing keys too: ``tls.server.need.client.auth=require`` with
``tls.server.trustCertPath`` on the master, ``tls.client.certPath``/``keyPath`` on the slave; then
a peer without a certificate of that CA neither reads the commit log nor acknowledges anything.
The allow-list (:class:`~rmqpy.store.ha.gate.ReplicaGate`) is asked before the TLS handshake.
"""
from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer, protocol
from twisted.internet.endpoints import connectProtocol

from rmqpy.remoting.tls import (
    TlsClientEndpoints,
    TlsConfigError,
    TlsServerWrapper,
    client_endpoint_factory,
    server_factory_wrapper,
)
from rmqpy.store.ha.gate import GatedFactory

log = logging.getLogger(__name__)


class HaTls:
    """The HA port's server wrapper and the replica's dialler, built once per broker from its ``tls.*`` keys."""

    def __init__(self, server: TlsServerWrapper, client: TlsClientEndpoints, reactor: Any) -> None:
        self.server = server
        self.client = client
        self.reactor = reactor

    def wrap(self, service: Any) -> protocol.Factory:
        """The HA port's factory for ``service`` (either HA service: a ``gate`` and ``connections``)."""
        return GatedFactory(self.server(service), service.gate, lambda: len(service.connections))

    def connect(self, address: str, proto: protocol.Protocol) -> defer.Deferred[Any]:
        """A replica's dial of its master's ``host:port`` (the ``connect`` of both HA clients)."""
        host, _, port = address.rpartition(":")
        return connectProtocol(self.client(self.reactor, host, int(port)), proto)

    def stop(self) -> None:
        self.client.stop()


def ha_tls(props: dict[str, str], reactor: Any, *, use_inotify: bool | None = None) -> HaTls:
    """:class:`HaTls` for ``haUseTLS=true``; :class:`TlsConfigError` when the keys cannot work (no
    certificate with the test mode off, unreadable files)."""
    server = server_factory_wrapper({**props, "tls.server.mode": "enforcing"}, reactor, use_inotify=use_inotify)
    client = client_endpoint_factory({**props, "tls.enable": "true"}, reactor, use_inotify=use_inotify)
    if server is None or client is None:  # enforcing and tls.enable=true: both are built or raise
        raise TlsConfigError("haUseTLS=true: the HA port's TLS could not be set up")
    log.info("HA port: TLS only (haUseTLS; the TLS line with tls.server.mode=enforcing is this port's), "
             "replicas dial their master with TLS")
    return HaTls(server, client, reactor)
