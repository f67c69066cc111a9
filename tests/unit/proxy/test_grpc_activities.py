"""The gRPC activities on a real BrokerController (task.Clock): the Codes bad input gets, and a send
then receive then ack through the broker's own processors."""
from __future__ import annotations

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from rmqpy.broker.pop.receipt import build_receipt, parse_receipt
from rmqpy.protocol.bodies.broker import SubscriptionGroupConfig
from rmqpy.protocol.bodies.topic import TopicConfig
from rmqpy.protocol.message import MessageExt
from rmqpy.proxy.grpc.activities import MessagingActivities, Refused
from rmqpy.proxy.grpc.convert import to_grpc_message
from tests.unit.broker.helpers import FakeChannel, make_broker, send_request


@pytest.fixture
def env(activities_on):
    _, _, acts = activities_on("GrpcT")
    return acts, acts.channel_of("client-1", "127.0.0.1:5000")


def _message(topic: str, body: bytes, msg_id: str = "MSGID1") -> pb.Message:
    m = pb.Message(topic=pb.Resource(name=topic), body=body)
    m.system_properties.message_id = msg_id
    m.system_properties.tag = "TagA"
    return m


def _result(d):
    out = []
    d.addBoth(out.append)
    assert out, "the Deferred did not fire"
    return out[0]


