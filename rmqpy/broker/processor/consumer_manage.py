"""ConsumerManageProcessor: GET_CONSUMER_LIST_BY_GROUP (38), QUERY_CONSUMER_OFFSET (14),
UPDATE_CONSUMER_OFFSET (15); and the store-offset requests GET_MAX_OFFSET (30),
GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32)
(answered by AdminBrokerProcessor in Java)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rmqpy.broker.topic import RETRY_GROUP_TOPIC_PREFIX
from rmqpy.broker.validation import is_group_auto_creatable, validate_topic
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import (
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmqpy.remoting.channel import Channel
from rmqpy.store.time_search import Boundary

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker


class ConsumerManageProcessor:
    codes = (RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.QUERY_CONSUMER_OFFSET,
             RequestCode.UPDATE_CONSUMER_OFFSET)

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        if request.code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
            h = request.decode_header(GetConsumerListByGroupRequestHeader)
            self.broker.queue_handover.member_list_read(channel.remote_address, h.consumerGroup)
            info = self.broker.consumer_manager.get(h.consumerGroup)
            if info is not None and info.channels:
                return request.response(ResponseCode.SUCCESS, None, body=info.consumer_list_body())
            return request.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumerGroup}")
        if request.code == RequestCode.UPDATE_CONSUMER_OFFSET:
            uh = request.decode_header(UpdateConsumerOffsetRequestHeader)
            # names no group or topic can have (5.3.3 answers these for unknown ones): the offset
            # table's "topic@group" keys stay unambiguous and hold no junk
            if not is_group_auto_creatable(uh.consumerGroup):
                return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                        f"Group {uh.consumerGroup} not exist!")
            if validate_topic(uh.topic) is not None:
                return request.response(ResponseCode.TOPIC_NOT_EXIST, f"Topic {uh.topic} not exist!")
            self.broker.consumer_offset_manager.commit_offset(channel.remote_address, uh.consumerGroup, uh.topic,
                                                              uh.queueId, uh.commitOffset)
            self.broker.queue_handover.offset_updated(channel.remote_address, uh.consumerGroup, uh.topic,
                                                      int(uh.queueId))
            return request.response(ResponseCode.SUCCESS, None)
        return self.query_after_handover(channel, request)

    def query_after_handover(self, channel: Channel, request: RemotingCommand) -> Any:
        """QUERY_CONSUMER_OFFSET, answered once the other members holding the queue have let go of it
        (rmqpy/broker/handover.py says why and how)."""
        h = request.decode_header(QueryConsumerOffsetRequestHeader)
        return self.broker.queue_handover.after_handover(channel.remote_address, h.consumerGroup, h.topic,
                                                         int(h.queueId), lambda: self.query_consumer_offset(request))

    def query_consumer_offset(self, request: RemotingCommand) -> RemotingCommand:
        """The committed offset of (group, topic, queue); for a group with none, 0 or QUERY_NOT_FOUND.

        QUERY_NOT_FOUND makes a push consumer (4.9 and 5.x alike, RebalancePushImpl.computePullFromWhere)
        start a non-retry queue at the max offset it reads in a *second* request (CONSUME_FROM_LAST_OFFSET,
        and CONSUME_FROM_TIMESTAMP on retry queues): whatever arrives between the two requests is skipped.
        0 makes it start at the first message. So, in this order:

        1. a committed offset: that offset;
        2. ``setZeroIfNotFound=false`` (5.x brokers forwarding a static-topic query ask "is there a real
           offset?"): QUERY_NOT_FOUND, as Java 5.3.3 answers;
        3. a queue that never had a message (max offset 0): 0, for every client. Nothing is there to
           replay and nothing can be skipped. Java 4.9.7 answers 0 here too; Java 5.x answers
           QUERY_NOT_FOUND and so skips what arrives in the window above (measured with 4.9.8 and 5.3.3
           clients against the 5.3.3 broker). A ``%RETRY%`` queue of a group that does not consume from a
           timestamp is left to rule 4, where no window opens (:meth:`_no_window`);
        4. otherwise the rule of the client's generation (``version``, MQVersion ordinal): from V5_0_0
           (413) on, 5.3.3's: 0 while the queue starts at 0 and its message 0 is still in memory
           (``checkInMemByConsumeOffset(topic, queueId, 0, 1)``), else QUERY_NOT_FOUND; older clients,
           4.9.7's: 0 while the queue starts at 0 and message 0 is not swapped out to disk
           (``!checkInDiskByConsumeOffset(topic, queueId, 0)``). The two differ only where no unit 0
           exists although the queue starts at 0; case 3 covers the usual one (an empty queue).
        """
        b = self.broker
        h = request.decode_header(QueryConsumerOffsetRequestHeader)
        offset = b.consumer_offset_manager.query_offset(h.consumerGroup, h.topic, h.queueId)
        if offset >= 0:
            return request.response(ResponseCode.SUCCESS, None, header=QueryConsumerOffsetResponseHeader(offset))
        if h.setZeroIfNotFound is False:
            return request.response(ResponseCode.QUERY_NOT_FOUND,
                                    "Not found, do not set to zero, maybe this group boot first")
        store = b.message_store
        if store.get_max_offset_in_queue(h.topic, h.queueId) <= 0 and not self._no_window(h.consumerGroup, h.topic):
            return request.response(ResponseCode.SUCCESS, None, header=QueryConsumerOffsetResponseHeader(0))
        min_offset = store.get_min_offset_in_queue(h.topic, h.queueId)
        if request.version >= MQVersion.V5_0_0:
            zero = min_offset <= 0 and self.check_in_mem_by_consume_offset(h.topic, h.queueId, 0)
        else:
            zero = min_offset <= 0 and not self.check_in_disk_by_consume_offset(h.topic, h.queueId, 0)
        if zero:
            return request.response(ResponseCode.SUCCESS, None, header=QueryConsumerOffsetResponseHeader(0))
        return request.response(ResponseCode.QUERY_NOT_FOUND,
                                "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    def _no_window(self, group: str, topic: str) -> bool:
        """Whether a QUERY_NOT_FOUND for this never-used queue opens no skip window, so the generation's
        own rule can answer: true for the ``%RETRY%`` queue of a group that does not consume from a
        timestamp. On not found both clients (4.9.8, 5.3.3 ``RebalancePushImpl.computePullFromWhere``)
        start a retry queue at 0 by themselves, except CONSUME_FROM_TIMESTAMP (the max offset, read
        later), and keep no offset for it, so they commit none. Answered 0, they keep 0 and commit it at
        their next persist or at shutdown, and mqadmin consumerProgress prints a ``%RETRY%group`` row
        the Java 5.3.3 broker does not have, depending only on whether the consumer had learned the
        retry topic's route before it shut down (on a loaded host it had)."""
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return False
        info = self.broker.consumer_manager.get(group)
        return info is not None and info.consume_from_where != "CONSUME_FROM_TIMESTAMP"

    def _memory_window(self) -> float:
        """Bytes from the commit log's end that Java counts as in memory (accessMessageInMemoryMaxRatio
        of physical memory)."""
        from rmqpy.store.message_store import TOTAL_PHYSICAL_MEMORY_SIZE
        return TOTAL_PHYSICAL_MEMORY_SIZE * self.broker.message_store.config.accessMessageInMemoryMaxRatio / 100.0

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, offset: int) -> bool:
        """Java 4.9.7 ``DefaultMessageStore.checkInDiskByConsumeOffset``: a unit at ``offset`` exists and
        its message lies further than the memory window from the commit log's end (false when no unit)."""
        store = self.broker.message_store
        cq = store.find_consume_queue(topic, queue_id, create=False)
        unit = cq.get_unit(offset) if cq is not None else None
        if not unit:
            return False
        return store.get_max_phy_offset() - unit[0] > self._memory_window()

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
        if store.get_commit_log_message(phy, size) is None:
            return False
        return store.get_max_phy_offset() - phy <= self._memory_window()


