"""Broker fast failure: SYSTEM_BUSY for sends that waited too long (Java ``BrokerFastFailure``).

Java queues each send in the send thread pool's queue; a scheduled task (every 10 ms)
answers SYSTEM_BUSY to the requests that waited ``waitTimeMillsInSendQueue`` (200 ms)
there ("[TIMEOUT_CLEAN_QUEUE]") and, while the commit log's put lock has been held longer
than ``osPageCacheBusyTimeOutMills`` (1000 ms), to every queued send ("[PCBUSY_CLEAN_QUEUE]").

rmqpy has no send queue: a request is decoded and put on the reactor thread as soon as it
is read.  What waits is everything the reactor has not come back to yet (bytes in socket
buffers, the frames after the current one in a read).  So the wait is measured as the
reactor's lateness, with a heartbeat every 10 ms (the period of Java's task):

* while a reactor turn runs, a send handled ``waitTimeMillsInSendQueue`` or more after the
  heartbeat was due has waited at least that long (anything that became readable after
  the last turn has): it is answered "[TIMEOUT_CLEAN_QUEUE]";
* when the heartbeat runs that late, the backlog read right after the stall waited as long:
  the sends handled before the next heartbeat are answered the same way;
* when a put took longer than ``osPageCacheBusyTimeOutMills`` (the store's writer was busy,
  Java's "page cache busy"), the sends handled until the next heartbeat are answered
  "[PCBUSY_CLEAN_QUEUE]", whatever their wait.

Differences from Java: the wait is a lower bound (the time a request spent in the kernel
before the stall is not seen); "size of queue" is the number of sends answered busy in the
current busy spell (rmqpy cannot count unread requests); pull, heartbeat and transaction
requests are not failed fast (their Java queues have nothing to map to here either).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqpy.protocol.codes import ResponseCode
from rmqpy.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from rmqpy.broker.config import BrokerConfig
    from rmqpy.store.config import MessageStoreConfig

PERIOD = 0.010  # Java: scheduleAtFixedRate(..., 1000, 10, MILLISECONDS)
INITIAL_DELAY = 1.0
_NEVER = float("inf")


class BrokerFastFailure:
    """The heartbeat and the check a send makes before anything else."""

    def __init__(self, reactor: Any, enabled: bool, wait_ms: int, page_cache_busy_ms: int,
                 store_stats: Any = None) -> None:
        self.reactor = reactor
        self._seconds = reactor.seconds
        self.enabled = enabled
        self.wait_s = wait_ms / 1000.0
        self.page_cache_busy_ms = page_cache_busy_ms
        self.stats = None
        self._slow_seen = 0
        self.watch(store_stats)
        self._ok_until = _NEVER  # a send handled by then needs no look (no heartbeat yet: never)
        self._last_tick = 0.0
        self._window_until = 0.0  # sends handled before this are answered busy
        self._window_ms = 0
        self._window_pcbusy = False
        self._spell = 0  # sends answered busy in this busy spell
        self._call = None
        self.refused = 0

    @classmethod
    def from_config(cls, reactor: Any, broker_config: BrokerConfig, store_config: MessageStoreConfig,
                    store_stats: Any = None) -> "BrokerFastFailure":
        return cls(reactor, bool(broker_config.brokerFastFailureEnable), int(broker_config.waitTimeMillsInSendQueue),
                   int(store_config.osPageCacheBusyTimeOutMills), store_stats)

    def watch(self, store_stats: Any) -> None:
        """Count the store's slow puts (``StoreStats.slow_puts``) as page-cache-busy events."""
        if store_stats is not None and hasattr(store_stats, "slow_puts"):
            store_stats.slow_put_ms = self.page_cache_busy_ms
            self.stats = store_stats
            self._slow_seen = store_stats.slow_puts

    # ------------------------------------------------------------------ heartbeat
    def start(self) -> None:
        if self.enabled and self._call is None:
            self._call = self.reactor.callLater(INITIAL_DELAY, self._tick, self._seconds() + INITIAL_DELAY)

    def stop(self) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        self._ok_until = _NEVER

    def _slow_put_since_last_look(self) -> bool:
        st = self.stats
        if st is None or st.slow_puts == self._slow_seen:
            return False
        self._slow_seen = st.slow_puts
        return True

    def _tick(self, due: float) -> None:
        now = self._seconds()
        late = now - due
        pcbusy = self._slow_put_since_last_look()
        if pcbusy or late >= self.wait_s:
            # the backlog read right after the stall waited as long: answer it busy until the next beat
            self._window_until = now + PERIOD
            self._window_ms = int(late * 1000)
            self._window_pcbusy = pcbusy
            self._ok_until = 0.0
        else:
            self._window_until = 0.0
            self._spell = 0
            # until then no send can have waited wait_s, nor can a put have run page_cache_busy_ms
            self._ok_until = now + PERIOD + min(self.wait_s, self.page_cache_busy_ms / 1000.0)
        self._last_tick = now
        self._call = self.reactor.callLater(PERIOD, self._tick, now + PERIOD)

    # ------------------------------------------------------------------ check
    def check(self, request: RemotingCommand) -> RemotingCommand | None:
        """None when the send may go on, else the SYSTEM_BUSY response Java would send."""
        now = self._seconds()
        if now <= self._ok_until:
            return None
        if not self.enabled:
            return None
        if now < self._window_until:
            waited_ms, pcbusy = self._window_ms, self._window_pcbusy
        else:
            pcbusy = self._slow_put_since_last_look()
            if pcbusy:  # a put just held the writer too long: until the next beat, sends are refused
                self._window_until, self._window_pcbusy = now + PERIOD, True
                self._window_ms = int(max(0.0, now - self._last_tick - PERIOD) * 1000)
                self._ok_until = 0.0
            waited_ms = int((now - self._last_tick - PERIOD) * 1000)
            if not pcbusy and waited_ms < self.wait_s * 1000:
                return None
        self._spell += 1
        self.refused += 1
        tag = "[PCBUSY_CLEAN_QUEUE]" if pcbusy else "[TIMEOUT_CLEAN_QUEUE]"
        remark = (f"{tag}broker busy, start flow control for a while, period in queue: {max(waited_ms, 0)}ms, "
                  f"size of queue: {self._spell}")
        return request.response(int(ResponseCode.SYSTEM_BUSY), remark)
