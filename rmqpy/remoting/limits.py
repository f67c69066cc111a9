"""Bounds on what one server connection may cost: idle time, half-sent frames, buffers.

Java's server pipeline has an ``IdleStateHandler(0, 0, serverChannelMaxIdleTimeSeconds)``
(no read and no write for that long closes the channel) and turns auto-read off while a
channel is not writable (``writeBufferHighWaterMark``). Here the write side is Twisted's
producer/consumer flow control (see ``_TrackedProtocol`` in :mod:`rmqpy.remoting.protocol`)
and everything time-based is one periodic :class:`ChannelSweeper` over every listening
factory of the process: with thousands of connections one pass a second is cheaper than
a timer per connection, and the connections' hot paths only set a flag.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from twisted.internet import task
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from rmqpy.remoting.connection_limits import ConnectionLimits as ConnectionLimits
from rmqpy.remoting.connection_limits import MiB as MiB
from rmqpy.remoting.netty_config import NettyServerConfig

if TYPE_CHECKING:
    from rmqpy.remoting.protocol import RemotingProtocol, RemotingServerFactory


class ChannelSweeper:
    """Closes idle connections, stalled half-sent frames, and the biggest partial frames when
    all connections together buffer more than ``max_partial_bytes_total``.

    A connection marks itself active (``_active``) on every read and write; the sweep turns
    the mark into a time stamp, so the idle time is known to within one sweep interval.

    It is also the factories' partial-frame budget: a connection adds the declared size of
    a frame it starts to buffer to :attr:`partial_bytes` (from the 4-byte length, before the
    bytes come) and calls :meth:`over_budget` when the sum passes the limit, so the biggest
    declared frame is closed before it is buffered.
    """

    log = Logger()

    def __init__(self, clock: IReactorTime, limits: ConnectionLimits,
                 factories: Iterable["RemotingServerFactory"] = (), config: NettyServerConfig | None = None) -> None:
        self.clock = clock
        self.limits = limits
        # NettyServerConfig, re-read every sweep: UPDATE_*_CONFIG changes apply to every
        # connection (Java's apply to connections made after the change)
        self.config = config
        self.factories: list[RemotingServerFactory] = []
        self.partial_bytes = 0  # declared sizes of the frames being buffered
        budget = limits.max_partial_bytes_total
        self.max_partial_bytes = budget if budget > 0 else 1 << 62
        for factory in factories:
            self.add(factory)
        self.closed_idle = 0
        self.closed_partial = 0
        self.closed_budget = 0
        self._loop = task.LoopingCall(self.sweep)
        self._loop.clock = clock

    def add(self, factory: "RemotingServerFactory") -> None:
        self.factories.append(factory)
        factory.partial_budget = self

    def start(self) -> None:
        if not self._loop.running:
            self._loop.start(self.limits.sweep_interval, now=False)

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()

    def _refresh(self, config: NettyServerConfig) -> None:
        fresh = ConnectionLimits.from_config(config)
        lim = self.limits  # shared with the factories: changed in place
        lim.max_idle_seconds, lim.write_high_water = fresh.max_idle_seconds, fresh.write_high_water
        lim.max_unsent_bytes, lim.partial_frame_timeout = fresh.max_unsent_bytes, fresh.partial_frame_timeout
        lim.max_partial_bytes_total = fresh.max_partial_bytes_total
        self.max_partial_bytes = fresh.max_partial_bytes_total if fresh.max_partial_bytes_total > 0 else 1 << 62

    def sweep(self) -> None:
        if self.config is not None:
            self._refresh(self.config)
        lim = self.limits
        now = self.clock.seconds()
        max_idle = lim.max_idle_seconds
        partial_timeout = lim.partial_frame_timeout
        total = 0
        holders = []
        for factory in self.factories:
            for ch in list(factory.channels):
                if ch._aborted:
                    continue
                if ch._active:
                    ch._active = False
                    ch._last_active = now
                elif 0 < max_idle < now - ch._last_active:
                    # also one being closed gracefully whose peer does not read what is left to send
                    self.closed_idle += 1
                    # Java's NettyConnectManageHandler.userEventTriggered line
                    self.log.warn("NETTY SERVER PIPELINE: IDLE exception [{peer}]", peer=ch.remote_address)
                    ch.abort()
                    continue
                if not ch.connected_:
                    continue
                held = len(ch._buffer)
                if not held:
                    continue
                held = max(held, ch._reserved)
                if not ch._paused:  # a paused connection is not read: its frame cannot advance
                    since = ch._partial_since
                    if since is None:
                        ch._partial_since = now
                    elif 0 < partial_timeout < now - since:
                        self.closed_partial += 1
                        self.log.warn("closing connection from {peer}: a frame begun {s:.0f}s ago is still "
                                      "incomplete ({n} bytes; serverPartialFrameTimeoutSeconds={t:g})",
                                      peer=ch.remote_address, s=now - since, n=held, t=partial_timeout)
                        ch.abort()
                        continue
                total += held
                holders.append(ch)
        self._enforce(holders, total, now)

    def over_budget(self) -> None:
        """Called by a connection when :attr:`partial_bytes` passed the budget: count exactly,
        then close the biggest holders until under it."""
        holders = [ch for f in self.factories for ch in f.channels if ch._reserved and ch.connected_]
        self._enforce(holders, sum(ch._reserved for ch in holders), self.clock.seconds())

    def _enforce(self, holders: list[RemotingProtocol], total: int, now: float) -> None:
        budget = self.max_partial_bytes
        if total > budget:
            # the biggest first, the oldest among equals: they cost the most and wait the longest
            holders.sort(key=lambda c: (-c._reserved, c._partial_since if c._partial_since is not None else now))
            for ch in holders:
                if total <= budget:
                    break
                total -= max(len(ch._buffer), ch._reserved)
                self.closed_budget += 1
                self.log.warn("closing connection from {peer}: its partial frame ({n} of {d} bytes) is the biggest "
                              "while all connections' partial frames pass serverPartialFramesMaxBytes={b}",
                              peer=ch.remote_address, n=len(ch._buffer), d=ch._reserved,
                              b=self.limits.max_partial_bytes_total)
                ch.abort()
        self.partial_bytes = total
