"""SendMessageProcessor: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320).

Checks and answers follow ``AbstractSendMessageProcessor.msgCheck`` and
``SendMessageProcessor`` of RocketMQ 4.9: same response codes and remarks, replies that
always carry msgId (the offsetMsgId), queueId, queueOffset and the MSG_REGION/TRACE_ON
extFields. A message is stored as the broker of its producer's generation stores it: from a 4.9
client without WAIT, from a 5.x client with WAIT, MSG_REGION and TRACE_ON (docs/compatibility.md).
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Sequence

from twisted.internet import defer

from rmqpy.broker.timer import TIMER_TOPIC
from rmqpy.broker.topic import NOT_ALLOWED_SEND_TOPICS, RETRY_GROUP_TOPIC_PREFIX, dlq_topic, topic_config_string, validate_topic
from rmqpy.broker.validation import bad_parameter_code
from rmqpy.common.faq import suggest_todo
from rmqpy.protocol import sysflag as SF
from rmqpy.protocol.bodies.topic import PERM_READ, PERM_WRITE
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RPC_RESPONSE, RemotingCommand
from rmqpy.protocol.headers.broker import SEND_HEADER, SEND_HEADER_V2, SendMessageRequestHeader
from rmqpy.protocol.message import (
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    MessageExtBatch,
    MessageExtBrokerInner,
    properties_to_string,
    string_to_properties,
)
from rmqpy.protocol.priority import PROPERTY_PRIORITY, message_type, priority_of
from rmqpy.protocol.recall import RecallHandle
from rmqpy.remoting.channel import Channel
from rmqpy.remoting.ratelimit import RateLimitedLogger
from rmqpy.store.message_store import PutMessageStatus
from rmqpy.store.space import disk_util

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker, SendMessageHook

_PUT_OK = PutMessageStatus.PUT_OK

DLQ_NUMS_PER_GROUP = 1
PROPERTY_MSG_REGION = "MSG_REGION"
PROPERTY_TRACE_SWITCH = "TRACE_ON"


#: put statuses answered with the message's coordinates (msgId, queueId, queueOffset)
_OK_CODES = {"PUT_OK": int(ResponseCode.SUCCESS), "FLUSH_DISK_TIMEOUT": int(ResponseCode.FLUSH_DISK_TIMEOUT),
             "FLUSH_SLAVE_TIMEOUT": int(ResponseCode.FLUSH_SLAVE_TIMEOUT),
             "SLAVE_NOT_AVAILABLE": int(ResponseCode.SLAVE_NOT_AVAILABLE)}


#: topic names validate_topic has passed (it depends on the name alone), so a send checks a set
_valid_topics: set[str] = set()
_VALID_TOPICS_MAX = 65536


#: the send codes whose header has the long keys; the others' (V2, batch, reply V2) has a..n
_LONG_KEY_CODES = frozenset((int(RequestCode.SEND_MESSAGE), int(RequestCode.SEND_REPLY_MESSAGE)))


def decode_send_header(request: RemotingCommand) -> SendMessageRequestHeader:
    """The send header of a send or reply request (both key sets), from the precompiled schemas:
    :class:`HeaderError` for a missing or bad field, as the header's declared decode refuses it."""
    schema = SEND_HEADER if request.code in _LONG_KEY_CODES else SEND_HEADER_V2
    return schema.decode(request.ext_fields or {})


def recall_handle(props: dict[str, str], broker_name: str) -> str | None:
    """5.3.3's ``attachRecallHandle``: the handle of a stored timer message (its TIMER_OUT_MS plus one,
    the real topic, its UNIQ_KEY), none for another message or one bound for a retry topic. Given whether
    or not recalls are enabled (``recallMessageEnable``, false by default), as Java gives it."""
    timestamp, real_topic = props.get("TIMER_OUT_MS"), props.get(PROPERTY_REAL_TOPIC)
    if timestamp is None or real_topic is None or real_topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    try:
        out_ms = int(timestamp)
    except ValueError:
        return None
    return RecallHandle(real_topic, broker_name, str(out_ms + 1),
                        props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or "null").encode()


