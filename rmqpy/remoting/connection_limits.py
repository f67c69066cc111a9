"""What a server connection may cost (:class:`ConnectionLimits`), read from the NettyServerConfig
keys both servers share (:mod:`rmqpy.remoting.netty_config`), and how many connections a port
holds (:class:`ConnectionCap`). Below :mod:`rmqpy.remoting.protocol`,
whose connections enforce them, and :mod:`rmqpy.remoting.limits`, whose sweeper enforces the
time-based ones."""
from __future__ import annotations

from dataclasses import dataclass

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from rmqpy.common import fdlimit
from rmqpy.remoting.netty_config import NettyServerConfig
from rmqpy.remoting.ratelimit import LogRateLimiter

MiB = 1024 * 1024


@dataclass
class ConnectionLimits:
    """The limits of a server's connections; ``from_config`` reads them from NettyServerConfig keys."""

    # serverChannelMaxIdleTimeSeconds (Java, 120): no read and no write for this long closes; <= 0: never
    max_idle_seconds: float = 120.0
    # writeBufferHighWaterMark (Java; 0 = Netty's default, 64 KiB): above it the connection is not read
    write_high_water: int = 0
    # serverChannelMaxUnsentBytes (rmqpy): bytes queued above the high-water mark before closing
    max_unsent_bytes: int = 32 * MiB
    # serverPartialFrameTimeoutSeconds (rmqpy): a frame begun but not finished within this closes; <= 0: never
    partial_frame_timeout: float = 60.0
    # serverPartialFramesMaxBytes (rmqpy): partial frames buffered over all connections of the process
    max_partial_bytes_total: int = 256 * MiB
    # how often the sweep runs (seconds)
    sweep_interval: float = 1.0

    @classmethod
    def from_config(cls, netty: NettyServerConfig) -> "ConnectionLimits":
        return cls(
            max_idle_seconds=float(netty.serverChannelMaxIdleTimeSeconds),
            write_high_water=int(netty.writeBufferHighWaterMark),
            max_unsent_bytes=int(netty.serverChannelMaxUnsentBytes),
            partial_frame_timeout=float(netty.serverPartialFrameTimeoutSeconds),
            max_partial_bytes_total=int(netty.serverPartialFramesMaxBytes),
        )


class ConnectionCap:
    """How many connections a port holds at once, in all and per source address.

    A flood of sockets (each costs the process a file descriptor, a relayed gRPC one three) must not
    leave the store without descriptors for its files, and one address must not take every slot. A
    refused connection is closed at once; the refusals write one line per ``log_every`` seconds and
    kind (the rest are counted in the limiter's "suppressed" summary), since a flood is what trips
    the cap. ``max_total`` or ``max_per_address`` <= 0: no cap of that kind.
    """

    log = Logger(namespace="rmqpy.remoting.connection_limits")

    def __init__(self, port_name: str, clock: IReactorTime, max_total: int, max_per_address: int,
                 keys: tuple[str, str], log_every: float = 10.0) -> None:
        self.port_name = port_name
        self.max_total, self.max_per_address = max_total, max_per_address
        self.keys = keys  # the config keys of the two caps, named in the log line
        self.limiter = LogRateLimiter(clock, rate=1.0 / log_every, burst=1, summary_interval=log_every)
        self.total = 0
        self.by_address: dict[str, int] = {}
        self.refused = 0

    def admit(self, host: str) -> bool:
        """Counts a new connection from ``host`` in, or refuses it (False) and says why."""
        held = self.by_address.get(host, 0)
        if 0 < self.max_total <= self.total:
            self._refuse("all", "{port}: refusing connections (from {host} now): {n} open, the cap of the port "
                         "({key}={cap})", host, self.total, self.keys[0], self.max_total)
            return False
        if 0 < self.max_per_address <= held:
            self._refuse("address", "{port}: refusing connections from {host}: {n} open from that address, the cap "
                         "per address ({key}={cap})", host, held, self.keys[1], self.max_per_address)
            return False
        self.total += 1
        self.by_address[host] = held + 1
        return True

    def release(self, host: str) -> None:
        """An admitted connection from ``host`` closed."""
        held = self.by_address.get(host, 0)
        if held <= 0:
            return
        self.total -= 1
        if held == 1:
            del self.by_address[host]
        else:
            self.by_address[host] = held - 1

    def _refuse(self, kind: str, fmt: str, host: str, n: int, key: str, cap: int) -> None:
        self.refused += 1
        self.limiter.warn(f"{self.port_name} cap {kind}", self.log, fmt, port=self.port_name, host=host, n=n,
                          key=key, cap=cap)


def remoting_cap(netty: NettyServerConfig, clock: IReactorTime, what: str, reserve: int = 0) -> ConnectionCap:
    """The remoting ports' ConnectionCap of a server (``what``: "broker", "name server"), from
    ``serverMaxConnections`` / ``serverMaxConnectionsPerAddress``: by default what the open-file limit
    leaves after ``reserve`` descriptors for the store (0: a quarter of the limit), one a connection,
    and half of that per address: an application host runs many clients, each with a connection
    (the gRPC port's quarter refused 1,253 of one host's 5,000 consumers, bench/consumer_group_probe.py).
    Logs the caps once, as the gRPC port's are."""
    total, per_address, how = fdlimit.port_caps(netty.serverMaxConnections, netty.serverMaxConnectionsPerAddress,
                                                reserve, 1)
    if netty.serverMaxConnectionsPerAddress == 0 and total > 0:
        per_address = max(1, total // 2)
    ConnectionCap.log.info("{what} remoting ports: at most {n} connections, {m} per address (0: no cap; {how})",
                           what=what, n=total, m=per_address, how=how)
    return ConnectionCap(f"{what} remoting ports", clock, total, per_address,
                         ("serverMaxConnections", "serverMaxConnectionsPerAddress"))
