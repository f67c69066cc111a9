"""The broker's requests to a gRPC consumer over its Telemetry stream, on a real BrokerController
(task.Clock): mqadmin consumerStatus with jstack (GET_CONSUMER_RUNNING_INFO) becomes a
PrintThreadStackTraceCommand, a message consumed directly (CONSUME_MESSAGE_DIRECTLY) a
VerifyMessageCommand, and the client's answers with their nonce become the broker's responses, as
5.3.3's proxy (GrpcClientChannel, ClientActivity, GrpcChannelManager, LocalProxyRelayService)."""
from __future__ import annotations

import asyncio
import queue
from typing import Any, AsyncIterator, Callable

import pytest
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb

from rmqpy.protocol import fastjson
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.admin import ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader
from rmqpy.proxy.grpc import local, relay, telemetry
from rmqpy.proxy.grpc.activities import MessagingActivities
from rmqpy.proxy.grpc.aioloop import AioThread
from rmqpy.proxy.grpc.servicer import MessagingServicer
from tests.unit.broker.helpers import FakeChannel, call, make_broker, send_request

GROUP = "gtele"


@pytest.fixture
def env(tmp_path):
    """A PushConsumer of GROUP with its Telemetry stream open; ``written`` is what went to the stream."""
    broker, clock = make_broker(tmp_path)
    acts = MessagingActivities(broker, broker.dispatcher, 8081)
    ch = acts.channel_of("client-1", "127.0.0.1:5000")
    written: list[Any] = []
    answer = _result(acts.settings(_consumer_settings(), ch, written.append))
    assert answer.status.code == pb.Code.OK
    yield acts, ch, clock, written
    broker.shutdown()


def _consumer_settings() -> Any:
    sub = pb.Subscription(group=pb.Resource(name=GROUP), subscriptions=[
        pb.SubscriptionEntry(topic=pb.Resource(name="TeleT"), expression=pb.FilterExpression(expression="*"))])
    return spb.TelemetryCommand(settings=pb.Settings(client_type=pb.ClientType.PUSH_CONSUMER, subscription=sub))


def _result(d):
    out = []
    d.addBoth(out.append)
    assert out, "the Deferred did not fire"
    return out[0]


def _running_info(jstack: bool, client_id: str = "client-1") -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, GetConsumerRunningInfoRequestHeader(
        consumerGroup=GROUP, clientId=client_id, jstackEnable=jstack))


def _stack_trace(nonce: str, text: str, code: int = pb.Code.OK) -> Any:
    return spb.TelemetryCommand(status=pb.Status(code=code, message=pb.Code.Name(code)),
                                thread_stack_trace=spb.ThreadStackTrace(nonce=nonce, thread_stack_trace=text))


def _verify_result(nonce: str, code: int) -> Any:
    return spb.TelemetryCommand(status=pb.Status(code=code, message=pb.Code.Name(code)),
                                verify_message_result=spb.VerifyMessageResult(nonce=nonce))


def _ask(acts: MessagingActivities, request: RemotingCommand) -> FakeChannel:
    """mqadmin's request to the broker; the broker's answer lands in the returned channel's ``sent``."""
    admin = FakeChannel()
    call(acts.broker, admin, request)
    return admin


def test_consumer_status_with_jstack_is_answered_with_the_clients_thread_stack_trace(env) -> None:
    acts, ch, clock, written = env
    admin = _ask(acts, _running_info(jstack=True))
    assert admin.sent == []  # waiting for the client
    [cmd] = written[-1:]
    assert cmd.WhichOneof("command") == "print_thread_stack_trace_command"
    nonce = cmd.print_thread_stack_trace_command.nonce
    assert nonce
    acts.clients.report(ch, _stack_trace(nonce, '"main" #1 prio=5\n\tat Foo.bar(Foo.java:1)\n'))
    [resp] = admin.sent
    assert resp.code == ResponseCode.SUCCESS, resp
    # ConsumerRunningInfo.encode() of the proxy's: only the jstack set, fastjson's sorted fields
    assert resp.body == (b'{"jstack":"\\"main\\" #1 prio=5\\n\\tat Foo.bar(Foo.java:1)\\n","mqPopTable":{},'
                         b'"mqTable":{},"properties":{},"statusTable":{},"subscriptionSet":[],"userConsumerInfo":{}}')
    assert fastjson.loads(resp.body)["jstack"].startswith('"main" #1')
    clock.advance(10)
    assert len(admin.sent) == 1  # answered once: no timeout answer follows


