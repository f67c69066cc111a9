"""Which resource and actions a request needs (Java's ``DefaultAuthorizationContextBuilder`` for
remoting requests, RocketMQ 5.3.3).

Sends, pulls, heartbeats, offsets, locks and a few more are read field by field; every other
code follows the ``@RocketMQAction`` / ``@RocketMQResource`` annotations of its request header
class (:data:`ANNOTATED`): the annotated fields name topics and groups (a retry topic names
its group), and a header of resource type Cluster with no field set names this broker's
cluster. A code without an annotated header needs nothing, as in Java.

Where rmqpy asks for more than Java 5.3.3 (:data:`RMQPY_EXTRA`): LITE_PULL_MESSAGE and the
reply sends are checked as the pulls and sends they are, and UPDATE_BROKER_CONFIG, the
subscription-group and plain-ACL admin codes need Cluster Update (Get for the reads): in Java
any authenticated user may change the broker's configuration.
"""
from __future__ import annotations

from typing import NamedTuple

from rmqpy.auth.model import Resource, is_retry_topic
from rmqpy.protocol.bodies.heartbeat import HeartbeatData
from rmqpy.protocol.bodies.lock import LockBatchRequestBody
from rmqpy.protocol.command import RemotingCommand

PUB, SUB, CREATE, UPDATE, DELETE, GET, LIST = "Pub", "Sub", "Create", "Update", "Delete", "Get", "List"
TOPIC, GROUP, CLUSTER, UNKNOWN = "Topic", "Group", "Cluster", "Unknown"


class Need(NamedTuple):
    resource: Resource
    actions: tuple[str, ...]


