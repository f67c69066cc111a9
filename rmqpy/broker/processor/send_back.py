"""ConsumerSendMsgBackProcessor: CONSUMER_SEND_MSG_BACK (36).

A consumer that failed to consume a message asks the broker to deliver it again later:
the broker reads the stored record at ``offset`` and writes a copy to ``%RETRY%<group>``
with a delay level (``3 + reconsumeTimes`` when the client says 0), or to ``%DLQ%<group>``
once ``reconsumeTimes`` reached the group's (or the request's) maximum, or when the client
asks for a negative level. Codes and remarks follow RocketMQ 4.9's
``SendMessageProcessor.consumerSendMsgBack``.
"""
from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Sequence

from rmqpy.broker.processor.send import DLQ_NUMS_PER_GROUP
from rmqpy.broker.topic import dlq_topic, retry_topic
from rmqpy.broker.validation import is_group_auto_creatable
from rmqpy.common.faq import suggest_todo
from rmqpy.protocol.bodies.topic import PERM_READ, PERM_WRITE
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import ConsumerSendMsgBackRequestHeader
from rmqpy.protocol.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
    MessageExtBrokerInner,
    properties_to_string,
    tags_string_to_tags_code,
)
from rmqpy.remoting.channel import Channel
from rmqpy.remoting.ratelimit import RateLimitedLogger

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker, SendBackHook

SUBSCRIPTION_GROUP_NOT_EXIST_URL = "http://rocketmq.apache.org/docs/faq/"
TOPIC_SYS_FLAG_UNIT_SUB = 2


class ConsumerSendMsgBackProcessor:
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped
    codes = (RequestCode.CONSUMER_SEND_MSG_BACK,)

    def __init__(self, broker: "Broker") -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker
        self.random = random.Random()
        self.send_back_hooks: Sequence["SendBackHook"] = ()

    def register_send_back_hook(self, hooks: Sequence["SendBackHook"]) -> None:
        self.send_back_hooks = hooks

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        b = self.broker
        busy = b.fast_failure.check(request, channel.read_at)
        if busy is not None:  # Java runs send-back in the send pool: it fails fast the same way
            return busy
        bc = b.broker_config
        h = request.decode_header(ConsumerSendMsgBackRequestHeader)
        # the group names %RETRY%<group> and %DLQ%<group>, directories of the store: a name 5.3.3
        # would not auto-create is refused even when a config of that name exists (rmqpy)
        sgc = b.subscription_group_manager.find(h.group) if is_group_auto_creatable(h.group) else None
        if sgc is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    f"subscription group not exist, {h.group} " + suggest_todo())
        if not bc.brokerPermission & PERM_WRITE:
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"the broker[{bc.brokerIP1}] sending message is forbidden")
        if sgc.retryQueueNums <= 0:
            return request.response(ResponseCode.SUCCESS, None)

        new_topic = retry_topic(h.group)
        queue_id = self.random.randrange(99999999) % sgc.retryQueueNums
        topic_sys_flag = TOPIC_SYS_FLAG_UNIT_SUB if h.unitMode else 0
        tcm = b.topic_config_manager
        tc = tcm.create_topic_in_send_message_back_method(new_topic, sgc.retryQueueNums, PERM_WRITE | PERM_READ,
                                                          topic_sys_flag)
        if tc is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"topic[{new_topic}] not exist")
        if not tc.perm & PERM_WRITE:
            return request.response(ResponseCode.NO_PERMISSION,
                                    f"the topic[{new_topic}] sending message is forbidden")
        msg = b.message_store.look_message_by_offset(h.offset)
        if msg is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")

        props = dict(msg.properties)
        if props.get(PROPERTY_RETRY_TOPIC) is None:
            props[PROPERTY_RETRY_TOPIC] = msg.topic
        props[PROPERTY_WAIT_STORE_MSG_OK] = "false"

        delay_level = h.delayLevel or 0
        max_reconsume = sgc.retryMaxTimes
        if request.version >= MQVersion.V3_4_9 and h.maxReconsumeTimes is not None:
            max_reconsume = h.maxReconsumeTimes
        if msg.reconsume_times >= max_reconsume or delay_level < 0:
            new_topic = dlq_topic(h.group)
            queue_id = self.random.randrange(99999999) % DLQ_NUMS_PER_GROUP
            tc = tcm.create_topic_in_send_message_back_method(new_topic, DLQ_NUMS_PER_GROUP,
                                                              PERM_WRITE | PERM_READ, 0)
            if tc is None:
                return request.response(ResponseCode.SYSTEM_ERROR, f"topic[{new_topic}] not exist")
            for hook in self.send_back_hooks:
                hook.send_to_dlq(h.group, h.originTopic or msg.topic)
            props[PROPERTY_DELAY_TIME_LEVEL] = "0"
        else:
            if delay_level == 0:
                delay_level = 3 + msg.reconsume_times
            props[PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)

        origin = props.get(PROPERTY_ORIGIN_MESSAGE_ID)
        props[PROPERTY_ORIGIN_MESSAGE_ID] = origin if origin and origin.strip() else msg.msg_id
        inner = MessageExtBrokerInner(
            topic=new_topic, queue_id=queue_id, body=msg.body or b"", flag=msg.flag, properties=props,
            properties_string=properties_to_string(props), sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=msg.store_host,
            reconsume_times=msg.reconsume_times + 1, tags_code=tags_string_to_tags_code(props.get("TAGS")))
        d = b.message_store.put_message(inner)
        return d.addCallback(self._put_done, request)

    def _put_done(self, result: Any, request: RemotingCommand) -> RemotingCommand:
        if result is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "putMessageResult is null")
        status = result.put_message_status.name
        if status == "PUT_OK":
            return request.response(ResponseCode.SUCCESS, None)
        return request.response(ResponseCode.SYSTEM_ERROR, status)
