"""ReceiveMessage answers, byte for byte, over the typed pop result.

The receive activity reads the broker's pop result (``rmqpy.broker.pop.result.PopResult``) as typed
fields; before, it parsed the POP_MESSAGE answer's header texts. The digests are of the answers
(protobuf, deterministic serialization) rmqpy gave at 72bcd57 for the same scenario: receipt handles
built from the start offsets, delivery attempts from an orderly pop's counts, and a message past the
group's attempts forwarded to the DLQ instead of delivered."""
from __future__ import annotations

import hashlib

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from rmqpy.protocol.bodies.broker import SubscriptionGroupConfig
from rmqpy.protocol.codes import ResponseCode
from rmqpy.proxy.grpc.activities import MessagingActivities
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request


def _digest(responses: list) -> str:
    return hashlib.sha256(b"".join(r.SerializeToString(deterministic=True) for r in responses)).hexdigest()[:16]


def _scenario(tmp_path) -> list[list]:
    broker, clock = make_broker(tmp_path, popFromRetryProbability=0)
    broker.pop_service.random.seed(7)
    for name, orderly, retries in (("GO", True, 16), ("GD", False, 0)):
        sgc = SubscriptionGroupConfig(groupName=name)
        sgc.retryMaxTimes = retries
        sgc.extra["consumeMessageOrderly"] = orderly
        broker.subscription_group_manager.update(sgc)
    acts = MessagingActivities(broker, broker.dispatcher, 8081)
    ch = acts.channel_of("client-1", "127.0.0.1:5000")
    remoting = FakeChannel("127.0.0.1", 5555)
    answers = []

    def receive(group: str, batch: int = 32) -> list:
        req = spb.ReceiveMessageRequest(group=pb.Resource(name=group), batch_size=batch,
                                        message_queue=pb.MessageQueue(topic=pb.Resource(name="T"), id=-1))
        req.invisible_duration.seconds = 10
        req.long_polling_timeout.seconds = 0
        out: list = []
        d = acts.receive_message(req, ch, 10_000)
        d.addBoth(out.append)
        for _ in range(6):
            if not out:
                clock.advance(1)
        assert out and isinstance(out[0], list), out
        answers.append(out[0])
        return out[0]

    def send(body: bytes, queue_id: int) -> None:
        assert call(broker, remoting, send_request("T", body, queue_id=queue_id)).code == ResponseCode.SUCCESS

    try:
        for i in range(6):
            send(f"m{i}".encode(), i % 4)
        receive("G")  # normal queues: handles from the start offsets
        receive("G")  # nothing visible
        clock.advance(22)  # revived into the retry topic, with their receipts
        send(b"n0", 2)
        receive("G")
        receive("GO")  # orderly: every message of T, attempts from the counts
        clock.advance(11)
        receive("GO")  # again: a second attempt each
        receive("GD", batch=1)
        clock.advance(22)
        receive("GD")  # one attempt allowed: the revived one goes to %DLQ%GD instead
        assert broker.message_store.get_max_offset_in_queue("%DLQ%GD", 0) == 1
    finally:
        broker.shutdown()
    return answers


BEFORE = ["63d924779bde5671", "7b1c818e8b8f37d4", "aa791d069a977360", "6aec35a473ed6bb4", "dbaeb12151f4a257",
          "f9be0e0fbaf0b332", "ac1b925d0030fabe"]  # 72bcd57


def test_receive_answers_are_the_bytes_given_before_the_result_was_typed(tmp_path) -> None:
    answers = _scenario(tmp_path)
    attempts = [[r.message.system_properties.delivery_attempt for r in a if r.HasField("message")] for a in answers]
    assert attempts[3:5] == [[1] * 7, [2] * 7]  # the orderly pop's counts
    assert [_digest(a) for a in answers] == BEFORE
