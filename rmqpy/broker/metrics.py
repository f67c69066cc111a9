"""BrokerMetricsManager: the broker's Prometheus metrics with RocketMQ 5's names and labels.

Java's ``BrokerMetricsManager`` (``metricsExporterType=PROM``) serves, through OpenTelemetry's
Prometheus exporter, the instruments of ``BrokerMetricsConstant``, ``RemotingMetricsConstant``
and ``DefaultStoreMetricsConstant``. rmqpy serves the same sample names and labels (checked
against a Java 5.3.3 broker's endpoint by tests/interop/test_metrics_logs.py):

- counted on the request path, by :class:`BrokerMetricsHook` (a ``SendMessageHook`` and
  ``ConsumeMessageHook``, as Java counts in its send and pull processors) and by the
  dispatcher's :class:`~rmqpy.common.metrics.RpcLatency`: ``rocketmq_messages_in_total``,
  ``rocketmq_throughput_in_total``, ``rocketmq_message_size``, ``rocketmq_messages_out_total``,
  ``rocketmq_throughput_out_total``, ``rocketmq_rpc_latency_milliseconds``;
- read when Prometheus scrapes, as Java's observable gauges are: topic and group numbers,
  broker permission, producer and consumer connections, consumer lag, lag latency, inflight,
  queueing latency and ready messages, storage size, flush and dispatch behind, message
  reserve time, and ``rocketmq_processor_watermark`` (always 0: rmqpy runs a request when it
  is read, there is no processor queue for a request to wait in; the wait is the reactor's lag);
- POP (``PopMetricsConstant``): revive records written, read back and revived to retry, counted
  by :class:`BrokerMetricsHook` as the pop service and the revive service tell it; revive lag and
  latency per revive queue, read at scrape. Timer (``DefaultStoreMetricsConstant``): messages parked
  and delivered, their delay, and the timer service's gauges. ``rocketmq_half_messages``: prepared
  sends less END_TRANSACTIONs, per real topic;
- rmqpy's own: ``rmqpy_reactor_lag_milliseconds``, ``rmqpy_put_latency_milliseconds``,
  ``rmqpy_flush_latency_milliseconds`` and ``rmqpy_storage_disk_used_ratio``;
- rmqpy's own too, the replica set (controller mode, issue 28): ``rmqpy_broker_role{role}`` (1 for
  the role held now: ``SYNC_MASTER``, ``ASYNC_MASTER`` or ``SLAVE``, as Java's ``BrokerRole``), and in
  controller mode ``rmqpy_broker_master_epoch`` (the epoch of the master this broker knows, as mqadmin
  getSyncStateSet's ``#MasterEpoch``), ``rmqpy_broker_sync_state_set_size`` and
  ``rmqpy_broker_sync_state_set_epoch`` (``#SyncStateSetNums`` and ``#SyncStateSetEpoch``: the master's
  in-sync set, which the master keeps: 0 on a replica). Apache 5.3.3's broker
  exports no metric of these (``BrokerMetricsConstant``, ``DefaultStoreMetricsConstant`` and the HA
  service have none; only its controller counts elections, ``election_total``, and its own ``role``:
  rmqpy/controller/metrics.py), hence rmqpy's prefix.

Where rmqpy's numbers differ: ``throughput_in`` and ``message_size`` count a stored message's
size computed from the request (Java's ``wroteBytes``, the record as stored, less the
properties the broker adds); inflight is the last pulled offset minus the committed offset.
"""
from __future__ import annotations

import os
from bisect import bisect_left
from typing import Any, Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, Metric
from twisted.logger import Logger

from rmqpy.broker.api import Broker
from rmqpy.broker.stats import count_messages
from rmqpy.broker.subscription import is_sys_consumer_group
from rmqpy.common.metrics import (
    BaseLabels,
    CallbackCollector,
    Histogram,
    ReactorLag,
    RpcLatency,
    exporter_enabled,
    histogram_family,
    wall_ms,
)
from rmqpy.protocol.bodies.topic import PERM_READ, PERM_WRITE
from rmqpy.protocol.codes import LanguageCode, RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.versions import version_desc
from rmqpy.store import space
from rmqpy.store.stats import FLUSH_BUCKETS_MS, PUT_BUCKETS_MS

