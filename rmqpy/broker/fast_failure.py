"""Broker fast failure: SYSTEM_BUSY for sends that waited too long (Java ``BrokerFastFailure``).

Java queues each send in the send thread pool's queue; a scheduled task (every 10 ms)
answers SYSTEM_BUSY to the requests that waited ``waitTimeMillsInSendQueue`` (200 ms)
there ("[TIMEOUT_CLEAN_QUEUE]") and, while the commit log's put lock has been held longer
than ``osPageCacheBusyTimeOutMills`` (1000 ms), to every queued send ("[PCBUSY_CLEAN_QUEUE]").
Java's wait starts when Netty has read and decoded the request: time spent in the kernel's
socket buffer before that is not counted.

rmqpy has no send thread pool: a request is decoded and put on the reactor thread in the
turn that read it. Its wait is counted the way Java counts it, from the moment rmqpy read
its bytes (``RemotingProtocol.read_at``, stamped in ``dataReceived``) to the moment the
send processor looks at it: the frames before it in the same read, or frames held while
the connection was paused, are what it queued behind.

An earlier version measured the reactor's lateness with a 10 ms heartbeat and refused the
sends read after a stall. That also counted time in the kernel, which Java does not, so a
broker descheduled for 200 ms on a loaded machine refused healthy producers (seen in the
interop suite); it is gone, and with it 100 timer wake-ups a second on an idle broker.

A put that took longer than ``osPageCacheBusyTimeOutMills`` (the store's writer was busy,
Java's "page cache busy") makes the sends handled in the next 10 ms "[PCBUSY_CLEAN_QUEUE]":
in Java they would have queued behind the held lock. "size of queue" is the number of sends
answered busy in the current busy spell (rmqpy cannot count unread requests); pull,
heartbeat and transaction requests are not failed fast.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from rmqpy.broker.config import BrokerConfig
    from rmqpy.store.config import MessageStoreConfig

PERIOD = 0.010  # Java checks its queues every 10 ms: how long a slow put makes sends busy


class BrokerFastFailure:
    """The check a send makes before anything else."""

    def __init__(self, reactor: Any, enabled: bool, wait_ms: int, page_cache_busy_ms: int,
                 store_stats: Any = None) -> None:
        self._seconds = reactor.seconds
        self.enabled = enabled
        self.wait_s = wait_ms / 1000.0
        self.page_cache_busy_ms = page_cache_busy_ms
        self.stats: Any = None
        self._slow_seen = 0
        self.watch(store_stats)
        self._pcbusy_until = 0.0  # sends handled before this follow a slow put
        self._spell = 0  # sends answered busy in this busy spell
        self._last_refused = 0.0
        self.refused = 0

    @classmethod
    def from_config(cls, reactor: Any, broker_config: BrokerConfig, store_config: MessageStoreConfig,
                    store_stats: Any = None) -> "BrokerFastFailure":
        return cls(reactor, bool(broker_config.brokerFastFailureEnable), int(broker_config.waitTimeMillsInSendQueue),
                   int(store_config.osPageCacheBusyTimeOutMills), store_stats)

    def watch(self, store_stats: Any) -> None:
        """Count the store's slow puts (``StoreStats.slow_puts``) as page-cache-busy events."""
        if store_stats is not None:
            store_stats.slow_put_ms = self.page_cache_busy_ms
            self.stats = store_stats
            self._slow_seen = store_stats.slow_puts

    def check(self, request: RemotingCommand, read_at: float | None) -> RemotingCommand | None:
        """None when the send may go on, else the SYSTEM_BUSY response Java would send.

        ``read_at`` is when rmqpy read the request's bytes (``reactor.seconds()``), None when
        unknown (then only page-cache-busy applies)."""
        if not self.enabled:
            return None
        now = self._seconds()
        st = self.stats
        if st is not None and st.slow_puts != self._slow_seen:
            self._slow_seen = st.slow_puts
            self._pcbusy_until = now + PERIOD
        pcbusy = now < self._pcbusy_until
        waited_s = now - read_at if read_at is not None else 0.0
        if not pcbusy and waited_s < self.wait_s:
            return None
        if now - self._last_refused > PERIOD:
            self._spell = 0
        self._last_refused = now
        self._spell += 1
        self.refused += 1
        tag = "[PCBUSY_CLEAN_QUEUE]" if pcbusy else "[TIMEOUT_CLEAN_QUEUE]"
        remark = (f"{tag}broker busy, start flow control for a while, period in queue: "
                  f"{max(round(waited_s * 1000), 0)}ms, size of queue: {self._spell}")
        return request.response(int(ResponseCode.SYSTEM_BUSY), remark)