def test_unknown_topic_is_topic_not_found_but_a_send_to_it_a_type_conflict(env) -> None:
    """As proxy 5.3.3 answers (tests/interop/grpc_diff.py): its send checks the message type before
    the route, and an unknown topic's type is UNSPECIFIED."""
    acts, ch = env
    with pytest.raises(Refused) as err:
        acts.query_route(spb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")))
    assert err.value.code == pb.Code.TOPIC_NOT_FOUND
    with pytest.raises(Refused) as err:
        acts.send_message(spb.SendMessageRequest(messages=[_message("NoSuchTopic", b"x")]), ch)
    assert err.value.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert "the expected type is UNSPECIFIED, but actual type is NORMAL" in err.value.message


def test_oversized_and_empty_bodies_are_refused_with_the_proxys_codes(env) -> None:
    acts, ch = env
    big = b"x" * (acts.broker.store_config.maxMessageSize + 1)
    with pytest.raises(Refused) as err:
        acts.send_message(spb.SendMessageRequest(messages=[_message("GrpcT", big)]), ch)
    assert err.value.code == pb.Code.MESSAGE_BODY_TOO_LARGE
    with pytest.raises(Refused) as err:
        acts.send_message(spb.SendMessageRequest(messages=[_message("GrpcT", b"")]), ch)
    assert err.value.code == pb.Code.MESSAGE_BODY_EMPTY


def test_route_names_this_broker_on_the_grpc_port(env) -> None:
    acts, _ = env
    req = spb.QueryRouteRequest(topic=pb.Resource(name="GrpcT"))
    req.endpoints.addresses.add(host="10.1.2.3", port=8081)
    resp = acts.query_route(req)
    assert resp.status.code == pb.Code.OK
    assert [q.id for q in resp.message_queues] == [0, 1]
    assert {(a.host, a.port) for q in resp.message_queues for a in q.broker.endpoints.addresses} == {("10.1.2.3", 8081)}


def test_send_receive_ack(env) -> None:
    acts, ch = env
    sent = _result(acts.send_message(spb.SendMessageRequest(messages=[_message("GrpcT", b"hello")]), ch))
    assert sent.status.code == pb.Code.OK, sent
    req = spb.ReceiveMessageRequest(group=pb.Resource(name="g1"), batch_size=4,
                                    message_queue=pb.MessageQueue(topic=pb.Resource(name="GrpcT"), id=0))
    req.invisible_duration.seconds = 30
    req.long_polling_timeout.seconds = 0
    got = _result(acts.receive_message(req, ch, 10_000))
    msgs = [r.message for r in got if r.WhichOneof("content") == "message"]
    assert [m.body for m in msgs] == [b"hello"] and msgs[0].system_properties.message_id == "MSGID1"
    handle = msgs[0].system_properties.receipt_handle
    ack = spb.AckMessageRequest(group=pb.Resource(name="g1"), topic=pb.Resource(name="GrpcT"),
                                entries=[spb.AckMessageEntry(message_id="MSGID1", receipt_handle=handle)])
    acked = _result(acts.ack_message(ack, ch))
    assert acked.status.code == pb.Code.OK, acked
    bad = spb.AckMessageRequest(group=pb.Resource(name="g1"), topic=pb.Resource(name="GrpcT"),
                                entries=[spb.AckMessageEntry(message_id="MSGID1", receipt_handle="forged")])
    assert _result(acts.ack_message(bad, ch)).entries[0].status.code == pb.Code.INVALID_RECEIPT_HANDLE


def test_an_empty_sql92_filter_is_refused_as_the_proxy_refuses_it(env) -> None:
    """Found by bench/grpc_diff_long.py (seed 11): proxy 5.3.3's FilterAPI.build refuses an empty SQL92
    expression; rmqpy took it as "*" and the broker's SQL parser failed (INTERNAL_SERVER_ERROR). An empty
    tag expression is every message, on both."""
    acts, ch = env
    req = spb.ReceiveMessageRequest(group=pb.Resource(name="g1"), batch_size=4,
                                    message_queue=pb.MessageQueue(topic=pb.Resource(name="GrpcT"), id=0),
                                    filter_expression=pb.FilterExpression(type=pb.FilterType.SQL, expression=""))
    req.invisible_duration.seconds = 30
    req.long_polling_timeout.seconds = 0
    with pytest.raises(Refused) as err:
        acts.receive_message(req, ch, 10_000)
    assert (err.value.code, err.value.message) == (pb.Code.ILLEGAL_FILTER_EXPRESSION, "Expression can't be null! SQL92")
    req.filter_expression.type = pb.FilterType.TAG
    acts.receive_message(req, ch, 10_000)  # taken: a long poll for any message (the clock does not move)


def test_a_deadline_too_short_to_poll_is_checked_before_the_topic_and_group(env) -> None:
    """Proxy 5.3.3's ReceiveMessageActivity computes the polling time first; found by
    bench/grpc_diff_long.py --seed 12 (a blank topic or a bad group with a short deadline)."""
    acts, ch = env
    req = spb.ReceiveMessageRequest(group=pb.Resource(name="a\x01"), batch_size=4,
                                    message_queue=pb.MessageQueue(topic=pb.Resource(name=""), id=0))
    req.invisible_duration.seconds = 30
    with pytest.raises(Refused) as err:
        acts.receive_message(req, ch, 3_000, client_version="5.0.8")
    assert err.value.code == pb.Code.ILLEGAL_POLLING_TIME
    with pytest.raises(Refused) as err:
        acts.receive_message(req, ch, 10_000, client_version="5.0.8")
    assert err.value.code == pb.Code.ILLEGAL_TOPIC


def test_consistent_hash_is_guavas() -> None:
    """Values printed by Guava 32.0.1 Hashing.consistentHash(key.hashCode(), n) (the proxy's queue of a
    message group); "order-7" has a negative Java hash."""
    from rmqpy.protocol.message import java_string_hash
    from rmqpy.proxy.grpc.activities import consistent_hash
    java = {("g1", 8): 6, ("order-7", 4): 0, ("order-7", 8): 4, ("abc", 8): 7, ("xyz-long-group-name", 4): 2}
    for (key, n), bucket in java.items():
        assert consistent_hash(java_string_hash(key), n) == bucket, (key, n)


def _settings_cmd(**kw):
    cmd = spb.TelemetryCommand()
    cmd.settings.CopyFrom(pb.Settings(**kw))
    return cmd


def test_settings_register_the_client_and_heartbeat_needs_them(env) -> None:
    acts, ch = env
    with pytest.raises(Refused) as err:
        acts.heartbeat(spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER), ch)
    assert err.value.code == pb.Code.UNRECOGNIZED_CLIENT_TYPE
    cmd = _settings_cmd(client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="GrpcT")]))
    answer = _result(acts.settings(cmd, ch, lambda c: None))
    assert answer.status.code == pb.Code.OK and answer.settings.backoff_policy.max_attempts == 3
    assert acts.broker.producer_manager.get_available_channel("GrpcT") is ch  # the topic is the producer group
    assert _result(acts.heartbeat(spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER), ch)).status.code == \
        pb.Code.OK
    with pytest.raises(Refused) as err:
        acts.settings(_settings_cmd(client_type=pb.ClientType.PRODUCER), ch, lambda c: None)
    assert err.value.code == pb.Code.BAD_REQUEST


