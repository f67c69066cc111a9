"""How long an empty receive is held (rmqpy.proxy.grpc.polling): the proxy's ReceiveMessageActivity
rule, with the clock driven by task.Clock. The old rule (hold until 100 ms before the deadline,
refuse a long-polling timeout above 20 s) fails each of these."""
from __future__ import annotations

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from rmqpy.protocol.bodies.topic import TopicConfig
from rmqpy.proxy.grpc.activities import MessagingActivities, Refused
from rmqpy.proxy.grpc.polling import PollingRefused, polling_ms
from tests.unit.broker.helpers import make_broker


@pytest.mark.parametrize("asked, remaining, request_timeout, held", [
    (None, 20_000, 10_000, 15_000),  # no long polling asked (Java 5.0.x): half the request timeout to spare
    (None, 13_000, 3_000, 11_500),
    (None, 33_000, 3_000, 20_000),  # capped at grpcClientConsumerMaxLongPollingTimeoutMillis
    (None, 6_000, 3_000, 5_000),  # raised to the minimum, which still fits the deadline
    (30_000, 33_000, 3_000, 20_000),  # asked beyond the maximum: capped, not refused
    (0, 10_000, 3_000, 5_000),  # asked 0: the minimum
    (-1, 10_000, 3_000, 5_000),
    (15_000, 8_000, 3_000, 8_000),  # never past the deadline
])
def test_polling_time_is_the_proxys(asked, remaining, request_timeout, held) -> None:
    assert polling_ms(asked, remaining, request_timeout, "5.0.8") == held


@pytest.mark.parametrize("version, code", [
    ("5.0.3", pb.Code.ILLEGAL_POLLING_TIME), ("5.1.2", pb.Code.ILLEGAL_POLLING_TIME),
    ("5.0.2", pb.Code.BAD_REQUEST), ("", pb.Code.BAD_REQUEST),
    ("5.0.10", pb.Code.BAD_REQUEST),  # Java compares the version strings: "5.0.3" > "5.0.10"
])
def test_less_than_the_minimum_left_is_refused_with_the_code_the_clients_version_knows(version, code) -> None:
    with pytest.raises(PollingRefused) as err:
        polling_ms(None, 4_999, 3_000, version)
    assert err.value.code == code
    assert err.value.message.startswith("The deadline time remaining is not enough for polling")


@pytest.fixture
def env(tmp_path):
    broker, clock = make_broker(tmp_path)
    broker.topic_config_manager.update_topic_config(TopicConfig("PollT"))
    acts = MessagingActivities(broker, broker.dispatcher, 8081)
    ch = acts.channel_of("simple-1", "127.0.0.1:5000")
    settings = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name="PollG"), subscriptions=[pb.SubscriptionEntry(
            topic=pb.Resource(name="PollT"), expression=pb.FilterExpression(expression="*"))]))
    settings.request_timeout.seconds = 10  # what the suite sets (ClientConfiguration.setRequestTimeout)
    cmd = spb.TelemetryCommand(settings=settings)
    acts.settings(cmd, ch, lambda c: None)
    yield acts, ch, clock
    broker.shutdown()


def _request(long_polling_s: int | None = None) -> spb.ReceiveMessageRequest:
    req = spb.ReceiveMessageRequest(group=pb.Resource(name="PollG"), batch_size=16,
                                    message_queue=pb.MessageQueue(topic=pb.Resource(name="PollT"), id=-1))
    req.invisible_duration.seconds = 30
    if long_polling_s is not None:
        req.long_polling_timeout.seconds = long_polling_s
    return req


def test_an_empty_receive_is_answered_with_half_the_request_timeout_to_spare(env) -> None:
    """A Java 5.0.3 SimpleConsumer (awaitDuration 10 s, requestTimeout 10 s) sends no long-polling
    timeout and gives up after 20 s: the answer comes at 15 s, as the proxy's, not at 19.9 s."""
    acts, ch, clock = env
    got = acts.receive_message(_request(), ch, 20_000, "5.0.3")
    clock.advance(14.9)
    assert not got.called
    clock.advance(0.1)
    assert got.called
    [resp] = got.result
    assert resp.status.code == pb.Code.MESSAGE_NOT_FOUND


def test_a_long_polling_timeout_beyond_the_maximum_is_held_the_maximum(env) -> None:
    acts, ch, clock = env
    got = acts.receive_message(_request(30), ch, 33_000, "5.2.0")  # awaitDuration 30 s, requestTimeout 3 s
    clock.advance(19.9)
    assert not got.called
    clock.advance(0.1)
    assert got.called and got.result[0].status.code == pb.Code.MESSAGE_NOT_FOUND


def test_a_deadline_shorter_than_the_minimum_is_refused(env) -> None:
    acts, ch, _ = env
    with pytest.raises(Refused) as err:
        acts.receive_message(_request(), ch, 4_000, "5.0.3")
    assert err.value.code == pb.Code.ILLEGAL_POLLING_TIME
