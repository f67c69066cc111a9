"""Broker liveness as the controller sees it (Java ``DefaultBrokerHeartbeatManager``).

Each controller keeps its own table from the BROKER_HEARTBEATs brokers send it (brokers send them
to every controller); it is not replicated. A broker is alive while its last heartbeat is younger
than the timeout it announced (``heartbeatTimeoutMills``, 10 s when it sent none). The scan every
``scanNotActiveBrokerInterval`` drops the expired ones, closes their connections and tells the
listeners, as does a broker's connection closing. Time comes from an injected clock
(``clock.seconds()``: the reactor, or ``twisted.internet.task.Clock`` in tests).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from twisted.logger import Logger

#: Java ``BrokerHeartbeatManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME``
DEFAULT_BROKER_CHANNEL_EXPIRED_TIME = 10_000
_INT_MAX = 0x7FFFFFFF

#: (clusterName, brokerName, brokerId) of a broker found dead
InactiveListener = Callable[[str, str, int], None]


@dataclass
class BrokerLiveInfo:
    brokerName: str
    brokerAddr: str
    brokerId: int
    lastUpdateTimestamp: int
    heartbeatTimeoutMillis: int
    channel: Any
    epoch: int
    maxOffset: int
    electionPriority: int
    confirmOffset: int = -1


class BrokerHeartbeatManager:
    log = Logger()

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.table: dict[tuple[str, str, int], BrokerLiveInfo] = {}
        self.listeners: list[InactiveListener] = []

    def now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    def on_heartbeat(self, cluster: str, broker_name: str, broker_addr: str, broker_id: int | None,
                     timeout_ms: int | None, channel: Any, epoch: int | None, max_offset: int | None,
                     confirm_offset: int | None, election_priority: int | None) -> None:
        real_id = -1 if broker_id is None else broker_id
        key = (cluster, broker_name, real_id)
        real_epoch = -1 if epoch is None else epoch
        real_max = -1 if max_offset is None else max_offset
        real_confirm = -1 if confirm_offset is None else confirm_offset
        real_timeout = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME if timeout_ms is None else timeout_ms
        real_priority = _INT_MAX if election_priority is None else election_priority
        prev = self.table.get(key)
        now = self.now_ms()
        if prev is None:
            self.table[key] = BrokerLiveInfo(broker_name, broker_addr, real_id, now, real_timeout, channel,
                                             real_epoch, real_max, real_priority, real_confirm)
            self.log.info("new broker registered, {cluster}/{name}, brokerId:{id}", cluster=cluster,
                          name=broker_name, id=real_id)
            return
        prev.lastUpdateTimestamp = now
        prev.heartbeatTimeoutMillis = real_timeout
        prev.electionPriority = real_priority
        if real_epoch > prev.epoch or (real_epoch == prev.epoch and real_max > prev.maxOffset):
            prev.epoch, prev.maxOffset, prev.confirmOffset = real_epoch, real_max, real_confirm
        # Java keeps the first channel; rmqpy follows a broker that reconnected, so that closing
        # its old connection does not count as its death
        if channel is not None:
            prev.channel = channel

    def is_active(self, cluster: str, broker_name: str, broker_id: int | None) -> bool:
        info = self.table.get((cluster, broker_name, -1 if broker_id is None else broker_id))
        if info is None:
            return False
        return info.lastUpdateTimestamp + info.heartbeatTimeoutMillis >= self.now_ms()

    def live_info(self, cluster: str, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self.table.get((cluster, broker_name, broker_id))

    def scan_not_active(self) -> None:
        now = self.now_ms()
        for key, info in list(self.table.items()):
            if now - info.lastUpdateTimestamp > info.heartbeatTimeoutMillis:
                del self.table[key]
                if info.channel is not None:
                    info.channel.close()
                self.log.warn("The broker channel {addr} expired, brokerInfo {key}, expired {ms}ms",
                              addr=info.brokerAddr, key=key, ms=info.heartbeatTimeoutMillis)
                self._notify(*key)

    def on_channel_closed(self, channel: Any) -> None:
        for key, info in list(self.table.items()):
            if info.channel is channel:
                del self.table[key]
                self.log.info("Channel of broker {name} {addr} id {id} inactive", name=info.brokerName,
                              addr=info.brokerAddr, id=info.brokerId)
                self._notify(*key)
                break

    def active_counts(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {}
        for (cluster, name, broker_id) in self.table:
            if self.is_active(cluster, name, broker_id):
                counts.setdefault(cluster, {}).setdefault(name, 0)
                counts[cluster][name] += 1
        return counts

    def _notify(self, cluster: str, broker_name: str, broker_id: int) -> None:
        for listener in self.listeners:
            try:
                listener(cluster, broker_name, broker_id)
            except Exception:
                self.log.failure("broker-inactive listener failed")
