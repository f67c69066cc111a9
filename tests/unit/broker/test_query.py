"""QUERY_MESSAGE by key and VIEW_MESSAGE_BY_ID."""
from __future__ import annotations

import pytest

from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import QueryMessageRequestHeader, ViewMessageRequestHeader
from rmqpy.protocol.message import decode_offset_msg_id, decode_records
from tests.unit.broker.helpers import FakeChannel, call, send_request


@pytest.fixture
def broker_overrides():
    return {"messageIndexEnable": True}


def query(broker, key, unique=False, max_num=64):
    h = QueryMessageRequestHeader(topic="T", key=key, maxNum=max_num, beginTimestamp=0, endTimestamp=2**62)
    req = RemotingCommand.request(RequestCode.QUERY_MESSAGE, h)
    req.ext_fields["_UNIQUE_KEY_QUERY"] = "true" if unique else "false"
    return call(broker, FakeChannel(), req)


def test_query_by_key_and_view_by_id(broker):
    ch = FakeChannel()
    ids = []
    for i in range(3):
        resp = call(broker, ch, send_request("T", f"m{i}".encode(), props={"KEYS": "k1 k2" if i < 2 else "k3"}))
        ids.append(resp.ext_fields["msgId"])
    resp = query(broker, "k1")
    assert resp.code == ResponseCode.SUCCESS
    assert sorted(m.body for m in decode_records(resp.body)) == [b"m0", b"m1"]
    assert int(resp.ext_fields["indexLastUpdatePhyoffset"]) >= 0 and "indexLastUpdateTimestamp" in resp.ext_fields
    resp = query(broker, "nope")
    assert resp.code == ResponseCode.QUERY_NOT_FOUND
    assert resp.remark == "can not find message, maybe time range not correct"

    _, phy = decode_offset_msg_id(ids[2])
    resp = call(broker, ch, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID,
                                                    ViewMessageRequestHeader(offset=phy)))
    assert resp.code == ResponseCode.SUCCESS
    (m,) = list(decode_records(resp.body))
    assert m.body == b"m2" and m.msg_id == ids[2]
    resp = call(broker, ch, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID,
                                                    ViewMessageRequestHeader(offset=999999)))
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "can not find message by the offset, 999999"


def test_unique_key_query(broker):
    ch = FakeChannel()
    resp = call(broker, ch, send_request("T", b"u", props={"UNIQ_KEY": "ABCDEF0123"}))
    assert resp.code == ResponseCode.SUCCESS
    resp = query(broker, "ABCDEF0123", unique=True, max_num=1)
    assert resp.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_records(resp.body)] == [b"u"]