# code: (header resource type, actions, annotated fields (name, type[, splitter]))
ANNOTATED: dict[int, tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]]] = {
    17: (UNKNOWN, (CREATE,), (("topic", TOPIC),)),  # UPDATE_AND_CREATE_TOPIC
    18: (UNKNOWN, (CREATE,), ()),  # UPDATE_AND_CREATE_TOPIC_LIST
    21: (TOPIC, (LIST,), ()),  # GET_ALL_TOPIC_CONFIG
    29: (UNKNOWN, (GET,), (("topic", TOPIC),)),  # SEARCH_OFFSET_BY_TIMESTAMP
    30: (UNKNOWN, (GET,), (("topic", TOPIC),)),  # GET_MAX_OFFSET
    31: (UNKNOWN, (GET,), (("topic", TOPIC),)),  # GET_MIN_OFFSET
    32: (UNKNOWN, (GET,), (("topic", TOPIC),)),  # GET_EARLIEST_MSG_STORETIME
    33: (UNKNOWN, (GET,), (("topic", TOPIC),)),  # VIEW_MESSAGE_BY_ID
    39: (UNKNOWN, (PUB,), (("topic", TOPIC),)),  # CHECK_TRANSACTION_STATE
    40: (UNKNOWN, (SUB,), (("consumerGroup", GROUP),)),  # NOTIFY_CONSUMER_IDS_CHANGED
    100: (CLUSTER, (UPDATE,), ()),  # PUT_KV_CONFIG
    101: (CLUSTER, (GET,), ()),  # GET_KV_CONFIG
    102: (CLUSTER, (UPDATE,), ()),  # DELETE_KV_CONFIG
    103: (CLUSTER, (UPDATE,), (("clusterName", CLUSTER),)),  # REGISTER_BROKER
    104: (CLUSTER, (UPDATE,), (("clusterName", CLUSTER),)),  # UNREGISTER_BROKER
    202: (UNKNOWN, (GET,), (("topic", TOPIC),)),  # GET_TOPIC_STATS_INFO
    203: (UNKNOWN, (GET,), (("consumerGroup", GROUP),)),  # GET_CONSUMER_CONNECTION_LIST
    204: (CLUSTER, (GET,), ()),  # GET_PRODUCER_CONNECTION_LIST
    205: (CLUSTER, (UPDATE,), ()),  # WIPE_WRITE_PERM_OF_BROKER
    207: (UNKNOWN, (DELETE,), (("groupName", GROUP),)),  # DELETE_SUBSCRIPTIONGROUP
    208: (UNKNOWN, (GET,), (("consumerGroup", GROUP), ("topic", TOPIC), ("topicList", TOPIC))),  # GET_CONSUME_STATS
    215: (UNKNOWN, (DELETE,), (("topic", TOPIC),)),  # DELETE_TOPIC_IN_BROKER
    216: (CLUSTER, (UPDATE,), (("clusterName", CLUSTER),)),  # DELETE_TOPIC_IN_NAMESRV
    217: (CLUSTER, (UPDATE,), ()),  # REGISTER_TOPIC_IN_NAMESRV
    219: (CLUSTER, (GET,), ()),  # GET_KVLIST_BY_NAMESPACE
    222: (UNKNOWN, (UPDATE,), (("group", GROUP), ("topic", TOPIC))),  # INVOKE_BROKER_TO_RESET_OFFSET
    223: (UNKNOWN, (GET,), (("topic", TOPIC), ("group", GROUP))),  # INVOKE_BROKER_TO_GET_CONSUMER_STATUS
    224: (TOPIC, (LIST,), ()),  # GET_TOPICS_BY_CLUSTER
    300: (UNKNOWN, (GET,), (("topic", TOPIC),)),  # QUERY_TOPIC_CONSUME_BY_WHO
    303: (UNKNOWN, (GET,), (("topic", TOPIC), ("group", GROUP))),  # QUERY_CONSUME_TIME_SPAN
    307: (UNKNOWN, (GET,), (("consumerGroup", GROUP),)),  # GET_CONSUMER_RUNNING_INFO
    308: (UNKNOWN, (GET,), (("filterGroups", GROUP, ","), ("compareGroup", GROUP), ("topic", TOPIC))),  # QUERY_CORRECTION_OFFSET
    309: (UNKNOWN, (SUB,), (("consumerGroup", GROUP), ("topic", TOPIC))),  # CONSUME_MESSAGE_DIRECTLY
    314: (UNKNOWN, (UPDATE,), (("destGroup", GROUP), ("topic", TOPIC))),  # CLONE_GROUP_OFFSET
    315: (CLUSTER, (GET,), ()),  # VIEW_BROKER_STATS_DATA
    317: (CLUSTER, (GET,), ()),  # GET_BROKER_CONSUME_STATS
    321: (UNKNOWN, (GET,), (("topic", TOPIC), ("consumerGroup", GROUP))),  # QUERY_CONSUME_QUEUE
    322: (CLUSTER, (GET,), (("clusterName", CLUSTER),)),  # QUERY_DATA_VERSION
    323: (UNKNOWN, (UPDATE,), (("topic", TOPIC),)),  # RESUME_CHECK_HALF_MESSAGE
    326: (UNKNOWN, (SUB,), (("producerGroup", GROUP), ("topic", TOPIC))),  # PUSH_REPLY_MESSAGE_TO_CLIENT
    327: (CLUSTER, (UPDATE,), ()),  # ADD_WRITE_PERM_OF_BROKER
    328: (CLUSTER, (GET,), ()),  # GET_ALL_PRODUCER_INFO
    343: (UNKNOWN, (GET,), (("group", GROUP),)),  # QUERY_TOPICS_BY_CONSUMER
    345: (UNKNOWN, (GET,), (("group", GROUP), ("topic", TOPIC))),  # QUERY_SUBSCRIPTION_BY_CONSUMER
    351: (UNKNOWN, (GET,), (("topic", TOPIC),)),  # GET_TOPIC_CONFIG
    352: (UNKNOWN, (GET,), (("group", GROUP),)),  # GET_SUBSCRIPTIONGROUP_CONFIG
    353: (UNKNOWN, (UPDATE,), (("group", GROUP), ("topic", TOPIC))),  # UPDATE_AND_GET_GROUP_FORBIDDEN
    354: (UNKNOWN, (GET,), (("topic", TOPIC),)),  # CHECK_ROCKSDB_CQ_WRITE_PROGRESS
    355: (CLUSTER, (GET,), ()),  # EXPORT_ROCKSDB_CONFIG_TO_JSON
    901: (UNKNOWN, (GET,), (("clusterName", CLUSTER),)),  # GET_BROKER_MEMBER_GROUP
    902: (CLUSTER, (UPDATE,), ()),  # ADD_BROKER
    903: (CLUSTER, (UPDATE,), (("brokerClusterName", CLUSTER),)),  # REMOVE_BROKER
    904: (CLUSTER, (UPDATE,), (("clusterName", CLUSTER),)),  # BROKER_HEARTBEAT
    905: (CLUSTER, (UPDATE,), ()),  # NOTIFY_MIN_BROKER_ID_CHANGE
    906: (CLUSTER, (UPDATE,), ()),  # EXCHANGE_BROKER_HA_INFO
    908: (CLUSTER, (UPDATE,), ()),  # RESET_MASTER_FLUSH_OFFSET
    1001: (CLUSTER, (UPDATE,), ()),  # CONTROLLER_ALTER_SYNC_STATE_SET
    1002: (CLUSTER, (UPDATE,), (("clusterName", CLUSTER),)),  # CONTROLLER_ELECT_MASTER
    1003: (CLUSTER, (UPDATE,), (("clusterName", CLUSTER),)),  # CONTROLLER_REGISTER_BROKER
    1004: (CLUSTER, (GET,), ()),  # CONTROLLER_GET_REPLICA_INFO
    1008: (CLUSTER, (UPDATE,), ()),  # NOTIFY_BROKER_ROLE_CHANGED
    1011: (CLUSTER, (UPDATE,), (("clusterName", CLUSTER),)),  # CLEAN_BROKER_DATA
    1012: (CLUSTER, (GET,), (("clusterName", CLUSTER),)),  # CONTROLLER_GET_NEXT_BROKER_ID
    1013: (CLUSTER, (UPDATE,), (("clusterName", CLUSTER),)),  # CONTROLLER_APPLY_BROKER_ID
    3001: (CLUSTER, (UPDATE,), ()),  # AUTH_CREATE_USER
    3002: (CLUSTER, (UPDATE,), ()),  # AUTH_UPDATE_USER
    3003: (CLUSTER, (UPDATE,), ()),  # AUTH_DELETE_USER
    3004: (CLUSTER, (GET,), ()),  # AUTH_GET_USER
    3005: (CLUSTER, (GET,), ()),  # AUTH_LIST_USER
    3006: (CLUSTER, (UPDATE,), ()),  # AUTH_CREATE_ACL
    3007: (CLUSTER, (UPDATE,), ()),  # AUTH_UPDATE_ACL
    3008: (CLUSTER, (UPDATE,), ()),  # AUTH_DELETE_ACL
    3009: (CLUSTER, (GET,), ()),  # AUTH_GET_ACL
    3010: (CLUSTER, (GET,), ()),  # AUTH_LIST_ACL
    200050: (UNKNOWN, (SUB,), (("consumerGroup", GROUP), ("topic", TOPIC))),  # POP_MESSAGE
    200051: (UNKNOWN, (SUB,), (("consumerGroup", GROUP), ("topic", TOPIC))),  # ACK_MESSAGE
    200052: (UNKNOWN, (SUB,), (("topic", TOPIC), ("consumerGroup", GROUP))),  # PEEK_MESSAGE
    200053: (UNKNOWN, (SUB,), (("consumerGroup", GROUP), ("topic", TOPIC))),  # CHANGE_MESSAGE_INVISIBLETIME
    200054: (UNKNOWN, (SUB,), (("consumerGroup", GROUP), ("topic", TOPIC))),  # NOTIFICATION
    200055: (UNKNOWN, (GET,), (("consumerGroup", GROUP), ("topic", TOPIC))),  # POLLING_INFO
}

