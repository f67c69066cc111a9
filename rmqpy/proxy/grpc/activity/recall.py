"""RecallMessage (the proxy's ``RecallMessageActivity`` and ``ProducerProcessor.recallMessage``): the topic
checked as every call checks it and its ``message.type`` against DELAY (an unknown topic's type is
UNSPECIFIED, which no message type passes), the recall handle decoded (rmqpy/protocol/recall.py), then
RECALL_MESSAGE to the broker the handle names: here the endpoint's own broker (a handle of another broker
is one the proxy cannot find either). That broker refuses it as Java's does by default
(rmqpy/broker/processor/recall.py); its remark comes back as the proxy passes a broker's refusal on,
INTERNAL_SERVER_ERROR. Compared call by call with proxy 5.4.0 (tests/interop/grpc_diff.py)."""
from __future__ import annotations

from typing import Any

from rocketmq.grpc_protocol import service_pb2 as spb
from twisted.internet import defer

from rmqpy.broker.topic_attributes import topic_message_type
from rmqpy.protocol import recall
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import RecallMessageRequestHeader
from rmqpy.proxy.grpc import validate
from rmqpy.proxy.grpc.context import ActivityContext
from rmqpy.proxy.grpc.convert import Code, status
from rmqpy.proxy.grpc.local import LocalChannel
from rmqpy.proxy.grpc.validate import Refused


class RecallMessageActivity:
    def __init__(self, ctx: ActivityContext) -> None:
        self.ctx = ctx

    def recall_message(self, req: Any, ch: LocalChannel) -> defer.Deferred[Any]:
        topic = validate.check_topic(req.topic.name)
        tc = self.ctx.broker.topic_config_manager.select(topic)
        # the topic's type from its metadata: UNSPECIFIED when unknown; MIXED without the attribute here
        # (the proxy: NORMAL), as for a send (SendMessageActivity.check_message_type)
        expected = "UNSPECIFIED" if tc is None else topic_message_type(tc.attributes, "MIXED")
        validate.topic_message_type(expected, "DELAY")
        try:
            handle = recall.decode(req.recall_handle)
        except ValueError as exc:
            raise validate.proxy_exception(Code.INTERNAL_SERVER_ERROR, str(exc)) from None
        if handle.broker_name != self.ctx.broker.broker_config.brokerName:
            raise validate.proxy_exception(Code.BAD_REQUEST, f"cannot find broker {handle.broker_name}")
        header = RecallMessageRequestHeader(topic=topic, recallHandle=req.recall_handle)
        return self.ctx.invoke(ch, RemotingCommand.request(RequestCode.RECALL_MESSAGE, header)).addCallback(_answer)


def _answer(resp: RemotingCommand) -> Any:
    if resp.code != ResponseCode.SUCCESS:
        raise Refused(Code.INTERNAL_SERVER_ERROR, resp.remark or str(resp.code))
    return spb.RecallMessageResponse(status=status(Code.OK), message_id=(resp.ext_fields or {}).get("msgId", ""))
