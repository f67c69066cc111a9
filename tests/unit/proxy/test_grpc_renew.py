"""Renewal of a PushConsumer's receipt handles (rmqpy/proxy/grpc/receipts.py), driven by task.Clock:
on a real BrokerController through the gRPC activities, and the table alone with a fake broker."""
from __future__ import annotations

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from twisted.internet import defer, task

from rmqpy.proxy.grpc.receipts import MAX_PER_GROUP, InvalidHandle, ReceiptHandles, RenewConfig

GROUP = "gRenew"


def _result(d):
    out = []
    d.addBoth(out.append)
    assert out, "the Deferred did not fire"
    if isinstance(out[0], Exception) or hasattr(out[0], "raiseException"):
        out[0].raiseException()
    return out[0]


@pytest.fixture
def env(activities_on):
    broker, clock, acts = activities_on("RenewT", queues=1)
    push = acts.channel_of("push-1", "127.0.0.1:5000")
    sub = pb.Subscription(group=pb.Resource(name=GROUP), subscriptions=[
        pb.SubscriptionEntry(topic=pb.Resource(name="RenewT"), expression=pb.FilterExpression(expression="*"))])
    cmd = spb.TelemetryCommand()
    cmd.settings.CopyFrom(pb.Settings(client_type=pb.ClientType.PUSH_CONSUMER, subscription=sub))
    _result(acts.settings(cmd, push, lambda c: None))
    m = pb.Message(topic=pb.Resource(name="RenewT"), body=b"slow")
    m.system_properties.message_id = "MSG-RENEW-1"
    assert _result(acts.send_message(spb.SendMessageRequest(messages=[m]), push)).status.code == pb.Code.OK
    acts.receipts.start()
    yield acts, push, clock
    acts.receipts.stop()


def _receive(acts, ch, auto_renew):
    req = spb.ReceiveMessageRequest(group=pb.Resource(name=GROUP), batch_size=4, auto_renew=auto_renew,
                                    message_queue=pb.MessageQueue(topic=pb.Resource(name="RenewT"), id=-1))
    if not auto_renew:
        req.invisible_duration.seconds = 30
    req.long_polling_timeout.seconds = 0
    d = acts.receive_message(req, ch, 10_000)
    for _ in range(5):  # an empty receive is held the proxy's minimum long polling, 5 s
        if not d.called:
            acts.broker.reactor.advance(1)
    return [r.message for r in _result(d) if r.WhichOneof("content") == "message"]


def _advance(acts, push, clock, seconds):
    """Time passes second by second; the client heartbeats every 10 s, as a real one does."""
    for i in range(seconds):
        clock.advance(1)
        if i % 10 == 0:
            _result(acts.heartbeat(spb.HeartbeatRequest(client_type=pb.ClientType.PUSH_CONSUMER,
                                                        group=pb.Resource(name=GROUP)), push))


def _ack(acts, ch, handle):
    req = spb.AckMessageRequest(group=pb.Resource(name=GROUP), topic=pb.Resource(name="RenewT"), entries=[
        spb.AckMessageEntry(message_id="MSG-RENEW-1", receipt_handle=handle)])
    return _result(acts.ack_message(req, ch))


def test_handle_renewed_before_it_expires_and_the_original_handle_acks(env) -> None:
    acts, push, clock = env
    [msg] = _receive(acts, push, auto_renew=True)
    original = msg.system_properties.receipt_handle
    assert original.split(" ")[2] == "60000"
    other = acts.channel_of("simple-1", "127.0.0.1:5001")
    _advance(acts, push, clock, 55)  # a scan every 5 s renews within 10 s of the end
    [tracked] = acts.receipts.groups[("push-1", GROUP)].values()
    assert tracked.handle != original and tracked.renew_times == 1
    assert tracked.next_visible() > acts.broker.now_ms() + 60_000 - 10_000
    _advance(acts, push, clock, 65)  # 120 s: without the renewal it would be back by now
    assert _receive(acts, other, auto_renew=False) == []
    resp = _ack(acts, push, original)  # the client's handle maps to the renewed one
    assert resp.status.code == pb.Code.OK, resp
    assert acts.receipts.tracked == 0
    _advance(acts, push, clock, 200)
    assert _receive(acts, other, auto_renew=False) == []  # acked for good


def test_renewal_stops_after_renew_max_time_and_the_message_comes_back(env) -> None:
    acts, push, clock = env
    acts.receipts.config.renewMaxTimeMillis = 90_000
    [msg] = _receive(acts, push, auto_renew=True)
    other = acts.channel_of("simple-1", "127.0.0.1:5001")
    _advance(acts, push, clock, 95)  # renewed at ~50 s, until ~110 s
    assert acts.receipts.tracked == 1
    _advance(acts, push, clock, 10)  # renewMaxTimeMillis=90 s: due again, given back with the retry delay (10 s)
    assert acts.receipts.tracked == 0
    again = _receive_within(acts, push, other, clock, 60)
    assert [m.body for m in again] == [b"slow"]
    assert again[0].system_properties.delivery_attempt == 2


def _receive_within(acts, push, other, clock, seconds: int) -> list:
    """Receives on ``other`` each second of ``seconds`` until something comes."""
    for _ in range(seconds):
        _advance(acts, push, clock, 1)
        again = _receive(acts, other, auto_renew=False)
        if again:
            return again
    return []