@pytest.mark.parametrize("code, answer", [
    (pb.Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED, (ResponseCode.NO_PERMISSION, "forbidden to verify message")),
    (pb.Code.INTERNAL_ERROR, (ResponseCode.SYSTEM_ERROR, "verify message failed")),
])
def test_a_thread_stack_trace_with_an_error_status_is_the_proxys_error(env, code, answer) -> None:
    acts, ch, _, written = env
    admin = _ask(acts, _running_info(jstack=True))
    acts.clients.report(ch, _stack_trace(written[-1].print_thread_stack_trace_command.nonce, "text", code))
    [resp] = admin.sent
    assert (resp.code, resp.remark) == answer and not resp.body


def _stored_message(acts: MessagingActivities) -> str:
    """A message in the store; its offset message id, as mqadmin queryMsgById names it."""
    resp = call(acts.broker, FakeChannel(), send_request("TeleT", b"verify me", tags="TagV"))
    assert resp.code == ResponseCode.SUCCESS, resp
    return resp.ext_fields["msgId"]


def _consume_directly(msg_id: str, client_id: str = "client-1") -> RemotingCommand:
    return RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, ConsumeMessageDirectlyResultRequestHeader(
        consumerGroup=GROUP, clientId=client_id, msgId=msg_id, topic="TeleT"))


@pytest.mark.parametrize("code, result", [
    (pb.Code.OK, "CR_SUCCESS"),
    (pb.Code.FAILED_TO_CONSUME_MESSAGE, "CR_LATER"),
    (pb.Code.MESSAGE_CORRUPTED, "CR_RETURN_NULL"),
    (pb.Code.INTERNAL_ERROR, None),  # buildConsumeMessageDirectlyResult leaves it unset
])
def test_consume_message_directly_is_a_verify_command_answered_with_the_clients_result(env, code, result) -> None:
    acts, ch, _, written = env
    admin = _ask(acts, _consume_directly(_stored_message(acts)))
    assert admin.sent == []
    cmd = written[-1]
    assert cmd.WhichOneof("command") == "verify_message_command"
    verify = cmd.verify_message_command
    assert verify.message.body == b"verify me" and verify.message.topic.name == "TeleT"
    assert verify.message.system_properties.tag == "TagV"
    acts.clients.report(ch, _verify_result(verify.nonce, code))
    [resp] = admin.sent
    assert resp.code == ResponseCode.SUCCESS, resp
    body = fastjson.loads(resp.body)
    assert body.get("consumeResult") == result
    assert (body["remark"], body["order"], body["autoCommit"], body["spentTimeMills"]) == \
        ("from gRPC client", False, True, 0)


def test_an_unanswered_jstack_request_ends_with_the_relays_timeout(env) -> None:
    """GrpcChannelManager expires a relay future after grpcProxyRelayRequestTimeoutInSeconds (5 s) with
    SYSTEM_BUSY "call remote timeout"; an answer after that is dropped."""
    acts, ch, clock, written = env
    admin = _ask(acts, _running_info(jstack=True))
    nonce = written[-1].print_thread_stack_trace_command.nonce
    clock.advance(local.RELAY_TIMEOUT_S - 0.1)
    assert admin.sent == []
    clock.advance(0.1)
    [resp] = admin.sent
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_BUSY, "call remote timeout")
    acts.clients.report(ch, _stack_trace(nonce, "too late"))
    assert len(admin.sent) == 1


def test_consumer_status_without_jstack_sends_nothing_and_times_out(env) -> None:
    """The proxy writes nothing for a GET_CONSUMER_RUNNING_INFO without jstackEnable; the broker's
    wait ends it (CONSUME_MSG_TIMEOUT)."""
    acts, _, clock, written = env
    before = len(written)
    admin = _ask(acts, _running_info(jstack=False))
    assert len(written) == before and admin.sent == []
    clock.advance(9.9)
    assert admin.sent == []  # the broker waits as Java's Broker2Client.callClient does: 10 s
    clock.advance(0.1)
    [resp] = admin.sent
    assert resp.code == ResponseCode.CONSUME_MSG_TIMEOUT, resp
    assert resp.remark.startswith(f"consumer <{GROUP}> <client-1> Timeout"), resp.remark


