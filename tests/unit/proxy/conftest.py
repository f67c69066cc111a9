"""What the gRPC activity tests share: a broker on a task.Clock with one topic, and its activities."""
from __future__ import annotations

from typing import Any

import pytest

from rmqpy.protocol.bodies.topic import TopicConfig
from rmqpy.proxy.grpc.activities import MessagingActivities
from tests.unit.broker.helpers import make_broker


@pytest.fixture
def activities_on(tmp_path):
    """``activities_on(topic, queues)``: (broker, clock, activities) of a broker holding ``topic`` with
    ``queues`` read and write queues; the brokers made are shut down after the test."""
    made: list[Any] = []

    def make(topic: str, queues: int = 2) -> tuple[Any, Any, MessagingActivities]:
        broker, clock = make_broker(tmp_path / f"broker-{len(made)}")
        made.append(broker)
        tc = TopicConfig(topic)
        tc.readQueueNums = tc.writeQueueNums = queues
        broker.topic_config_manager.update_topic_config(tc)
        return broker, clock, MessagingActivities(broker, broker.dispatcher, 8081)
    yield make
    for broker in made:
        broker.shutdown()