# rmqpy's additions (see the module docstring): Cluster-wide admin codes Java leaves unchecked
RMQPY_EXTRA: dict[int, tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]]] = {
    25: (CLUSTER, (UPDATE,), ()),  # UPDATE_BROKER_CONFIG
    200: (CLUSTER, (UPDATE,), ()),  # UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
    225: (CLUSTER, (UPDATE,), ()),  # UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST
    50: (CLUSTER, (UPDATE,), ()),  # UPDATE_AND_CREATE_ACL_CONFIG
    51: (CLUSTER, (UPDATE,), ()),  # DELETE_ACL_CONFIG
    52: (CLUSTER, (GET,), ()),  # GET_BROKER_CLUSTER_ACL_INFO
    53: (CLUSTER, (UPDATE,), ()),  # UPDATE_GLOBAL_WHITE_ADDRS_CONFIG
    54: (CLUSTER, (GET,), ()),  # GET_BROKER_CLUSTER_ACL_CONFIG
}

SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE = 10, 310, 320
SEND_REPLY_MESSAGE, SEND_REPLY_MESSAGE_V2 = 324, 325
PULL_MESSAGE, LITE_PULL_MESSAGE = 11, 361
GET_ROUTEINFO_BY_TOPIC, RECALL_MESSAGE, END_TRANSACTION = 105, 370, 37
CONSUMER_SEND_MSG_BACK, QUERY_MESSAGE, HEART_BEAT, UNREGISTER_CLIENT = 36, 12, 34, 35
GET_CONSUMER_LIST_BY_GROUP, QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET = 38, 14, 15
LOCK_BATCH_MQ, UNLOCK_BATCH_MQ = 41, 42


