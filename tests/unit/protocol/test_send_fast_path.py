"""SendMessageProcessor's fast paths (the precompiled send header schemas, the inline success
response, answering without a Deferred in ASYNC_FLUSH) against the general code."""
from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from twisted.internet import defer, task

from rmqpy.broker.fast_failure import BrokerFastFailure
from rmqpy.broker.processor import send as S
from rmqpy.protocol import command as codec
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import HeaderError, RemotingCommand
from rmqpy.protocol.headers.base import HeaderSchema
from rmqpy.protocol.headers.broker import (
    SEND_HEADER,
    SEND_HEADER_V2,
    SEND_V2_FIELDS,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from rmqpy.store.message_store import AppendMessageResult, AppendMessageStatus, PutMessageResult, PutMessageStatus
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request


def _slow(ext, long_keys=False):
    """The declared decode, as the send path ran it before the schemas."""
    try:
        if long_keys:
            return SendMessageRequestHeader.decode(ext)
        return SendMessageRequestHeaderV2.decode(ext).to_v1()
    except HeaderError as exc:
        return ("HeaderError", str(exc))


def _fast(ext, long_keys=False):
    schema = SEND_HEADER if long_keys else SEND_HEADER_V2
    try:
        return schema.decode(ext)
    except HeaderError as exc:
        return ("HeaderError", str(exc))


BASE = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000", "h": "0",
        "i": "WAIT\u0001true\u0002", "j": "0", "k": "false", "l": "16", "m": "false", "n": "broker-a"}
INTS = ["0", "1", "-1", " 7 ", "\t9\n", "12345678901234", "x", "", "1.5", "0x10", "1_000", "\u0661", "+3",
        str(2**31), str(-2**31 - 1), str(2**63), "0" * 24 + "1", " " * 23 + "5", "1" * 5000]
BOOLS = ["true", "false", "TRUE", " True ", "yes", "", "1"]


@pytest.mark.parametrize("long_keys", [False, True])
def test_send_header_schema_matches_the_declared_decode(long_keys) -> None:
    """Random headers, each field kept, dropped or replaced (numbers out of the Java ranges, padded
    past 24 characters, not text at all): the schema decodes or refuses exactly as ``decode``."""
    rng = random.Random(5)
    short_of = {v1: v2 for v2, v1 in SEND_V2_FIELDS.items()}
    for _ in range(4000):
        ext: dict = dict(BASE)
        for key in rng.sample(sorted(BASE), rng.randrange(5)):
            choice = rng.random()
            if choice < 0.3:
                del ext[key]
            elif choice < 0.35:
                ext[key] = rng.choice([None, 7, True, b"1", ["x"]])
            elif key in "defghjl":
                ext[key] = rng.choice(INTS)
            elif key in "km":
                ext[key] = rng.choice(BOOLS)
            else:
                ext[key] = rng.choice(["", " s ", "\u4e2d", "x"])
        if rng.random() < 0.2:
            ext["zz"] = "extra"
        if long_keys:
            ext = {SEND_V2_FIELDS.get(k, k): v for k, v in ext.items()}
            assert all(k in short_of or k == "zz" for k in ext)
        assert _fast(ext, long_keys) == _slow(ext, long_keys), ext


def test_send_header_decode_by_request_code() -> None:
    """SEND_MESSAGE and SEND_REPLY_MESSAGE carry the long keys; V2, batch and reply V2 the short."""
    long = {SEND_V2_FIELDS[k]: v for k, v in BASE.items()}
    for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_REPLY_MESSAGE):
        assert S.decode_send_header(RemotingCommand(code=code, ext_fields=long)) == _slow(long, True)
        with pytest.raises(HeaderError, match="the custom field <producerGroup> is null"):
            S.decode_send_header(RemotingCommand(code=code, ext_fields=BASE))
    for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2):
        assert S.decode_send_header(RemotingCommand(code=code, ext_fields=BASE)) == _slow(BASE)
        with pytest.raises(HeaderError, match="the custom field <a> is null"):
            S.decode_send_header(RemotingCommand(code=code, ext_fields=None))


def test_header_schema_refuses_a_declaration_it_cannot_mirror() -> None:
    with pytest.raises(TypeError, match="one to one"):
        HeaderSchema(SendMessageRequestHeaderV2, SendMessageRequestHeader, {"a": "producerGroup"})
    with pytest.raises(TypeError, match="one to one"):
        HeaderSchema(SendMessageRequestHeaderV2, SendMessageRequestHeader, {**SEND_V2_FIELDS, "b": "producerGroup"})


def test_v2_renaming_round_trips() -> None:
    v1 = _slow(BASE)
    assert SendMessageRequestHeaderV2.from_v1(v1) == SendMessageRequestHeaderV2.decode(BASE)
    assert SendMessageRequestHeaderV2.from_v1(v1).to_v1() == v1


