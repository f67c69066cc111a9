"""RouteInfoManager: the name server's tables of clusters, brokers, topics and liveness.

Follows the Java name server: only a master's (brokerId 0) topic configs create queue
data, and only when its DataVersion changed or it registered for the first time; a broker
expires 120 s after its last registration, or at once when its connection closes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from rmqpy.protocol.bodies.route import BrokerData, ClusterInfo, QueueData, TopicList, TopicRouteData
from rmqpy.protocol.bodies.topic import PERM_READ, PERM_WRITE, DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rmqpy.remoting.ratelimit import RateLimitedLogger

TOPIC_SYS_FLAG_UNIT = 0x1
TOPIC_SYS_FLAG_UNIT_SUB = 0x2


@dataclass
class BrokerLiveInfo:
    last_update: float
    data_version: DataVersion
    channel: Any
    ha_server_addr: str
    timeout_ms: int = 120_000


@dataclass
class RegisterBrokerResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass
class RouteInfoManager:
    now_ms: Callable[[], float]
    broker_channel_expired_ms: int = 120_000
    topic_queue_table: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    broker_live_table: dict[str, BrokerLiveInfo] = field(default_factory=dict)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    # bumped by every change that can alter a route, so that encoded routes can be cached
    generation: int = 0
    clock: Any = None  # IReactorTime of the rate-limited log lines (None: the global reactor)

    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped

    def __post_init__(self) -> None:
        self.log = self.log.on(self.clock)

    # ------------------------------------------------------------------ registration
    def register_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                        ha_server_addr: str, wrapper: TopicConfigSerializeWrapper | None,
                        filter_servers: list[str], channel: Any, timeout_ms: int | None = None
                        ) -> RegisterBrokerResult:
        self.generation += 1
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        broker_data = self.broker_addr_table.get(broker_name)
        register_first = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster, broker_name, {})
            self.broker_addr_table[broker_name] = broker_data
        # The same address under another id (a slave promoted to master): drop the old id.
        for other_id, addr in list(broker_data.brokerAddrs.items()):
            if addr == broker_addr and other_id != broker_id:
                del broker_data.brokerAddrs[other_id]
        old_addr = broker_data.brokerAddrs.get(broker_id)
        broker_data.brokerAddrs[broker_id] = broker_addr
        register_first = register_first or old_addr is None

        if wrapper is not None and broker_id == 0:
            # 5.x's isTopicConfigChanged: all topics when the broker's data version moved, else those
            # this broker name has no queue data for yet. A registration split in parts (each with the
            # broker's one version: enableSplitRegistration, or rmqpy's own split of a table too big for
            # one frame) is then taken whole; 4.9 took the first part only.
            changed = register_first or self.is_topic_config_changed(broker_addr, wrapper.dataVersion)
            topic_queue_table = self.topic_queue_table
            for tc in wrapper.topicConfigTable.values():
                if changed or broker_name not in topic_queue_table.get(tc.topicName, ()):
                    self._create_or_update_queue_data(broker_name, tc)

        previous = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            self.now_ms(), wrapper.dataVersion if wrapper is not None else DataVersion(0, 0),
            channel, ha_server_addr, timeout_ms or self.broker_channel_expired_ms)
        if previous is None:
            self.log.info("new broker registered, {addr} HAServer: {ha}", addr=broker_addr, ha=ha_server_addr)
        if filter_servers:
            self.filter_server_table[broker_addr] = list(filter_servers)
        else:
            self.filter_server_table.pop(broker_addr, None)

        result = RegisterBrokerResult()
        if broker_id != 0:
            master_addr = broker_data.brokerAddrs.get(0)
            if master_addr:
                live = self.broker_live_table.get(master_addr)
                if live is not None:
                    result.ha_server_addr = live.ha_server_addr
                    result.master_addr = master_addr
        return result

    def _create_or_update_queue_data(self, broker_name: str, tc: TopicConfig) -> None:
        qd = QueueData(broker_name, tc.readQueueNums, tc.writeQueueNums, tc.perm, tc.topicSysFlag)
        table = self.topic_queue_table.setdefault(tc.topicName, {})
        old = table.get(broker_name)
        if old != qd:
            if old is None:
                self.log.info("new topic registered, {topic} {qd}", topic=tc.topicName, qd=qd)
            table[broker_name] = qd

    def is_topic_config_changed(self, broker_addr: str, version: DataVersion) -> bool:
        live = self.broker_live_table.get(broker_addr)
        return live is None or not live.data_version.same_as(version)

    def data_version_of(self, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(broker_addr)
        return live.data_version if live is not None else None

    def touch(self, broker_addr: str) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update = self.now_ms()

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        self.generation += 1
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        removed_name = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            if broker_data.brokerAddrs.get(broker_id) == broker_addr:
                del broker_data.brokerAddrs[broker_id]
            if not broker_data.brokerAddrs:
                del self.broker_addr_table[broker_name]
                removed_name = True
        if removed_name:
            names = self.cluster_addr_table.get(cluster)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster]
            self._remove_topics_of_broker(broker_name)
        self.log.info("broker unregistered: {addr} ({name} id {id})", addr=broker_addr, name=broker_name,
                      id=broker_id)

    def _remove_topics_of_broker(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            table = self.topic_queue_table[topic]
            if table.pop(broker_name, None) is not None and not table:
                del self.topic_queue_table[topic]
                self.log.info("remove topic {topic}: no queue data left", topic=topic)

    # ------------------------------------------------------------------ liveness
    def scan_not_active_brokers(self) -> list[str]:
        """Remove brokers whose last registration is too old; close their channels."""
        now = self.now_ms()
        expired = []
        for addr, live in list(self.broker_live_table.items()):
            if live.last_update + live.timeout_ms < now:
                expired.append(addr)
                self.log.warn("the broker channel {addr} expired, {ms}ms", addr=addr, ms=live.timeout_ms)
                channel = live.channel
                self._destroy_addr(addr)
                if channel is not None:
                    channel.close()
        return expired

    def on_channel_destroy(self, channel: Any) -> None:
        for addr, live in list(self.broker_live_table.items()):
            if live.channel is channel:
                self.log.info("the broker's channel {addr} closed, removing it", addr=addr)
                self._destroy_addr(addr)

    def _destroy_addr(self, broker_addr: str) -> None:
        self.generation += 1
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        removed_names = []
        for name, data in list(self.broker_addr_table.items()):
            for bid, addr in list(data.brokerAddrs.items()):
                if addr == broker_addr:
                    del data.brokerAddrs[bid]
            if not data.brokerAddrs:
                del self.broker_addr_table[name]
                removed_names.append(name)
        for name in removed_names:
            for cluster, names in list(self.cluster_addr_table.items()):
                names.discard(name)
                if not names:
                    del self.cluster_addr_table[cluster]
            self._remove_topics_of_broker(name)

    # ------------------------------------------------------------------ queries
    def route_of(self, topic: str) -> TopicRouteData | None:
        table = self.topic_queue_table.get(topic)
        if not table:
            return None
        queue_datas = [table[name] for name in sorted(table)]
        broker_datas = []
        filters: dict[str, list[str]] = {}
        for name in sorted(table):
            data = self.broker_addr_table.get(name)
            if data is None:
                continue
            broker_datas.append(data.copy())
            for addr in data.brokerAddrs.values():
                if addr in self.filter_server_table:
                    filters[addr] = list(self.filter_server_table[addr])
        if not broker_datas:
            return None
        return TopicRouteData([QueueData(**vars(q)) for q in queue_datas], broker_datas, filters)

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo({n: d.copy() for n, d in self.broker_addr_table.items()},
                           {c: sorted(n) for c, n in self.cluster_addr_table.items()})

    def all_topics(self) -> TopicList:
        return TopicList(list(self.topic_queue_table))

    def topics_by_cluster(self, cluster: str) -> TopicList:
        names = self.cluster_addr_table.get(cluster, set())
        return TopicList([t for t, table in self.topic_queue_table.items() if names & set(table)])

    def system_topics(self) -> TopicList:
        topics: list[str] = []
        for cluster, names in self.cluster_addr_table.items():
            topics.append(cluster)
            topics.extend(names)
        addr = None
        for data in self.broker_addr_table.values():
            if data.brokerAddrs:
                addr = next(iter(data.brokerAddrs.values()))
                break
        return TopicList(topics, addr)

    def topics_with_flag(self, want: Callable[[int], bool]) -> TopicList:
        return TopicList([t for t, table in self.topic_queue_table.items()
                          if table and want(next(iter(table.values())).topicSysFlag)])

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        self.generation += 1
        if not cluster:
            self.topic_queue_table.pop(topic, None)
            return
        table = self.topic_queue_table.get(topic)
        if table is None:
            return
        for name in self.cluster_addr_table.get(cluster, set()):
            table.pop(name, None)
        if not table:
            del self.topic_queue_table[topic]

    def register_topic(self, topic: str, queue_datas: list[QueueData]) -> None:
        """5.x REGISTER_TOPIC_IN_NAMESRV: queue data for brokers the name server knows."""
        self.generation += 1
        table = self.topic_queue_table.setdefault(topic, {})
        for qd in queue_datas:
            if qd.brokerName in self.broker_addr_table:
                table[qd.brokerName] = qd
        if not table:
            del self.topic_queue_table[topic]

    def change_write_perm(self, broker_name: str, wipe: bool) -> int:
        """Wipe (or restore) the write permission of a broker's queues; returns the count."""
        self.generation += 1
        count = 0
        for table in self.topic_queue_table.values():
            qd = table.get(broker_name)
            if qd is None:
                continue
            qd.perm = qd.perm & ~PERM_WRITE if wipe else PERM_READ | PERM_WRITE
            count += 1
        return count
