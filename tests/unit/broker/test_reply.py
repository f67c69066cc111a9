"""SEND_REPLY_MESSAGE(_V2): push to the requester's producer channel, store, answer as Java."""
from __future__ import annotations

from twisted.internet import defer

from rmqpy.broker.clients import ClientChannelInfo
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.message import string_to_properties
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


class Requester(FakeChannel):
    def __init__(self, answer: int | None = ResponseCode.SUCCESS) -> None:
        super().__init__()
        self.answer = answer
        self.pushed = []
        self.pending = []

    def invoke(self, request, timeout=3.0):
        self.pushed.append((request, timeout))
        if self.answer is None:
            d = defer.Deferred()
            self.pending.append(d)
            return d
        return defer.succeed(request.response(self.answer, None))


def reply_request(client_id="req-1", code=RequestCode.SEND_REPLY_MESSAGE_V2):
    props = {"CORRELATION_ID": "c-1", "MSG_TYPE": "reply", "TTL": "3000", "CLUSTER": "DefaultCluster"}
    if client_id is not None:
        props["REPLY_TO_CLIENT"] = client_id
    return send_request(REPLY_TOPIC, b"the answer", props=props, code=code)


def stored(broker):
    return broker.message_store.get_max_offset_in_queue(REPLY_TOPIC, 0)


def test_reply_is_pushed_to_the_requester_and_stored(broker):
    req = Requester()
    broker.producer_manager.register_producer("RG", ClientChannelInfo(req, "req-1", 0, 399))
    resp = call(broker, FakeChannel(), reply_request())
    assert resp.code == ResponseCode.SUCCESS and resp.remark is None
    (push, timeout), = req.pushed
    assert push.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT and not push.is_oneway and timeout == 10.0
    assert push.body == b"the answer"
    f = push.ext_fields
    assert f["topic"] == REPLY_TOPIC and f["producerGroup"] == "PG" and f["storeHost"] == "127.0.0.1:10911"
    props = string_to_properties(f["properties"])
    assert props["CORRELATION_ID"] == "c-1" and "PUSH_REPLY_TIME" in props
    assert stored(broker) == 1
    # the stored copy's id wins in the answer (Java overwrites msgId when the put succeeds)
    assert resp.ext_fields["queueOffset"] == "0" and len(resp.ext_fields["msgId"]) == 32


def test_v1_code_and_no_store(tmp_path):
    b, _ = make_broker(tmp_path, storeReplyMessageEnable=False)
    req = Requester()
    b.producer_manager.register_producer("RG", ClientChannelInfo(req, "req-1", 0, 399))
    from rmqpy.protocol.command import RemotingCommand
    from rmqpy.protocol.headers.broker import SendMessageRequestHeaderV2
    v2 = reply_request()
    v1 = RemotingCommand.request(RequestCode.SEND_REPLY_MESSAGE,
                                 v2.decode_header(SendMessageRequestHeaderV2).to_v1(), v2.body)
    resp = call(b, FakeChannel(), v1)
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["msgId"] == "0"
    assert b.message_store.get_max_offset_in_queue(REPLY_TOPIC, 0) == 0
    b.shutdown()


def test_no_waiting_requester_gets_java_system_error_and_is_still_stored(broker):
    resp = call(broker, FakeChannel(), reply_request("gone-client"))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "push reply message fail, channel of <gone-client> not found."
    assert stored(broker) == 1


def test_reply_without_reply_to_client(broker):
    resp = call(broker, FakeChannel(), reply_request(None))
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "reply message properties[REPLY_TO_CLIENT] is null")


def test_requester_answering_an_error(broker):
    req = Requester(answer=ResponseCode.SYSTEM_ERROR)
    broker.producer_manager.register_producer("RG", ClientChannelInfo(req, "req-1", 0, 399))
    resp = call(broker, FakeChannel(), reply_request())
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "push reply message to req-1fail.")


def test_send_checks_apply(broker):
    req = reply_request()
    req.ext_fields["b"] = "SCHEDULE_TOPIC_XXXX"
    resp = call(broker, FakeChannel(), req)
    assert resp.code == ResponseCode.NO_PERMISSION