def test_new_settings_change_what_the_next_heartbeat_registers(env) -> None:
    """The HEART_BEAT body is built once per settings (a client heartbeats every 10 s): settings
    naming another topic register the client as that topic's producer at the next heartbeat."""
    acts, ch = env
    tc = TopicConfig("GrpcT2")
    acts.broker.topic_config_manager.update_topic_config(tc)
    heartbeat = spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER)
    for topic in ("GrpcT", "GrpcT2"):
        cmd = _settings_cmd(client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name=topic)]))
        ch.settings = cmd.settings  # as the settings activity keeps them, without registering
        assert _result(acts.heartbeat(heartbeat, ch)).status.code == pb.Code.OK
        assert acts.broker.producer_manager.get_available_channel(topic) is ch
        body = ch.heartbeat_body
        assert _result(acts.heartbeat(heartbeat, ch)).status.code == pb.Code.OK
        assert ch.heartbeat_body is body  # the same settings: not built again


def test_consumer_settings_take_the_groups_retry_times_and_order(env) -> None:
    acts, ch = env
    sub = pb.Subscription(group=pb.Resource(name="g2"), subscriptions=[
        pb.SubscriptionEntry(topic=pb.Resource(name="GrpcT"), expression=pb.FilterExpression(expression="*"))])
    answer = _result(acts.settings(_settings_cmd(client_type=pb.ClientType.SIMPLE_CONSUMER, subscription=sub), ch,
                                   lambda c: None))
    assert answer.settings.backoff_policy.max_attempts == 17 and not answer.settings.subscription.fifo
    assert len(answer.settings.backoff_policy.customized_backoff.next) == 18
    info = acts.broker.consumer_manager.get("g2")
    assert info is not None and info.consume_type == "CONSUME_ACTIVELY" and ch in info.channels


