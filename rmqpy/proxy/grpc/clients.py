"""The gRPC clients the endpoint knows, as 5.3.3's proxy in local mode keeps them.

* One :class:`~rmqpy.proxy.grpc.local.LocalChannel` per client id (``GrpcChannelManager``), at
  most ``MAX_CLIENTS``; one silent for ``channelExpiredTimeoutMills`` without a Telemetry stream is
  forgotten by ``sweep`` (every ``SWEEP_EVERY`` new clients, and when the table is full).
* The client's raw ``Settings`` (``GrpcClientSettingsManager``), from its Telemetry stream, and the
  answer merged from the broker's config (``merged_settings``).
* Registration in the broker's producer and consumer tables by a HEART_BEAT run on the client's
  channel (``ClientActivity.registerProducer``/``registerConsumer``: the topic name is the producer
  group, consumers are CLUSTERING from the last offset, CONSUME_ACTIVELY for a SimpleConsumer and
  CONSUME_PASSIVELY for a PushConsumer), so that mqadmin producerConnection / consumerConnection
  list them, and an UNREGISTER_CLIENT when the client says it terminates.
* Transaction data (``TransactionDataManager``): the half message's offsets by producer group and
  transaction id, from a send or a check-back, for the EndTransaction that follows; each expires
  after ``TRANSACTION_DATA_EXPIRE_MS`` and at most ``TRANSACTION_DATA_MAX_NUM`` per key.
* Broker-to-client requests on the client's Telemetry stream (``GrpcClientChannel``):
  CHECK_TRANSACTION_STATE becomes a ``RecoverOrphanedTransactionCommand`` (its transaction data kept);
  GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY are relayed with a nonce, and the client's
  answers go back to the requests waiting for them (the commands and answers: :mod:`rmqpy.proxy.grpc.relay`).

Runs on the reactor.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from twisted.internet import defer

from rmqpy.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from rmqpy.protocol.codes import LanguageCode, MQVersion, RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import CheckTransactionStateRequestHeader, UnregisterClientRequestHeader
from rmqpy.protocol.message import decode_records
from rmqpy.proxy.grpc.convert import to_grpc_message
from rmqpy.proxy.grpc.local import LocalChannel
from rmqpy.proxy.grpc.relay import (
    consume_directly_response,
    running_info_response,
    thread_stack_trace_command,
    verify_message_command,
)
from rmqpy.remoting.ratelimit import RateLimitedLogger

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

MAX_CLIENTS = 65_536
SWEEP_EVERY = 1024  # new clients between two sweeps of the silent ones
TRANSACTION_DATA_EXPIRE_MS = 30_000  # ProxyConfig.transactionDataExpireMillis
TRANSACTION_DATA_MAX_NUM = 15  # ProxyConfig.transactionDataMaxNum, per producer group and transaction id
MAX_TRANSACTION_KEYS = 65_536  # rmqpy's bound on the table (Java's has none)


class TooManyClients(Exception):
    pass


def language_of(name: str) -> int:
    """``LanguageCode.valueOf(x-mq-language)``; a name Java does not know is OTHER here."""
    try:
        return int(LanguageCode[name.upper()])
    except KeyError:
        return int(LanguageCode.OTHER)


class GrpcClients:
    log = RateLimitedLogger()

    def __init__(self, broker: "Broker", dispatcher: Any) -> None:
        self.broker, self.dispatcher = broker, dispatcher
        self.channels: dict[str, LocalChannel] = {}
        self.writers: dict[str, Callable[[Any], None]] = {}  # client id -> its open Telemetry stream's
        self._created = 0
        # (producer group, transaction id) -> [(expire at ms, tranStateTableOffset, commitLogOffset)]
        self.transactions: OrderedDict[tuple[str, str], list[tuple[int, int, int]]] = OrderedDict()

    # ------------------------------------------------------------------ channels
    def channel_of(self, client_id: str, peer: str, language: str = "") -> LocalChannel:
        ch = self.channels.get(client_id)
        if ch is None:
            self._created += 1
            if len(self.channels) >= MAX_CLIENTS or self._created % SWEEP_EVERY == 0:
                self.sweep()
                if len(self.channels) >= MAX_CLIENTS:
                    raise TooManyClients(f"more than {MAX_CLIENTS} gRPC clients")
            # parseClientVersion: x-mq-client-version ("5.1.2") is no MQVersion.Version name, so Java
            # registers every gRPC client with its own CURRENT_VERSION
            ch = self.channels[client_id] = LocalChannel(peer, self.broker.reactor, client_id,
                                                         language_of(language), MQVersion.V5_3_3)
        return ch

    def forget(self, client_id: str) -> LocalChannel | None:
        return self.channels.pop(client_id, None)

    def sweep(self) -> None:
        """Forget clients silent for longer than the broker keeps a channel without a heartbeat."""
        limit = self.broker.broker_config.channelExpiredTimeoutMills / 1000.0
        now = self.broker.reactor.seconds()
        for client_id, ch in list(self.channels.items()):
            if ch.push is None and now - ch.last_used > limit:
                del self.channels[client_id]

    # ------------------------------------------------------------------ broker tables
    def _heartbeat_data(self, ch: LocalChannel, group: str | None) -> HeartbeatData | None:
        s = ch.settings
        if s is None:
            return None
        data = HeartbeatData(clientID=ch.client_id)
        if s.HasField("publishing"):
            data.producerDataSet = [ProducerData(t.name) for t in s.publishing.topics]
        elif s.HasField("subscription"):
            subs = [SubscriptionData.build(e.topic.name, e.expression.expression or "*",
                                           "SQL92" if e.expression.type == pb.FilterType.SQL else "TAG")
                    for e in s.subscription.subscriptions]
            consume = "CONSUME_PASSIVELY" if s.client_type == pb.ClientType.PUSH_CONSUMER else "CONSUME_ACTIVELY"
            data.consumerDataSet = [ConsumerData(group or s.subscription.group.name, consume, "CLUSTERING",
                                                 "CONSUME_FROM_LAST_OFFSET", subs)]
        return data

    def register(self, ch: LocalChannel, group: str | None = None) -> defer.Deferred[Any]:
        """HEART_BEAT for the client, as the settings it sent describe it."""
        body = self._heartbeat_body(ch, group)
        if body is None:
            return defer.succeed(None)
        request = RemotingCommand.request(RequestCode.HEART_BEAT, None, body[0])
        request.typed_body = body[1]
        return ch.call(self.dispatcher, request)

    def _heartbeat_body(self, ch: LocalChannel, group: str | None) -> tuple[bytes, HeartbeatData] | None:
        """The HEART_BEAT body of the client and what it decodes to, made once per settings and group:
        a client heartbeats every 10 s with what its settings said, and the JSON encoding was a third
        of a heartbeat's cost (bench/grpc_clients_probe.py), the processor's decoding of it 13 µs."""
        cached = ch.heartbeat_body
        if cached is not None and cached[0] is ch.settings and cached[1] == group:
            return cached[2]
        data = self._heartbeat_data(ch, group)
        body = data.encode() if data is not None and (data.producerDataSet or data.consumerDataSet) else None
        # the processor gets the body's own decoding, as it would decode it itself
        made = (body, HeartbeatData.decode(body)) if body is not None else None
        ch.heartbeat_body = (ch.settings, group, made)
        return made

    def unregister(self, ch: LocalChannel, group: str | None) -> defer.Deferred[Any]:
        s = ch.settings
        calls = []
        if s is not None and s.HasField("publishing"):
            for t in s.publishing.topics:
                h = UnregisterClientRequestHeader(clientID=ch.client_id, producerGroup=t.name)
                calls.append(ch.call(self.dispatcher, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, h)))
        elif s is not None and group:
            h = UnregisterClientRequestHeader(clientID=ch.client_id, consumerGroup=group)
            calls.append(ch.call(self.dispatcher, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, h)))
        return defer.gatherResults(calls, consumeErrors=True)

    # ------------------------------------------------------------------ telemetry
    def attach(self, ch: LocalChannel, write: Callable[[Any], None]) -> None:
        """The client's Telemetry stream is open: broker requests go to ``write``."""
        self.writers[ch.client_id] = write
        ch.push = lambda request, nonce: self._push(ch, request, nonce, write)

    def detach(self, ch: LocalChannel, write: Callable[[Any], None]) -> None:
        """The stream that ``write`` wrote to ended (a newer one of the client stays)."""
        if self.writers.get(ch.client_id) is write:
            del self.writers[ch.client_id]
            ch.push = None

    def _push(self, ch: LocalChannel, request: RemotingCommand, nonce: str, write: Callable[[Any], None]) -> bool:
        """The broker's ``request`` as the Telemetry command the proxy writes for it; True when one
        the client answers with ``nonce`` was written. NOTIFY_CONSUMER_IDS_CHANGED and
        RESET_CONSUMER_CLIENT_OFFSET are nothing a gRPC client takes."""
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            self._check_transaction(ch, request, write)
        elif request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            return thread_stack_trace_command(request, nonce, write)
        elif request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            return verify_message_command(request, nonce, write)
        return False

    def _check_transaction(self, ch: LocalChannel, request: RemotingCommand, write: Callable[[Any], None]) -> None:
        try:
            h = request.decode_header(CheckTransactionStateRequestHeader)
            msgs = list(decode_records(request.body or b""))
        except Exception as exc:  # the broker's own request: a bug
            self.log.warn("cannot convert CHECK_TRANSACTION_STATE for {c}: {e}", c=ch.client_id, e=exc)
            return
        if not msgs or not h.transactionId:
            return
        msg = msgs[0]
        group = msg.properties.get("PGROUP") or msg.topic
        self.add_transaction(group, h.transactionId, h.tranStateTableOffset, h.commitLogOffset)
        cmd = spb.TelemetryCommand(recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
            message=to_grpc_message(msg, None), transaction_id=h.transactionId))
        write(cmd)

    def report(self, ch: LocalChannel, cmd: Any) -> None:
        """A client's answer to a command of ``_push`` (checked by :func:`rmqpy.proxy.grpc.relay.bounded_answer`): the
        broker's request waiting for its nonce gets its response. One that no request waits for (a
        late answer, or a nonce never sent) is dropped with a rate-limited line, as the proxy drops it."""
        if cmd.WhichOneof("command") == "thread_stack_trace":
            nonce, code = cmd.thread_stack_trace.nonce, RequestCode.GET_CONSUMER_RUNNING_INFO
            text = cmd.thread_stack_trace.thread_stack_trace
            answered = ch.answer(nonce, code, lambda request: running_info_response(request, cmd.status.code, text))
        else:
            nonce, code = cmd.verify_message_result.nonce, RequestCode.CONSUME_MESSAGE_DIRECTLY
            answered = ch.answer(nonce, code, lambda request: consume_directly_response(request, cmd.status.code))
        if not answered:
            self.log.warn("gRPC client {c} answered nonce {n!r}, which no request waits for", c=ch.client_id[:64],
                          n=nonce)

    # ------------------------------------------------------------------ transaction data
    def add_transaction(self, group: str, transaction_id: str, queue_offset: int, commit_log_offset: int) -> None:
        key = (group, transaction_id)
        entries = self.transactions.pop(key, [])
        entries.append((self.broker.now_ms() + TRANSACTION_DATA_EXPIRE_MS, queue_offset, commit_log_offset))
        del entries[:-TRANSACTION_DATA_MAX_NUM]
        self.transactions[key] = entries
        while len(self.transactions) > MAX_TRANSACTION_KEYS:
            self.transactions.popitem(last=False)

    def poll_transaction(self, group: str, transaction_id: str) -> tuple[int, int] | None:
        """The newest unexpired data of the key, taken out of the table (``pollNoExpireTransactionData``)."""
        key = (group, transaction_id)
        entries = self.transactions.get(key)
        if not entries:
            return None
        now = self.broker.now_ms()
        found = None
        while entries:
            expire, queue_offset, commit_log_offset = entries.pop()
            if expire >= now:
                found = (queue_offset, commit_log_offset)
                break
        if not entries:
            del self.transactions[key]
        return found

