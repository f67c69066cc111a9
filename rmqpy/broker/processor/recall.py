"""RecallMessageProcessor: RECALL_MESSAGE (370), a producer taking back a delay message before its time
with the recall handle its send was answered with (rmqpy/protocol/recall.py).

As 5.3.3's ``RecallMessageProcessor`` with ``recallMessageEnable`` at its default, false: the header is
read (a missing topic or handle is the header's error) and the recall is refused, NO_PERMISSION
"recall failed, operation is forbidden", with the broker's region as every answer of it carries. rmqpy
has no such key: a recall would need the timer wheel to drop the parked message (Java's delete marker,
``TIMER_DEL_UNIQKEY``), which rmqpy's timer does not have yet.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from rmqpy.broker.processor.send import PROPERTY_MSG_REGION
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import RecallMessageRequestHeader
from rmqpy.remoting.channel import Channel

if TYPE_CHECKING:
    from rmqpy.broker.api import Broker

FORBIDDEN = "recall failed, operation is forbidden"


class RecallMessageProcessor:
    codes = (RequestCode.RECALL_MESSAGE,)

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        request.decode_header(RecallMessageRequestHeader)
        return request.response(ResponseCode.NO_PERMISSION, FORBIDDEN,
                                ext_fields={PROPERTY_MSG_REGION: self.broker.broker_config.regionId})
