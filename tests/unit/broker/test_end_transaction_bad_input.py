"""END_TRANSACTION bad input answered as the Java broker (rocketmq-all-5.3.3 / 4.9.7
EndTransactionRequestHeader.checkFields; compared with the real Java 5.3.3 broker in
tests/interop/test_transaction_java.py::test_bad_input_answered_as_java_broker)."""
from __future__ import annotations

import pytest

from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import EndTransactionRequestHeader
from tests.unit.broker.helpers import FakeChannel, call


def end_tx(state: int, oneway: bool = False, from_check: bool = False) -> RemotingCommand:
    h = EndTransactionRequestHeader(producerGroup="PG", tranStateTableOffset=0, commitLogOffset=10 ** 12,
                                    commitOrRollback=state, fromTransactionCheck=from_check, msgId="X")
    return RemotingCommand.request(RequestCode.END_TRANSACTION, h, oneway=oneway)


@pytest.mark.parametrize("state", [3, 4, -1, 16])
def test_bad_commit_or_rollback_is_an_error_answer(broker, state):
    resp = call(broker, FakeChannel(), end_tx(state))
    assert resp is not None and resp.code == ResponseCode.SYSTEM_ERROR
    assert "commitOrRollback field wrong" in resp.remark


def test_bad_commit_or_rollback_oneway_gets_no_answer(broker):
    assert call(broker, FakeChannel(), end_tx(3, oneway=True)) is None


@pytest.mark.parametrize("from_check", [False, True])
def test_pending_state_gets_no_answer(broker, from_check):
    assert call(broker, FakeChannel(), end_tx(0, from_check=from_check)) is None


@pytest.mark.parametrize("state", [8, 12])
def test_unknown_offset(broker, state):
    resp = call(broker, FakeChannel(), end_tx(state))
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
