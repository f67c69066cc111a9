"""AdminBrokerProcessor, one family of its requests: runtime info and statistics."""
from __future__ import annotations

import os
from typing import Any

from rmqpy.broker.processor.admin_base import GROUP_GET_NUMS, AdminBase, human_readable_bytes, version_desc
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies import admin as admin_bodies
from rmqpy.protocol.codes import MQVersion, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import (
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from rmqpy.remoting.channel import Channel


class StatsAdmin(AdminBase):
    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's table as 5.3.3 fills it (its keys are in the golden
        frames); ``getTransferedTps``, 4.9's spelling that 4.9.8 mqadmin reads, stays beside
        5.3.3's ``getTransferredTps``."""
        b = self.broker
        store = b.message_store
        put_total = store.stats.put_times_total
        get_total = store.stats.get_transferred
        info: dict[str, str] = {
            # 5.3.3 isSpecialServiceRunning: schedule and transaction services running (a master);
            # mqadmin 5.x clusterList prints it as #ACTIVATED
            "brokerActive": str(self._special_services_running()).lower(),
            "brokerVersionDesc": version_desc(MQVersion.CURRENT),
            "brokerVersion": str(MQVersion.CURRENT),
            "msgPutTotalYesterdayMorning": "0", "msgPutTotalTodayMorning": "0",
            "msgPutTotalTodayNow": str(put_total),
            "msgGetTotalYesterdayMorning": "0", "msgGetTotalTodayMorning": "0",
            "msgGetTotalTodayNow": str(get_total),
            "sendThreadPoolQueueSize": "0", "sendThreadPoolQueueCapacity": "10000",
            "pullThreadPoolQueueSize": "0", "pullThreadPoolQueueCapacity": "100000",
            "queryThreadPoolQueueSize": "0", "queryThreadPoolQueueCapacity": "20000",
            "litePullThreadPoolQueueSize": "0", "litePullThreadPoolQueueCapacity": "100000",
            "ackThreadPoolQueueSize": "0", "ackThreadPoolQueueCapacity": "100000",
            "sendThreadPoolQueueHeadWaitTimeMills": "0", "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0", "litePullThreadPoolQueueHeadWaitTimeMills": "0",
            "ackThreadPoolQueueHeadWaitTimeMills": "0",
            "EndTransactionQueueSize": "0", "EndTransactionThreadPoolQueueCapacity": "100000",
            "dispatchBehindBytes": str(store.dispatch_behind_bytes()),
            "pageCacheLockTimeMills": "0",
            "earliestMessageTimeStamp": str(store.get_earliest_message_time()),
            "startAcceptSendRequestTimeStamp": str(b.broker_config.startAcceptSendRequestTimeStamp),
            # no transient store pool: Integer.MAX_VALUE buffers left, nothing to commit (no key)
            "remainTransientStoreBufferNumbs": "2147483647",
            "remainHowManyDataToFlush": human_readable_bytes(0),
        }
        info.update(self._timer_info())
        path = b.store_config.storePathRootDir
        try:
            st = os.statvfs(path)  # Java: storePathRootDir, getTotalSpace / getUsableSpace
            info["commitLogDirCapacity"] = (f"Total : {human_readable_bytes(st.f_blocks * st.f_frsize)}, "
                                            f"Free : {human_readable_bytes(st.f_bavail * st.f_frsize)}.")
        except OSError:
            pass
        info.update(store.runtime_info())
        info.update(b.replication.runtime_info())
        return info

    def _special_services_running(self) -> bool:
        b = self.broker
        # (POP revive, Java's other way to true, runs on a master only, like these two)
        return bool(b.schedule_message_service.started and b.transactional_message_service.started)

    def _timer_info(self) -> dict[str, str]:
        """5.3.3's timer keys: behind in seconds (due, not delivered yet) and in messages (written,
        not parked yet); rmqpy keeps no rates nor congestion counts, reported as 0 like a broker
        with the timer wheel off."""
        timer = self.broker.timer_message_service
        gauges = timer.gauges() if timer.started else {}
        return {"timerReadBehind": str(int(gauges.get("dequeue_latency_ms", 0)) // 1000),
                "timerOffsetBehind": str(int(gauges.get("enqueue_lag", 0))),
                "timerCongestNum": "0", "timerEnqueueTps": "0.0", "timerDequeueTps": "0.0"}

    def get_broker_runtime_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return self._ok(request, fastjson.dumps({"table": self.runtime_info()}).encode())

    def get_broker_ha_status(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_HA_STATUS (``mqadmin haStatus``): the HA side's ``HARuntimeInfo``; Java's
        SYSTEM_ERROR when there is none (a controller-mode broker on a store that cannot replicate)."""
        info = self.broker.replication.ha_runtime_info()
        if info is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "Can not get HARuntimeInfo, may be duplicationEnable is true")
        return self._ok(request, info.encode())

    def get_consume_stats(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        h = request.decode_header(GetConsumeStatsRequestHeader)
        group = h.consumerGroup
        if not (h.topic or "").strip():
            topics = b.consumer_offset_manager.which_topics_by_group(group)
        else:
            topics = {h.topic or ""}  # h.topic is not empty here
        store = b.message_store
        info = b.consumer_manager.get(group)
        table = {}
        for topic in sorted(topics):
            tc = b.topic_config_manager.select(topic)
            if tc is None:
                continue
            if info is not None and info.subscriptions and info.find_subscription(topic) is None:
                continue
            for i in self._queues(tc.readQueueNums):
                broker_offset = max(0, store.get_max_offset_in_queue(topic, i))
                consumer_offset = max(0, b.consumer_offset_manager.query_offset(group, topic, i))
                # 5.x OffsetWrapper.pullOffset (mqadmin consumerProgress "#Inflight" = pull - consumer):
                # max(consumer offset, pull offset); no pull offsets are tracked apart here
                entry = {"brokerOffset": broker_offset, "consumerOffset": consumer_offset, "lastTimestamp": 0,
                         "pullOffset": consumer_offset}
                if consumer_offset - 1 >= 0:
                    ts = store.get_message_store_timestamp(topic, i, consumer_offset - 1)
                    if ts > 0:
                        entry["lastTimestamp"] = ts
                table[self._mq(topic, i)] = entry
        # Java: the GROUP_GET_NUMS rate of the last minute, summed over the topics
        tps = 0.0
        for topic in topics:
            item = self._stats().get(GROUP_GET_NUMS, f"{topic}@{group}")
            if item is not None:
                tps += item.in_minute().tps
        return self._ok(request, fastjson.dumps({"consumeTps": tps, "offsetTable": table}).encode())

    def fetch_all_consume_stats_in_broker(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS: every subscription group's consume stats per topic it has offsets of."""
        b = self.broker
        h = request.decode_header(GetConsumeStatsInBrokerHeader)
        store = b.message_store
        stats = self._stats()
        groups_stats: list[dict[str, list[dict[str, Any]]]] = []
        total_diff = 0
        for group in list(b.subscription_group_manager.table):
            per_topic: list[dict[str, Any]] = []
            info = b.consumer_manager.get(group)
            for topic in sorted(b.consumer_offset_manager.which_topics_by_group(group)):
                tc = b.topic_config_manager.select(topic)
                if tc is None:
                    self.log.warn("consumeStats, topic config not exist, {t}", t=topic)
                    continue
                if h.isOrder and not tc.order:
                    continue
                if info is not None and info.subscriptions and info.find_subscription(topic) is None:
                    continue
                table = {}
                diff = 0
                for i in self._queues(tc.writeQueueNums):
                    broker_offset = max(0, store.get_max_offset_in_queue(topic, i))
                    consumer_offset = max(0, b.consumer_offset_manager.query_offset(group, topic, i))
                    entry = {"brokerOffset": broker_offset, "consumerOffset": consumer_offset, "lastTimestamp": 0}
                    if consumer_offset - 1 >= 0:
                        ts = store.get_message_store_timestamp(topic, i, consumer_offset - 1)
                        if ts > 0:
                            entry["lastTimestamp"] = ts
                    table[self._mq(topic, i)] = entry
                    diff += broker_offset - consumer_offset
                item = stats.get(GROUP_GET_NUMS, f"{topic}@{group}")
                tps = item.in_minute().tps if item is not None else 0.0
                per_topic.append(admin_bodies.consume_stats(table, tps))
                total_diff += diff
            groups_stats.append({group: per_topic})
        body = admin_bodies.consume_stats_list(b.broker_addr, groups_stats, total_diff)
        return self._ok(request, fastjson.dumps(body).encode())

    def view_broker_stats_data(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(ViewBrokerStatsDataRequestHeader)
        item = self._stats().get(h.statsName, h.statsKey)
        if item is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"The stats <{h.statsName}> <{h.statsKey}> not exist")
        body = admin_bodies.broker_stats_data(item.in_minute().as_item(), item.in_hour().as_item(),
                                              item.in_day().as_item())
        return self._ok(request, fastjson.dumps(body).encode())

    def query_consume_time_span(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        h = request.decode_header(QueryConsumeTimeSpanRequestHeader)
        tc = b.topic_config_manager.select(h.topic)
        if tc is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        store = b.message_store
        spans = []
        for i in self._queues(tc.writeQueueNums):
            min_ts = store.get_earliest_message_time(h.topic, i)
            max_offset = store.get_max_offset_in_queue(h.topic, i)
            max_ts = store.get_message_store_timestamp(h.topic, i, max_offset - 1)
            consumer_offset = b.consumer_offset_manager.query_offset(h.group, h.topic, i)
            if consumer_offset > 0:
                consume_ts = store.get_message_store_timestamp(h.topic, i, consumer_offset - 1)
            else:
                consume_ts = min_ts
            delay = 0
            if consumer_offset < max_offset:
                delay = b.now_ms() - store.get_message_store_timestamp(h.topic, i, consumer_offset)
            mq = admin_bodies.message_queue(h.topic, self.broker_name, i)
            spans.append(admin_bodies.queue_time_span(mq, min_ts, max_ts, consume_ts, delay))
        body = admin_bodies.query_consume_time_span_body(spans)
        return self._ok(request, fastjson.dumps(body).encode())
