"""AdminBrokerProcessor: the requests mqadmin (and the clients' admin paths) send to a broker.

Topics, subscription groups, broker config and runtime info, consume/topic statistics,
connection lists, offsets tables, reset offset (forwarded to the consumers as
RESET_CONSUMER_CLIENT_OFFSET) and consumer running info (forwarded to the client). Codes,
remarks and body shapes follow RocketMQ 4.9's ``AdminBrokerProcessor`` and
``Broker2Client`` (facts §4.6, §5.3).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

from twisted.internet import defer

from rmqpy.broker.topic import (AUTO_CREATE_TOPIC_KEY_TOPIC, RMQ_SYS_BENCHMARK_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT,
                                RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_TRACE_TOPIC,
                                RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC,
                                RMQ_SYS_TRANS_OP_HALF_TOPIC, validate_topic)
from rmqpy.broker.validation import bounded, validate_group, validate_queue_nums
from rmqpy.common import config_guard
from rmqpy.common.properties import PropertiesError, apply_properties
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.broker import SubscriptionGroupConfig
from rmqpy.protocol.bodies.topic import DataVersion, TopicConfig
from rmqpy.protocol.codes import LanguageCode, MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.bodies import admin as admin_bodies
from rmqpy.protocol.headers.admin import (CloneGroupOffsetRequestHeader, ConsumeMessageDirectlyResultRequestHeader,
                                          ConsumerGroupRequestHeader, CreateTopicRequestHeader,
                                          DeleteSubscriptionGroupRequestHeader, GetBrokerConfigResponseHeader,
                                          GetConsumerRunningInfoRequestHeader, GetConsumerStatusRequestHeader,
                                          GetConsumeStatsInBrokerHeader, GetConsumeStatsRequestHeader,
                                          GetProducerConnectionListRequestHeader, QueryConsumeQueueRequestHeader,
                                          QueryConsumeTimeSpanRequestHeader, QueryCorrectionOffsetHeader,
                                          ResetOffsetRequestHeader, TopicRequestHeader,
                                          ViewBrokerStatsDataRequestHeader)
from rmqpy.remoting.ratelimit import RateLimitedLogger

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."
CONFIG_BLACK_LIST = config_guard.BROKER_BLACK_LIST
# TopicValidator.SYSTEM_TOPIC_SET (the broker adds its cluster and broker name topics)
SYSTEM_TOPICS = (AUTO_CREATE_TOPIC_KEY_TOPIC, RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_BENCHMARK_TOPIC,
                 RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRACE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
                 RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT)
V3_0_7_SNAPSHOT = 72
V3_1_8_SNAPSHOT = 132
JAVA_LONG_MAX = 2 ** 63 - 1
GROUP_GET_NUMS = "GROUP_GET_NUMS"


def human_readable_bytes(n: int) -> str:
    """``MixAll.humanReadableByteCount(bytes, false)``."""
    if n < 1024:
        return f"{n} B"
    exp = 0
    v = float(n)
    while v >= 1024 and exp < 6:
        v /= 1024
        exp += 1
    return f"{n / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def language_name(code: Any) -> str:
    try:
        return LanguageCode(int(code)).name
    except (ValueError, TypeError):
        return str(code)


def version_desc(version: int) -> str:
    for name in dir(MQVersion):
        if name.startswith("V") and getattr(MQVersion, name) == version:
            return name
    return str(version)


class AdminBrokerProcessor:
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped
    codes = (RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER,
             RequestCode.GET_ALL_TOPIC_CONFIG, RequestCode.GET_TOPIC_STATS_INFO,
             RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
             RequestCode.DELETE_SUBSCRIPTIONGROUP, RequestCode.GET_BROKER_RUNTIME_INFO,
             RequestCode.GET_BROKER_CONFIG, RequestCode.UPDATE_BROKER_CONFIG, RequestCode.GET_CONSUME_STATS,
             RequestCode.GET_CONSUMER_CONNECTION_LIST, RequestCode.GET_PRODUCER_CONNECTION_LIST,
             RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, RequestCode.GET_ALL_CONSUMER_OFFSET,
             RequestCode.GET_ALL_DELAY_OFFSET, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
             RequestCode.GET_CONSUMER_RUNNING_INFO, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
             RequestCode.GET_TOPIC_NAME_LIST, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
             RequestCode.CLEAN_UNUSED_TOPIC, RequestCode.GET_TOPIC_CONFIG,
             RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, RequestCode.GET_BROKER_CONSUME_STATS,
             RequestCode.QUERY_CONSUME_TIME_SPAN, RequestCode.QUERY_CONSUME_QUEUE, RequestCode.CLONE_GROUP_OFFSET,
             RequestCode.VIEW_BROKER_STATS_DATA, RequestCode.QUERY_CORRECTION_OFFSET,
             RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, RequestCode.CONSUME_MESSAGE_DIRECTLY)

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.config_version = DataVersion()
        self.handlers: dict[int, Callable[[Any, RemotingCommand], Any]] = {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_subscription_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topic_list,
            RequestCode.GET_TOPIC_NAME_LIST: self.get_topic_name_list,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
            RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
            RequestCode.GET_TOPIC_CONFIG: self.get_topic_config,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.get_subscription_group_config,
            RequestCode.GET_BROKER_CONSUME_STATS: self.fetch_all_consume_stats_in_broker,
            RequestCode.QUERY_CONSUME_TIME_SPAN: self.query_consume_time_span,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
            RequestCode.CLONE_GROUP_OFFSET: self.clone_group_offset,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            RequestCode.QUERY_CORRECTION_OFFSET: self.query_correction_offset,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.get_consumer_status,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
        }

    def process_request(self, channel: Any, request: RemotingCommand) -> Any:
        return self.handlers[request.code](channel, request)

    # ------------------------------------------------------------------ helpers
    def _ok(self, request: RemotingCommand, body: bytes | None = None, **kw: Any) -> RemotingCommand:
        return request.response(ResponseCode.SUCCESS, None, body=body, **kw)

    def _is_slave(self) -> bool:
        return self.broker.store_config.brokerRole == "SLAVE"

    @property
    def broker_name(self) -> str:
        return self.broker.broker_config.brokerName

    def _mq(self, topic: str, queue_id: int) -> fastjson.ObjectKey:
        return fastjson.ObjectKey(brokerName=self.broker_name, queueId=queue_id, topic=topic)

    def _system_topics(self) -> set[str]:
        return set(SYSTEM_TOPICS) | set(self.broker.topic_config_manager.system_topics)

    def _is_system_topic(self, topic: str) -> bool:
        return topic in self._system_topics() or topic.startswith("rmq_sys_")

    def _max_queues(self) -> int:
        return self.broker.topic_config_manager.max_queue_nums

    def _queues(self, count: int) -> range:
        """Queue ids 0..count-1, never more than ``maxTopicQueueNums``: these loops run on the reactor."""
        return range(bounded(count, self._max_queues()))

    def _topic_checks(self, request: RemotingCommand, topic: str) -> RemotingCommand | None:
        bad = validate_topic(topic)
        if bad is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, bad)
        if self._is_system_topic(topic):
            return request.response(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
        return None

    # ------------------------------------------------------------------ topics
    def update_and_create_topic(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        if self._is_slave():
            return request.response(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        h = request.decode_header(CreateTopicRequestHeader)
        self.log.info("updateAndCreateTopic called by {a}", a=getattr(channel, "remote_address", "?"))
        error = self._topic_checks(request, h.topic)
        if error is not None:
            return error
        bad = validate_queue_nums(h.readQueueNums, h.writeQueueNums, self._max_queues())
        if bad is not None:
            return request.response(ResponseCode.SYSTEM_ERROR, bad)
        tc = TopicConfig(h.topic, readQueueNums=h.readQueueNums, writeQueueNums=h.writeQueueNums, perm=h.perm,
                         topicFilterType=h.topicFilterType or "SINGLE_TAG", topicSysFlag=h.topicSysFlag or 0)
        if h.order is not None:
            tc.order = bool(h.order)
        self.broker.topic_config_manager.update_topic_config(tc)
        if self.broker.started:
            self.broker.register_broker_all()
        return self._ok(request)

    def delete_topic(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        if self._is_slave():
            return request.response(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        h = request.decode_header(TopicRequestHeader)
        self.log.info("deleteTopic called by {a}", a=getattr(channel, "remote_address", "?"))
        error = self._topic_checks(request, h.topic)
        if error is not None:
            return error
        tcm = self.broker.topic_config_manager
        tcm.delete_topic_config(h.topic)
        self.broker.message_store.clean_unused_topic(set(tcm.table))
        return self._ok(request)

    def get_all_topic_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        wrapper = self.broker.topic_config_manager.wrapper()
        if not wrapper.topicConfigTable:
            return request.response(ResponseCode.SYSTEM_ERROR, "No topic in this broker")
        return self._ok(request, fastjson.dumps(wrapper).encode())

    def get_topic_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """5.x GET_TOPIC_CONFIG: mqadmin asks it before topic stats (static-topic check)."""
        h = request.decode_header(TopicRequestHeader)
        tc = self.broker.topic_config_manager.select(h.topic)
        if tc is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {h.topic}")
        # TopicConfigAndQueueMapping: the TopicConfig properties (no mapping detail: no static topics)
        return self._ok(request, fastjson.dumps(tc).encode())

    def get_subscription_group_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        group = request.ext("group")
        if not group:
            return request.response(ResponseCode.SYSTEM_ERROR, "the custom field <group> is null")
        config = self.broker.subscription_group_manager.table.get(group)
        if config is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return self._ok(request, fastjson.dumps(config).encode())

    def get_topic_name_list(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        body = {"brokerAddr": self.broker.broker_addr, "topicList": sorted(self.broker.topic_config_manager.table)}
        return self._ok(request, fastjson.dumps(body).encode())

    def get_system_topic_list(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        return self._ok(request, fastjson.dumps({"topicList": sorted(self._system_topics())}).encode())

    def get_topic_stats_info(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(TopicRequestHeader)
        tc = self.broker.topic_config_manager.select(h.topic)
        if tc is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        store = self.broker.message_store
        table = {}
        for i in self._queues(tc.writeQueueNums):
            lo = max(0, store.get_min_offset_in_queue(h.topic, i))
            hi = max(0, store.get_max_offset_in_queue(h.topic, i))
            ts = store.get_message_store_timestamp(h.topic, i, hi - 1) if hi > 0 else 0
            table[self._mq(h.topic, i)] = {"lastUpdateTimestamp": ts, "maxOffset": hi, "minOffset": lo}
        return self._ok(request, fastjson.dumps({"offsetTable": table}).encode())

    def clean_expired_consume_queue(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        self.broker.message_store.clean_expired_consumer_queue()
        return self._ok(request)

    def clean_unused_topic(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        self.broker.message_store.clean_unused_topic(set(self.broker.topic_config_manager.table))
        return self._ok(request)

    # ------------------------------------------------------------------ groups
    def update_and_create_subscription_group(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        if self._is_slave():
            return request.response(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        self.log.info("updateAndCreateSubscriptionGroup called by {a}", a=getattr(channel, "remote_address", "?"))
        obj = fastjson.loads(request.body or b"{}")
        if obj:
            config = SubscriptionGroupConfig.from_json(obj)
            # rmqpy: Java 5.3.3 stores any name and count; the group names %RETRY%/%DLQ% topics
            bad = validate_group(config.groupName)
            if bad is None and not 0 <= config.retryQueueNums <= self._max_queues():
                bad = (f"retryQueueNums {config.retryQueueNums} is out of range [0, {self._max_queues()}] "
                       "(broker setting maxTopicQueueNums)")
            if bad is not None:
                return request.response(ResponseCode.SYSTEM_ERROR, bad)
            self.broker.subscription_group_manager.update(config)
        return self._ok(request)

    def get_all_subscription_group(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        content = fastjson.dumps(self.broker.subscription_group_manager.encode())
        if not content:
            return request.response(ResponseCode.SYSTEM_ERROR, "No subscription group in this broker")
        return self._ok(request, content.encode())

    def delete_subscription_group(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        if self._is_slave():
            return request.response(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        h = request.decode_header(DeleteSubscriptionGroupRequestHeader)
        self.broker.subscription_group_manager.delete(h.groupName)
        if h.removeOffset:
            self.broker.consumer_offset_manager.remove_group(h.groupName)
        self._stats().on_group_deleted(h.groupName)
        return self._ok(request)

    # ------------------------------------------------------------------ broker config / runtime
    def get_broker_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """rmqpy's settings, then every other key the Java broker of the requester's generation lists,
        with Java's default (rmqpy/broker/java_config.py)."""
        from rmqpy.broker.java_config import java_only_items
        from rmqpy.common.properties import format_properties
        settings = self.broker.settings
        items = settings.items()
        content = format_properties(items + java_only_items(request.version, {k for k, _ in items}))
        version = fastjson.dumps(self.config_version)
        return self._ok(request, content.encode() if content else None,
                        header=GetBrokerConfigResponseHeader(version=version))

    def update_broker_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        self.log.info("updateBrokerConfig called by {a}", a=getattr(channel, "remote_address", "?"))
        if request.body:
            try:
                props = config_guard.parse_update_body(request.body)
            except PropertiesError as exc:
                return request.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
            broker_config = self.broker.settings.broker
            refused = config_guard.refusal(props, CONFIG_BLACK_LIST + tuple(broker_config.configBlackList.split(";")),
                                           broker_config.remoteConfigUpdateAllowKeys)
            if refused is not None:   # issue 11: NO_PERMISSION as Java's black list check, one log line
                self.log.warn("updateBrokerConfig from {a} refused: {r}",
                              a=getattr(channel, "remote_address", "?"), r=refused)
                return request.response(ResponseCode.NO_PERMISSION, refused)
            from rmqpy.broker.config import check_update
            try:
                check_update(self.broker.settings, props)   # what a restart would refuse, too
                apply_properties(self.broker.settings.objects, props)
            except PropertiesError as exc:   # a value of the wrong type: nothing was set
                return request.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
            self.config_version.next_version()
            # Java's Configuration.update persists to the broker config file (the -c file)
            from rmqpy.broker.config import persist_settings
            try:
                path = persist_settings(self.broker.settings)
                self.log.info("updateBrokerConfig persisted to {p}", p=path)
            except OSError as exc:
                self.log.error("persist string2File error, {e}", e=exc)
            if "brokerPermission" in props:
                self.broker.topic_config_manager.data_version.next_version()
                if self.broker.started:
                    self.broker.register_broker_all()
        return self._ok(request)

    def runtime_info(self) -> dict[str, str]:
        b = self.broker
        store = b.message_store
        put_total = store.stats.put_times_total
        get_total = store.stats.get_transferred
        info: dict[str, str] = {
            "brokerVersionDesc": version_desc(MQVersion.CURRENT),
            "brokerVersion": str(MQVersion.CURRENT),
            "msgPutTotalYesterdayMorning": "0", "msgPutTotalTodayMorning": "0",
            "msgPutTotalTodayNow": str(put_total),
            "msgGetTotalYesterdayMorning": "0", "msgGetTotalTodayMorning": "0",
            "msgGetTotalTodayNow": str(get_total),
            "sendThreadPoolQueueSize": "0", "sendThreadPoolQueueCapacity": "10000",
            "pullThreadPoolQueueSize": "0", "pullThreadPoolQueueCapacity": "100000",
            "queryThreadPoolQueueSize": "0", "queryThreadPoolQueueCapacity": "20000",
            "sendThreadPoolQueueHeadWaitTimeMills": "0", "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "EndTransactionQueueSize": "0", "EndTransactionThreadPoolQueueCapacity": "100000",
            "dispatchBehindBytes": str(store.dispatch_behind_bytes()),
            "pageCacheLockTimeMills": "0",
            "earliestMessageTimeStamp": str(store.get_earliest_message_time()),
            "startAcceptSendRequestTimeStamp": str(b.broker_config.startAcceptSendRequestTimeStamp),
            "remainHowManyDataToCommit": "0", "remainHowManyDataToFlush": "0",
        }
        path = b.store_config.storePathRootDir
        try:
            st = os.statvfs(path)  # Java: storePathRootDir, getTotalSpace / getUsableSpace
            info["commitLogDirCapacity"] = (f"Total : {human_readable_bytes(st.f_blocks * st.f_frsize)}, "
                                            f"Free : {human_readable_bytes(st.f_bavail * st.f_frsize)}.")
        except OSError:
            pass
        info.update(store.runtime_info())
        return info

    def get_broker_runtime_info(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        return self._ok(request, fastjson.dumps({"table": self.runtime_info()}).encode())

    # ------------------------------------------------------------------ consumers / producers
    def get_consume_stats(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
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

    def _connection(self, info: Any) -> dict[str, Any]:
        return {"clientAddr": info.address, "clientId": info.client_id, "language": language_name(info.language),
                "version": info.version}

    def get_consumer_connection_list(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(ConsumerGroupRequestHeader)
        info = self.broker.consumer_manager.get(h.consumerGroup)
        if info is None:
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE,
                                    f"the consumer group[{h.consumerGroup}] not online")
        body = {"connectionSet": [self._connection(c) for c in info.channels.values()],
                "consumeFromWhere": info.consume_from_where, "consumeType": info.consume_type,
                "messageModel": info.message_model, "subscriptionTable": dict(info.subscriptions)}
        return self._ok(request, fastjson.dumps(body).encode())

    def get_producer_connection_list(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(GetProducerConnectionListRequestHeader)
        table = self.broker.producer_manager.groups.get(h.producerGroup)
        if table is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{h.producerGroup}] not exist")
        body = {"connectionSet": [self._connection(c) for c in table.values()]}
        return self._ok(request, fastjson.dumps(body).encode())

    def query_topic_consume_by_who(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(TopicRequestHeader)
        groups = set(self.broker.consumer_manager.query_topic_consume_by_who(h.topic))
        groups |= self.broker.consumer_offset_manager.which_groups_by_topic(h.topic)
        return self._ok(request, fastjson.dumps({"groupList": sorted(groups)}).encode())

    def get_all_consumer_offset(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        content = fastjson.dumps(self.broker.consumer_offset_manager.encode())
        if not content:
            return request.response(ResponseCode.SYSTEM_ERROR, "No consumer offset in this broker")
        return self._ok(request, content.encode())

    def get_all_delay_offset(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        content = fastjson.dumps(self.broker.delay_offset_manager.encode())
        if not content:
            return request.response(ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
        return self._ok(request, content.encode())

    # ------------------------------------------------------------------ broker -> client
    def reset_offset(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """``Broker2Client.resetOffset``: compute the offsets, tell every consumer of the group.

        A group with an offset for every queue but no consumer online answers CONSUMER_NOT_ONLINE (206),
        on which mqadmin resetOffsetByTime falls back to the offline reset (GET_CONSUME_STATS, then
        UPDATE_CONSUMER_OFFSET per queue). A missing topic: SYSTEM_ERROR for 4.x requesters,
        TOPIC_NOT_EXIST from V5_0_0 on (as each Java generation answers). Java 5.x's default
        server-side reset (useServerSideResetOffset) is not implemented: this is its Broker2Client path."""
        b = self.broker
        h = request.decode_header(ResetOffsetRequestHeader)
        tc = b.topic_config_manager.select(h.topic)
        if tc is None:
            code = ResponseCode.TOPIC_NOT_EXIST if request.version >= MQVersion.V5_0_0 else ResponseCode.SYSTEM_ERROR
            return request.response(code,
                                    f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}")
        store = b.message_store
        table = {}
        for i in self._queues(tc.writeQueueNums):
            consumer_offset = b.consumer_offset_manager.query_offset(h.group, h.topic, i)
            if consumer_offset == -1:
                return request.response(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{h.group}> not exist")
            if h.timestamp == -1:
                ts_offset = store.get_max_offset_in_queue(h.topic, i)
            else:
                ts_offset = store.get_offset_in_queue_by_time(h.topic, i, h.timestamp)
            if ts_offset < 0:
                ts_offset = 0
            table[self._mq(h.topic, i)] = ts_offset if (h.isForce or ts_offset < consumer_offset) \
                else consumer_offset
        body = fastjson.dumps({"offsetTable": table}).encode()
        info = b.consumer_manager.get(h.group)
        if info is None or not info.channels:
            return request.response(ResponseCode.CONSUMER_NOT_ONLINE,
                                    f"Consumer not online, so can not reset offset, Group: {h.group} "
                                    f"Topic: {h.topic} Timestamp: {h.timestamp}")
        for client in list(info.channels.values()):
            if client.version < V3_0_7_SNAPSHOT:
                return request.response(ResponseCode.SYSTEM_ERROR,
                                        f"the client does not support this feature. version="
                                        f"{version_desc(client.version)}")
        for client in list(info.channels.values()):
            header = ResetOffsetRequestHeader(topic=h.topic, group=h.group, timestamp=h.timestamp,
                                              isForce=bool(h.isForce))
            push = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, header, body)
            try:
                client.channel.invoke_oneway(push)
                self.log.info("[reset-offset] reset offset success. topic={t}, group={g}, clientId={c}",
                              t=h.topic, g=h.group, c=client.client_id)
            except Exception:
                self.log.failure("[reset-offset] reset offset exception. topic={t}, group={g}", t=h.topic, g=h.group)
        return self._ok(request, body)

    def get_consumer_running_info(self, channel: Any, request: RemotingCommand) -> Any:
        h = request.decode_header(GetConsumerRunningInfoRequestHeader)
        return self.call_consumer(RequestCode.GET_CONSUMER_RUNNING_INFO, request, h.consumerGroup, h.clientId)

    def call_consumer(self, code: int, request: RemotingCommand, group: str, client_id: str) -> Any:
        info = self.broker.consumer_manager.get(group)
        client = None
        if info is not None:
            client = next((c for c in info.channels.values() if c.client_id == client_id), None)
        if client is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if client.version < V3_1_8_SNAPSHOT:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"The Consumer <{client_id}> Version <{version_desc(client.version)}> too low to "
                                    f"finish, please upgrade it to V3_1_8_SNAPSHOT")
        forward = RemotingCommand.request(code, None, request.body)
        forward.ext_fields = dict(request.ext_fields or {})
        invoke = getattr(client.channel, "invoke", None)
        if invoke is None:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"invoke consumer <{group}> <{client_id}> Exception: channel cannot invoke")
        d = defer.maybeDeferred(invoke, forward, 5.0)

        def answered(resp: RemotingCommand) -> RemotingCommand:
            out = request.response(resp.code, resp.remark, body=resp.body, ext_fields=resp.ext_fields)
            return out

        def failed(f: Any) -> RemotingCommand:
            from twisted.internet.error import TimeoutError as TwistedTimeout
            if f.check(TwistedTimeout, defer.TimeoutError):
                return request.response(ResponseCode.CONSUME_MSG_TIMEOUT,
                                        f"consumer <{group}> <{client_id}> Timeout: {f.getErrorMessage()}")
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"invoke consumer <{group}> <{client_id}> Exception: {f.getErrorMessage()}")

        return d.addCallbacks(answered, failed)

    # ------------------------------------------------------------------ statistics and queues (issue #4)
    def _stats(self) -> Any:
        return self.broker.broker_stats_manager

    def fetch_all_consume_stats_in_broker(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
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

    def query_consume_time_span(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
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

    def query_consume_queue(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE (mqadmin queryCq): ``count`` units of one consume queue from ``index``."""
        b = self.broker
        h = request.decode_header(QueryConsumeQueueRequestHeader)
        cq = b.message_store.find_consume_queue(h.topic, h.queueId, create=False) if h.topic is not None else None
        if cq is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"{h.queueId}@{h.topic} is not exist!")
        assert h.topic is not None  # cq was found for it
        subscription: Any = None
        filter_data: str | None = None
        if h.consumerGroup is not None:
            sub = b.consumer_manager.find_subscription(h.consumerGroup, h.topic)
            if sub is None:
                filter_data = f"{h.consumerGroup}@{h.topic} is not online!"
            else:
                subscription = sub
                fd = b.consumer_filter_manager.get(h.topic, h.consumerGroup)
                filter_data = "null" if fd is None else fastjson.dumps(
                    {"consumerGroup": fd.group, "expression": fd.expression, "expressionType": fd.expression_type,
                     "clientVersion": fd.client_version, "topic": fd.topic})
        max_index, min_index = cq.get_max_offset_in_queue(), cq.get_min_offset_in_queue()
        units = cq.iter_units_in_file(h.index)
        if units is None:
            return request.response(ResponseCode.SUCCESS,
                                    f"Index {h.index} of {h.queueId}@{h.topic} is not exist!")
        queue_data = []
        for n, (phy, size, tags_code) in enumerate(units):
            if n >= h.count:
                break
            queue_data.append(admin_bodies.consume_queue_data(phy, size, tags_code))
        body = admin_bodies.query_consume_queue_body(max_index, min_index, queue_data, subscription, filter_data)
        return self._ok(request, fastjson.dumps(body).encode())

    def clone_group_offset(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """CLONE_GROUP_OFFSET: copy srcGroup's offsets of ``topic`` to destGroup."""
        b = self.broker
        h = request.decode_header(CloneGroupOffsetRequestHeader)
        if not (h.topic or "").strip():
            topics = b.consumer_offset_manager.which_topics_by_group(h.srcGroup)
        else:
            topics = {h.topic or ""}  # h.topic is not empty here
        com = b.consumer_offset_manager
        for topic in sorted(topics):
            if b.topic_config_manager.select(topic) is None:
                self.log.warn("[cloneGroupOffset], topic config not exist, {t}", t=topic)
                continue
            if not h.offline:
                info = b.consumer_manager.get(h.srcGroup)
                if info is not None and info.subscriptions and info.find_subscription(topic) is None:
                    self.log.warn("[cloneGroupOffset], the consumer group[{g}], topic[{t}] not exist",
                                  g=h.srcGroup, t=topic)
                    continue
            # as Java: the header's topic (not the loop's) names the table copied
            src = com.table.get(f"{h.topic}@{h.srcGroup}")
            if src is not None:
                com.table[f"{h.topic}@{h.destGroup}"] = dict(src)
                com.dirty = True
        return self._ok(request)

    def view_broker_stats_data(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(ViewBrokerStatsDataRequestHeader)
        item = self._stats().get(h.statsName, h.statsKey)
        if item is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"The stats <{h.statsName}> <{h.statsKey}> not exist")
        body = admin_bodies.broker_stats_data(item.in_minute().as_item(), item.in_hour().as_item(),
                                              item.in_day().as_item())
        return self._ok(request, fastjson.dumps(body).encode())

    def query_correction_offset(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        """QUERY_CORRECTION_OFFSET: per queue, the smallest offset any group (but filterGroups) has
        committed at or above the queue's minimum; Long.MAX_VALUE where compareGroup is behind it.

        Java's ``queryMinOffsetInAllGroup`` also deletes the filtered groups' offsets as a side
        effect; that is not reproduced: they are only left out.
        """
        b = self.broker
        h = request.decode_header(QueryCorrectionOffsetHeader)
        skip = {g for g in (h.filterGroups or "").split(",") if g} if (h.filterGroups or "").strip() else set()
        mins: dict[int, int] = {}
        for key, queues in b.consumer_offset_manager.table.items():
            topic, _, group = key.partition("@")
            if topic != h.topic or group in skip:
                continue
            for qid, offset in queues.items():
                if offset >= b.message_store.get_min_offset_in_queue(h.topic, qid):
                    mins[qid] = min(offset, mins.get(qid, offset))
        compare = b.consumer_offset_manager.table.get(f"{h.topic}@{h.compareGroup}")
        for qid, offset in (compare or {}).items():
            if qid in mins:
                mins[qid] = JAVA_LONG_MAX if mins[qid] > offset else mins[qid]
        return self._ok(request, fastjson.dumps(admin_bodies.correction_offset_body(mins)).encode())

    def get_consumer_status(self, channel: Any, request: RemotingCommand) -> Any:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (``Broker2Client.getConsumeStatus``): ask every consumer
        of the group (or only ``clientAddr``'s client id) with GET_CONSUMER_STATUS_FROM_CLIENT and
        gather their offset tables by client id."""
        b = self.broker
        h = request.decode_header(GetConsumerStatusRequestHeader)
        self.log.info("[get-consumer-status] get consumer status by {a}. topic={t}, group={g}",
                      a=getattr(channel, "remote_address", "?"), t=h.topic, g=h.group)
        info = b.consumer_manager.get(h.group)
        clients = list(info.channels.values()) if info is not None else []
        if not clients:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"No Any Consumer online in the consumer group: [{h.group}]")
        for client in clients:
            if client.version < V3_0_7_SNAPSHOT:
                return request.response(ResponseCode.SYSTEM_ERROR, f"the client does not support this feature. "
                                        f"version={version_desc(client.version)}")
        origin = (h.clientAddr or "").strip()
        if origin:
            clients = [c for c in clients if c.client_id == origin][:1]
        table: dict[str, Any] = {}
        calls = []
        for client in clients:
            ask = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
                                          GetConsumerStatusRequestHeader(topic=h.topic, group=h.group))
            invoke = getattr(client.channel, "invoke", None)
            if invoke is None:
                continue
            d = defer.maybeDeferred(invoke, ask, 5.0)

            def answered(resp: RemotingCommand, client_id: str = client.client_id) -> None:
                if resp.code == ResponseCode.SUCCESS and resp.body:
                    obj = fastjson.loads(resp.body.decode("utf-8"))
                    table[client_id] = dict(obj.get("messageQueueTable") or {})

            def failed(f: Any, client_id: str = client.client_id) -> None:
                self.log.error("[get-consumer-status] get consumer status exception. topic={t}, group={g}, "
                               "error={e}", t=h.topic, g=h.group, e=f.getErrorMessage())

            calls.append(d.addCallbacks(answered, failed))

        def reply(_: Any) -> RemotingCommand:
            ordered = {c.client_id: table[c.client_id] for c in clients if c.client_id in table}
            return self._ok(request, fastjson.dumps(admin_bodies.consumer_status_body(ordered)).encode())

        return defer.gatherResults(calls).addCallback(reply)

    def consume_message_directly(self, channel: Any, request: RemotingCommand) -> Any:
        """CONSUME_MESSAGE_DIRECTLY: attach the stored message named by msgId and hand it to the client."""
        b = self.broker
        h = request.decode_header(ConsumeMessageDirectlyResultRequestHeader)
        ext = request.ext_fields = dict(request.ext_fields or {})
        ext["brokerName"] = self.broker_name
        if h.topic:
            tc = b.topic_config_manager.table.get(h.topic)
            if tc is not None:
                ext["topicSysFlag"] = str(tc.topicSysFlag)
        if h.consumerGroup:
            sgc = b.subscription_group_manager.table.get(h.consumerGroup)
            if sgc is not None:
                ext["groupSysFlag"] = str(int(sgc.extra.get("groupSysFlag", 0) or 0))
        if h.msgId:
            from rmqpy.protocol.message import decode_offset_msg_id
            _, offset = decode_offset_msg_id(h.msgId)
            data = b.message_store.select_one_message_by_offset(offset)
            if data is None:
                raise ValueError(f"no message at commit log offset {offset}")
            request.body = bytes(data)
        return self.call_consumer(RequestCode.CONSUME_MESSAGE_DIRECTLY, request, h.consumerGroup, h.clientId or "")
