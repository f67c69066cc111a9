"""TransactionalMessageService: half messages, their decisions, and the check-back.

A PREPARED message is parked in ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 (REAL_TOPIC/REAL_QID
keep where it belongs). A decision (commit or rollback) is recorded as an *op* record in
``RMQ_SYS_TRANS_OP_HALF_TOPIC`` queue 0, tag ``d``, body = the half message's queue offset
as decimal text; commit also puts the real message first. Both queues live in the commit
log, so the state survives a restart.

Every ``transactionCheckInterval`` ms the half queue is walked from the offset kept (as
RocketMQ does) under the consumer group ``CID_RMQ_SYS_TRANS`` in consumerOffset.json:
half messages that have an op record are passed over; one younger than
``transactionTimeOut`` (or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``) ends the walk; an older
one is put back at the end of the half queue with ``TRANSACTION_CHECK_TIMES`` + 1 and the
producer group (PGROUP) is asked about the new copy with a oneway CHECK_TRANSACTION_STATE
on one live producer channel; one already checked ``transactionCheckMax`` times is moved to
``TRANS_CHECK_MAX_TIME_TOPIC`` instead. The op queue's progress only moves past op records
whose half offset is below the half queue's progress, so a restart re-reads every decision
that still matters.

Time comes from the controller's reactor (``task.Clock`` in tests).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from rmqpy.broker.topic import RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC
from rmqpy.protocol import sysflag as SF
from rmqpy.protocol.bodies.topic import PERM_READ, PERM_WRITE
from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import CheckTransactionStateRequestHeader
from rmqpy.protocol.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
    MessageExtBrokerInner,
    encode_record,
    properties_to_string,
    tags_string_to_tags_code,
)
from rmqpy.remoting.ratelimit import RateLimitedLogger
from rmqpy.store.message_store import PutMessageResult, put_status_name
from rmqpy.store.role import is_slave

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker, HalfMessageHook

TRANS_CHECK_GROUP = "CID_RMQ_SYS_TRANS"
REMOVETAG = "d"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
FIRST_CHECK_DELAY = 3.0  # s after start, as Java's TransactionalMessageCheckService waits one interval


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def check_immunity_ms(properties: dict[str, str], transaction_timeout_ms: int) -> int:
    """How old a half message must be before it is checked (Java's ``getImmunityTime`` of the check
    service, 4.9.7 and 5.3.3): its CHECK_IMMUNITY_TIME_IN_SECONDS, else transactionTimeOut."""
    immunity_s = properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
    if immunity_s is None:
        return transaction_timeout_ms
    return _int(immunity_s, transaction_timeout_ms // 1000) * 1000


class TransactionalMessageService:
    log = RateLimitedLogger()  # lines a client's messages can cause: rate-limited per call site, values clipped

    def __init__(self, broker: "Broker") -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker
        self._call: Any = None
        self._running = False
        self.started = False
        # half queue offset -> op queue offset of its op record, for op records not yet passed
        self.removed: dict[int, int] = {}
        self._op_read: int | None = None
        self.checks_sent = 0
        self.metrics: HalfMessageHook | None = None  # metricsExporterType=PROM: the broker's metrics hook

    # ------------------------------------------------------------------ topics
    def _ensure_topic(self, name: str) -> None:
        self.broker.topic_config_manager.create_topic_in_send_message_back_method(name, 1, PERM_READ | PERM_WRITE)

    @property
    def store(self) -> Any:
        return self.broker.message_store

    # ------------------------------------------------------------------ prepare / decide
    def prepare_message(self, msg: MessageExtBrokerInner) -> defer.Deferred:
        self._ensure_topic(RMQ_SYS_TRANS_HALF_TOPIC)
        return self.store.put_message(half_message(msg))

    def get_half_message(self, commit_log_offset: int) -> MessageExt | None:
        try:
            if commit_log_offset < 0 or commit_log_offset >= self.store.get_max_phy_offset():
                return None
            msg = self.store.look_message_by_offset(commit_log_offset)
        except Exception:
            return None
        if msg is None or msg.topic != RMQ_SYS_TRANS_HALF_TOPIC:
            return None
        return msg

    def end_message_transaction(self, half: MessageExt) -> MessageExtBrokerInner:
        """The message to commit: back in its real topic/queue (Java ``endMessageTransaction``).

        As Java, the stored properties string is the half message's (built before REAL_TOPIC,
        REAL_QID and TRAN_MSG leave the map), the map the store sees lacks them.
        """
        props = dict(half.properties)
        stored = properties_to_string(props)
        topic = props.pop(PROPERTY_REAL_TOPIC, None) or ""
        queue_id = _int(props.pop(PROPERTY_REAL_QUEUE_ID, None), 0)
        props.pop(PROPERTY_TRANSACTION_PREPARED, None)
        props["WAIT"] = "false"
        return MessageExtBrokerInner(
            topic=topic, queue_id=queue_id, body=half.body or b"", flag=half.flag, properties=props,
            properties_string=stored,
            sys_flag=SF.reset_transaction_value(half.sys_flag, SF.TRANSACTION_COMMIT_TYPE),
            born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=half.store_host,
            reconsume_times=half.reconsume_times, prepared_transaction_offset=half.commit_log_offset,
            tags_code=tags_string_to_tags_code(props.get("TAGS")))

    def delete_prepare_message(self, half: MessageExt) -> defer.Deferred:
        """Write the op record of ``half`` (tag ``d``, body = its queue offset)."""
        self._ensure_topic(RMQ_SYS_TRANS_OP_HALF_TOPIC)
        b = self.broker
        op = MessageExtBrokerInner(
            topic=RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id=half.queue_id, body=str(half.queue_offset).encode(),
            properties={"TAGS": REMOVETAG, "WAIT": "true"}, born_timestamp=b.now_ms(),
            born_host=b.store_host, store_host=b.store_host, tags_code=tags_string_to_tags_code(REMOVETAG))
        return self.store.put_message(op)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self.started or is_slave(self.broker.store_config):
            return
        self.started = True
        self._arm(min(FIRST_CHECK_DELAY, self.broker.broker_config.transactionCheckInterval / 1000.0))

    def stop(self) -> None:
        self.started = False
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None

    def _arm(self, delay: float) -> None:
        if self.started:
            self._call = self.broker.reactor.callLater(max(0.0, delay), self._tick)

    def _tick(self) -> None:
        self._call = None
        d = self.check()
        d.addErrback(lambda f: self.log.failure("transaction check failed", f))
        d.addBoth(lambda _: self._arm(self.broker.broker_config.transactionCheckInterval / 1000.0))

    # ------------------------------------------------------------------ offsets
    def _offset(self, topic: str) -> int:
        off = self.broker.consumer_offset_manager.query_offset(TRANS_CHECK_GROUP, topic, 0)
        if off < 0:
            off = self.store.get_min_offset_in_queue(topic, 0)
        return off

    def _commit(self, topic: str, offset: int) -> None:
        self.broker.consumer_offset_manager.commit_offset("127.0.0.1", TRANS_CHECK_GROUP, topic, 0, offset)

    def _unit(self, topic: str, offset: int) -> tuple[int, int, int] | None:
        cq = self.store.find_consume_queue(topic, 0, create=False)
        if cq is None:
            return None
        return cq.get_unit(offset)

    def _read_ops(self) -> None:
        if self._op_read is None:
            self._op_read = self._offset(RMQ_SYS_TRANS_OP_HALF_TOPIC)
        max_op = self.store.get_max_offset_in_queue(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0)
        while self._op_read < max_op:
            unit = self._unit(RMQ_SYS_TRANS_OP_HALF_TOPIC, self._op_read)
            if unit is not None:
                msg = self.store.look_message_by_offset(unit[0], unit[1])
                if msg is not None and msg.tags == REMOVETAG:
                    half_offset = _int((msg.body or b"").decode("utf-8", "replace"), -1)
                    if half_offset >= 0:
                        self.removed.setdefault(half_offset, self._op_read)
            self._op_read += 1

    # ------------------------------------------------------------------ check-back
    @defer.inlineCallbacks
    def check(self) -> Any:
        """One pass over the half queue (Java ``TransactionalMessageServiceImpl.check``)."""
        if self._running or self.store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0) <= 0:
            return
        self._running = True
        try:
            yield self._check()
        finally:
            self._running = False

    @defer.inlineCallbacks
    def _check(self) -> Any:
        bc = self.broker.broker_config
        start = self.broker.now_ms()
        self._read_ops()
        offset = self._offset(RMQ_SYS_TRANS_HALF_TOPIC)
        end = self.store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)
        while offset < end and self.started:
            if offset in self.removed:
                offset += 1
                continue
            unit = self._unit(RMQ_SYS_TRANS_HALF_TOPIC, offset)
            msg = self.store.look_message_by_offset(unit[0], unit[1]) if unit is not None else None
            if msg is None:
                offset += 1
                continue
            times = _int(msg.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES), 0)
            if times >= bc.transactionCheckMax:
                yield self._discard(msg)
                offset += 1
                continue
            if msg.store_timestamp >= start:
                break
            age = self.broker.now_ms() - msg.born_timestamp
            immunity = check_immunity_ms(msg.properties, bc.transactionTimeOut)
            if 0 <= age < immunity:
                break
            ok = yield self._put_back_and_check(msg, times + 1)
            if not ok:
                break
            offset += 1
        self._commit(RMQ_SYS_TRANS_HALF_TOPIC, offset)
        for half_offset in [k for k in self.removed if k < offset]:
            del self.removed[half_offset]
        assert self._op_read is not None  # _read_ops set it
        self._commit(RMQ_SYS_TRANS_OP_HALF_TOPIC, min(self.removed.values(), default=self._op_read))

    def _copy(self, msg: MessageExt, topic: str, props: dict) -> MessageExtBrokerInner:
        return MessageExtBrokerInner(
            topic=topic, queue_id=0 if topic != RMQ_SYS_TRANS_HALF_TOPIC else msg.queue_id, body=msg.body or b"",
            flag=msg.flag, properties=props, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp,
            born_host=msg.born_host, store_host=msg.store_host, reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset,
            tags_code=tags_string_to_tags_code(props.get("TAGS")))

    @defer.inlineCallbacks
    def _put_back_and_check(self, msg: MessageExt, times: int) -> Any:
        props = dict(msg.properties)
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(times)
        inner = self._copy(msg, RMQ_SYS_TRANS_HALF_TOPIC, props)
        result = yield self.store.put_message(inner)
        ar = result.append_message_result if isinstance(result, PutMessageResult) else None
        if put_status_name(result) != "PUT_OK" or ar is None:
            self.log.error("put back half message failed: {r}", r=result)
            return False
        copy = MessageExt(topic=msg.topic, queue_id=msg.queue_id, flag=msg.flag, body=msg.body, properties=props,
                          sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                          store_timestamp=ar.store_timestamp, store_host=msg.store_host,
                          reconsume_times=msg.reconsume_times,
                          prepared_transaction_offset=msg.prepared_transaction_offset,
                          queue_offset=ar.logics_offset, commit_log_offset=ar.wrote_offset)
        self.send_check_message(copy)
        return True

    def send_check_message(self, msg: MessageExt) -> bool:
        """Oneway CHECK_TRANSACTION_STATE about ``msg`` to a live channel of its producer group."""
        uniq = msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        header = CheckTransactionStateRequestHeader(
            topic=msg.topic, tranStateTableOffset=msg.queue_offset, commitLogOffset=msg.commit_log_offset,
            msgId=uniq, transactionId=uniq, offsetMsgId=msg.msg_id)
        fields = header.encode()
        fields["brokerName"] = self.broker.broker_config.brokerName  # 5.x field; 4.x clients ignore it
        real = MessageExt(topic=msg.properties.get(PROPERTY_REAL_TOPIC) or msg.topic,
                          queue_id=_int(msg.properties.get(PROPERTY_REAL_QUEUE_ID), msg.queue_id), flag=msg.flag,
                          body=msg.body, properties=msg.properties, sys_flag=msg.sys_flag,
                          born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                          store_timestamp=msg.store_timestamp, store_host=msg.store_host,
                          reconsume_times=msg.reconsume_times,
                          prepared_transaction_offset=msg.prepared_transaction_offset,
                          queue_offset=msg.queue_offset, commit_log_offset=msg.commit_log_offset)
        group = msg.properties.get(PROPERTY_PRODUCER_GROUP) or ""
        channel = self.broker.producer_manager.get_available_channel(group)
        if channel is None:
            self.log.warn("Check transaction failed, channel is null. groupId={g}", g=group)
            return False
        request = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, None, encode_record(real),
                                          oneway=True, ext_fields=fields)
        try:
            channel.invoke_oneway(request)
        except Exception:
            self.log.failure("Check transaction failed, group {g}", g=group)
            return False
        self.checks_sent += 1
        return True

    def _discard(self, msg: MessageExt) -> defer.Deferred:
        """Java ``DefaultTransactionalMessageCheckListener.resolveDiscardMsg``."""
        self.log.error("MsgExt: {m} has been checked too many times, so discard it by moving it to system "
                       "topic TRANS_CHECK_MAXTIME_TOPIC", m=msg.msg_id)
        self._ensure_topic(RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC)
        inner = self._copy(msg, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, dict(msg.properties))
        if self.metrics is not None:  # Java: no longer a half message (rocketmq_half_messages)
            self.metrics.half_discarded(msg.properties.get(PROPERTY_REAL_TOPIC) or "")
        return self.store.put_message(inner)


def half_message(msg: MessageExtBrokerInner) -> MessageExtBrokerInner:
    """``TransactionalMessageBridge.parseHalfMessageInner``: park a prepared message in the half topic."""
    props = msg.get_properties()
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.properties = props
    msg.properties_string = None
    msg.sys_flag = SF.reset_transaction_value(msg.sys_flag, SF.TRANSACTION_NOT_TYPE)
    msg.topic = RMQ_SYS_TRANS_HALF_TOPIC
    msg.queue_id = 0
    return msg
