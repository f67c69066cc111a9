"""SET_MESSAGE_REQUEST_MODE: the mode applies at once; messageRequestMode.json is written coalesced."""
from __future__ import annotations

import os

from rmqpy.broker.processor.assignment import PERSIST_DELAY
from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request


def set_mode(broker, ch, mode: str, share: int) -> None:
    body = {"topic": "T", "consumerGroup": "G", "mode": mode, "popShareQueueNum": share}
    resp = call(broker, ch, RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, None,
                                                     fastjson.dumps(body).encode()))
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def written(broker) -> dict | None:
    path = broker.message_request_mode_manager.path
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return fastjson.loads(fh.read())["messageRequestModeMap"]["T"]["G"]


def test_many_requests_write_the_file_once_after_the_delay_and_shutdown_writes_what_is_pending(tmp_path):
    broker, clock = make_broker(tmp_path)
    ch = FakeChannel()
    assert call(broker, ch, send_request("T")).code == ResponseCode.SUCCESS
    try:
        writes = []
        manager = broker.message_request_mode_manager
        real = manager.persist
        manager.persist = lambda: (writes.append(clock.seconds()), real())  # type: ignore[method-assign]
        for share in range(100):
            set_mode(broker, ch, "POP", share)
        assert broker.message_request_mode_manager.get("T", "G")["popShareQueueNum"] == 99  # in effect at once
        assert writes == [] and written(broker) is None  # nothing written on the request's path
        clock.advance(PERSIST_DELAY)
        assert len(writes) == 1 and written(broker)["popShareQueueNum"] == 99
        set_mode(broker, ch, "PULL", 0)
        assert len(writes) == 1
    finally:
        broker.shutdown()
    assert len(writes) == 2 and written(broker)["mode"] == "PULL"  # the shutdown wrote the pending change
