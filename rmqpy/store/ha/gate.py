"""Who may be a replica on the HA port, and what a replica can report (issue 31, case 6).

Java's HA port, classic and AutoSwitch, takes whoever connects: a stranger reads the whole
commit log, and a fake "slave" that acknowledges what it is sent answers a SYNC_MASTER's puts
that should have been SLAVE_NOT_AVAILABLE. Both services of rmqpy ask one :class:`ReplicaGate`
before a connection gets a protocol (``buildProtocol``): its address must be in
``haAllowedReplicaAddresses`` (empty, the default: everyone, so that a Java slave replicates
with Java's defaults), and the service must hold fewer than ``max_connections``. A refused
connection is closed at once by Twisted (``buildProtocol`` returns None) and never counted as
a replica. :func:`impossible_report` is what both connections close on: an offset no real
replica can report.
"""
from __future__ import annotations

import ipaddress
import logging
import re
from typing import Any, Callable, Iterable, Union

from twisted.internet import protocol
from twisted.internet.address import IPv4Address, IPv6Address

from rmqpy.remoting.ratelimit import clip, limiter_for

log = logging.getLogger(__name__)

Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
IP = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]

#: the config key of the allow-list, named in log lines and errors
ALLOW_KEY = "haAllowedReplicaAddresses"
#: at most this many connections on the HA port, replicas or not (Java has no cap)
DEFAULT_MAX_CONNECTIONS = 64


def parse_allowed(text: str | None) -> tuple[Network, ...]:
    """``haAllowedReplicaAddresses``: IP addresses and CIDR blocks (``10.0.0.7``, ``10.1.0.0/16``,
    ``fd00::/8``) separated by commas, semicolons or blanks; empty: everyone. A host name is an
    error, not a lookup: the list must not depend on a resolver an attacker may answer."""
    nets: list[Network] = []
    for item in re.split(r"[,;\s]+", (text or "").strip()):
        if not item:
            continue
        try:
            nets.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"{ALLOW_KEY}: {item!r} is not an IP address or a CIDR block "
                             f"(host names are not accepted)") from None
    return tuple(nets)


def peer_ip(addr: Any) -> IP | None:
    """The IP of a TCP peer, an IPv4-mapped IPv6 one (a port bound to ``::``) as the IPv4
    address it is; None for another kind of address."""
    if not isinstance(addr, (IPv4Address, IPv6Address)):
        return None
    try:
        ip = ipaddress.ip_address(addr.host.split("%", 1)[0])  # a scoped link-local's zone
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def impossible_report(offset: int, master_max_offset: int) -> str | None:
    """Why a replica's acknowledged offset cannot be a real replica's (None: it can be): a
    replica holds at most what the master has. Java takes any offset, so one far ahead answers
    every SYNC put until the master restarts; rmqpy closes the connection instead."""
    if offset < 0:
        return f"reported a negative offset {offset}"
    if offset > master_max_offset:
        return f"reported {offset}, beyond the master's end {master_max_offset}"
    return None


class ReplicaGate:
    """The HA port's admission: the allow-list and the cap, one log line per refusal kind and
    second at most (the process's rate limiter: a scan of the port writes a few lines)."""

    def __init__(self, clock: Any, allowed: Iterable[Network] = (), *,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS, what: str = "HA") -> None:
        self.clock = clock
        self.allowed = tuple(allowed)
        self.max_connections = max_connections
        self.what = what  # "HA" or "AutoSwitch HA": the log lines say which service refused
        self.refused = 0

    @classmethod
    def from_config(cls, clock: Any, config: Any, *, what: str = "HA") -> "ReplicaGate":
        """From a MessageStoreConfig (``haAllowedReplicaAddresses``)."""
        return cls(clock, parse_allowed(getattr(config, ALLOW_KEY, "")), what=what)

    def allows(self, addr: Any) -> bool:
        """Whether ``addr`` (a Twisted address) is in the allow-list; everyone with an empty list."""
        if not self.allowed:
            return True
        ip = peer_ip(addr)
        return ip is not None and any(ip in net for net in self.allowed)

    def admit(self, addr: Any, open_now: int) -> bool:
        """Whether a new connection from ``addr`` may become a replica, ``open_now`` being the
        service's connections; False is logged (rate-limited) and counted in :attr:`refused`."""
        if not self.allows(addr):
            self._refuse("not-allowed", "%s: refusing a connection from %s: not in %s", self.what,
                         clip(_host(addr)), ALLOW_KEY)
            return False
        if open_now >= self.max_connections:
            self._refuse("cap", "%s: refusing a replica from %s: %d connections already", self.what,
                         clip(_host(addr)), open_now)
            return False
        return True

    def _refuse(self, kind: str, fmt: str, *args: Any) -> None:
        self.refused += 1
        if limiter_for(self.clock).allow(f"{self.what} refused {kind}"):
            log.warning(fmt, *args)


class GatedFactory(protocol.Factory):
    """``inner`` (the HA port's TLS wrapper, :mod:`rmqpy.store.ha.tls`) behind ``gate``: a peer the
    gate refuses is closed before a byte is read, and so before any TLS handshake costs the master
    a private-key operation. The service behind the TLS checks the gate again; only its cap can
    differ by then."""

    noisy = False

    def __init__(self, inner: protocol.Factory, gate: ReplicaGate, open_now: Callable[[], int]) -> None:
        self.inner: Any = inner  # Twisted types its buildProtocol by the factory's protocol class
        self.gate = gate
        self.open_now = open_now

    def startFactory(self) -> None:  # noqa: N802 (Twisted's name)
        self.inner.doStart()

    def stopFactory(self) -> None:  # noqa: N802
        self.inner.doStop()

    def buildProtocol(self, addr: Any) -> protocol.Protocol | None:  # noqa: N802
        if not self.gate.admit(addr, self.open_now()):
            return None
        return self.inner.buildProtocol(addr)


def _host(addr: Any) -> str:
    host = getattr(addr, "host", None)
    return str(host) if host is not None else repr(addr)
