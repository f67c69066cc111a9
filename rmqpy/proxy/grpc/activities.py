"""The calls of ``apache.rocketmq.v2.MessagingService`` as 5.3.3's proxy answers them, on the reactor.

Each activity checks the request as the proxy's ``GrpcValidator`` and activities do (with
their ``Code`` answers), turns it into the broker's own remoting request (SEND_MESSAGE_V2,
POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, CONSUMER_SEND_MSG_BACK, END_TRANSACTION)
and runs it through the broker's dispatcher on the client's :class:`LocalChannel`, as the proxy's
local mode hands it to its broker's processors; the remoting answer becomes the gRPC one.
Routes and assignments name this broker, at the address the client reached it on.

Receipt handles are 5.3.3's ``ReceiptHandle``: the broker's ``POP_CK`` receipt and the
message's commit log offset, space-separated.

Every method returns a Deferred of the response message (``receive`` of the list of stream
responses); :mod:`rmqpy.proxy.grpc.server` calls them from grpcio's threads.
"""
from __future__ import annotations

import itertools
import re
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from twisted.internet import defer

from rmqpy.broker.pop.receipt import NORMAL_TOPIC, ReceiptError, build_receipt, parse_receipt, real_topic, retry_mark
from rmqpy.broker.pop.result import PopResult
from rmqpy.protocol.bodies import retry_policy
from rmqpy.protocol.bodies.topic import PERM_READ, PERM_WRITE
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import ConsumerSendMsgBackRequestHeader, EndTransactionRequestHeader, SendMessageRequestHeaderV2
from rmqpy.protocol.headers.pop import AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, PopMessageRequestHeader
from rmqpy.protocol.message import decode_records, java_string_hash, properties_to_string
from rmqpy.protocol.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE
from rmqpy.proxy.grpc import validate
from rmqpy.proxy.grpc.auth import exempt_local_channels
from rmqpy.proxy.grpc.clients import GrpcClients
from rmqpy.proxy.grpc.convert import SYSTEM_PROPERTIES, Code, remoting_status, resource, status, to_grpc_message
from rmqpy.proxy.grpc.local import LocalChannel
from rmqpy.proxy.grpc.polling import MAX_POLLING_MS, PollingRefused, polling_ms
from rmqpy.proxy.grpc.receipts import InvalidHandle, ReceiptHandles, RenewConfig, Tracked
from rmqpy.proxy.grpc.validate import Refused
from rmqpy.remoting.ratelimit import RateLimitedLogger

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

# ProxyConfig defaults of 5.3.3
MIN_INVISIBLE_MS = 10 * 1000  # minInvisibleTimeMillsForRecv
MAX_INVISIBLE_MS = 12 * 3600 * 1000  # maxInvisibleTimeMills
MAX_BATCH = 32
MAX_MESSAGE_GROUP = 64  # maxMessageGroupSize
MAX_USER_PROPERTIES = 128  # userPropertyMaxNum
MAX_USER_PROPERTY_SIZE = 16 * 1024  # maxUserPropertySize
MAX_DELAY_MS = 24 * 3600 * 1000  # maxDelayTimeMills
_NAME = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")  # TopicValidator / GroupValidator patterns, 127: topic max
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_OK_PUT = (ResponseCode.SUCCESS,)
PRODUCER_MAX_ATTEMPTS = 3  # grpcClientProducerMaxAttempts
_BAD_HANDLE = (ResponseCode.NO_MESSAGE, ResponseCode.MESSAGE_ILLEGAL)


__all__ = ["MessagingActivities", "Refused"]


def _name(res: Any, bad: int, what: str) -> str:
    """``GrpcValidator``'s topic or group check, its texts."""
    return validate.check_topic(res.name) if bad == Code.ILLEGAL_TOPIC else validate.check_group(res.name)


def _duration_ms(d: Any) -> int:
    return d.seconds * 1000 + d.nanos // 1_000_000


