"""ConsumerManageProcessor: GET_CONSUMER_LIST_BY_GROUP (38), QUERY_CONSUMER_OFFSET (14),
UPDATE_CONSUMER_OFFSET (15); and the store-offset requests GET_MAX_OFFSET (30),
GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32)
(answered by AdminBrokerProcessor in Java)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.logger import Logger

from rmqpy.broker.validation import is_group_auto_creatable, validate_topic
from rmqpy.protocol.bodies.heartbeat import consumer_list_body
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import (GetConsumerListByGroupRequestHeader,
                                           GetEarliestMsgStoretimeRequestHeader,
                                           GetEarliestMsgStoretimeResponseHeader, GetMaxOffsetRequestHeader,
                                           GetMinOffsetRequestHeader, OffsetResponseHeader,
                                           QueryConsumerOffsetRequestHeader, QueryConsumerOffsetResponseHeader,
                                           SearchOffsetRequestHeader, UpdateConsumerOffsetRequestHeader)

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker


#: a query for a queue this soon after a group change may be one for a queue changing hands (ms): the new
#: member's first rebalance (a fresh JVM) often asks more than a second after it registered
HANDOVER_WINDOW_MS = 10_000
#: the longest such a query waits for the previous owner's commit (ms; the clients wait 5 s for the answer)
HANDOVER_MAX_MS = 2000
#: a member that committed a queue (pull commitOffset or update) this recently was consuming it (ms); a held
#: pull is answered within brokerSuspendMaxTimeMillis (15 s) and the next one carries the commit
ACTIVE_MS = 20_000


@dataclass(eq=False)
class _Handover:
    """A QUERY_CONSUMER_OFFSET waiting for the queue's previous owners (client addresses) to commit it."""
    key: tuple[str, str, int]
    pending: set[str]
    request: RemotingCommand
    deferred: defer.Deferred
    timer: Any = None


class ConsumerManageProcessor:
    log = Logger()
    codes = (RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.QUERY_CONSUMER_OFFSET,
             RequestCode.UPDATE_CONSUMER_OFFSET)

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        # (group, topic, queueId) -> client address -> last commit of any kind / last UPDATE_CONSUMER_OFFSET (ms)
        self.active: dict[tuple[str, str, int], dict[str, int]] = {}
        self.updated: dict[tuple[str, str, int], dict[str, int]] = {}
        self.handovers: list[_Handover] = []
        broker.consumer_offset_manager.listeners.append(self._committed)

    def _committed(self, host: str, group: str, topic: str, queue_id: int) -> None:
        self.active.setdefault((group, topic, queue_id), {})[host] = self.broker.now_ms()

    def process_request(self, channel: Any, request: RemotingCommand) -> Any:
        if request.code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
            h = request.decode_header(GetConsumerListByGroupRequestHeader)
            info = self.broker.consumer_manager.get(h.consumerGroup)
            ids = info.client_ids() if info is not None else []
            if ids:
                return request.response(ResponseCode.SUCCESS, None, body=consumer_list_body(ids))
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
            self._updated(channel.remote_address, uh.consumerGroup, uh.topic, int(uh.queueId))
            return request.response(ResponseCode.SUCCESS, None)
        return self.query_after_handover(channel, request)

    # ------------------------------------------------------------------ queue hand-over
    def _updated(self, host: str, group: str, topic: str, queue_id: int) -> None:
        key = (group, topic, queue_id)
        self.updated.setdefault(key, {})[host] = self.broker.now_ms()
        for waiter in list(self.handovers):
            if waiter.key == key:
                waiter.pending.discard(host)
                if not waiter.pending:
                    self._answer(waiter)

    def _previous_owners(self, channel: Any, group: str, topic: str, queue_id: int) -> set[str]:
        """The other member that was consuming the queue (committed it last, within ACTIVE_MS) if it has not
        sent UPDATE_CONSUMER_OFFSET for it since the group last changed, while that change is recent."""
        b = self.broker
        changed = b.consumer_manager.changed_at.get(group)
        info = b.consumer_manager.get(group)
        now = b.now_ms()
        if changed is None or info is None or info.message_model != "CLUSTERING" or now - changed >= HANDOVER_WINDOW_MS:
            return set()
        key = (group, topic, queue_id)
        active, updated = self.active.get(key, {}), self.updated.get(key, {})
        members = {c.address for c in info.channels.values()} - {channel.remote_address}
        # the owner: the other member that committed the queue last (an owner's pulls carry commits)
        owner = max((h for h in members if h in active), key=active.__getitem__, default=None)
        if owner is None or now - active[owner] >= ACTIVE_MS or updated.get(owner, -1) >= changed:
            return set()
        return {owner}

    def query_after_handover(self, channel: Any, request: RemotingCommand) -> Any:
        """QUERY_CONSUMER_OFFSET, answered once the queue's previous owner has committed it.

        When a group changes, the broker tells every member (NOTIFY_CONSUMER_IDS_CHANGED); a member that
        takes a queue asks for its offset while the member that gives it up commits it (a oneway
        UPDATE_CONSUMER_OFFSET, RebalancePushImpl.removeUnnecessaryMessageQueue). Both follow one round
        trip after the notice, so the query often comes first and reads an older offset: what the
        previous owner consumed since its last commit is consumed twice (Java brokers answer at once and
        have the same race). So within HANDOVER_WINDOW_MS of a change, a query for a queue that another
        member was the last to commit (pulls or updates within ACTIVE_MS), and has not updated since the change,
        waits for that member's UPDATE_CONSUMER_OFFSET, at most HANDOVER_MAX_MS (a member that keeps the
        queue, or left, costs that wait once)."""
        h = request.decode_header(QueryConsumerOffsetRequestHeader)
        pending = self._previous_owners(channel, h.consumerGroup, h.topic, int(h.queueId))
        if not pending:
            return self.query_consumer_offset(request)
        self.log.info("hand-over: offset query of {g} {t} {q} from {c} waits for the commit of {p}",
                      g=h.consumerGroup, t=h.topic, q=h.queueId, c=channel.remote_address, p=sorted(pending))
        waiter = _Handover((h.consumerGroup, h.topic, int(h.queueId)), pending, request, defer.Deferred())
        self.handovers.append(waiter)
        waiter.timer = self.broker.reactor.callLater(HANDOVER_MAX_MS / 1000.0, self._answer, waiter)
        return waiter.deferred

    def _answer(self, waiter: "_Handover") -> None:
        if waiter not in self.handovers:
            return
        self.handovers.remove(waiter)
        if waiter.timer is not None and waiter.timer.active():
            waiter.timer.cancel()
        elif waiter.pending:
            self.log.info("hand-over: no commit of {g} {t} {q} from {p} in time", g=waiter.key[0], t=waiter.key[1],
                          q=waiter.key[2], p=sorted(waiter.pending))
        waiter.deferred.callback(self.query_consumer_offset(waiter.request))

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
           clients against the 5.3.3 broker);
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
        if store.get_max_offset_in_queue(h.topic, h.queueId) <= 0:
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

    def process_request(self, channel: Any, request: RemotingCommand) -> RemotingCommand:
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
            offset = store.get_offset_in_queue_by_time(sh.topic, sh.queueId, sh.timestamp)
            return request.response(ResponseCode.SUCCESS, None, header=OffsetResponseHeader(offset))
        eh = request.decode_header(GetEarliestMsgStoretimeRequestHeader)
        ts = store.get_earliest_message_time(eh.topic, eh.queueId)
        return request.response(ResponseCode.SUCCESS, None, header=GetEarliestMsgStoretimeResponseHeader(ts))
