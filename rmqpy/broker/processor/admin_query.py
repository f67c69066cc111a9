"""AdminBrokerProcessor, one family of its requests: message and consume-queue queries."""
from __future__ import annotations

from typing import Any

from rmqpy.broker.processor.admin_base import AdminBase
from rmqpy.broker.validation import group_sys_flag
from rmqpy.protocol import fastjson
from rmqpy.protocol.bodies import admin as admin_bodies
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import ConsumeMessageDirectlyResultRequestHeader, QueryConsumeQueueRequestHeader
from rmqpy.remoting.channel import Channel


class MessageQueryAdmin(AdminBase):
    def query_consume_queue(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
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
        units = cq.iter_units_in_file(h.index, h.count)
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

    def consume_message_directly(self, channel: Channel, request: RemotingCommand) -> Any:
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
                ext["groupSysFlag"] = str(group_sys_flag(sgc.extra))
        if h.msgId:
            from rmqpy.protocol.message import decode_offset_msg_id
            _, offset = decode_offset_msg_id(h.msgId)
            data = b.message_store.select_one_message_by_offset(offset)
            if data is None:
                raise ValueError(f"no message at commit log offset {offset}")
            request.body = bytes(data)
        return self.call_consumer(RequestCode.CONSUME_MESSAGE_DIRECTLY, request, h.consumerGroup, h.clientId or "")
