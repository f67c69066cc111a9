"""Topic attributes as UPDATE_AND_CREATE_TOPIC alters them (Java's AttributeParser / TopicAttributes)."""
from __future__ import annotations

import pytest

from rmqpy.broker.topic_attributes import AttributeError_, alter


def test_add_change_and_delete():
    assert alter({}, "+message.type=FIFO") == {"message.type": "FIFO"}
    assert alter({"message.type": "FIFO"}, "+message.type=NORMAL,+reserve.time=24") == {
        "message.type": "NORMAL", "reserve.time": "24"}
    assert alter({"message.type": "FIFO", "queue.type": "SimpleCQ"}, "-queue.type") == {"message.type": "FIFO"}
    assert alter({"message.type": "FIFO"}, None) == {"message.type": "FIFO"}


@pytest.mark.parametrize("bad", ["message.type=FIFO", "+message.type", "+nope=1", "+message.type=LIFO",
                                 "+reserve.time=999", "+reserve.time=x", "+message.type=FIFO,+message.type=FIFO",
                                 "+" + "x" * 5000 + "=1"])
def test_refused_as_java_refuses(bad):
    with pytest.raises(AttributeError_):
        alter({}, bad)