#: Java ``BrokerMetricsManager.registerMetricsView``: rocketmq_message_size buckets (bytes)
MESSAGE_SIZE_BUCKETS = (1024, 4 * 1024, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
#: Java's rocketmq_finish_message_latency buckets: 5 s, 1 min, 10 min, 1 h, 12 h, 24 h (Java records
#: seconds under the unit "ms", so the sample is named _milliseconds and holds seconds; so does rmqpy's)
FINISH_LATENCY_BUCKETS_S = (5, 60, 600, 3600, 12 * 3600, 24 * 3600)
#: Java ``DefaultStoreMetricsManager.getMetricsView``: rocketmq_delay_message_latency buckets (s)
DELAY_LATENCY_BUCKETS_S = (60, 600, 3600, 12 * 3600, 24 * 3600, 3 * 24 * 3600)
#: Java's processor pools, as rocketmq_processor_watermark labels them
PROCESSORS = ("send", "async_put", "pull", "ack", "query_message", "client_manager", "heartbeat", "lite_pull",
              "transaction", "consumer_manager", "admin", "reply")
#: Java ``ConsumeType.getTypeCN`` in lower case
CONSUME_MODES = {"CONSUME_ACTIVELY": "pull", "CONSUME_PASSIVELY": "push", "CONSUME_POP": "pop"}

_SEND_OK = frozenset(int(c) for c in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT,
                                     ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE))
_SUCCESS = int(ResponseCode.SUCCESS)
_SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)
#: fixed part of a stored record with IPv4 hosts (Java ``CommitLog.calMsgLength`` less body, topic, properties)
_RECORD_FIXED = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4 + 1 + 2
#: series any one table may hold (Java's metricsOtelCardinalityLimit default)
MAX_SERIES = 50 * 1000


def message_type(properties: str | None) -> str:
    """Java ``BrokerMetricsManager.getMessageType`` (``TopicMessageType.getMetricsValue``)."""
    if not properties:
        return "normal"
    if "TRAN_MSG" not in properties and "__SHARDINGKEY" not in properties and "DELAY" not in properties \
            and "TIMER_" not in properties \
            and "__STARTDELIVERTIME" not in properties:
        return "normal"  # the usual message: no full parse
    props = dict(kv.split("\x01", 1) for kv in properties.split("\x02") if "\x01" in kv)
    if props.get("TRAN_MSG", "").lower() == "true":
        return "transaction"
    if "__SHARDINGKEY" in props:
        return "fifo"
    if any(k in props for k in ("__STARTDELIVERTIME", "DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC",
                                "TIMER_DELAY_MS")):
        return "delay"
    return "normal"


_RETRY_OR_DLQ = ("%RETRY%", "%DLQ%")


def is_retry_or_dlq(topic: str) -> bool:
    return topic.startswith(_RETRY_OR_DLQ)


class _In:
    __slots__ = ("nums", "bytes", "size")

    def __init__(self) -> None:
        self.nums = 0
        self.bytes = 0
        self.size = Histogram(MESSAGE_SIZE_BUCKETS)


