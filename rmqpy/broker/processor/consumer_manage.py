"""ConsumerManageProcessor: GET_CONSUMER_LIST_BY_GROUP (38), QUERY_CONSUMER_OFFSET (14),
UPDATE_CONSUMER_OFFSET (15); and the store-offset requests GET_MAX_OFFSET (30),
GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32)
(answered by AdminBrokerProcessor in Java)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqpy.protocol.bodies.heartbeat import consumer_list_body
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import (GetConsumerListByGroupRequestHeader,
                                           GetEarliestMsgStoretimeRequestHeader,
                                           GetEarliestMsgStoretimeResponseHeader, GetMaxOffsetRequestHeader,
                                           GetMinOffsetRequestHeader, OffsetResponseHeader,
                                           QueryConsumerOffsetRequestHeader, QueryConsumerOffsetResponseHeader,
                                           SearchOffsetRequestHeader, UpdateConsumerOffsetRequestHeader)

if TYPE_CHECKING:
    from rmqpy.broker.controller import BrokerController


class ConsumerManageProcessor:
    codes = (RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.QUERY_CONSUMER_OFFSET,
             RequestCode.UPDATE_CONSUMER_OFFSET)

    def __init__(self, broker: "BrokerController") -> None:
        self.broker = broker

    def process_request(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        if request.code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
            h = request.decode_header(GetConsumerListByGroupRequestHeader)
            info = self.broker.consumer_manager.get(h.consumerGroup)
            ids = info.client_ids() if info is not None else []
            if ids:
                return request.response(ResponseCode.SUCCESS, None, body=consumer_list_body(ids))
            return request.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumerGroup}")
        if request.code == RequestCode.UPDATE_CONSUMER_OFFSET:
            h = request.decode_header(UpdateConsumerOffsetRequestHeader)
            self.broker.consumer_offset_manager.commit_offset(channel.remote_address, h.consumerGroup, h.topic,
                                                              h.queueId, h.commitOffset)
            return request.response(ResponseCode.SUCCESS, None)
        return self.query_consumer_offset(request)

    def query_consumer_offset(self, request: RemotingCommand) -> RemotingCommand:
        b = self.broker
        h = request.decode_header(QueryConsumerOffsetRequestHeader)
        offset = b.consumer_offset_manager.query_offset(h.consumerGroup, h.topic, h.queueId)
        if offset >= 0:
            return request.response(ResponseCode.SUCCESS, None, header=QueryConsumerOffsetResponseHeader(offset))
        min_offset = b.message_store.get_min_offset_in_queue(h.topic, h.queueId)
        if h.setZeroIfNotFound is False:  # 5.x clients may ask not to get 0
            return request.response(ResponseCode.QUERY_NOT_FOUND,
                                    "Not found, do not set to zero, maybe this group boot first")
        # 5.1.0+ rule (ConsumerManageProcessor.queryConsumerOffset since apache/rocketmq 3949f6938e, ISSUE
        # #5837): 0 only while the queue still starts at 0 *and* its message 0 is there and in memory
        # (DefaultMessageStore.checkInMemByConsumeOffset(topic, queueId, 0, 1)). A queue without message 0
        # (an empty %RETRY% queue, say) answers QUERY_NOT_FOUND, so the client keeps no offset for it and
        # commits none. 4.9 answered 0 there (!checkInDiskByConsumeOffset: true when no unit exists).
        if min_offset <= 0 and self.check_in_mem_by_consume_offset(h.topic, h.queueId, 0):
            return request.response(ResponseCode.SUCCESS, None, header=QueryConsumerOffsetResponseHeader(0))
        return request.response(ResponseCode.QUERY_NOT_FOUND,
                                "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    def check_in_mem_by_consume_offset(self, topic: str, queue_id: int, offset: int) -> bool:
        """Java 5.3.3 ``DefaultMessageStore.checkInMemByConsumeOffset(topic, queueId, offset, 1)``: the
        consume queue has a unit at ``offset``, the commit log still holds its bytes
        (``commitLog.getMessage(pos, size) != null``) and they are in memory. Java asks mincore
        (``MappedByteBuffer.isLoaded0``); here residency is estimated as Java's pull path does
        (within accessMessageInMemoryMaxRatio of physical memory from the commit log's end)."""
        store = self.broker.message_store
        cq = store.find_consume_queue(topic, queue_id, create=False)
        unit = cq.get_unit(offset) if cq is not None else None
        if not unit:
            return False
        phy, size = unit[0], unit[1]
        if store.commit_log.get_data(phy, size) is None:
            return False
        from rmqpy.store.message_store import TOTAL_PHYSICAL_MEMORY_SIZE
        memory = TOTAL_PHYSICAL_MEMORY_SIZE * store.config.accessMessageInMemoryMaxRatio / 100.0
        return store.get_max_phy_offset() - phy <= memory


class StoreOffsetProcessor:
    codes = (RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
             RequestCode.GET_EARLIEST_MSG_STORETIME)

    def __init__(self, broker: "BrokerController") -> None:
        self.broker = broker

    def process_request(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
        store = self.broker.message_store
        code = request.code
        if code == RequestCode.GET_MAX_OFFSET:
            h = request.decode_header(GetMaxOffsetRequestHeader)
            offset = store.get_max_offset_in_queue(h.topic, h.queueId)
            return request.response(ResponseCode.SUCCESS, None, header=OffsetResponseHeader(offset))
        if code == RequestCode.GET_MIN_OFFSET:
            h = request.decode_header(GetMinOffsetRequestHeader)
            offset = max(0, store.get_min_offset_in_queue(h.topic, h.queueId))
            return request.response(ResponseCode.SUCCESS, None, header=OffsetResponseHeader(offset))
        if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            h = request.decode_header(SearchOffsetRequestHeader)
            offset = store.get_offset_in_queue_by_time(h.topic, h.queueId, h.timestamp)
            return request.response(ResponseCode.SUCCESS, None, header=OffsetResponseHeader(offset))
        h = request.decode_header(GetEarliestMsgStoretimeRequestHeader)
        ts = store.get_earliest_message_time(h.topic, h.queueId)
        return request.response(ResponseCode.SUCCESS, None, header=GetEarliestMsgStoretimeResponseHeader(ts))
