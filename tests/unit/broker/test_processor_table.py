"""BrokerController.register_processor(): one processor per request code, as each processor declares."""
from __future__ import annotations

from rmqpy.broker.stats import BrokerStatsHook
from rmqpy.protocol.codes import RequestCode
from tests.unit.broker.helpers import make_broker


def test_each_processor_answers_exactly_the_codes_it_declares(tmp_path) -> None:
    broker, _clock = make_broker(tmp_path)
    try:
        table = broker.dispatcher._processors
        for processor in broker.processors.values():
            served = {code for code, p in table.items() if p is processor}
            assert served == {int(c) for c in processor.codes}, type(processor).__name__
        assert set(table) == {int(c) for p in broker.processors.values() for c in p.codes}
    finally:
        broker.message_store.shutdown()


def test_send_and_pull_are_answered_by_their_processors_with_the_stats_hooks(tmp_path) -> None:
    broker, _clock = make_broker(tmp_path)
    try:
        table = broker.dispatcher._processors
        send, pull = broker.processors["SendMessageProcessor"], broker.processors["PullMessageProcessor"]
        assert table[int(RequestCode.SEND_MESSAGE_V2)] is send and table[int(RequestCode.PULL_MESSAGE)] is pull
        assert [type(h) for h in send.send_message_hooks] == [BrokerStatsHook]
        assert [type(h) for h in pull.consume_message_hooks] == [BrokerStatsHook]
    finally:
        broker.message_store.shutdown()
