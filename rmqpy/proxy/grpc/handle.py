"""Receipt handles as the ack, change-invisible-duration and forward-to-DLQ activities read them.

A handle is 5.3.3's ``ReceiptHandle``: the broker's ``POP_CK`` receipt (``rmqpy.broker.pop.receipt``)
and the message's commit log offset, space-separated. It is the client's text: every check answers
with the proxy's ``Code`` and words.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from rmqpy.broker.pop.receipt import Receipt, ReceiptError, parse_receipt
from rmqpy.protocol.codes import ResponseCode
from rmqpy.proxy.grpc import validate
from rmqpy.proxy.grpc.validate import Code, Refused

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

#: the broker's answers to an ack or change of invisible time that mean the handle is no longer valid
BAD_HANDLE = (ResponseCode.NO_MESSAGE, ResponseCode.MESSAGE_ILLEGAL)


class Handle(NamedTuple):
    receipt: Receipt
    extra_info: str  # the first eight fields: the ``extraInfo`` the broker takes
    queue_offset: int  # the message's (a handle without one is refused)


def parse_handle(text: str, revive_queue_num: int) -> Handle:
    """The handle the client sent, read."""
    if not text:
        raise Refused(Code.INVALID_RECEIPT_HANDLE, "receipt handle cannot be empty")
    try:
        receipt = parse_receipt(text, revive_queue_num)
    except ReceiptError as exc:
        raise Refused(Code.INVALID_RECEIPT_HANDLE, f"receipt handle is invalid: {exc}") from None
    if receipt.queue_offset is None:
        raise Refused(Code.INVALID_RECEIPT_HANDLE, "receipt handle has no queue offset")
    return Handle(receipt, " ".join(text.split(" ")[:8]), receipt.queue_offset)


def check_live(receipt: Receipt, broker: "Broker", expiry: bool = True) -> None:
    """``AbstractProcessor.validateReceiptHandle`` (not for a forward to the DLQ), then the
    handle's broker as ``ClusterMessageService`` looks it up: this broker, or none known."""
    if expiry and validate.expired(receipt.pop_time + receipt.invisible_time, broker.now_ms()):
        raise validate.proxy_exception(Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
    if receipt.broker_name != broker.broker_config.brokerName:
        raise validate.proxy_exception(Code.INVALID_RECEIPT_HANDLE, f"cannot find broker {receipt.broker_name}")


def commit_log_offset(text: str) -> str:
    """The handle's ninth field, the message's commit log offset ("-1" for a handle without one)."""
    return text.split(" ")[8] if text.count(" ") == 8 else "-1"
