"""PullMessageProcessor: PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361), with long polling.

Follows RocketMQ 4.9 ``PullMessageProcessor``: permission and subscription checks with
Java's codes and remarks, TAG filtering on the consume-queue tag hash, SQL92 filtering on
properties when ``enablePropertyFilter``, the store-status mapping of facts §9.4, the
commit offset carried in the request, and suspension of empty pulls (``longpolling``).
Every reply carries suggestWhichBrokerId, nextBeginOffset, minOffset and maxOffset.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from twisted.internet import defer

from rmqpy.broker.filter.message_filter import ConsumerFilterManager, ExpressionMessageFilter
from rmqpy.broker.longpolling import PullRequest
from rmqpy.broker.validation import bad_parameter_code, group_sys_flag
from rmqpy.common.faq import suggest_todo
from rmqpy.protocol.bodies.heartbeat import SubscriptionData
from rmqpy.protocol.bodies.topic import PERM_READ
from rmqpy.protocol.codes import MQVersion, RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import PullMessageRequestHeader, PullMessageResponseHeader
from rmqpy.remoting.channel import Channel
from rmqpy.remoting.ratelimit import RateLimitedLogger
from rmqpy.store.role import is_slave

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker, ConsumeMessageHook

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
FLAG_LITE_PULL = 0x10

# GetMessageStatus name -> (response code, code when the request offset is not 0)
_STATUS = {
    "FOUND": ResponseCode.SUCCESS,
    "MESSAGE_WAS_REMOVING": ResponseCode.PULL_RETRY_IMMEDIATELY,
    "NO_MATCHED_MESSAGE": ResponseCode.PULL_RETRY_IMMEDIATELY,
    "OFFSET_FOUND_NULL": ResponseCode.PULL_NOT_FOUND,
    "OFFSET_OVERFLOW_BADLY": ResponseCode.PULL_OFFSET_MOVED,
    "OFFSET_OVERFLOW_ONE": ResponseCode.PULL_NOT_FOUND,
    "OFFSET_TOO_SMALL": ResponseCode.PULL_OFFSET_MOVED,
}


class PullMessageProcessor:
    log = RateLimitedLogger()  # lines any client can trigger: rate-limited per call site, values clipped
    codes = (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE)

    def __init__(self, broker: "Broker") -> None:
        self.log = self.log.on(broker.reactor)
        self.broker = broker
        self.consume_message_hooks: Sequence[ConsumeMessageHook] = ()  # Java registerConsumeMessageHook

    def register_consume_message_hook(self, hooks: Sequence[ConsumeMessageHook]) -> None:
        self.consume_message_hooks = hooks

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        return self._process(channel, request, True)

    def execute_request_when_wakeup(self, req: PullRequest) -> None:
        """Re-run a held pull without suspension and answer it through its Deferred."""
        try:
            result = self._process(req.channel, req.request, False)
        except Exception as exc:  # noqa: BLE001 - answered as the dispatcher would
            self.log.failure("re-running a held pull failed")
            result = req.request.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        if isinstance(result, defer.Deferred):
            result.chainDeferred(req.deferred)
        else:
            req.deferred.callback(result)

    # ------------------------------------------------------------------ the work
    def _error(self, request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
        return request.response(code, remark)

    def _process(self, channel: Channel, request: RemotingCommand, allow_suspend: bool) -> Any:
        b = self.broker
        bc = b.broker_config
        h = request.decode_header(PullMessageRequestHeader)
        if not bc.brokerPermission & PERM_READ:
            return self._error(request, ResponseCode.NO_PERMISSION,
                               f"the broker[{bc.brokerIP1}] pulling message is forbidden")
        sgc = b.subscription_group_manager.find(h.consumerGroup)
        if sgc is None:
            return self._error(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                               f"subscription group [{h.consumerGroup}] does not exist, {suggest_todo()}")
        if not sgc.consumeEnable:
            return self._error(request, ResponseCode.NO_PERMISSION,
                               f"subscription group no permission, {h.consumerGroup}")
        has_suspend = bool(h.sysFlag & FLAG_SUSPEND)
        has_commit = bool(h.sysFlag & FLAG_COMMIT_OFFSET)
        has_subscription = bool(h.sysFlag & FLAG_SUBSCRIPTION)
        suspend_ms = h.suspendTimeoutMillis if has_suspend else 0

        tc = b.topic_config_manager.select(h.topic)
        if tc is None:
            self.log.error("the topic {t} not exist, consumer: {c}", t=h.topic, c=channel.remote_address)
            return self._error(request, ResponseCode.TOPIC_NOT_EXIST,
                               f"topic[{h.topic}] not exist, apply first please! {suggest_todo()}")
        if not tc.perm & PERM_READ:
            return self._error(request, ResponseCode.NO_PERMISSION,
                               f"the topic[{h.topic}] pulling message is forbidden")
        if h.queueId < 0 or h.queueId >= tc.readQueueNums:
            info = (f"queueId[{h.queueId}] is illegal, topic:[{h.topic}] topicConfig.readQueueNums:"
                    f"[{tc.readQueueNums}] consumer:[{_slash(channel.remote_address)}]")
            self.log.warn("{text}", text=info)
            return self._error(request, bad_parameter_code(request.version), info)

        filter_data = None
        sub: SubscriptionData | None
        if has_subscription:
            sub = SubscriptionData.build(h.topic, h.subscription, h.expressionType, h.subVersion)
            if not sub.is_tag:
                filter_data = ConsumerFilterManager.build(h.consumerGroup, h.topic, h.subscription,
                                                          h.expressionType or "", h.subVersion)
                if filter_data is None:
                    self.log.warn("Parse the consumer's subscription[{s}] failed, group: {g}", s=h.subscription,
                                  g=h.consumerGroup)
                    return self._error(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                       "parse the consumer's subscription failed")
        else:
            cgi = b.consumer_manager.get(h.consumerGroup)
            if cgi is None:
                return self._error(request, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                   "the consumer's group info not exist" + suggest_todo())
            if not sgc.consumeBroadcastEnable and cgi.message_model == "BROADCASTING":
                return self._error(request, ResponseCode.NO_PERMISSION,
                                   f"the consumer group[{h.consumerGroup}] can not consume by broadcast way")
            sub = cgi.find_subscription(h.topic)
            if sub is None:
                return self._error(request, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                   "the consumer's subscription not exist" + suggest_todo())
            if sub.subVersion < h.subVersion:
                return self._error(request, ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                   "the consumer's subscription not latest")
            if not sub.is_tag:
                filter_data = b.consumer_filter_manager.get(h.topic, h.consumerGroup)
                if filter_data is None:
                    return self._error(request, ResponseCode.FILTER_DATA_NOT_EXIST,
                                       "The broker's consumer filter data is not exist!Your expression may be wrong!")
                if filter_data.client_version < h.subVersion:
                    return self._error(request, ResponseCode.FILTER_DATA_NOT_LATEST,
                                       "the consumer's consumer filter data not latest")
        if not sub.is_tag and not bc.enablePropertyFilter:
            return self._error(request, ResponseCode.SYSTEM_ERROR,
                               f"The broker does not support consumer to filter message by {sub.expressionType}")

        message_filter = ExpressionMessageFilter(sub, filter_data)
        result = b.message_store.get_message(h.consumerGroup, h.topic, h.queueId, h.queueOffset, h.maxMsgNums,
                                             # rmqpy: a positive one bounds the bytes (Java ignores it)
                                             max_total_bytes=h.maxMsgBytes if h.maxMsgBytes and h.maxMsgBytes > 0
                                             else None,
                                             message_filter=message_filter)
        if result is None:
            return self._error(request, ResponseCode.SYSTEM_ERROR, "store getMessage return null")

        status = result.status.name
        header = PullMessageResponseHeader(suggestWhichBrokerId=0, nextBeginOffset=result.next_begin_offset,
                                           minOffset=result.min_offset, maxOffset=result.max_offset)
        if request.version >= MQVersion.V5_0_0:  # 5.x's PullMessageProcessor adds both to every pull it answers
            header.topicSysFlag = tc.topicSysFlag
            header.groupSysFlag = group_sys_flag(sgc.extra)
        if status in ("NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE"):
            code = ResponseCode.PULL_OFFSET_MOVED if h.queueOffset != 0 else ResponseCode.PULL_NOT_FOUND
        else:
            code = _STATUS.get(status, ResponseCode.SYSTEM_ERROR)
        # a slave serves pulls whatever slaveReadEnable says: Java 4.9 sets PULL_RETRY_IMMEDIATELY
        # for a slave without it and then overwrites it with the status's code, so consumers
        # keep reading from a slave while its master is down; the flag only steers where the
        # next pull goes (suggestWhichBrokerId, 0 without it)
        if bc.slaveReadEnable:
            header.suggestWhichBrokerId = (sgc.whichBrokerWhenConsumeSlowly if result.suggest_pulling_from_slave
                                           else sgc.brokerId)
        # a slave does not correct offsets (offsetCheckInSlave off): the consumer retries at once
        # and is sent to the group's broker, which is the master by default (4.9.7's OFFSET_MOVED case)
        if code == ResponseCode.PULL_OFFSET_MOVED and is_slave(b.store_config) \
                and not b.store_config.offsetCheckInSlave:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
            header.suggestWhichBrokerId = sgc.brokerId

        response: Any = request.response(code, status, header=header)
        if code == ResponseCode.SUCCESS:
            response.body_parts = result.message_list  # framed as they are (command.encode_parts)
            for hook in self.consume_message_hooks:
                hook.consume_message_after(h.consumerGroup, h.topic, h.queueId, response)
        elif code == ResponseCode.PULL_NOT_FOUND and allow_suspend and has_suspend:
            polling_ms = suspend_ms if bc.longPollingEnable else bc.shortPollingTimeMills
            held = PullRequest(request=request, channel=channel, timeout_ms=polling_ms, suspend_ts=b.now_ms(),
                               pull_from_offset=h.queueOffset, message_filter=message_filter)
            deferred = b.pull_hold_service.suspend(h.topic, h.queueId, held)
            if deferred is not None:  # else full: answered now, as Java answers a pull it does not hold
                response = deferred

        if allow_suspend:  # the member holds the queue (rmqpy/broker/handover.py)
            b.queue_handover.pulled(channel.remote_address, h.consumerGroup, h.topic, h.queueId)
        # commit the consumer's offset (first execution only, masters only)
        if allow_suspend and has_commit and not is_slave(b.store_config):
            b.consumer_offset_manager.commit_offset(channel.remote_address, h.consumerGroup, h.topic, h.queueId,
                                                    h.commitOffset)
        return response


def _slash(addr: str) -> str:
    """Java prints ``channel.remoteAddress()`` as ``/ip:port``."""
    return addr if addr.startswith("/") else "/" + addr