def test_without_a_telemetry_stream_the_request_fails_at_once(env) -> None:
    acts, ch, _, written = env
    acts.clients.detach(ch, acts.clients.writers[ch.client_id])  # the stream ended
    assert ch.push is None
    admin = _ask(acts, _running_info(jstack=True))
    [resp] = admin.sent
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "gRPC client client-1 has no Telemetry stream open" in resp.remark, resp.remark


def test_answers_for_unknown_nonces_or_the_other_kind_are_ignored(env) -> None:
    acts, ch, _, written = env
    admin = _ask(acts, _running_info(jstack=True))
    nonce = written[-1].print_thread_stack_trace_command.nonce
    acts.clients.report(ch, _stack_trace("no-such-nonce", "forged"))
    acts.clients.report(ch, _verify_result(nonce, pb.Code.OK))  # a verify result for a jstack request
    assert admin.sent == []
    other = acts.channel_of("client-2", "127.0.0.1:5001")  # another client cannot answer it either
    acts.clients.report(other, _stack_trace(nonce, "forged"))
    assert admin.sent == []
    acts.clients.report(ch, _stack_trace(nonce, "real"))
    [resp] = admin.sent
    assert fastjson.loads(resp.body)["jstack"] == "real"


def test_waiting_requests_are_bounded_and_fail_when_the_channel_closes(env) -> None:
    acts, ch, clock, written = env
    waiting = [ch.invoke(_running_info(jstack=True), 30.0) for _ in range(local.MAX_RELAYED)]
    refused = _result(ch.invoke(_running_info(jstack=True), 30.0))
    assert isinstance(refused.value, ConnectionError) and "are waiting for its answer" in str(refused.value)
    ch.close()
    for d in waiting:
        assert isinstance(_result(d).value, ConnectionError)
    assert all(c.func != ch._expire for c in clock.getDelayedCalls())  # their timers are gone
    before = len(written)
    again = ch.invoke(_running_info(jstack=True), 30.0)  # the table is empty again
    assert not again.called and len(written) == before + 1
    clock.advance(local.RELAY_TIMEOUT_S)
    assert _result(again).code == ResponseCode.SYSTEM_BUSY


def test_answers_are_bounded_before_they_reach_the_reactor() -> None:
    long_text = "x" * (relay.MAX_THREAD_STACK_TRACE + 10)
    kept = relay.bounded_answer(_stack_trace("1", long_text))
    assert len(kept.thread_stack_trace.thread_stack_trace) == relay.MAX_THREAD_STACK_TRACE
    assert relay.bounded_answer(_stack_trace("1" * (relay.MAX_NONCE + 1), "t")) is None
    assert relay.bounded_answer(_verify_result("7", pb.Code.OK)) is not None


