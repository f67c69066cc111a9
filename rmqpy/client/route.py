"""Routes as the Java client reads them (``MQClientInstance.topicRouteData2TopicPublishInfo`` /
``...SubscribeInfo``), the producer's queue choice (``TopicPublishInfo.selectOneMessageQueue``) and
the optional latency fault tolerance (``MQFaultStrategy``, 5.3 values). Pure: no I/O, no clock
of its own (callers pass ``now`` in seconds)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from rmqpy.client.model import MessageQueue
from rmqpy.protocol.bodies.route import MASTER_ID, BrokerData, TopicRouteData

PERM_READ = 0x4
PERM_WRITE = 0x2
AUTO_CREATE_TOPIC = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS = 4   # DefaultMQProducer.defaultTopicQueueNums


@dataclass
class TopicRoute:
    topic: str
    data: TopicRouteData
    #: True when this is TBW102's route standing in for a topic the name servers do not know
    from_default: bool = False
    brokers: dict[str, BrokerData] = field(init=False)

    def __post_init__(self) -> None:
        self.brokers = {b.brokerName: b for b in self.data.brokerDatas}

    def publish_queues(self) -> list[MessageQueue]:
        """Writable queues of brokers that have a master, sorted by broker name (Java sorts QueueData)."""
        out = []
        for qd in sorted(self.data.queueDatas, key=lambda q: q.brokerName):
            if not qd.perm & PERM_WRITE:
                continue
            bd = self.brokers.get(qd.brokerName)
            if bd is None or MASTER_ID not in bd.brokerAddrs:
                continue
            n = min(DEFAULT_TOPIC_QUEUE_NUMS, qd.writeQueueNums) if self.from_default else qd.writeQueueNums
            out += [MessageQueue(self.topic, qd.brokerName, i) for i in range(n)]
        return out

    def subscribe_queues(self) -> list[MessageQueue]:
        """Readable queues of every broker group in the route, sorted."""
        out = []
        for qd in self.data.queueDatas:
            if qd.perm & PERM_READ:
                out += [MessageQueue(self.topic, qd.brokerName, i) for i in range(qd.readQueueNums)]
        return sorted(out)

    def master(self, broker_name: str) -> str | None:
        """``findBrokerAddressInPublish``: the master's address or None."""
        bd = self.brokers.get(broker_name)
        return bd.brokerAddrs.get(MASTER_ID) if bd else None

    def subscribe_addr(self, broker_name: str, broker_id: int = MASTER_ID) -> tuple[str, bool] | None:
        """``findBrokerAddressInSubscribe(name, id, false)``: (address, is_slave) of ``broker_id``,
        else of the master, else of the lowest-numbered slave; None when the group is not routed."""
        bd = self.brokers.get(broker_name)
        if bd is None or not bd.brokerAddrs:
            return None
        for bid in (broker_id, MASTER_ID, min(bd.brokerAddrs)):
            if bid in bd.brokerAddrs:
                return bd.brokerAddrs[bid], bid != MASTER_ID
        return None


class FaultTolerance:
    """``LatencyFaultToleranceImpl`` with ``MQFaultStrategy``'s 5.3 tables: a broker that failed
    (isolation: counted as 10 s latency) or answered slowly is avoided for a while."""
    LATENCY_MAX_MS = (50, 100, 550, 1800, 3000, 5000, 15000)
    NOT_AVAILABLE_MS = (0, 0, 2000, 5000, 6000, 10000, 30000)

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._until: dict[str, float] = {}

    def not_available_ms(self, latency_ms: float) -> int:
        for limit, duration in zip(reversed(self.LATENCY_MAX_MS), reversed(self.NOT_AVAILABLE_MS)):
            if latency_ms >= limit:
                return duration
        return 0

    def update(self, broker_name: str, latency_ms: float, isolation: bool, now: float) -> None:
        if self.enabled:
            duration = self.not_available_ms(10000 if isolation else latency_ms)
            self._until[broker_name] = now + duration / 1000.0

    def available(self, broker_name: str, now: float) -> bool:
        return now >= self._until.get(broker_name, 0.0)


class QueueSelector:
    """Round robin over the publish queues, skipping the broker the last attempt failed on
    (``selectOneMessageQueue(lastBrokerName)``) and, when enabled, brokers in a fault period."""

    def __init__(self, faults: FaultTolerance) -> None:
        self.faults = faults
        self._index = itertools.count()

    def select(self, queues: list[MessageQueue], last_broker: str | None, now: float) -> MessageQueue:
        if not queues:
            raise ValueError("no queue to choose from")
        n = len(queues)
        for _ in range(n):
            mq = queues[next(self._index) % n]
            if mq.broker_name == last_broker:
                continue
            if self.faults.enabled and not self.faults.available(mq.broker_name, now):
                continue
            return mq
        return queues[next(self._index) % n]