class StoreOffsetProcessor:
    codes = (RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
             RequestCode.GET_EARLIEST_MSG_STORETIME)

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        store = self.broker.message_store
        code = request.code
        if code == RequestCode.GET_MAX_OFFSET:
            h = request.decode_header(GetMaxOffsetRequestHeader)
            offset = store.get_max_offset_in_queue(h.topic, h.queueId)
            return request.response(ResponseCode.SUCCESS, None, header=OffsetResponseHeader(offset))
        if code == RequestCode.GET_MIN_OFFSET:
            mh = request.decode_header(GetMinOffsetRequestHeader)
            offset = max(0, store.get_min_offset_in_queue(mh.topic, mh.queueId))
            return request.response(ResponseCode.SUCCESS, None, header=OffsetResponseHeader(offset))
        if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            sh = request.decode_header(SearchOffsetRequestHeader)
            # a request without boundaryType (4.x clients) gets LOWER, as from Java 5.3.3
            offset = store.get_offset_in_queue_by_time(sh.topic, sh.queueId, sh.timestamp,
                                                       Boundary.of(sh.boundaryType))
            return request.response(ResponseCode.SUCCESS, None, header=OffsetResponseHeader(offset))
        eh = request.decode_header(GetEarliestMsgStoretimeRequestHeader)
        ts = store.get_earliest_message_time(eh.topic, eh.queueId)
        return request.response(ResponseCode.SUCCESS, None, header=GetEarliestMsgStoretimeResponseHeader(ts))