def test_renewal_stop_gives_the_message_back_with_the_groups_retry_policy(env) -> None:
    """STOP_RENEW's delay is the group's groupRetryPolicy for the message's reconsume times (0:
    next[2] of a customized policy), not the default's 10 s."""
    acts, push, clock = env
    cfg = acts.broker.subscription_group_manager.find(GROUP)
    cfg.extra["groupRetryPolicy"] = {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 1000, 40_000]}}
    acts.receipts.config.renewMaxTimeMillis = 90_000
    [msg] = _receive(acts, push, auto_renew=True)
    other = acts.channel_of("simple-1", "127.0.0.1:5001")
    _advance(acts, push, clock, 105)  # renewed at ~50 s; stopped at ~100 s with 40 s
    assert acts.receipts.tracked == 0
    _advance(acts, push, clock, 25)  # the receive below is held 5 s more, to ~135 s: still before ~140 s
    assert _receive(acts, other, auto_renew=False) == []  # the default (10 s) would have given it by now
    assert [m.body for m in _receive_within(acts, push, other, clock, 30)] == [b"slow"]


def test_termination_removes_the_handles_and_gives_the_messages_back(env) -> None:
    acts, push, clock = env
    assert len(_receive(acts, push, auto_renew=True)) == 1
    assert acts.receipts.tracked == 1
    _advance(acts, push, clock, 3)  # (a checkpoint of the same pop time would match the old one's ack)
    resp = _result(acts.notify_client_termination(spb.NotifyClientTerminationRequest(group=pb.Resource(name=GROUP)),
                                                  push))
    assert resp.status.code == pb.Code.OK
    assert acts.receipts.tracked == 0
    other = acts.channel_of("simple-1", "127.0.0.1:5001")
    waited, again = 0, []
    while not again and waited < 60:  # invisibleTimeMillisWhenClear: 1 s, not the 60 s of the pop
        _advance(acts, push, clock, 1)
        waited += 1
        again = _receive(acts, other, auto_renew=False)
    assert [m.body for m in again] == [b"slow"] and waited < 10


def test_change_invisible_duration_stops_the_renewal(env) -> None:
    acts, push, clock = env
    [msg] = _receive(acts, push, auto_renew=True)
    _advance(acts, push, clock, 55)
    req = spb.ChangeInvisibleDurationRequest(group=pb.Resource(name=GROUP), topic=pb.Resource(name="RenewT"),
                                             receipt_handle=msg.system_properties.receipt_handle,
                                             message_id="MSG-RENEW-1")
    req.invisible_duration.seconds = 20
    resp = _result(acts.change_invisible_duration(req, push))  # the renewed handle is the one changed
    assert resp.status.code == pb.Code.OK, resp
    assert acts.receipts.tracked == 0


# ---------------------------------------------------------------------- the table alone
class FakeBroker:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, defer.Deferred]] = []
        self.online = True

    def change(self, t, invisible):
        d: defer.Deferred = defer.Deferred()
        self.calls.append((t.handle, invisible, d))
        return d


def _handle(pop_ms: int, invisible: int, offset: int = 0) -> str:
    return f"{offset} {pop_ms} {invisible} 0 0 broker-a 0 {offset} 100"


@pytest.fixture
def table():
    clock = task.Clock()
    clock.advance(1000)
    fake = FakeBroker()
    handles = ReceiptHandles(clock, fake.change, lambda c, g: fake.online, lambda g, n: 10_000, RenewConfig())
    handles.start()
    yield handles, fake, clock
    handles.stop()


def test_an_ack_during_a_renewal_waits_for_its_new_handle(table) -> None:
    handles, fake, clock = table
    h0 = _handle(1_000_000, 60_000)
    handles.add("c", "g", "T", "M", h0, 0)
    clock.advance(45)  # 10 s before the end: nothing yet
    assert fake.calls == []
    clock.advance(5)
    [(handle, invisible, d)] = fake.calls
    assert (handle, invisible) == (h0, 60_000)  # RenewStrategyPolicy's first time
    acked = handles.remove("c", "g", h0)
    assert not acked.called
    d.callback(_handle(1_050_000, 60_000))
    assert _result(acked) == _handle(1_050_000, 60_000)
    clock.advance(300)
    assert len(fake.calls) == 1  # no longer renewed


def test_failed_renewals_are_retried_then_given_up(table) -> None:
    handles, fake, clock = table
    handles.add("c", "g", "T", "M", _handle(1_000_000, 60_000), 0)
    for n in range(3):  # maxRenewRetryTimes
        clock.advance(5)
        while len(fake.calls) <= n:
            clock.advance(5)
        fake.calls[-1][2].errback(RuntimeError("broker busy"))
    clock.advance(5)
    assert handles.tracked == 0 and len(fake.calls) == 3


def test_a_refused_handle_ends_the_renewal(table) -> None:
    handles, fake, clock = table
    handles.add("c", "g", "T", "M", _handle(1_000_000, 20_000), 0)
    clock.advance(15)
    fake.calls[0][2].errback(InvalidHandle("no message"))
    assert handles.tracked == 0


def test_an_expired_client_gives_its_messages_back(table) -> None:
    handles, fake, clock = table
    h0 = _handle(1_000_000, 60_000)
    handles.add("c", "g", "T", "M", h0, 0)
    fake.online = False  # no longer in the group's consumer table
    clock.advance(5)
    assert handles.tracked == 0
    assert [(h, i) for h, i, _ in fake.calls] == [(h0, 1000)]  # invisibleTimeMillisWhenClear


def test_the_table_is_bounded_per_client_and_group(table) -> None:
    handles, fake, clock = table
    for n in range(MAX_PER_GROUP + 10):
        handles.add("c", "g", "T", f"M{n}", _handle(1_000_000, 60_000, n), 0)
    assert handles.tracked == MAX_PER_GROUP
    assert _handle(1_000_000, 60_000, 0) not in handles.groups[("c", "g")]  # the oldest left
