"""AdminBrokerProcessor: the requests mqadmin (and the clients' admin paths) send to a broker.

Topics, subscription groups, broker config and runtime info, consume/topic statistics,
connection lists, offsets tables, reset offset (forwarded to the consumers as
RESET_CONSUMER_CLIENT_OFFSET) and consumer running info (forwarded to the client). Codes,
remarks and body shapes follow RocketMQ 4.9's ``AdminBrokerProcessor`` and
``Broker2Client`` (facts §4.6, §5.3).
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.logger import Logger

from rmqpy.broker.topic import (AUTO_CREATE_TOPIC_KEY_TOPIC, RMQ_SYS_BENCHMARK_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT,
                                RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_TRACE_TOPIC,
                                RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC,
                                RMQ_SYS_TRANS_OP_HALF_TOPIC, validate_topic)
from rmqpy.common.properties import PropertiesError, apply_properties
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies.broker import SubscriptionGroupConfig
from rmqpy.protocol.bodies.topic import DataVersion, TopicConfig
from rmqpy.protocol.codes import LanguageCode, MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import (ConsumerGroupRequestHeader, CreateTopicRequestHeader,
                                          DeleteSubscriptionGroupRequestHeader, GetBrokerConfigResponseHeader,
                                          GetConsumerRunningInfoRequestHeader, GetConsumeStatsRequestHeader,
                                          GetProducerConnectionListRequestHeader, ResetOffsetRequestHeader,
                                          TopicRequestHeader)

if TYPE_CHECKING:
    from rmqpy.broker.controller import BrokerController

SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."
CONFIG_BLACK_LIST = ("brokerConfigPath", "rocketmqHome", "configBlackList")
# TopicValidator.SYSTEM_TOPIC_SET (the broker adds its cluster and broker name topics)
SYSTEM_TOPICS = (AUTO_CREATE_TOPIC_KEY_TOPIC, RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_BENCHMARK_TOPIC,
                 RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRACE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
                 RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT)
V3_0_7_SNAPSHOT = 72
V3_1_8_SNAPSHOT = 132


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
    from rmqpy.protocol import codes
    fn = getattr(codes.MQVersion, "desc", None) or getattr(codes, "version_desc", None)
    if fn is not None:
        try:
            return fn(version)
        except Exception:
            pass
    for name in dir(MQVersion):
        if name.startswith("V") and getattr(MQVersion, name) == version:
            return name
    return str(version)


class AdminBrokerProcessor:
    log = Logger()
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
             RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG)

    def __init__(self, broker: "BrokerController") -> None:
        self.broker = broker
        self.config_version = DataVersion()
        self.handlers = {
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
        clean = getattr(self.broker.message_store, "clean_unused_topic", None)
        if clean is not None:
            clean(set(tcm.table))
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
        for i in range(tc.writeQueueNums):
            lo = max(0, store.get_min_offset_in_queue(h.topic, i))
            hi = max(0, store.get_max_offset_in_queue(h.topic, i))
            ts = store.get_message_store_timestamp(h.topic, i, hi - 1) if hi > 0 else 0
            table[self._mq(h.topic, i)] = {"lastUpdateTimestamp": ts, "maxOffset": hi, "minOffset": lo}
        return self._ok(request, fastjson.dumps({"offsetTable": table}).encode())

    def clean_expired_consume_queue(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        fn = getattr(self.broker.message_store, "clean_expired_consumer_queue", None)
        if fn is not None:
            fn()
        return self._ok(request)

    def clean_unused_topic(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        fn = getattr(self.broker.message_store, "clean_unused_topic", None)
        if fn is not None:
            fn(set(self.broker.topic_config_manager.table))
        return self._ok(request)

    # ------------------------------------------------------------------ groups
    def update_and_create_subscription_group(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        if self._is_slave():
            return request.response(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        self.log.info("updateAndCreateSubscriptionGroup called by {a}", a=getattr(channel, "remote_address", "?"))
        obj = fastjson.loads(request.body or b"{}")
        if obj:
            self.broker.subscription_group_manager.update(SubscriptionGroupConfig.from_json(obj))
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
        return self._ok(request)

    # ------------------------------------------------------------------ broker config / runtime
    def get_broker_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        content = self.broker.settings.format()
        version = fastjson.dumps(self.config_version)
        return self._ok(request, content.encode() if content else None,
                        header=GetBrokerConfigResponseHeader(version=version))

    def update_broker_config(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        self.log.info("updateBrokerConfig called by {a}", a=getattr(channel, "remote_address", "?"))
        if request.body:
            from rmqpy.common.properties import parse_properties
            try:
                props = parse_properties(request.body.decode("utf-8"))
            except Exception:
                return request.response(ResponseCode.SYSTEM_ERROR, "string2Properties error")
            if any(k in props for k in CONFIG_BLACK_LIST):
                return request.response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
            try:
                apply_properties(self.broker.settings.objects, props)
            except PropertiesError:
                return request.response(ResponseCode.SYSTEM_ERROR, "string2Properties error")
            self.config_version.next_version()
        return self._ok(request)

    def runtime_info(self) -> dict[str, str]:
        b = self.broker
        store = b.message_store
        stats = getattr(store, "stats", None)
        put_total = int(getattr(stats, "put_times_total", 0) or 0)
        get_total = int(getattr(stats, "get_transferred", 0) or 0)
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
            st = os.statvfs(b.store_config.commitlog_dir if os.path.isdir(b.store_config.commitlog_dir) else path)
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
            topics = {h.topic}
        store = b.message_store
        info = b.consumer_manager.get(group)
        table = {}
        for topic in sorted(topics):
            tc = b.topic_config_manager.select(topic)
            if tc is None:
                continue
            if info is not None and info.subscriptions and info.find_subscription(topic) is None:
                continue
            for i in range(tc.readQueueNums):
                broker_offset = max(0, store.get_max_offset_in_queue(topic, i))
                consumer_offset = max(0, b.consumer_offset_manager.query_offset(group, topic, i))
                entry = {"brokerOffset": broker_offset, "consumerOffset": consumer_offset, "lastTimestamp": 0}
                if consumer_offset - 1 >= 0:
                    ts = store.get_message_store_timestamp(topic, i, consumer_offset - 1)
                    if ts > 0:
                        entry["lastTimestamp"] = ts
                table[self._mq(topic, i)] = entry
        return self._ok(request, fastjson.dumps({"consumeTps": 0.0, "offsetTable": table}).encode())

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
        """``Broker2Client.resetOffset``: compute the offsets, tell every consumer of the group."""
        b = self.broker
        h = request.decode_header(ResetOffsetRequestHeader)
        tc = b.topic_config_manager.select(h.topic)
        if tc is None:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}")
        store = b.message_store
        table = {}
        for i in range(tc.writeQueueNums):
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
            return request.response(ResponseCode.SYSTEM_ERROR,
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