def _reference_handle_put_result(processor, result, request, queue_id):
    """The success branch of _handle_put_result before its fast path."""
    ok_codes = {"PUT_OK": ResponseCode.SUCCESS, "FLUSH_DISK_TIMEOUT": ResponseCode.FLUSH_DISK_TIMEOUT,
                "FLUSH_SLAVE_TIMEOUT": ResponseCode.FLUSH_SLAVE_TIMEOUT,
                "SLAVE_NOT_AVAILABLE": ResponseCode.SLAVE_NOT_AVAILABLE}
    status = result.put_message_status.name
    if status in ok_codes and result.append_message_result is not None:
        ar = result.append_message_result
        header = SendMessageResponseHeader(msgId=ar.msg_id, queueId=queue_id, queueOffset=ar.logics_offset)
        resp = processor.response(request, ok_codes[status], None)
        resp.ext_fields.update(header.encode())
        return resp
    return processor._handle_put_result(result, request, None, queue_id)


@pytest.mark.parametrize("status", list(PutMessageStatus))
@pytest.mark.parametrize("with_append", [True, False])
@pytest.mark.parametrize("region,trace", [("DefaultRegion", True), ("r\u00e9gion", False)])
def test_put_result_response_matches_the_header_encode(status, with_append, region, trace) -> None:
    clock = task.Clock()
    broker = SimpleNamespace(reactor=clock, fast_failure=BrokerFastFailure(clock, False, 200, 1000),
                             broker_config=SimpleNamespace(regionId=region, traceOn=trace),
                             store_config=SimpleNamespace(maxMessageSize=4 << 20, commitlog_dir="/nonexistent/commitlog",
                                                          consume_queue_dir="/nonexistent/consumequeue",
                                                          index_dir="/nonexistent/index"))
    processor = S.SendMessageProcessor(broker)
    for serialize_type in (0, 1):
        request = RemotingCommand(code=310, opaque=77, serialize_type=serialize_type)
        ar = AppendMessageResult(AppendMessageStatus.PUT_OK, 100, 200, "7F0000010000297F0000000000000064", 5, 12345)
        result = PutMessageResult(status, ar if with_append else None)
        got = processor._handle_put_result(result, request, None, 3)
        want = _reference_handle_put_result(processor, result, request, 3)
        assert codec.encode(got) == codec.encode(want)
        assert (got.code, got.ext_fields, got.serialize_type) == (want.code, want.ext_fields, want.serialize_type)
        assert type(got.code) is int


def test_async_flush_send_answers_without_a_deferred(tmp_path) -> None:
    broker, _clock = make_broker(tmp_path)
    try:
        processor = broker.processors["SendMessageProcessor"]
        channel = FakeChannel()
        call(broker, channel, send_request("FastTopic"))  # creates the topic
        result = processor.process_request(channel, send_request("FastTopic", body=b"b" * 10, queue_id=1))
        assert isinstance(result, RemotingCommand) and result.code == ResponseCode.SUCCESS
        assert result.ext_fields["queueOffset"] == "0" and result.ext_fields["queueId"] == "1"
    finally:
        broker.message_store.shutdown()


def test_sync_flush_send_is_answered_only_after_the_flush(tmp_path, monkeypatch) -> None:
    broker, _clock = make_broker(tmp_path, flushDiskType="SYNC_FLUSH")
    try:
        store = broker.message_store
        channel = FakeChannel()
        call(broker, channel, send_request("SyncTopic"))  # creates the topic (flushed inline on the Clock)
        pending = []

        def fake_in_thread(fn, *a):
            d = defer.Deferred()
            pending.append((fn, a, d))
            return d
        monkeypatch.setattr(store.blocking, "run", fake_in_thread)
        channel.sent = []
        broker.dispatcher.dispatch(channel, send_request("SyncTopic", body=b"durable"))
        assert channel.sent == [] and len(pending) == 1  # nothing acknowledged before the fsync
        fn, a, d = pending.pop()
        fn(*a)
        end = store.commit_log.get_max_offset()
        assert store.commit_log.queue.files[-1].flushed_position == end
        d.callback(None)
        assert len(channel.sent) == 1 and channel.sent[0].code == ResponseCode.SUCCESS
    finally:
        broker.message_store.shutdown()


@pytest.mark.parametrize("text", [" 7", "7 ", "\t9\n", "1_000", " " * 23 + "5"])
def test_a_number_java_cannot_parse_is_refused(text) -> None:
    """Whitespace around a number or ``_`` in it: Java's parseInt/parseLong throw (the Java 5.3.3
    broker answers SYSTEM_ERROR, NumberFormatException), so the declared decode and the schema refuse
    it too (Python's int() read both; found by tests/interop/remoting_diff.py)."""
    for key in ("e", "g", "j"):  # a required int, a required long, an optional int
        ext = dict(BASE, **{key: text})
        slow, fast = _slow(ext), _fast(ext)
        assert slow == fast and slow[0] == "HeaderError" and "is not an integer" in slow[1], (key, slow, fast)
    assert _fast(dict(BASE, e="+3")).queueId == 3  # a sign Java reads too
