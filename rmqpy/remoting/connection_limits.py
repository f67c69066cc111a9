"""What a server connection may cost (:class:`ConnectionLimits`), read from the NettyServerConfig
keys both servers share (:mod:`rmqpy.remoting.netty_config`). Below :mod:`rmqpy.remoting.protocol`,
whose connections enforce them, and :mod:`rmqpy.remoting.limits`, whose sweeper enforces the
time-based ones."""
from __future__ import annotations

from dataclasses import dataclass

from rmqpy.remoting.netty_config import NettyServerConfig

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