# ---------------------------------------------------------------------- the stream's reader
class _Reactor:
    """The reactor thread, played by the test's thread: ``pump`` runs what grpcio's loop handed over."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.calls: queue.Queue[tuple[Callable[..., Any], tuple[Any, ...]]] = queue.Queue()

    def callFromThread(self, f: Callable[..., Any], *args: Any, **kw: Any) -> None:  # noqa: N802 (Twisted's name)
        self.calls.put((lambda: f(*args, **kw), ()))

    def pump(self, until: Callable[[], bool], timeout: float = 10.0) -> None:
        import time
        deadline = time.monotonic() + timeout
        while not until():
            assert time.monotonic() < deadline, "timed out"
            try:
                f, args = self.calls.get(timeout=0.05)
            except queue.Empty:
                continue
            f(*args)


class _Context:
    def invocation_metadata(self) -> list[tuple[str, str]]:
        return [("x-mq-client-id", "client-1")]

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5000"

    def is_active(self) -> bool:
        return True

    def time_remaining(self) -> None:
        return None


def test_the_telemetry_reader_hands_a_thread_stack_trace_to_the_reactor(tmp_path) -> None:
    """Through the servicer's Telemetry: settings, the broker's command out, the client's answer in
    (a coroutine on grpcio's loop, as the endpoint runs it), the admin tool's answer on the reactor."""
    broker, clock = make_broker(tmp_path)
    aio = AioThread()
    aio.start()
    try:
        acts = MessagingActivities(broker, broker.dispatcher, 8081)
        reactor = _Reactor(clock)
        servicer = MessagingServicer(acts, reactor)
        incoming: asyncio.Queue[Any] = asyncio.Queue()
        outgoing: list[Any] = []

        def send(cmd: Any) -> None:  # the client writes its stream
            assert aio.loop is not None
            aio.loop.call_soon_threadsafe(incoming.put_nowait, cmd)

        async def requests() -> AsyncIterator[Any]:
            while (cmd := await incoming.get()) is not None:
                yield cmd

        async def stream() -> None:  # grpcio's loop writing the stream
            async for cmd in servicer.Telemetry(requests(), _Context()):
                outgoing.append(cmd)

        writer = aio.submit(stream())
        send(_consumer_settings())
        reactor.pump(lambda: len(outgoing) == 1)
        assert outgoing[0].status.code == pb.Code.OK
        admin = FakeChannel()
        call(broker, admin, _running_info(jstack=True))
        reactor.pump(lambda: len(outgoing) == 2)
        nonce = outgoing[1].print_thread_stack_trace_command.nonce
        send(_stack_trace("999", "forged"))  # unknown: nothing answered
        send(_stack_trace(nonce, "from the reader"))
        reactor.pump(lambda: bool(admin.sent))
        assert fastjson.loads(admin.sent[0].body)["jstack"] == "from the reader"
        assert len(admin.sent) == 1
        send(None)  # the client ends its stream
        reactor.pump(lambda: writer.done() and reactor.calls.empty())
        writer.result()
    finally:
        servicer.stopping = True
        aio.stop()
        broker.shutdown()


class _InlineReactor:
    """Runs what the loop hands over at once, on the loop's thread."""

    def callFromThread(self, f: Callable[..., Any], *args: Any, **kw: Any) -> None:  # noqa: N802 (Twisted's name)
        f(*args, **kw)


class _Auth:
    """Authenticates a call whose metadata has ``authorization: ok``."""

    def check(self, metadata: dict[str, str], request: Any, address: str, host: str) -> str | None:
        return None if metadata.get("authorization") == "ok" else "no credentials"


class _AuthContext(_Context):
    def __init__(self, client_id: str, authorization: str = "") -> None:
        self.metadata = [("x-mq-client-id", client_id)] + ([("authorization", authorization)] if authorization else [])

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return self.metadata


def test_streams_that_never_authenticate_are_bounded(tmp_path, monkeypatch) -> None:
    """The proxy answers a refused Telemetry command and keeps the stream; past
    MAX_UNAUTHENTICATED_STREAMS such streams a refused one is ended after its answer, and a client
    with credentials still opens its stream."""
    monkeypatch.setattr(telemetry, "MAX_UNAUTHENTICATED_STREAMS", 2)
    broker, _clock = make_broker(tmp_path)
    servicer = MessagingServicer(MessagingActivities(broker, broker.dispatcher, 8081), _InlineReactor(), _Auth())

    ended_early: list[str] = []

    async def scenario() -> list[list[Any]]:
        ends: list[asyncio.Event] = []
        outputs: list[list[Any]] = []
        ended: list[str] = []

        async def client(client_id: str, authorization: str = "") -> None:
            end = asyncio.Event()
            ends.append(end)
            out: list[Any] = []
            outputs.append(out)

            async def commands() -> AsyncIterator[Any]:
                yield _consumer_settings()
                await end.wait()  # the client keeps its stream open

            async for cmd in servicer.Telemetry(commands(), _AuthContext(client_id, authorization)):
                out.append(cmd)
            out.append("ended")
            ended.append(client_id)

        tasks = [asyncio.ensure_future(client(f"bad-{i}")) for i in range(3)]
        tasks.append(asyncio.ensure_future(client("good", "ok")))
        for _ in range(50):
            await asyncio.sleep(0)
        ended_early.extend(ended)
        for end in ends:
            end.set()
        await asyncio.gather(*tasks)
        return outputs

    try:
        bad0, bad1, bad2, good = asyncio.run(scenario())
    finally:
        broker.shutdown()
    refused = [out[0].status.code for out in (bad0, bad1, bad2)]
    assert refused == [pb.Code.UNAUTHORIZED] * 3
    # the first two stayed open until their client ended them; the third was ended at once
    assert ended_early == ["bad-2"]
    assert good[0].status.code == pb.Code.OK and good[-1] == "ended"
    assert servicer.unauthenticated == set()