def needs(request: RemotingCommand, cluster: str) -> list[Need]:
    """What ``request`` needs, in Java's order (the first refused one is answered).

    Raises ValueError for a body that cannot be read (Java: "parse authorization context error.")."""
    ext = request.ext_fields or {}
    if not ext:
        return []
    code = request.code
    out: list[Need] = []

    def add(resource: Resource, *actions: str) -> None:
        out.append(Need(resource, actions))

    def send(topic: str | None, group: str | None) -> None:
        if is_retry_topic(topic):
            add(Resource.group(group if group and group.strip() else topic), SUB)
        else:
            add(Resource.topic(topic), PUB)

    def topic_and_group(topic: str | None, group: str | None, *actions: str) -> None:
        if not is_retry_topic(topic):
            add(Resource.topic(topic), *actions)
        add(Resource.group(group), *actions)

    if code == GET_ROUTEINFO_BY_TOPIC:
        topic = ext.get("topic")
        if is_retry_topic(topic):
            add(Resource.group(topic), SUB, GET)
        else:
            add(Resource.topic(topic), PUB, SUB, GET)
    elif code in (SEND_MESSAGE, SEND_REPLY_MESSAGE):
        send(ext.get("topic"), ext.get("group"))
    elif code in (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, SEND_REPLY_MESSAGE_V2):
        send(ext.get("b"), ext.get("a"))
    elif code == RECALL_MESSAGE:
        add(Resource.topic(ext.get("topic")), PUB)
    elif code == END_TRANSACTION:
        if (ext.get("topic") or "").strip():
            add(Resource.topic(ext["topic"]), PUB)
    elif code == CONSUMER_SEND_MSG_BACK:
        add(Resource.group(ext.get("group")), SUB)
    elif code in (PULL_MESSAGE, LITE_PULL_MESSAGE):
        topic_and_group(ext.get("topic"), ext.get("consumerGroup"), SUB)
    elif code == QUERY_MESSAGE:
        add(Resource.topic(ext.get("topic")), SUB, GET)
    elif code == HEART_BEAT:
        heartbeat = HeartbeatData.decode(request.body or b"{}")
        for consumer in heartbeat.consumerDataSet:
            add(Resource.group(consumer.groupName), SUB)
            for sub in consumer.subscriptionDataSet:
                if not is_retry_topic(sub.topic):
                    add(Resource.topic(sub.topic), SUB)
    elif code == UNREGISTER_CLIENT:
        if (ext.get("consumerGroup") or "").strip():
            add(Resource.group(ext["consumerGroup"]), SUB)
    elif code == GET_CONSUMER_LIST_BY_GROUP:
        add(Resource.group(ext.get("consumerGroup")), SUB, GET)
    elif code == QUERY_CONSUMER_OFFSET:
        topic_and_group(ext.get("topic"), ext.get("consumerGroup"), SUB, GET)
    elif code == UPDATE_CONSUMER_OFFSET:
        topic_and_group(ext.get("topic"), ext.get("consumerGroup"), SUB, UPDATE)
    elif code in (LOCK_BATCH_MQ, UNLOCK_BATCH_MQ):
        body = LockBatchRequestBody.decode(request.body)
        add(Resource.group(body.consumerGroup), SUB)
        for topic, _broker, _queue in body.mqSet:
            if not is_retry_topic(topic):
                add(Resource.topic(topic), SUB)
    else:
        spec = ANNOTATED.get(code) or RMQPY_EXTRA.get(code)
        if spec is not None:
            out.extend(_annotated(spec, ext, cluster))
    return out


def _annotated(spec: tuple[str, tuple[str, ...], tuple[tuple[str, ...], ...]], ext: dict[str, str],
               cluster: str) -> list[Need]:
    """``buildContextByAnnotation``."""
    rtype, actions, fields = spec
    out = []
    for name, ftype, *splitter in fields:
        value = ext.get(name)
        if value is None:
            continue
        values = [v for v in value.split(splitter[0]) if v] if splitter else [value]
        for item in values:
            if ftype == TOPIC and is_retry_topic(item):
                out.append(Need(Resource.group(item), actions))
            else:
                out.append(Need(Resource(ftype, item, "LITERAL"), actions))
    if not out and rtype == CLUSTER:
        out.append(Need(Resource.cluster(cluster), actions))
    return out