class MessagingActivities:
    """One per broker; ``channel_of`` gives the :class:`LocalChannel` of a client id (one per
    client, so that a client's requests share a channel as its gRPC connection shares them)."""

    log = RateLimitedLogger()

    def __init__(self, broker: "Broker", dispatcher: Any, grpc_port: int) -> None:
        self.broker = broker
        self.dispatcher = dispatcher  # the broker's RequestDispatcher: its processors and hooks
        self.grpc_port = grpc_port
        self.clients = GrpcClients(broker, dispatcher)
        self._round_robin = itertools.count()
        bc = broker.broker_config
        self.receipts = ReceiptHandles(
            broker.reactor, self._renew_change,
            lambda client_id, group: broker.consumer_manager.find_channel(group, client_id) is not None,
            lambda group, times: self.retry_policy(group).next_delay_ms(times),
            RenewConfig(bc.renewSchedulePeriodMillis, bc.renewAheadTimeMillis, bc.renewMaxTimeMillis,
                        bc.maxRenewRetryTimes, bc.invisibleTimeMillisWhenClear))
        # the remoting requests of a call were checked once, for the call (rmqpy.proxy.grpc.auth)
        exempt_local_channels(broker.auth_pipeline)

    # ------------------------------------------------------------------ helpers
    def retry_policy(self, group: str) -> retry_policy.RetryPolicy:
        """The group's ``groupRetryPolicy`` (the default for a group the broker does not know)."""
        sgc = self.broker.subscription_group_manager.find(group) if _NAME.match(group or "") else None
        return retry_policy.of_group(sgc.extra) if sgc is not None else retry_policy.DEFAULT

    def channel_of(self, client_id: str, peer: str, language: str = "") -> LocalChannel:
        return self.clients.channel_of(client_id, peer, language)

    def _invoke(self, ch: LocalChannel, request: RemotingCommand) -> defer.Deferred[RemotingCommand]:
        return ch.call(self.dispatcher, request)

    def _topic(self, res: Any, write: bool = False, read: bool = False) -> Any:
        name = _name(res, Code.ILLEGAL_TOPIC, "topic")
        tc = self.broker.topic_config_manager.select(name)
        if tc is None:
            raise validate.topic_not_found(name)
        if (write and not tc.perm & PERM_WRITE) or (read and not tc.perm & PERM_READ):
            raise Refused(Code.FORBIDDEN, f"topic {name} is not {'writable' if write else 'readable'}")
        return tc

    def _group(self, res: Any) -> str:
        return _name(res, Code.ILLEGAL_CONSUMER_GROUP, "group")

    def _broker(self, endpoints: Any) -> Any:
        """This broker as the route names it: the host the client used, on the gRPC port."""
        bc = self.broker.broker_config
        ep = pb.Endpoints(scheme=pb.AddressScheme.IPv4)
        hosts = [a.host for a in endpoints.addresses if a.host][:8]
        if hosts and endpoints.scheme in (pb.AddressScheme.IPv4, pb.AddressScheme.IPv6,
                                          pb.AddressScheme.DOMAIN_NAME):
            ep.scheme = endpoints.scheme
        for host in hosts or [bc.brokerIP1]:
            ep.addresses.add(host=host[:255], port=self.grpc_port)
        return pb.Broker(name=bc.brokerName, id=0, endpoints=ep)

    @staticmethod
    def _permission(perm: int) -> int:
        r, w = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
        if r and w:
            return pb.Permission.READ_WRITE
        return pb.Permission.READ if r else pb.Permission.WRITE if w else pb.Permission.NONE

    @staticmethod
    def _accept_types(tc: Any) -> list[int]:
        """TopicMessageType from the ``message.type`` attribute; a topic without one is MIXED here
        (Java: NORMAL), so that one topic takes every message type as the 4.x broker did."""
        kind = (tc.attributes.get("+message.type") or tc.attributes.get("message.type") or "MIXED").upper()
        types = {"NORMAL": [pb.MessageType.NORMAL], "FIFO": [pb.MessageType.FIFO],
                 "DELAY": [pb.MessageType.DELAY], "TRANSACTION": [pb.MessageType.TRANSACTION]}
        return types.get(kind, [pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY,
                                pb.MessageType.TRANSACTION])

    # ------------------------------------------------------------------ route
    def query_route(self, req: Any) -> Any:
        tc = self._topic(req.topic)
        broker = self._broker(req.endpoints)
        perm = tc.perm & self.broker.broker_config.brokerPermission
        queues = []
        # RouteActivity.genMessageQueueFromQueueData: read-only, write-only, then read-write queues
        r = w = rw = 0
        if perm & PERM_READ and perm & PERM_WRITE:
            rw = min(tc.readQueueNums, tc.writeQueueNums)
            r, w = tc.readQueueNums - rw, tc.writeQueueNums - rw
        elif perm & PERM_WRITE:
            w = tc.writeQueueNums
        elif perm & PERM_READ:
            r = tc.readQueueNums
        kinds = [pb.Permission.READ] * r + [pb.Permission.WRITE] * w + [pb.Permission.READ_WRITE] * rw
        if not kinds:
            kinds = [pb.Permission.NONE] * max(1, tc.readQueueNums, tc.writeQueueNums)
        accept = self._accept_types(tc)
        for i, permission in enumerate(kinds):
            queues.append(pb.MessageQueue(topic=resource(tc.topicName), id=i, permission=permission, broker=broker,
                                          accept_message_types=accept))
        return spb.QueryRouteResponse(status=status(Code.OK), message_queues=queues)

    def query_assignment(self, req: Any) -> Any:
        validate.check_topic(req.topic.name)  # validateTopicAndConsumerGroup, then the route
        self._group(req.group)
        tc = self._topic(req.topic)
        perm = tc.perm & self.broker.broker_config.brokerPermission
        if not perm & PERM_READ or tc.readQueueNums <= 0:
            return spb.QueryAssignmentResponse(status=status(Code.FORBIDDEN, "no readable queue"))
        mq = pb.MessageQueue(topic=resource(tc.topicName), id=-1, permission=self._permission(perm),
                             broker=self._broker(req.endpoints))
        return spb.QueryAssignmentResponse(status=status(Code.OK), assignments=[pb.Assignment(message_queue=mq)])

    # ------------------------------------------------------------------ client
    def heartbeat(self, req: Any, ch: LocalChannel) -> Any:
        """``ClientActivity.heartbeat``: register the client as its settings describe it."""
        s = ch.settings
        if s is None:
            raise Refused(Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
        group = None
        if s.client_type in (pb.ClientType.PUSH_CONSUMER, pb.ClientType.SIMPLE_CONSUMER):
            group = self._group(req.group)
        elif s.client_type != pb.ClientType.PRODUCER:
            raise Refused(Code.UNRECOGNIZED_CLIENT_TYPE, pb.ClientType.Name(s.client_type))
        return self.clients.register(ch, group).addCallback(
            lambda _: spb.HeartbeatResponse(status=status(Code.OK)))

    def notify_client_termination(self, req: Any, ch: LocalChannel) -> Any:
        s = ch.settings
        if s is None:
            raise Refused(Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
        group = self._group(req.group) if s.HasField("subscription") else None
        self.receipts.clear_client(ch.client_id)  # the proxy's CLIENT_UNREGISTER listener
        self.clients.forget(ch.client_id)
        return self.clients.unregister(ch, group).addCallback(
            lambda _: spb.NotifyClientTerminationResponse(status=status(Code.OK)))

    def settings(self, cmd: Any, ch: LocalChannel, write: Any) -> Any:
        """A client's settings on its Telemetry stream (``processAndWriteClientSettings``): kept,
        the client registered, the stream attached, and the settings merged with the broker's
        answered."""
        raw = cmd.settings
        if raw.HasField("publishing"):
            for t in raw.publishing.topics:
                _name(t, Code.ILLEGAL_TOPIC, "topic")
        elif raw.HasField("subscription"):
            self._group(raw.subscription.group)
        else:
            raise Refused(Code.BAD_REQUEST, "there is no publishing or subscription data in settings")
        kept = pb.Settings()
        kept.CopyFrom(raw)
        ch.settings = kept
        self.clients.attach(ch, write)
        return self.clients.register(ch).addCallback(
            lambda _: spb.TelemetryCommand(status=status(Code.OK), settings=self.merged_settings(ch)))

    def merged_settings(self, ch: LocalChannel) -> Any:
        """``GrpcClientSettingsManager.getClientSettings``: the raw settings with the proxy's producer
        policy, or the consumer group's (its config, else SubscriptionGroupConfig's defaults)."""
        s = pb.Settings()
        s.CopyFrom(ch.settings)
        if s.HasField("publishing"):
            s.backoff_policy.Clear()
            s.backoff_policy.max_attempts = PRODUCER_MAX_ATTEMPTS
            s.backoff_policy.exponential_backoff.initial.nanos = 10_000_000
            s.backoff_policy.exponential_backoff.max.seconds = 1
            s.backoff_policy.exponential_backoff.multiplier = 2.0
            s.publishing.max_body_size = self.broker.store_config.maxMessageSize
            s.publishing.validate_message_type = True
        elif s.HasField("subscription"):
            group = s.subscription.group.name
            sgc = self.broker.subscription_group_manager.find(group) if _NAME.match(group or "") else None
            s.subscription.receive_batch_size = MAX_BATCH
            s.subscription.long_polling_timeout.seconds = MAX_POLLING_MS // 1000
            s.subscription.fifo = bool(sgc.extra.get("consumeMessageOrderly")) if sgc is not None else False
            s.backoff_policy.Clear()
            s.backoff_policy.max_attempts = (sgc.retryMaxTimes if sgc is not None else 16) + 1
            policy = retry_policy.of_group(sgc.extra) if sgc is not None else retry_policy.DEFAULT
            if policy.type == retry_policy.EXPONENTIAL:
                exp = s.backoff_policy.exponential_backoff
                exp.initial.FromMilliseconds(policy.initial_ms)
                exp.max.FromMilliseconds(policy.max_ms)
                exp.multiplier = float(policy.multiplier)
            else:
                for ms in policy.next_ms:
                    s.backoff_policy.customized_backoff.next.add().FromMilliseconds(ms)
        s.metric.Clear()
        s.metric.on = False
        return s

    # ------------------------------------------------------------------ send
    def send_message(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        msgs = list(req.messages)
        if not msgs:
            raise Refused(Code.MESSAGE_CORRUPTED, "no message to send")
        if len(msgs) > MAX_BATCH * 32:
            raise Refused(Code.BAD_REQUEST, "too many messages in one request")
        name = _name(msgs[0].topic, Code.ILLEGAL_TOPIC, "topic")
        # SendMessageActivity.buildMessage: each message in turn, its topic and then its fields; then
        # ProducerProcessor: the type, then the route (an unknown topic's type is UNSPECIFIED)
        tc = self.broker.topic_config_manager.select(name)
        queue_id = self._send_queue(msgs, tc) if tc is not None else 0
        requests = []
        for m in msgs:
            if m.topic != msgs[0].topic:
                raise Refused(Code.MESSAGE_CORRUPTED, "topic in message is not same")
            requests.append(self._send_request(m, tc if tc is not None else SimpleNamespace(topicName=name),
                                               queue_id))
        if tc is None and not name.startswith(("%RETRY%", "%DLQ%")):
            validate.topic_message_type("UNSPECIFIED", self._message_type(msgs[0]))
        tc = self._topic(msgs[0].topic, write=True)
        self._check_message_type(tc, msgs[0])
        sends = [self._invoke(ch, r) for r in requests]
        return defer.gatherResults(sends, consumeErrors=True).addCallback(self._send_response, msgs, tc.topicName)

    def _check_message_type(self, tc: Any, m: Any) -> None:
        """``ProducerProcessor``: the first message's type against its topic's ``message.type`` (not
        for retry and DLQ topics). A topic without the attribute is MIXED here (the proxy: NORMAL)."""
        if tc.topicName.startswith(("%RETRY%", "%DLQ%")):
            return
        expected = (tc.attributes.get("+message.type") or tc.attributes.get("message.type") or "MIXED").upper()
        validate.topic_message_type(expected, self._message_type(m))

    @staticmethod
    def _message_type(m: Any) -> str:
        """``TopicMessageType.parseFromMessageProperty`` of the properties the message will have."""
        sp = m.system_properties
        return "TRANSACTION" if sp.message_type == pb.MessageType.TRANSACTION else \
            "DELAY" if sp.HasField("delivery_timestamp") else "FIFO" if sp.message_group else "NORMAL"

    def _send_queue(self, msgs: list[Any], tc: Any) -> int:
        """``SendMessageQueueSelector``: a lone message's group picks its queue by Guava's consistent
        hash of the group's Java hash; anything else takes the next write queue in turn."""
        n = max(tc.writeQueueNums, 1)
        group = msgs[0].system_properties.message_group if len(msgs) == 1 else ""
        if group:
            return consistent_hash(java_string_hash(group), n)
        return next(self._round_robin) % n

    def _send_request(self, m: Any, tc: Any, queue_id: int) -> RemotingCommand:
        sp = m.system_properties
        body = bytes(m.body)
        if not body:
            raise Refused(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
        limit = self.broker.store_config.maxMessageSize
        if len(body) > limit:
            raise Refused(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {limit}")
        # SendMessageActivity.buildMessageProperty, in its order; sizes are UTF-8 bytes and count the
        # tag and the keys with the user properties
        props: dict[str, str] = {}
        if len(m.user_properties) > MAX_USER_PROPERTIES:
            raise Refused(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {MAX_USER_PROPERTIES}")
        size = 0
        for k, v in m.user_properties.items():
            if k in SYSTEM_PROPERTIES:
                raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {k}")
            if validate.has_control(k):
                raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character")
            if validate.has_control(v):
                raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                              "the value of property cannot contain control character")
            size += validate.utf8_size(k) + validate.utf8_size(v)
            props[k] = v
        validate.tag(sp.tag)
        if sp.tag:
            props["TAGS"] = sp.tag
        size += validate.utf8_size(sp.tag)
        for key in sp.keys:
            validate.message_key(key)
            size += validate.utf8_size(key)
        if size > MAX_USER_PROPERTY_SIZE:
            raise Refused(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                          f"the total size of user property is too large, max is {MAX_USER_PROPERTY_SIZE}")
        if sp.keys:
            props["KEYS"] = " ".join(sp.keys)
        if validate.blank(sp.message_id):
            raise Refused(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
        props["UNIQ_KEY"] = sp.message_id
        if sp.HasField("delivery_timestamp"):
            deliver = _duration_ms(sp.delivery_timestamp)
            now = int(time.time() * 1000)
            if deliver - now > MAX_DELAY_MS:
                raise Refused(Code.ILLEGAL_DELIVERY_TIME,
                              f"the max delay time of message is too large, max is {MAX_DELAY_MS}")
            if deliver > now:
                props["TIMER_DELIVER_MS"] = str(deliver)
        if sp.message_type == pb.MessageType.TRANSACTION:
            props["TRAN_MSG"] = "true"
        props["PGROUP"] = tc.topicName  # SendMessageActivity: the topic is the producer group (transaction checks)
        if sp.message_group:  # an empty one is none
            validate.message_group(sp.message_group, MAX_MESSAGE_GROUP)
            props["__SHARDINGKEY"] = sp.message_group
        if sp.HasField("trace_context"):
            props["TRACE_CONTEXT"] = sp.trace_context[:1024]
        if sp.born_host:
            props["BORN_HOST"] = sp.born_host[:128]
        born = _duration_ms(sp.born_timestamp) if sp.HasField("born_timestamp") else int(time.time() * 1000)
        props["BORN_TIMESTAMP"] = str(born)
        header = SendMessageRequestHeaderV2(
            a=tc.topicName, b=tc.topicName, c="TBW102", d=4, e=queue_id,
            f=0x4 if props.get("TRAN_MSG") == "true" else 0,  # TRANSACTION_PREPARED_TYPE
            g=born, h=0, i=properties_to_string(props), j=0, k=False, m=False,
            n=self.broker.broker_config.brokerName)
        return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header, body)

    def _send_response(self, responses: list[RemotingCommand], msgs: list[Any], topic: str) -> Any:
        entries = []
        for resp, m in zip(responses, msgs):
            ext = resp.ext_fields or {}
            # SendMessageActivity.convertToSendMessageResponse: a stored message is OK, "OK"
            entry = spb.SendResultEntry(status=status(Code.OK) if resp.code in _OK_PUT else
                                        remoting_status(resp.code, resp.remark),
                                        message_id=m.system_properties.message_id)
            if resp.code in _OK_PUT:
                entry.offset = int(ext.get("queueOffset", "0") or 0)
                if m.system_properties.message_type == pb.MessageType.TRANSACTION:
                    # ProducerProcessor.fillTransactionData: the half message's offsets, for EndTransaction
                    entry.transaction_id = ext.get("transactionId") or m.system_properties.message_id
                    offset_id = ext.get("msgId") or ""
                    if len(offset_id) >= 16 and all(c in "0123456789ABCDEFabcdef" for c in offset_id[-16:]):
                        self.clients.add_transaction(topic, entry.transaction_id, entry.offset,
                                                     int(offset_id[-16:], 16))
            entries.append(entry)
        codes = {e.status.code for e in entries}
        if len(codes) == 1:
            top = status(entries[0].status.code, entries[0].status.message)
        else:
            top = status(Code.MULTIPLE_RESULTS)
        return spb.SendMessageResponse(status=top, entries=entries)

    # ------------------------------------------------------------------ receive
    def receive_message(self, req: Any, ch: LocalChannel, remaining_ms: int,
                        client_version: str = "") -> defer.Deferred[list[Any]]:
        validate.check_topic(req.message_queue.topic.name)  # validateTopicAndConsumerGroup: topic, then group
        group = self._group(req.group)
        # ConsumerProcessor.popMessage: a larger batch is cut to MAX_MSG_NUMS_FOR_POP_REQUEST, not refused
        batch = min(req.batch_size, MAX_BATCH)  # below 1: the broker's refusal, after its own checks
        bc = self.broker.broker_config
        renew = bool(req.auto_renew and bc.enableProxyAutoRenew)
        if renew:  # a PushConsumer: the proxy's invisible time, its handles renewed (receipts.py)
            invisible = bc.defaultInvisibleTimeMills
        else:
            invisible = validate.invisible_time(_duration_ms(req.invisible_duration), MIN_INVISIBLE_MS,
                                                MAX_INVISIBLE_MS)
        asked = _duration_ms(req.long_polling_timeout) if req.HasField("long_polling_timeout") else None
        request_timeout = _duration_ms(ch.settings.request_timeout) if ch.settings is not None else 0
        try:
            polling = polling_ms(asked, remaining_ms, request_timeout, client_version)
        except PollingRefused as exc:
            raise Refused(exc.code, exc.message) from None
        fe = req.filter_expression
        exp_type = "SQL92" if fe.type == pb.FilterType.SQL else "TAG"
        exp = fe.expression or "*"
        if len(exp) > 4096:
            raise Refused(Code.ILLEGAL_FILTER_EXPRESSION, "filter expression is too long")
        tc = self._topic(req.message_queue.topic, read=True)  # the route: after the request's own checks
        # the merged settings: FIFO from the group's consumeMessageOrderly, attempts from its retryMaxTimes
        settings = self.merged_settings(ch) if ch.settings is not None and ch.settings.HasField("subscription") \
            else None
        fifo = bool(settings.subscription.fifo) if settings is not None else self._orderly(group)
        max_attempts = settings.backoff_policy.max_attempts if settings is not None else self._max_attempts(group)
        qid = -1  # as the proxy's ReceiveMessageQueueSelector: the broker's acting queue, every queue of it
        header = PopMessageRequestHeader(consumerGroup=group, topic=tc.topicName, queueId=qid,
                                         maxMsgNums=batch, invisibleTime=invisible, pollTime=polling,
                                         bornTime=self.broker.now_ms(), initMode=0, expType=exp_type, exp=exp,
                                         order=fifo)
        pop = RemotingCommand.request(RequestCode.POP_MESSAGE, header)
        return self._invoke(ch, pop).addCallback(self._received, tc.topicName, group, ch, max_attempts, renew)

    def _orderly(self, group: str) -> bool:
        sgc = self.broker.subscription_group_manager.find(group)
        return bool(sgc.extra.get("consumeMessageOrderly")) if sgc is not None else False

    def _max_attempts(self, group: str) -> int:
        sgc = self.broker.subscription_group_manager.find(group)
        return (sgc.retryMaxTimes if sgc is not None else 16) + 1

    def _received(self, resp: RemotingCommand, topic: str, group: str, ch: LocalChannel,
                  max_attempts: int, renew: bool = False) -> list[Any]:
        if resp.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.PULL_NOT_FOUND):
            return [spb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))]
        if resp.code == ResponseCode.POLLING_FULL:
            return [spb.ReceiveMessageResponse(status=status(Code.TOO_MANY_REQUESTS, "polling full"))]
        if resp.code != ResponseCode.SUCCESS:
            return [spb.ReceiveMessageResponse(status=remoting_status(resp.code, resp.remark))]
        result = resp.typed_result
        if not isinstance(result, PopResult):  # the pop processor answers every found pop with its result
            raise RuntimeError("POP_MESSAGE answered SUCCESS without its pop result")
        starts = result.start_offsets()
        counts = result.delivery_counts()  # an orderly pop's deliveries so far
        broker_name = self.broker.broker_config.brokerName
        out = [spb.ReceiveMessageResponse(status=status(Code.OK))]
        for msg in (m for record in result.records for m in decode_records(record)):
            if counts:  # MQClientAPIImpl.processPopResponse: the count is the message's reconsume times
                mark = retry_mark(msg.topic)
                times = counts.get((mark, msg.queue_id, msg.queue_offset), counts.get((mark, msg.queue_id, None)))
                if times:
                    msg.reconsume_times = times
            ck = msg.properties.get("POP_CK")
            if ck is None:  # a message of the topic itself; pop retry ones carry their receipt
                start = starts.get((NORMAL_TOPIC, msg.queue_id), msg.queue_offset)
                ck = build_receipt(start, result.pop_time, result.invisible_time, result.revive_qid, topic,
                                   broker_name, msg.queue_id, msg.queue_offset)
            handle = f"{ck} {msg.commit_log_offset}"
            msg.properties.pop("POP_CK", None)
            if msg.reconsume_times >= max_attempts:
                # PopMessageResultFilterImpl: TO_DLQ, forwarded (and acked) instead of delivered
                message_id = msg.properties.get("UNIQ_KEY") or msg.msg_id
                defer.maybeDeferred(self._forward_to_dlq, ch, group, topic, handle, message_id).addErrback(
                    lambda f: self.log.warn("forward to DLQ failed: {e}", e=f.getErrorMessage()))
                continue
            if renew:
                self.receipts.add(ch.client_id, group, topic, msg.properties.get("UNIQ_KEY") or msg.msg_id, handle,
                                  msg.reconsume_times)
            out.append(spb.ReceiveMessageResponse(message=to_grpc_message(msg, handle)))
        if len(out) == 1:
            return [spb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no match message"))]
        return out

    # ------------------------------------------------------------------ dead letter queue
    def forward_message_to_dead_letter_queue(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        """``ForwardMessageToDLQActivity``: CONSUMER_SEND_MSG_BACK with delay level -1 (straight to
        %DLQ%group), then the ack of the receipt; the send-back's code is the answer."""
        topic = validate.check_topic(req.topic.name)
        group = self._group(req.group)
        return self._forward_to_dlq(ch, group, topic, req.receipt_handle, req.message_id).addCallback(
            lambda resp: spb.ForwardMessageToDeadLetterQueueResponse(
                status=remoting_status(resp.code, resp.remark)))

    def _forward_to_dlq(self, ch: LocalChannel, group: str, topic: str, handle: str,
                        message_id: str) -> defer.Deferred[RemotingCommand]:
        receipt, _ = self._handle(handle)
        parts = handle.split(" ")
        if len(parts) != 9 or not parts[8].lstrip("-").isdigit() or int(parts[8]) < 0:
            raise Refused(Code.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
        self._live(receipt, expiry=False)
        try:
            real = real_topic(topic, group, receipt.retry)
        except ReceiptError as exc:
            raise Refused(Code.INVALID_RECEIPT_HANDLE, str(exc)) from None
        header = ConsumerSendMsgBackRequestHeader(offset=int(parts[8]), group=group, delayLevel=-1,
                                                  originMsgId=message_id[:128], originTopic=real,
                                                  maxReconsumeTimes=0)
        back = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header)

        def sent(resp: RemotingCommand) -> Any:
            if resp.code == ResponseCode.SUCCESS:
                entry = spb.AckMessageEntry(message_id=message_id, receipt_handle=handle)
                self._ack_one(ch, group, topic, entry)
            return resp
        return self._invoke(ch, back).addCallback(sent)

    # ------------------------------------------------------------------ transactions
    def end_transaction(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        """``EndTransactionActivity``: the half message's offsets from the transaction data of
        (topic as producer group, transaction id), then END_TRANSACTION as the proxy sends it."""
        topic = validate.check_topic(req.topic.name)
        if validate.blank(req.transaction_id):
            raise Refused(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        resolution = {pb.TransactionResolution.COMMIT: TRANSACTION_COMMIT_TYPE,
                      pb.TransactionResolution.ROLLBACK: TRANSACTION_ROLLBACK_TYPE}.get(req.resolution, 0)
        data = self.clients.poll_transaction(topic, req.transaction_id)
        if data is None:  # ProxyExceptionCode.TRANSACTION_DATA_NOT_FOUND: no Code of its own
            raise validate.proxy_exception(Code.INTERNAL_SERVER_ERROR, "cannot found transaction data")
        ok = spb.EndTransactionResponse(status=status(Code.OK))
        if resolution == 0:  # UNKNOWN: the broker would log it and not answer; the check-back asks again
            return defer.succeed(ok)
        queue_offset, commit_log_offset = data
        header = EndTransactionRequestHeader(
            topic=topic, producerGroup=topic, tranStateTableOffset=queue_offset,
            commitLogOffset=commit_log_offset, commitOrRollback=resolution,
            fromTransactionCheck=req.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
            msgId=req.message_id, transactionId=req.transaction_id)
        # endTransactionOneway: the answer is OK whatever the broker says (it logs a refusal)
        return self._invoke(ch, RemotingCommand.request(RequestCode.END_TRANSACTION, header)).addCallback(
            lambda _: ok)

    # ------------------------------------------------------------------ ack / invisible time
    def _handle(self, text: str) -> tuple[Any, str]:
        if not text:
            raise Refused(Code.INVALID_RECEIPT_HANDLE, "receipt handle cannot be empty")
        try:
            receipt = parse_receipt(text, self.broker.broker_config.reviveQueueNum)
        except ReceiptError as exc:
            raise Refused(Code.INVALID_RECEIPT_HANDLE, f"receipt handle is invalid: {exc}") from None
        if receipt.queue_offset is None:
            raise Refused(Code.INVALID_RECEIPT_HANDLE, "receipt handle has no queue offset")
        parts = text.split(" ")
        return receipt, " ".join(parts[:8])

    def _live(self, receipt: Any, expiry: bool = True) -> None:
        """``AbstractProcessor.validateReceiptHandle`` (not for a forward to the DLQ), then the
        handle's broker as ``ClusterMessageService`` looks it up: this broker, or none known."""
        if expiry and validate.expired(receipt.pop_time + receipt.invisible_time, self.broker.now_ms()):
            raise validate.proxy_exception(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
        if receipt.broker_name != self.broker.broker_config.brokerName:
            raise validate.proxy_exception(Code.INVALID_RECEIPT_HANDLE, f"cannot find broker {receipt.broker_name}")

    def ack_message(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        """``AckMessageActivity``: the names checked (not looked up), then each entry's handle."""
        topic = validate.check_topic(req.topic.name)
        group = self._group(req.group)
        if not req.entries:  # setAckResponseStatus of no result
            raise Refused(Code.INTERNAL_SERVER_ERROR, "ack message result is empty")
        if len(req.entries) > 1024:
            raise Refused(Code.BAD_REQUEST, "ack entries must be 1 to 1024")
        acks = []
        for e in req.entries:
            acks.append(self._ack_one(ch, group, topic, e))
        return defer.gatherResults(acks, consumeErrors=True).addCallback(self._ack_response)

    def _ack_one(self, ch: LocalChannel, group: str, topic: str, e: Any) -> defer.Deferred[Any]:
        entry = spb.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle)
        try:
            receipt, extra = self._handle(e.receipt_handle)
            real = real_topic(topic, group, receipt.retry)
        except (Refused, ReceiptError) as exc:
            code = exc.code if isinstance(exc, Refused) else Code.INVALID_RECEIPT_HANDLE
            entry.status.CopyFrom(status(code, str(exc)))
            return defer.succeed(entry)

        def ack(current: str) -> defer.Deferred[Any]:
            receipt, extra = self._handle(current)  # a renewed handle: the broker's, well formed
            try:
                self._live(receipt)
            except Refused as exc:
                entry.status.CopyFrom(status(exc.code, exc.message))
                return defer.succeed(entry)
            header = AckMessageRequestHeader(consumerGroup=group, topic=real, queueId=receipt.queue_id,
                                             extraInfo=extra, offset=receipt.queue_offset)
            return self._invoke(ch, RemotingCommand.request(RequestCode.ACK_MESSAGE, header)).addCallback(answered)

        def answered(resp: RemotingCommand) -> Any:
            if resp.code == ResponseCode.SUCCESS:
                entry.status.CopyFrom(status(Code.OK))
            else:
                entry.status.CopyFrom(status(Code.INVALID_RECEIPT_HANDLE if resp.code in _BAD_HANDLE else
                                             remoting_status(resp.code, resp.remark).code, resp.remark or ""))
            return entry
        # the proxy's removeReceiptHandle: the client's original handle stands for the renewed one
        return self.receipts.remove(ch.client_id, group, e.receipt_handle).addCallback(ack)

    @staticmethod
    def _ack_response(entries: list[Any]) -> Any:
        """``setAckResponseStatus``: the one code (or MULTIPLE_RESULTS), its name the message."""
        codes = {e.status.code for e in entries}
        top = status(entries[0].status.code) if len(codes) == 1 else status(Code.MULTIPLE_RESULTS)
        return spb.AckMessageResponse(status=top, entries=entries)

    def change_invisible_duration(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        """``ChangeInvisibleDurationActivity``: names checked (not looked up), the time in [0, max]."""
        topic = validate.check_topic(req.topic.name)
        group = self._group(req.group)
        invisible = validate.invisible_time(_duration_ms(req.invisible_duration), 0, MAX_INVISIBLE_MS)
        self._change_header(req.receipt_handle, group, topic, invisible)  # refused before anything

        def answered(result: tuple[RemotingCommand, str | None]) -> Any:
            resp, handle = result
            if handle is None:
                code = Code.INVALID_RECEIPT_HANDLE if resp.code in _BAD_HANDLE else \
                    remoting_status(resp.code, resp.remark).code
                return spb.ChangeInvisibleDurationResponse(status=status(code, resp.remark or ""))
            return spb.ChangeInvisibleDurationResponse(status=status(Code.OK), receipt_handle=handle)
        # the proxy's removeReceiptHandle: no more renewals, and the renewed handle is the one changed
        return self.receipts.remove(ch.client_id, group, req.receipt_handle).addCallback(
            lambda current: self._change_invisible(ch, group, topic, current, invisible)).addCallback(answered)

    def _change_header(self, handle: str, group: str, topic: str, invisible: int) -> ChangeInvisibleTimeRequestHeader:
        receipt, extra = self._handle(handle)
        try:
            real = real_topic(topic, group, receipt.retry)
        except ReceiptError as exc:
            raise Refused(Code.INVALID_RECEIPT_HANDLE, str(exc)) from None
        return ChangeInvisibleTimeRequestHeader(consumerGroup=group, topic=real, queueId=receipt.queue_id,
                                                extraInfo=extra, offset=receipt.queue_offset, invisibleTime=invisible)

    def _change_invisible(self, ch: LocalChannel, group: str, topic: str, handle: str,
                          invisible: int) -> defer.Deferred[tuple[RemotingCommand, str | None]]:
        """CHANGE_MESSAGE_INVISIBLETIME of ``handle``: the answer, and the new handle if it succeeded."""
        header = self._change_header(handle, group, topic, invisible)
        receipt, _ = self._handle(handle)
        self._live(receipt)
        commit_log_offset = handle.split(" ")[8] if handle.count(" ") == 8 else "-1"

        def answered(resp: RemotingCommand) -> tuple[RemotingCommand, str | None]:
            if resp.code != ResponseCode.SUCCESS:
                return resp, None
            ext = resp.ext_fields or {}
            assert receipt.queue_offset is not None
            new = build_receipt(receipt.queue_offset, int(ext["popTime"]), int(ext["invisibleTime"]),
                                int(ext["reviveQid"]), header.topic, receipt.broker_name, receipt.queue_id,
                                receipt.queue_offset)
            return resp, f"{new} {commit_log_offset}"
        return self._invoke(ch, RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header)
                            ).addCallback(answered)

    def _renew_change(self, t: Tracked, invisible: int) -> defer.Deferred[str]:
        """The renewal's CHANGE_MESSAGE_INVISIBLETIME (``ReceiptHandleProcessor``'s listener), on the
        client's channel while it has one."""
        ch = self.clients.channels.get(t.client_id) or LocalChannel("renew:0", self.broker.reactor, t.client_id)

        def answered(result: tuple[RemotingCommand, str | None]) -> str:
            resp, handle = result
            if handle is not None:
                return handle
            if resp.code in _BAD_HANDLE:
                raise InvalidHandle(resp.remark or "")
            raise RuntimeError(f"CHANGE_MESSAGE_INVISIBLETIME answered {resp.code} {resp.remark or ''}"[:200])
        try:
            d = self._change_invisible(ch, t.group, t.topic, t.handle, invisible)
        except Refused as exc:
            raise InvalidHandle(exc.message) from None
        return d.addCallback(answered)


def consistent_hash(key: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)`` (its linear congruential generator)."""
    state = key & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        top = state >> 33  # (int) (state >>> 33): 31 bits, never negative
        nxt = int((candidate + 1) / ((top + 1) / 2.0 ** 31))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate
