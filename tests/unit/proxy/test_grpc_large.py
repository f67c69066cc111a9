"""Large SendMessage requests (rmqpy.proxy.grpc.large, issue 31 case 7): bodies over maxMessageSize
are left out of the decoded request and refused by their size with the answers of the whole request;
the memory of large requests is trimmed on a thread of its own."""
from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, Iterator

import grpc
import pytest
from google.protobuf.message import DecodeError
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc

from rmqpy.protocol.message import decode_record
from rmqpy.proxy.grpc import large
from rmqpy.proxy.grpc.activities import Refused
from rmqpy.proxy.grpc.large import LARGE_BODY, MAX_FIELDS, CutSendRequest, Trimmer, send_request
from rmqpy.proxy.grpc.server import GrpcServerService

LIMIT = 100


def _message(topic: str, body: bytes, tag: str = "TagA", msg_id: str = "MSGID1") -> pb.Message:
    m = pb.Message(topic=pb.Resource(name=topic), body=body)
    m.system_properties.message_id = msg_id
    m.system_properties.tag = tag
    m.user_properties["k"] = "v"
    return m


def test_bodies_over_the_limit_are_left_out_and_their_sizes_kept() -> None:
    req = spb.SendMessageRequest(messages=[_message("T", b"a" * 10), _message("T", b"b" * 2000, "x"),
                                           _message("T", b"c" * (LIMIT + 1))])
    cut = send_request(lambda: LIMIT)(req.SerializeToString())
    assert isinstance(cut, CutSendRequest)
    assert cut.bodies == {1: 2000, 2: LIMIT + 1}
    assert [m.body for m in cut.request.messages] == [b"a" * 10, b"", b""]
    for whole, kept in zip(req.messages, cut.request.messages):
        kept.body = whole.body
        assert kept == whole  # everything else as sent


def test_a_request_within_the_limit_or_without_one_is_decoded_as_a_whole() -> None:
    req = spb.SendMessageRequest(messages=[_message("T", b"a" * 50)])
    raw = req.SerializeToString()
    assert send_request(lambda: LIMIT)(raw) == req
    assert send_request(lambda: 0)(spb.SendMessageRequest(messages=[_message("T", b"a" * 500)]).SerializeToString()) \
        == spb.SendMessageRequest(messages=[_message("T", b"a" * 500)])
    with pytest.raises(DecodeError):  # grpcio answers INTERNAL, as for any malformed request
        send_request(lambda: LIMIT)(spb.SendMessageRequest(messages=[_message("T", b"a" * 500)]).SerializeToString()
                                    + b"\x0a\x05ab")  # the last message shorter than its length


def test_a_large_body_within_the_limit_is_handed_over_as_bytes() -> None:
    body = bytes(range(256)) * (LARGE_BODY // 256 + 1)
    req = spb.SendMessageRequest(messages=[_message("T", b"small"), _message("T", body)])
    cut = send_request(lambda: 4 * LARGE_BODY)(req.SerializeToString())
    assert isinstance(cut, CutSendRequest) and cut.bodies == {1: body} and type(cut.bodies[1]) is bytes
    assert [m.body for m in cut.request.messages] == [b"small", b""]


def test_a_request_of_many_fields_is_decoded_whole_not_walked() -> None:
    """The cut gives up past MAX_FIELDS fields at one level: upb decodes such a request faster than a
    Python loop walks it."""
    m = _message("T", b"b" * 2000)
    for i in range(MAX_FIELDS):
        m.user_properties[f"k{i}"] = "v"
    req = spb.SendMessageRequest(messages=[m])
    assert send_request(lambda: LIMIT)(req.SerializeToString()) == req


@pytest.fixture
def acts(activities_on):
    broker, _, acts = activities_on("GrpcT")
    broker.store_config.maxMessageSize = LIMIT
    return acts, acts.channel_of("client-1", "127.0.0.1:5000")


def _answer(acts: Any, ch: Any, req: Any, bodies: Any = None) -> tuple[int, str]:
    try:
        d = acts.send_message(req, ch, bodies)
    except Refused as exc:
        return exc.code, exc.message
    out: list[Any] = []
    d.addBoth(out.append)
    return out[0].status.code, out[0].status.message


@pytest.mark.parametrize("messages", [
    [("GrpcT", b"x" * 500, "TagA")],  # MESSAGE_BODY_TOO_LARGE
    [("Bad Topic", b"x" * 500, "TagA")],  # the topic is checked first
    [("GrpcT", b"ok", "Tag|B"), ("GrpcT", b"x" * 500, "TagA")],  # the first message's tag before the second's body
    [("GrpcT", b"x" * 500, "TagA"), ("Other", b"ok", "TagA")],  # the first message's body before the second's topic
    [("GrpcT", b"ok", "TagA"), ("GrpcT", b"x" * 500, "Tag|B")],  # a body before its own tag
])
def test_a_cut_request_gets_the_answer_of_the_whole_one(acts, messages) -> None:
    acts, ch = acts
    req = spb.SendMessageRequest(messages=[_message(t, b, g, f"ID{i}") for i, (t, b, g) in enumerate(messages)])
    cut = send_request(lambda: LIMIT)(req.SerializeToString())
    assert isinstance(cut, CutSendRequest) and cut.bodies
    whole = _answer(acts, ch, req)
    assert whole[0] != pb.Code.OK
    assert _answer(acts, ch, cut.request, cut.bodies) == whole


def test_a_handed_over_body_is_stored_as_sent(acts, monkeypatch) -> None:
    acts, ch = acts
    monkeypatch.setattr(large, "LARGE_BODY", 1000)  # the store of make_broker has 1 MiB files
    acts.broker.store_config.maxMessageSize = 4000
    body = bytes(range(256)) * 8
    cut = send_request(lambda: 4000)(spb.SendMessageRequest(messages=[_message("GrpcT", body)]).SerializeToString())
    assert isinstance(cut, CutSendRequest) and cut.bodies == {0: body}
    assert _answer(acts, ch, cut.request, cut.bodies) == (pb.Code.OK, "OK")
    stored = [r for q in (0, 1) for r in acts.broker.message_store.get_message("g", "GrpcT", q, 0, 1).message_list]
    assert [decode_record(r).body for r in stored] == [body]


def test_the_trimmer_trims_once_after_a_burst_and_again_after_the_next() -> None:
    trims: list[float] = []
    trimmer = Trimmer(delay=0.05, interval=0.2, trim=lambda: trims.append(time.monotonic()))
    try:
        t0 = time.monotonic()
        for _ in range(5):
            trimmer.soon()
        deadline = time.monotonic() + 5
        while not trims and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(trims) == 1 and trims[0] - t0 >= 0.05
        trimmer.soon()
        while len(trims) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(trims) == 2 and trims[1] - trims[0] >= 0.2  # at most one per interval
        time.sleep(0.3)
        assert len(trims) == 2
    finally:
        trimmer.stop()


class _Reactor:
    """Runs what grpcio's loop hands over at once, on the loop's thread."""

    def callFromThread(self, fn: Any, *args: Any, **kw: Any) -> None:  # noqa: N802
        fn(*args, **kw)


@pytest.fixture
def endpoint() -> Iterator[tuple[Any, list[Any]]]:
    """A GrpcServerService on fake activities whose send_message records (request, bodies) and
    refuses: the service and what it recorded."""
    seen: list[Any] = []

    def send_message(req: Any, ch: Any, bodies: Any) -> Any:
        seen.append((req, bodies))
        raise Refused(pb.Code.MESSAGE_BODY_TOO_LARGE, "message body cannot exceed the max 100")

    activities = SimpleNamespace(broker=SimpleNamespace(store_config=SimpleNamespace(maxMessageSize=LIMIT)),
                                 receipts=SimpleNamespace(start=lambda: None, stop=lambda: None),
                                 channel_of=lambda *a: object(), send_message=send_message, grpc_port=0)
    svc = GrpcServerService(activities, _Reactor(), "127.0.0.1", 0, max_calls=4)  # type: ignore[arg-type]
    svc.startService()
    try:
        yield svc, seen
    finally:
        svc.halt(svc.server, grace=None)


def test_the_endpoint_decodes_sendmessage_without_the_oversized_body(endpoint) -> None:
    svc, seen = endpoint
    channel = grpc.insecure_channel(f"127.0.0.1:{svc.bound_port}")
    try:
        stub = sgrpc.MessagingServiceStub(channel)
        resp = stub.SendMessage(spb.SendMessageRequest(messages=[_message("GrpcT", b"x" * 5000)]),
                                metadata=(("x-mq-client-id", "c1"),), timeout=10)
        assert resp.status.code == pb.Code.MESSAGE_BODY_TOO_LARGE
        [(req, sizes)] = seen
        assert sizes == {0: 5000} and req.messages[0].body == b"" and req.messages[0].topic.name == "GrpcT"
        stub.SendMessage(spb.SendMessageRequest(messages=[_message("GrpcT", b"small")]),
                         metadata=(("x-mq-client-id", "c1"),), timeout=10)
        assert seen[1][1] == {} and seen[1][0].messages[0].body == b"small"
        deadline = time.monotonic() + 5
        while svc.trimmer.trims == 0 and time.monotonic() < deadline:  # after the cut request
            time.sleep(0.05)
        assert svc.trimmer.trims >= 1 or svc.trimmer.trim is None
    finally:
        channel.close()


@pytest.mark.parametrize("method", ["SendMessage", "QueryRoute", "ReceiveMessage"])
def test_a_malformed_request_ends_the_call_internal_as_the_proxy(endpoint, method: str) -> None:
    """grpc-java (the proxy) and grpcio's synchronous server answer a request that is not a protobuf
    with INTERNAL; grpcio's asyncio server would say UNKNOWN."""
    svc, seen = endpoint
    with grpc.insecure_channel(f"127.0.0.1:{svc.bound_port}") as channel:
        path = f"/apache.rocketmq.v2.MessagingService/{method}"
        call = channel.unary_stream(path) if method == "ReceiveMessage" else channel.unary_unary(path)
        with pytest.raises(grpc.RpcError) as err:
            result = call(b"\x0a\xff\xff\xff", timeout=10)  # a field whose length runs past the end
            list(result) if method == "ReceiveMessage" else result
        assert err.value.code() == grpc.StatusCode.INTERNAL
        # the methods the proxy (5.3.3, 5.4.0) does not serve either, with grpc-java's text
        with pytest.raises(grpc.RpcError) as err:
            channel.unary_unary("/apache.rocketmq.v2.MessagingService/UpdateOffset")(b"", timeout=10)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert err.value.details() == "Method apache.rocketmq.v2.MessagingService/UpdateOffset is unimplemented"
        with pytest.raises(grpc.RpcError) as err:
            list(channel.unary_stream("/apache.rocketmq.v2.MessagingService/PullMessage")(b"\x0a\xff", timeout=10))
        assert (err.value.code(), err.value.details()) == (
            grpc.StatusCode.UNIMPLEMENTED, "Method apache.rocketmq.v2.MessagingService/PullMessage is unimplemented")
    assert seen == []