class SendMessageProcessor:
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped
    codes = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)

    def __init__(self, broker: "Broker") -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker
        self.random = random.Random()
        self._fast_failure = broker.fast_failure
        self.send_message_hooks: Sequence[SendMessageHook] = ()  # Java registerSendMessageHook

    def register_send_message_hook(self, hooks: Sequence[SendMessageHook]) -> None:
        self.send_message_hooks = hooks

    # ------------------------------------------------------------------ entry
    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        busy = self._fast_failure.check(request, channel.read_at)  # SYSTEM_BUSY when the send waited too long (Java BrokerFastFailure)
        if busy is not None:
            return busy
        header = decode_send_header(request)
        if request.code == RequestCode.SEND_BATCH_MESSAGE or header.batch:
            result = self.send_batch_message(channel, request, header)
        else:
            result = self.send_message(channel, request, header)
        for hook in self.send_message_hooks:
            if isinstance(result, RemotingCommand):
                hook.send_message_after(result, request, header.topic)
            else:
                result.addCallback(hook.send_message_after, request, header.topic)
        return result

    # ------------------------------------------------------------------ checks (also the reply path's)
    def response(self, request: RemotingCommand, code: int, remark: str | None) -> RemotingCommand:
        """The answer to a send with ``code``, carrying the MSG_REGION and TRACE_ON extFields
        that every Java send answer carries."""
        bc = self.broker.broker_config
        return request.response(code, remark, ext_fields={
            PROPERTY_MSG_REGION: bc.regionId, PROPERTY_TRACE_SWITCH: "true" if bc.traceOn else "false"})

    def pre_send(self, channel: Channel, request: RemotingCommand, header: SendMessageRequestHeader
                 ) -> RemotingCommand | None:
        """None when the request may go on; else the error response (``preSend``+``msgCheck``)."""
        b = self.broker
        bc = b.broker_config
        start = bc.startAcceptSendRequestTimeStamp
        if start > 0 and b.now_ms() < start:  # (the clock is never before 0)
            return self.response(request, ResponseCode.SYSTEM_ERROR, f"broker unable to service, until {start}")
        topic = header.topic
        if not bc.brokerPermission & PERM_WRITE and b.topic_config_manager.is_order_topic(topic):
            return self.response(request, ResponseCode.NO_PERMISSION,
                                  f"the broker[{bc.brokerIP1}] sending message is forbidden")
        if topic not in _valid_topics:
            bad = validate_topic(topic)
            if bad is not None:
                return self.response(request, bad_parameter_code(request.version), bad)
            if len(_valid_topics) >= _VALID_TOPICS_MAX:
                _valid_topics.clear()
            _valid_topics.add(topic)
        if topic in NOT_ALLOWED_SEND_TOPICS:
            return self.response(request, ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        tcm = b.topic_config_manager
        tc = tcm.select(topic)
        if tc is None:
            sys_flag = 0
            if header.unitMode:
                sys_flag = 2 if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else 1
            self.log.warn("the topic {t} not exist, producer: {p}", t=topic, p=channel.remote_address)
            tc = tcm.create_topic_in_send_message_method(topic, header.defaultTopic, channel.remote_address,
                                                         header.defaultTopicQueueNums, sys_flag)
            if tc is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                tc = tcm.create_topic_in_send_message_back_method(topic, 1, PERM_WRITE | PERM_READ, sys_flag)
            if tc is None:
                return self.response(request, ResponseCode.TOPIC_NOT_EXIST,
                                      f"topic[{topic}] not exist, apply first please!" + suggest_todo())
        valid = max(tc.writeQueueNums, tc.readQueueNums)
        if header.queueId >= valid:
            info = (f"request queueId[{header.queueId}] is illegal, "
                    f"{topic_config_string(tc, request.version >= MQVersion.V5_0_0)} "
                    f"Producer: {channel.remote_address}")
            self.log.warn("{text}", text=info)
            return self.response(request, bad_parameter_code(request.version), info)
        return None

    def select_queue_id(self, header: SendMessageRequestHeader) -> int:
        """The header's queue, or a random one of the topic's write queues when it names none (< 0)."""
        if header.queueId >= 0:
            return header.queueId
        tc = self.broker.topic_config_manager.select(header.topic)
        return self.random.randrange(99999999) % max(1, tc.writeQueueNums if tc else 1)

    def born_host(self, channel: Channel) -> tuple[str, int]:
        """The producer's address as a message stores it (loopback when the channel has none)."""
        return (channel.remote_host or "127.0.0.1", channel.remote_port)

    # ------------------------------------------------------------------ single
    def send_message(self, channel: Channel, request: RemotingCommand, header: SendMessageRequestHeader) -> Any:
        error = self.pre_send(channel, request, header)
        if error is not None:
            return error
        b = self.broker
        topic = header.topic
        tc = b.topic_config_manager.select(topic)
        queue_id = header.queueId
        if queue_id < 0:
            queue_id = self.select_queue_id(header)
        store_topic, store_queue_id = topic, queue_id
        properties = header.properties
        # retry topic: group must exist; too many reconsumes go to the DLQ
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            group = topic[len(RETRY_GROUP_TOPIC_PREFIX):]
            sgc = b.subscription_group_manager.find(group)
            if sgc is None:
                return self.response(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                      f"subscription group not exist, {group} " + suggest_todo())
            max_reconsume = sgc.retryMaxTimes
            if request.version >= MQVersion.V3_4_9 and header.maxReconsumeTimes is not None:
                max_reconsume = header.maxReconsumeTimes
            if (header.reconsumeTimes or 0) >= max_reconsume:
                store_topic = dlq_topic(group)
                tc = b.topic_config_manager.create_topic_in_send_message_back_method(
                    store_topic, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ, 0)
                store_queue_id = self.random.randrange(99999999) % DLQ_NUMS_PER_GROUP
                header.properties = properties = _without(properties, PROPERTY_DELAY_TIME_LEVEL)
        sys_flag = header.sysFlag
        if tc is not None and tc.topicFilterType == "MULTI_TAG":
            sys_flag |= SF.MULTI_TAGS_FLAG
        props = string_to_properties(properties)
        if PROPERTY_PRIORITY in props:  # 5.4.0: a PRIORITY message's queue is its priority (capped)
            priority = priority_of(props)
            if priority >= 0 and tc is not None and message_type(props) == "PRIORITY":
                queue_id = store_queue_id = min(priority, max(tc.writeQueueNums - 1, 0))
            elif priority >= 0:  # any other type loses the property
                del props[PROPERTY_PRIORITY]
        if request.version >= MQVersion.V5_0_0:  # stored as the 5.x broker stores it (_add_5x_properties)
            _add_5x_properties(props, b.broker_config)
            properties_string = properties_to_string(props)
        else:
            props[PROPERTY_CLUSTER] = b.broker_config.brokerClusterName
            # 4.9: "WAIT=true" is not stored (saves 9 bytes a message); the store still needs to see it
            wait = props.pop(PROPERTY_WAIT_STORE_MSG_OK, None)
            properties_string = properties_to_string(props)
            if wait is not None:
                props[PROPERTY_WAIT_STORE_MSG_OK] = wait
        msg = MessageExtBrokerInner(store_topic, store_queue_id, request.body or b"", header.flag, props,
                                    properties_string, sys_flag, header.bornTimestamp,
                                    (channel.remote_host or "127.0.0.1", channel.remote_port),  # born_host
                                    b.store_host, header.reconsumeTimes or 0)

        prepared = props.get(PROPERTY_TRANSACTION_PREPARED)
        if prepared is not None and prepared.lower() == "true":
            if b.broker_config.rejectTransactionMessage:
                return self.response(request, ResponseCode.NO_PERMISSION,
                                      f"the broker[{b.broker_config.brokerIP1}] sending transaction message is forbidden")
            d = b.prepare_transaction_message(msg)
        else:
            refused = b.timer_message_service.transform(msg)  # 5.x TIMER_* properties (broker/timer.py)
            if refused is not None:
                return self.response(request, *refused)
            store = b.message_store
            # the answer right away unless the store must wait for a flush (SYNC_FLUSH)
            put = store.put_message_now(msg)
            if not isinstance(put, defer.Deferred):
                return self._handle_put_result(put, request, msg, queue_id)
            d = put
        return d.addCallback(self._handle_put_result, request, msg, queue_id)

    def _handle_put_result(self, result: Any, request: RemotingCommand, msg: Any, queue_id: int) -> RemotingCommand:
        if result is None:
            return self.response(request, ResponseCode.SYSTEM_ERROR, "store putMessage return null")
        ps = result.put_message_status
        status = "PUT_OK" if ps is _PUT_OK else ps.name
        ar = result.append_message_result
        code = _OK_CODES.get(status)
        if code is not None and ar is not None:
            # response() + SendMessageResponseHeader(msgId, queueId, queueOffset).encode(), inline
            bc = self.broker.broker_config
            fields = {PROPERTY_MSG_REGION: bc.regionId, PROPERTY_TRACE_SWITCH: "true" if bc.traceOn else "false",
                      "msgId": str(ar.msg_id), "queueId": str(int(queue_id)), "queueOffset": str(int(ar.logics_offset))}
            if request.version >= MQVersion.V5_0_0 and isinstance(msg, MessageExtBrokerInner):
                # 5.3.3 answers a single send with its UNIQ_KEY as transactionId (4.9.7 does not): Apache's
                # proxy hands it to a gRPC producer, whose EndTransaction is refused without it
                uniq = (msg.properties or {}).get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                if uniq:
                    fields["transactionId"] = uniq
            if isinstance(msg, MessageExtBrokerInner) and msg.topic == TIMER_TOPIC:  # a single send, parked
                handle = recall_handle(msg.get_properties(), bc.brokerName)
                if handle is not None:
                    fields["recallHandle"] = handle
            return RemotingCommand(code=code, opaque=request.opaque, flag=RPC_RESPONSE, remark=None, ext_fields=fields,
                                   body=None, serialize_type=request.serialize_type)
        max_size = self.broker.store_config.maxMessageSize
        failures = {
            "CREATE_MAPEDFILE_FAILED": (ResponseCode.SYSTEM_ERROR,
                                        "create mapped file failed, server is busy or broken."),
            "MESSAGE_ILLEGAL": (ResponseCode.MESSAGE_ILLEGAL,
                                f"the message is illegal, maybe msg body or properties length not matched. "
                                f"msg body length limit {max_size}B, msg properties length limit 32KB."),
            "SERVICE_NOT_AVAILABLE": (ResponseCode.SERVICE_NOT_AVAILABLE,
                                      "service not available now. It may be caused by one of the following "
                                      "reasons: the broker's disk is full [" + disk_util(self.broker.store_config) +
                                      "], messages are put to the slave, message store has been shut down, etc."),
            "OS_PAGECACHE_BUSY": (ResponseCode.SYSTEM_ERROR, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
            "UNKNOWN_ERROR": (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
            "IN_SYNC_REPLICAS_NOT_ENOUGH": (ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough"),
        }
        failures["PROPERTIES_SIZE_EXCEEDED"] = failures["MESSAGE_ILLEGAL"]
        code, remark = failures.get(status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
        return self.response(request, code, remark)

    # ------------------------------------------------------------------ batch
    def send_batch_message(self, channel: Channel, request: RemotingCommand, header: SendMessageRequestHeader) -> Any:
        error = self.pre_send(channel, request, header)
        if error is not None:
            return error
        b = self.broker
        tc = b.topic_config_manager.select(header.topic)
        queue_id = self.select_queue_id(header)
        if len(header.topic) > 127:
            return self.response(request, ResponseCode.MESSAGE_ILLEGAL,
                                  f"message topic length too long {len(header.topic)}")
        if header.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return self.response(request, ResponseCode.MESSAGE_ILLEGAL,
                                  f"batch request does not support retry group {header.topic}")
        sys_flag = header.sysFlag
        if tc is not None and tc.topicFilterType == "MULTI_TAG":
            sys_flag |= SF.MULTI_TAGS_FLAG
        props = string_to_properties(header.properties)
        # Both Java brokers (4.9.7, 5.3.3) append the batch's own properties to each of its messages; the
        # 5.x client gives the batch a UNIQ_KEY of its own, which then hides each message's (all consumed
        # with one msgId: apache/rocketmq #9416, fixed after 5.3.3 by not appending at all). rmqpy appends
        # the rest and keeps each message's own UNIQ_KEY.
        props.pop(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, None)
        if request.version >= MQVersion.V5_0_0:
            _add_5x_properties(props, b.broker_config)
        else:
            props[PROPERTY_CLUSTER] = b.broker_config.brokerClusterName
        batch = MessageExtBatch(topic=header.topic, queue_id=queue_id, body=request.body or b"",
                                flag=header.flag, properties_string=properties_to_string(props),
                                sys_flag=sys_flag, born_timestamp=header.bornTimestamp,
                                born_host=self.born_host(channel), store_host=b.store_host,
                                reconsume_times=header.reconsumeTimes or 0)
        put = b.message_store.put_messages_now(batch)
        if not isinstance(put, defer.Deferred):
            return self._handle_put_result(put, request, batch, queue_id)
        return put.addCallback(self._handle_put_result, request, batch, queue_id)


def _add_5x_properties(props: dict[str, str], bc: Any) -> None:
    """What the 5.3.3 broker stores with a 5.x client's message besides the client's properties (WAIT
    kept): MSG_REGION and TRACE_ON (``AbstractSendMessageProcessor.buildMsgContext``, which 5.x runs for
    every send and 4.9.7 only with a send hook registered), then CLUSTER. The 5.x client's consume trace
    hook reads both (a ``TRACE_ON=false`` message is not traced)."""
    props[PROPERTY_MSG_REGION] = bc.regionId
    props[PROPERTY_TRACE_SWITCH] = "true" if bc.traceOn else "false"
    props[PROPERTY_CLUSTER] = bc.brokerClusterName


def _without(properties: str | None, key: str) -> str | None:
    if not properties:
        return properties
    props = string_to_properties(properties)
    props.pop(key, None)
    return properties_to_string(props)