@pytest.mark.parametrize("policy, customized, exponential", [
    ({"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [6000, 1500]}}, [(6, 0), (1, 500_000_000)], None),
    ({"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 2000, "max": 60_000, "multiplier": 3}}, [],
     ((2, 0), (60, 0), 3.0)),
])
def test_consumer_settings_carry_the_groups_retry_policy(env, policy, customized, exponential) -> None:
    """GrpcClientSettingsManager.mergeSubscriptionData: the group's groupRetryPolicy is the backoff a
    PushConsumer waits before a failed message comes again."""
    acts, ch = env
    cfg = SubscriptionGroupConfig("gPolicy", retryMaxTimes=2, extra={"groupRetryPolicy": policy})
    acts.broker.subscription_group_manager.update(cfg)
    sub = pb.Subscription(group=pb.Resource(name="gPolicy"), subscriptions=[
        pb.SubscriptionEntry(topic=pb.Resource(name="GrpcT"), expression=pb.FilterExpression(expression="*"))])
    answer = _result(acts.settings(_settings_cmd(client_type=pb.ClientType.PUSH_CONSUMER, subscription=sub), ch,
                                   lambda c: None))
    backoff = answer.settings.backoff_policy
    assert backoff.max_attempts == 3
    assert [(d.seconds, d.nanos) for d in backoff.customized_backoff.next] == customized
    if exponential is None:
        assert backoff.WhichOneof("strategy") == "customized_backoff"
    else:
        e = backoff.exponential_backoff
        assert ((e.initial.seconds, e.initial.nanos), (e.max.seconds, e.max.nanos), e.multiplier) == exponential


def test_end_transaction_without_its_data_is_refused(env) -> None:
    acts, ch = env
    req = spb.EndTransactionRequest(topic=pb.Resource(name="GrpcT"), transaction_id="", message_id="M")
    with pytest.raises(Refused) as err:
        acts.end_transaction(req, ch)
    assert err.value.code == pb.Code.INVALID_TRANSACTION_ID
    req.transaction_id = "NOPE"
    with pytest.raises(Refused) as err:
        acts.end_transaction(req, ch)
    assert err.value.code == pb.Code.INTERNAL_SERVER_ERROR


def test_transaction_data_expires_and_is_bounded(env) -> None:
    acts, _ = env
    clients = acts.clients
    for i in range(20):
        clients.add_transaction("T", "tx", i, 100 + i)
    assert clients.poll_transaction("T", "tx") == (19, 119)  # the newest first, 15 kept
    assert len(clients.transactions[("T", "tx")]) == 14
    acts.broker.reactor.advance(31)
    assert clients.poll_transaction("T", "tx") is None and ("T", "tx") not in clients.transactions


def test_push_consumer_receive_auto_renew_pops_with_the_proxys_default_invisible_time(env) -> None:
    """A PushConsumer's receive has auto_renew and no invisible duration: the proxy pops with its
    defaultInvisibleTimeMills (60 s) instead of refusing it."""
    acts, ch = env
    assert _result(acts.send_message(spb.SendMessageRequest(messages=[_message("GrpcT", b"push")]), ch)).status.code \
        == pb.Code.OK
    req = spb.ReceiveMessageRequest(group=pb.Resource(name="g1"), batch_size=4, auto_renew=True,
                                    message_queue=pb.MessageQueue(topic=pb.Resource(name="GrpcT"), id=-1))
    req.long_polling_timeout.seconds = 0
    got = _result(acts.receive_message(req, ch, 10_000))
    msgs = [r.message for r in got if r.WhichOneof("content") == "message"]
    assert [m.body for m in msgs] == [b"push"], got
    handle = msgs[0].system_properties.receipt_handle
    receipt = parse_receipt(" ".join(handle.split(" ")[:8]), acts.broker.broker_config.reviveQueueNum)
    assert receipt.invisible_time == acts.broker.broker_config.defaultInvisibleTimeMills == 60_000


def test_forward_to_dlq_moves_the_message_and_acks_it(env) -> None:
    acts, ch = env
    _result(acts.send_message(spb.SendMessageRequest(messages=[_message("GrpcT", b"poison", "POISON1")]), ch))
    req = spb.ReceiveMessageRequest(group=pb.Resource(name="g3"), batch_size=4,
                                    message_queue=pb.MessageQueue(topic=pb.Resource(name="GrpcT"), id=0))
    req.invisible_duration.seconds = 30
    req.long_polling_timeout.seconds = 0
    got = [r.message for r in _result(acts.receive_message(req, ch, 10_000)) if r.WhichOneof("content") == "message"]
    assert [m.body for m in got] == [b"poison"]
    fwd = spb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name="g3"), topic=pb.Resource(name="GrpcT"), message_id="POISON1",
        receipt_handle=got[0].system_properties.receipt_handle, delivery_attempt=1, max_delivery_attempts=1)
    assert _result(acts.forward_message_to_dead_letter_queue(fwd, ch)).status.code == pb.Code.OK
    store = acts.broker.message_store
    assert store.get_max_offset_in_queue("%DLQ%g3", 0) == 1
    # acked: past the invisible time nothing comes back
    acts.broker.reactor.advance(40)
    for _ in range(5):
        acts.broker.reactor.advance(1)
    waiting = acts.receive_message(req, ch, 10_000)
    acts.broker.reactor.advance(5)  # a long-polling timeout of 0 is held the proxy's minimum, 5 s
    again = _result(waiting)
    assert [r for r in again if r.WhichOneof("content") == "message"] == []
    bad = spb.ForwardMessageToDeadLetterQueueRequest(group=pb.Resource(name="g3"), topic=pb.Resource(name="GrpcT"),
                                                     message_id="X", receipt_handle="1 2 3")
    with pytest.raises(Refused) as err:
        acts.forward_message_to_dead_letter_queue(bad, ch)
    assert err.value.code == pb.Code.INVALID_RECEIPT_HANDLE


def test_with_5x_authentication_grpc_requests_are_checked_once_per_call(tmp_path) -> None:
    """With 5.x authentication on, a gRPC call is checked once, by the endpoint from its metadata
    (rmqpy.proxy.grpc.auth, tests/unit/proxy/test_grpc_auth.py); the remoting requests the
    activities make for it are not checked again by the broker's hook, which still refuses an
    unsigned remoting client."""
    broker, _ = make_broker(tmp_path, authenticationEnabled=True, authorizationEnabled=True,
                            initAuthenticationUser='{"username":"root","password":"rootpw12"}')
    try:
        broker.topic_config_manager.update_topic_config(TopicConfig("GrpcT"))
        acts = MessagingActivities(broker, broker.dispatcher, 8081)
        ch = acts.channel_of("client-1", "127.0.0.1:5000")
        sent = _result(acts.send_message(spb.SendMessageRequest(messages=[_message("GrpcT", b"hello")]), ch))
        assert sent.status.code == pb.Code.OK, sent
        assert sum(broker.message_store.get_max_offset_in_queue("GrpcT", q) for q in range(8)) == 1
        unsigned = send_request("GrpcT", b"x")
        assert broker.auth_pipeline.before_request(FakeChannel(), unsigned).remark == "username cannot be null."
    finally:
        broker.shutdown()


def test_silent_clients_are_forgotten(env) -> None:
    acts, ch = env
    clients = acts.clients
    clients.attach(clients.channel_of("streaming", "127.0.0.1:5001"), lambda c: None)
    acts.broker.reactor.advance(acts.broker.broker_config.channelExpiredTimeoutMills / 1000 + 1)
    clients.channel_of("fresh", "127.0.0.1:5002")
    clients.sweep()
    assert set(clients.channels) == {"streaming", "fresh"}  # client-1 was silent, streaming has its stream


def test_several_messages_in_one_send_are_each_stored_and_answered(env) -> None:
    """A SendMessageRequest with several messages (the proxy's batch: one topic): one entry per message,
    in order, each with its own id, and each message received once."""
    acts, ch = env
    batch = [_message("GrpcT", f"b{i}".encode(), msg_id=f"MSGID-B{i}") for i in range(3)]
    sent = _result(acts.send_message(spb.SendMessageRequest(messages=batch), ch))
    assert sent.status.code == pb.Code.OK, sent
    assert [e.message_id for e in sent.entries] == ["MSGID-B0", "MSGID-B1", "MSGID-B2"]
    assert all(e.status.code == pb.Code.OK for e in sent.entries)
    got = []
    for qid in (0, 1):
        req = spb.ReceiveMessageRequest(group=pb.Resource(name="gb"), batch_size=16,
                                        message_queue=pb.MessageQueue(topic=pb.Resource(name="GrpcT"), id=qid))
        req.invisible_duration.seconds = 30
        req.long_polling_timeout.seconds = 0
        waiting = acts.receive_message(req, ch, 10_000)
        acts.broker.reactor.advance(5)  # an empty receive is held the proxy's minimum long polling, 5 s
        got += [r.message.body for r in _result(waiting) if r.WhichOneof("content") == "message"]
    assert sorted(got) == [b"b0", b"b1", b"b2"]


def test_user_properties_are_all_but_the_proxys_system_ones(env) -> None:
    """5.3.3's GrpcConverter.buildUserAttributes leaves out MessageConst.STRING_HASH_SET only: a FIFO
    message's group comes back as its message_group and as the user property __SHARDINGKEY (what the Go
    client 5.1.2 showed through Apache's proxy); the born host is stored as the proxy's __BORNHOST. A
    send refuses the keys of that set (TIMER_DELAY_LEVEL is one), not the others (__STARTDELIVERTIME)."""
    acts, ch = env
    m = _message("GrpcT", b"fifo", msg_id="MSGID-F")
    m.system_properties.message_group = "ga"
    m.system_properties.born_host = "client-host"
    m.user_properties["i"] = "0"
    m.user_properties["__STARTDELIVERTIME"] = "1"
    sent = _result(acts.send_message(spb.SendMessageRequest(messages=[m]), ch))
    assert sent.status.code == pb.Code.OK, sent
    got = []
    for qid in (0, 1):
        req = spb.ReceiveMessageRequest(group=pb.Resource(name="gf"), batch_size=16,
                                        message_queue=pb.MessageQueue(topic=pb.Resource(name="GrpcT"), id=qid))
        req.invisible_duration.seconds = 30
        req.long_polling_timeout.seconds = 0
        waiting = acts.receive_message(req, ch, 10_000)
        acts.broker.reactor.advance(5)
        got += [r.message for r in _result(waiting) if r.WhichOneof("content") == "message"]
    [msg] = got
    assert dict(msg.user_properties) == {"i": "0", "__STARTDELIVERTIME": "1", "__SHARDINGKEY": "ga"}
    assert msg.system_properties.message_group == "ga" and msg.system_properties.born_host == "client-host"
    bad = _message("GrpcT", b"x", msg_id="MSGID-X")
    bad.user_properties["TIMER_DELAY_LEVEL"] = "1"
    with pytest.raises(Refused) as err:
        acts.send_message(spb.SendMessageRequest(messages=[bad]), ch)
    assert (err.value.code, err.value.message) == (pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                                                   "property is used by system: TIMER_DELAY_LEVEL")


def test_the_born_host_is_read_from_javas_property() -> None:
    """GrpcConverter.buildSystemProperties reads MessageConst.PROPERTY_BORN_HOST, "__BORNHOST" (what the proxy
    writes for a gRPC send, rmqpy too), else the stored born host; rmqpy's former key "BORN_HOST" is a user
    property to the proxy, so to rmqpy."""
    msg = MessageExt(topic="T", body=b"x", properties={"UNIQ_KEY": "ID", "__BORNHOST": "client:1", "BORN_HOST": "old"},
                     born_host=("10.0.0.1", 5000))
    m = to_grpc_message(msg, None)
    assert m.system_properties.born_host == "client:1" and dict(m.user_properties) == {"BORN_HOST": "old"}
    del msg.properties["__BORNHOST"]
    assert to_grpc_message(msg, None).system_properties.born_host == "10.0.0.1:5000"


def test_a_user_property_sharding_key_makes_a_fifo_message(env) -> None:
    """__SHARDINGKEY is no system key to proxy 5.3.3, so a send may carry it as a user property, and
    TopicMessageType.parseFromMessageProperty then finds a FIFO message: a NORMAL topic refuses it."""
    acts, ch = env
    tc = TopicConfig("GrpcNormal")
    tc.attributes = {"message.type": "NORMAL"}
    acts.broker.topic_config_manager.update_topic_config(tc)
    m = _with_user(_message("GrpcNormal", b"x"), {"__SHARDINGKEY": "g"})
    with pytest.raises(Refused) as err:
        acts.send_message(spb.SendMessageRequest(messages=[m]), ch)
    assert err.value.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert "the expected type is NORMAL, but actual type is FIFO" in err.value.message
    sent = _result(acts.send_message(spb.SendMessageRequest(messages=[_message("GrpcNormal", b"y")]), ch))
    assert sent.status.code == pb.Code.OK, sent


def _with_user(m: pb.Message, props: dict[str, str]) -> pb.Message:
    for k, v in props.items():
        m.user_properties[k] = v
    return m


def test_a_failed_ack_entry_is_a_first_error_for_one_entry_as_for_many(env, monkeypatch) -> None:
    """One entry skips gatherResults (the clients ack one message a call); a bug in an entry still
    reaches the servicer as gatherResults reports it, so INTERNAL_SERVER_ERROR's text is the same."""
    from twisted.internet import defer
    acts, ch = env
    monkeypatch.setattr(acts.ack.receipts, "remove", lambda *a: defer.fail(RuntimeError("boom")))
    handle = build_receipt(0, 1_700_000_000_000, 30_000, 0, "GrpcT", "broker-a", 0, 0) + " 0"
    for entries in (1, 2):
        req = spb.AckMessageRequest(group=pb.Resource(name="g1"), topic=pb.Resource(name="GrpcT"), entries=[
            spb.AckMessageEntry(message_id=f"MSGID{i}", receipt_handle=handle) for i in range(entries)])
        failure = _result(acts.ack_message(req, ch))
        assert isinstance(failure.value, defer.FirstError) and failure.value.index == 0, entries
        assert str(failure.value.subFailure.value) == "boom"