class BrokerMetricsHook:
    """The metrics' ``SendMessageHook`` and ``ConsumeMessageHook``: plain counters per series."""

    def __init__(self, is_system_topic: Any) -> None:
        self.is_system_topic = is_system_topic
        self.messages_in: dict[tuple[str, str], _In] = {}
        self.messages_out: dict[tuple[str, str], list[int]] = {}
        # (group, topic, queue) -> the next offset the last found pull returned (Java's pull offset)
        self.pull_offsets: dict[tuple[str, str, int], int] = {}
        self.to_dlq: dict[tuple[str, str], int] = {}  # (origin topic, group)
        self.committed: dict[str, int] = {}
        self.rolled_back: dict[str, int] = {}
        self.finish_latency: dict[str, Histogram] = {}
        self.half: dict[str, int] = {}  # real topic -> half messages prepared and not ended (since start)
        # POP (Java PopMetricsManager) and timer (DefaultStoreMetricsManager) counters
        self.revive_in: dict[tuple[str, str, str, str], int] = {}  # (group, topic, CK/ACK, put status)
        self.revive_out: dict[tuple[str, str, int, str], int] = {}  # (group, topic, revive queue, CK/ACK)
        self.revive_retry_puts: dict[tuple[str, str, str], int] = {}  # (group, topic, put status)
        self.timer_in: dict[str, int] = {}
        self.timer_out: dict[str, int] = {}
        self.timer_delay: dict[str, Histogram] = {}

    def send_message_after(self, response: Any, request: RemotingCommand, topic: str) -> Any:
        if type(response) is not RemotingCommand or response.code not in _SEND_OK or not topic \
                or topic.startswith(_RETRY_OR_DLQ):
            return response
        ext = request.ext_fields or {}
        props = ext.get("i") or ext.get("properties")
        body = request.body
        if request.code == _SEND_BATCH_MESSAGE:
            msg_id = (response.ext_fields or {}).get("msgId") or ""
            nums = msg_id.count(",") + 1 if msg_id else 1
            wrote = (len(body) if body else 0) + nums * (_RECORD_FIXED + len(topic))
        else:
            nums = 1
            wrote = _RECORD_FIXED + (len(body) if body else 0) + len(topic) + (len(props) if props else 0)
        if props and ("TRAN_MSG" in props or "__SHARDINGKEY" in props or "DELAY" in props or "TIMER_" in props
                      or "__STARTDELIVERTIME" in props):
            key = (topic, message_type(props))
        else:
            key = (topic, "normal")  # the usual message: no parse of its properties
        series = self.messages_in.get(key)
        if series is None:
            if len(self.messages_in) >= MAX_SERIES:
                return response
            series = self.messages_in[key] = _In()
        series.nums += nums
        series.bytes += wrote
        if key[1] == "transaction":  # a half message (Java's TransactionMetrics: +1 per prepared put)
            _add(self.half, topic, nums)
        per = wrote // nums
        size = series.size
        size.counts[bisect_left(size.bounds, per)] += 1
        size.sum += per
        return response

    def consume_message_after(self, group: str, topic: str, queue_id: int, response: RemotingCommand) -> None:
        parts = response.body_parts
        if response.code != _SUCCESS or not (parts or response.body) or is_retry_or_dlq(topic):
            return
        nxt = (response.ext_fields or {}).get("nextBeginOffset")
        if nxt is not None and len(self.pull_offsets) < MAX_SERIES:
            try:
                self.pull_offsets[(group, topic, queue_id)] = int(nxt)
            except ValueError:
                pass
        key = (topic, group)
        series = self.messages_out.get(key)
        if series is None:
            if len(self.messages_out) >= MAX_SERIES:
                return
            series = self.messages_out[key] = [0, 0]
        if parts is not None:  # a pull's records, one per part
            series[0] += len(parts)
            series[1] += sum(map(len, parts))
        else:
            body = response.body or b""
            series[0] += count_messages(body)
            series[1] += len(body)

    def send_to_dlq(self, group: str, origin_topic: str) -> None:
        key = (origin_topic, group)
        if key in self.to_dlq or len(self.to_dlq) < MAX_SERIES:
            self.to_dlq[key] = self.to_dlq.get(key, 0) + 1

    def end_transaction_after(self, topic: str, committed: bool, born_timestamp: int) -> None:
        table = self.committed if committed else self.rolled_back
        if topic in table or len(table) < MAX_SERIES:
            table[topic] = table.get(topic, 0) + 1
        if self.half.get(topic, 0) > 0:  # (a half message prepared before a restart is not counted)
            self.half[topic] -= 1
        if committed:
            hist = self.finish_latency.get(topic)
            if hist is None:
                if len(self.finish_latency) >= MAX_SERIES:
                    return
                hist = self.finish_latency[topic] = Histogram(FINISH_LATENCY_BUCKETS_S)
            hist.observe(max(0, (wall_ms() - born_timestamp) // 1000))  # Java records seconds

    # HalfMessageHook
    def half_discarded(self, topic: str) -> None:
        if self.half.get(topic, 0) > 0:
            self.half[topic] -= 1

    # PopMetricsHook
    def revive_put(self, group: str, topic: str, kind: str, status: str) -> None:
        _add(self.revive_in, (group, topic, kind, status))

    def revive_get(self, group: str, topic: str, queue_id: int, kind: str) -> None:
        _add(self.revive_out, (group, topic, queue_id, kind))

    def revive_retry(self, group: str, topic: str, status: str) -> None:
        _add(self.revive_retry_puts, (group, topic, status))

    # TimerMetricsHook
    def timer_enqueue(self, topic: str, delay_s: int) -> None:
        _add(self.timer_in, topic)
        hist = self.timer_delay.get(topic)
        if hist is None:
            if len(self.timer_delay) >= MAX_SERIES:
                return
            hist = self.timer_delay[topic] = Histogram(DELAY_LATENCY_BUCKETS_S)
        hist.observe(delay_s)

    def timer_dequeue(self, topic: str) -> None:
        _add(self.timer_out, topic)

    def forget_topic(self, topic: str) -> None:
        for table in (self.messages_in, self.messages_out):
            for key in [k for k in table if k[0] == topic]:
                del table[key]
        for pkey in [k for k in self.pull_offsets if k[1] == topic]:
            del self.pull_offsets[pkey]


class BrokerMetricsManager:
    """Builds the registry of one broker and what feeds it; :meth:`attach` wires the hooks."""

    log = Logger()

    def __init__(self, broker: Broker, clock: Any) -> None:
        self.broker = broker
        self.clock = clock
        bc = broker.broker_config
        self.base = BaseLabels(bc.brokerClusterName, "broker", bc.brokerName, bc.metricsLabel, bc.metricsInDelta)
        self.hook = BrokerMetricsHook(broker.topic_config_manager.is_system_topic)
        self.rpc = RpcLatency(clock)
        self.reactor_lag = ReactorLag(clock)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(CallbackCollector(
            self._traffic, lambda: self.rpc.families(self.base), self._broker_gauges, self._connections,
            self._lag, self._store, self._pop, self._timer, lambda: self.reactor_lag.families(self.base),
            self._replicas))

    @staticmethod
    def enabled(broker_config: Any) -> bool:
        return exporter_enabled(broker_config.metricsExporterType, "broker", BrokerMetricsManager.log)

    def address(self) -> tuple[str, int]:
        """Java: ``metricsPromExporterHost``, or ``brokerIP1`` when blank; ``metricsPromExporterPort``."""
        bc = self.broker.broker_config
        return (bc.metricsPromExporterHost or bc.brokerIP1), bc.metricsPromExporterPort

    def start(self) -> None:
        self.reactor_lag.start()

    def stop(self) -> None:
        self.reactor_lag.stop()

    # ------------------------------------------------------------------ counted on the request path
    def _traffic(self) -> Iterable[Metric]:
        base, hook = self.base, self.hook
        names_in = base.names + ["is_system", "message_type", "topic"]
        msgs = CounterMetricFamily("rocketmq_messages_in", "Total number of incoming messages", labels=names_in)
        thr = CounterMetricFamily("rocketmq_throughput_in", "Total traffic of incoming messages", labels=names_in)
        sizes = []
        for (topic, mtype), s in list(hook.messages_in.items()):
            values = base.values + [_bool(self.hook.is_system_topic(topic)), mtype, topic]
            msgs.add_metric(values, s.nums)
            thr.add_metric(values, s.bytes)
            sizes.append((values, s.size))
        yield msgs
        yield thr
        yield histogram_family("rocketmq_message_size", "Incoming messages size", names_in, sizes)
        names_out = base.names + ["consumer_group", "is_system", "topic"]
        out = CounterMetricFamily("rocketmq_messages_out", "Total number of outgoing messages", labels=names_out)
        tout = CounterMetricFamily("rocketmq_throughput_out", "Total traffic of outgoing messages", labels=names_out)
        for (topic, group), (nums, nbytes) in list(hook.messages_out.items()):
            system = self.hook.is_system_topic(topic) or is_sys_consumer_group(group)
            values = base.values + [group, _bool(system), topic]
            out.add_metric(values, nums)
            tout.add_metric(values, nbytes)
        yield out
        yield tout
        dlq = CounterMetricFamily("rocketmq_send_to_dlq_messages", "Consumer send to DLQ messages", labels=names_out)
        for (topic, group), n in list(hook.to_dlq.items()):
            system = self.hook.is_system_topic(topic) or is_sys_consumer_group(group)
            dlq.add_metric(base.values + [group, _bool(system), topic], n)
        yield dlq
        names_tx = base.names + ["topic"]
        for name, doc, table in (("rocketmq_commit_messages", "Total number of commit messages", hook.committed),
                                 ("rocketmq_rollback_messages", "Total number of rollback messages",
                                  hook.rolled_back)):
            family = CounterMetricFamily(name, doc, labels=names_tx)
            for topic, n in list(table.items()):
                family.add_metric(base.values + [topic], n)
            yield family
        yield histogram_family("rocketmq_finish_message_latency_milliseconds", "Transaction finish latency",
                               names_tx, ((base.values + [t], h) for t, h in list(hook.finish_latency.items())))
        yield base.gauge("rocketmq_half_messages", "Half messages of all topics", ("topic",),
                         (((t,), n) for t, n in list(hook.half.items())))

    # ------------------------------------------------------------------ POP (Java PopMetricsManager)
    def _pop(self) -> Iterable[Metric]:
        base, hook = self.base, self.hook
        revive_in = CounterMetricFamily("rocketmq_pop_revive_in_message", "Total number of put message to revive topic",
                                        labels=base.names + ["consumer_group", "put_status", "revive_message_type",
                                                             "topic"])
        for (group, topic, kind, status), n in list(hook.revive_in.items()):
            revive_in.add_metric(base.values + [group, status, kind, topic], n)
        yield revive_in
        revive_out = CounterMetricFamily("rocketmq_pop_revive_out_message",
                                         "Total number of get message from revive topic",
                                         labels=base.names + ["consumer_group", "queue_id", "revive_message_type",
                                                              "topic"])
        for (group, topic, queue_id, kind), n in list(hook.revive_out.items()):
            revive_out.add_metric(base.values + [group, str(queue_id), kind, topic], n)
        yield revive_out
        retry = CounterMetricFamily("rocketmq_pop_revive_retry_messages",
                                    "Total number of put message to pop retry topic",
                                    labels=base.names + ["consumer_group", "put_status", "topic"])
        for (group, topic, status), n in list(hook.revive_retry_puts.items()):
            retry.add_metric(base.values + [group, status, topic], n)
        yield retry
        # rmqpy writes each checkpoint and ack to the revive topic at once, as Java does with
        # enablePopBufferMerge=false (its default): nothing is buffered
        yield base.one("rocketmq_pop_offset_buffer_size", "Time number of buffered offset", 0)
        yield base.one("rocketmq_pop_checkpoint_buffer_size", "The number of buffered checkpoint", 0)
        revive = self.broker.pop_revive_service
        behind = [(str(q.queue_id), *revive.behind(q)) for q in revive.queues]
        # Java gives both the unit milliseconds, so the lag (records) is named _milliseconds too
        yield base.gauge("rocketmq_pop_revive_lag_milliseconds", "The processing lag of revive topic", ("queue_id",),
                         (((q,), n) for q, n, _ in behind))
        yield base.gauge("rocketmq_pop_revive_latency_milliseconds", "The processing latency of revive topic",
                         ("queue_id",), (((q,), ms) for q, _, ms in behind))

    # ------------------------------------------------------------------ timer (Java DefaultStoreMetricsManager)
    def _timer(self) -> Iterable[Metric]:
        if not self.broker.store_config.timerWheelEnable:
            return  # Java registers the timer instruments only with the timer wheel
        base, hook = self.base, self.hook
        store_names = ["storage_medium", "storage_type"]
        store_values = ["disk", "local"]  # Java's store metrics carry these two on every timer sample
        g = self.broker.timer_message_service.gauges()

        def gauge(name: str, doc: str, labels: tuple[str, ...], series: Iterable[tuple[tuple[str, ...], float]]
                  ) -> Metric:
            return base.gauge(name, doc, tuple(store_names) + labels,
                              ((tuple(store_values) + values, v) for values, v in series))

        yield gauge("rocketmq_timer_enqueue_lag", "Timer enqueue messages lag", (), [((), g["enqueue_lag"])])
        yield gauge("rocketmq_timer_enqueue_latency_milliseconds", "Timer enqueue latency", (),
                    [((), g["enqueue_latency_ms"])])
        yield gauge("rocketmq_timer_dequeue_lag", "Timer dequeue messages lag", (), [((), g["dequeue_lag"])])
        yield gauge("rocketmq_timer_dequeue_latency_milliseconds", "Timer dequeue latency", (),
                    [((), g["dequeue_latency_ms"])])
        yield gauge("rocketmq_timing_messages", "Current message number in timing", ("topic",),
                    (((t,), n) for t, n in g["timing"].items()))
        yield gauge("rocketmq_timer_message_snapshot", "Timer message distribution snapshot, only count timing "
                    "messages in 24h.", ("timer_bound_s",), (((str(b),), n) for b, n in g["snapshot"].items()))
        names = base.names + store_names + ["topic"]
        for name, doc, table in (("rocketmq_timer_enqueue", "Total number of timer enqueue", hook.timer_in),
                                 ("rocketmq_timer_dequeue", "Total number of timer dequeue", hook.timer_out)):
            family = CounterMetricFamily(name, doc, labels=names)
            for topic, n in list(table.items()):
                family.add_metric(base.values + store_values + [topic], n)
            yield family
        yield histogram_family("rocketmq_delay_message_latency_seconds", "Timer message set latency distribution",
                               names, ((base.values + store_values + [t], h) for t, h in list(hook.timer_delay.items())))

    # ------------------------------------------------------------------ read at scrape
    def _broker_gauges(self) -> Iterable[Metric]:
        b, base = self.broker, self.base
        yield base.gauge("rocketmq_processor_watermark", "Request processor watermark", ("processor",),
                         (((p,), 0) for p in PROCESSORS))
        yield base.one("rocketmq_broker_permission", "Broker permission", b.broker_config.brokerPermission)
        yield base.one("rocketmq_topic_number", "Active topic number", len(b.topic_config_manager.table))
        yield base.one("rocketmq_consumer_group_number", "Active subscription group number",
                       len(b.subscription_group_manager.table))

    def _replicas(self) -> Iterable[Metric]:
        base = self.base
        yield base.gauge("rmqpy_broker_role", "The broker's role now (1)", ("role",),
                         [((self.broker.role.role.value,), 1)])
        replicas = getattr(self.broker, "replicas_manager", None)  # controller mode only
        if replicas is None:
            return
        yield base.one("rmqpy_broker_master_epoch", "The epoch of the master this broker knows", replicas.master_epoch)
        on_master = replicas.master_broker_id is not None and replicas.master_broker_id == replicas.broker_controller_id
        yield base.one("rmqpy_broker_sync_state_set_size", "The master's in-sync replicas, itself included",
                       len(replicas.sync_state_set) if on_master else 0)
        yield base.one("rmqpy_broker_sync_state_set_epoch", "The epoch of the master's in-sync set",
                       replicas.sync_state_set_epoch if on_master else 0)

    def _connections(self) -> Iterable[Metric]:
        b, base = self.broker, self.base
        producers: dict[tuple[str, str], int] = {}
        for channels in b.producer_manager.groups.values():
            for info in channels.values():
                pkey = (_language(info.language), version_desc(info.version).lower())
                producers[pkey] = producers.get(pkey, 0) + 1
        yield base.gauge("rocketmq_producer_connections", "Producer connections",
                         ("language", "protocol_type", "version"),
                         (((lang, "remoting", ver), n) for (lang, ver), n in producers.items()))
        consumers: dict[tuple[str, str, str, str], int] = {}
        for group, ginfo in b.consumer_manager.groups.items():
            mode = CONSUME_MODES.get(ginfo.consume_type, str(ginfo.consume_type).lower())
            for info in ginfo.channels.values():
                ckey = (group, _language(info.language), version_desc(info.version).lower(), mode)
                consumers[ckey] = consumers.get(ckey, 0) + 1
        yield base.gauge("rocketmq_consumer_connections", "Consumer connections",
                         ("consume_mode", "consumer_group", "is_system", "language", "protocol_type", "version"),
                         (((mode, g, _bool(is_sys_consumer_group(g)), lang, "remoting", ver), n)
                          for (g, lang, ver, mode), n in consumers.items()))

    def _lag(self) -> Iterable[Metric]:
        """Java ``ConsumerLagCalculator`` for consumers that pull (rmqpy has no POP): per group
        online and topic it subscribes (not its retry topic), summed over the write queues."""
        b, base = self.broker, self.base
        store, offsets, tcm = b.message_store, b.consumer_offset_manager, b.topic_config_manager
        perm_broker = b.broker_config.brokerPermission
        now = wall_ms()
        rows = []
        for group, ginfo in list(b.consumer_manager.groups.items()):
            for topic in list(ginfo.subscriptions):
                if topic.startswith("%RETRY%"):
                    continue
                tc = tcm.select(topic)
                if tc is None or not (tc.perm & perm_broker & (PERM_READ | PERM_WRITE)):
                    continue
                lag = inflight = ready = 0
                unconsumed_ts = unpulled_ts = 0
                for q in range(tc.writeQueueNums):
                    top = max(0, store.get_max_offset_in_queue(topic, q))
                    done = offsets.query_offset(group, topic, q)
                    if done < 0:
                        done = top
                    pulled = self.hook.pull_offsets.get((group, topic, q), done)
                    pulled = min(max(pulled, done), top)
                    lag += top - done
                    inflight += pulled - done
                    ready += top - pulled
                    if done < top:
                        unconsumed_ts = _earliest(unconsumed_ts, store.get_message_store_timestamp(topic, q, done))
                    if pulled < top:
                        unpulled_ts = _earliest(unpulled_ts, store.get_message_store_timestamp(topic, q, pulled))
                labels = (group, "false", _bool(tcm.is_system_topic(topic) or is_sys_consumer_group(group)), topic)
                rows.append((labels, lag, inflight, ready, now - unconsumed_ts if unconsumed_ts else 0,
                             now - unpulled_ts if unpulled_ts else 0))
        names = ("consumer_group", "is_retry", "is_system", "topic")
        yield base.gauge("rocketmq_consumer_lag_messages", "Consumer lag messages", names,
                         ((r[0], r[1]) for r in rows))
        yield base.gauge("rocketmq_consumer_lag_latency_milliseconds", "Consumer lag time", names,
                         ((r[0], r[4]) for r in rows))
        yield base.gauge("rocketmq_consumer_inflight_messages", "Consumer inflight messages", names,
                         ((r[0], r[2]) for r in rows))
        yield base.gauge("rocketmq_consumer_queueing_latency_milliseconds", "Consumer queueing time", names,
                         ((r[0], r[5]) for r in rows))
        yield base.gauge("rocketmq_consumer_ready_messages", "Consumer ready messages", names,
                         ((r[0], r[3]) for r in rows))

    def _store(self) -> Iterable[Metric]:
        b, base = self.broker, self.base
        store = b.message_store
        root = b.store_config.storePathRootDir
        labels = ("storage_medium", "storage_type")
        medium = ("disk", "local")
        if os.path.isdir(root):
            st = os.statvfs(root)
            used = (st.f_blocks - st.f_bfree) * st.f_frsize
            if st.f_blocks > 0:
                yield base.gauge("rocketmq_storage_size_bytes", "Broker storage size", labels, [(medium, used)])
            yield base.one("rmqpy_storage_disk_used_ratio",
                           "Used share of the store's disk (Java's brokerStatus commitLogDiskRatio)",
                           space.disk_used_ratio(root))
        stats = store.stats
        yield base.gauge("rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes", labels,
                         [(medium, store.flush_behind_bytes())])
        yield base.gauge("rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes", labels,
                         [(medium, store.dispatch_behind_bytes())])
        earliest = store.get_earliest_message_time()
        if earliest > 0:
            yield base.gauge("rocketmq_storage_message_reserve_time_milliseconds", "Broker message reserve time",
                             labels, [(medium, wall_ms() - earliest)])
        put = Histogram(PUT_BUCKETS_MS)
        put.counts, put.sum = list(stats.dist), stats.put_ms_sum
        yield base.histogram("rmqpy_put_latency_milliseconds", "Time a put held the commit log writer",
                             (), [((), put)])
        flush = Histogram(FLUSH_BUCKETS_MS)
        flush.counts, flush.sum = list(stats.flush_dist), stats.flush_ms_sum
        yield base.histogram("rmqpy_flush_latency_milliseconds", "Time a commit log flush (fsync) took",
                             (), [((), flush)])


def _add(table: dict[Any, int], key: Any, n: int = 1) -> None:
    """Count ``n`` into ``table``; a new series only while the table has fewer than MAX_SERIES."""
    if key in table:
        table[key] += n
    elif len(table) < MAX_SERIES:
        table[key] = n


def _earliest(current: int, ts: int) -> int:
    if ts <= 0:
        return current
    return ts if current == 0 else min(current, ts)


def _bool(v: bool) -> str:
    return "true" if v else "false"


_LANGUAGES = {int(lang): lang.name.lower() for lang in LanguageCode}


def _language(code: Any) -> str:
    return _LANGUAGES.get(code, str(code).lower()) if isinstance(code, int) else str(code).lower()
