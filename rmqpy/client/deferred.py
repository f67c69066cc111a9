"""The Twisted form: the same Producer and PullConsumer, every call returning a Deferred.

The plans of :mod:`rmqpy.client.core` run on rmqpy's own remoting client (one connection per
address, many requests in flight on it), with the reactor's clock for retries and route ages.
Use it inside a running reactor; :mod:`rmqpy.client.blocking` is for plain threads.
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.internet import defer
from twisted.python.failure import Failure

from rmqpy.client.core import Call, ConsumerCore, Plan, ProducerCore, T
from rmqpy.client.errors import ClientError, TransportError
from rmqpy.client.model import Message, MessageQueue, PullResult, SendResult
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.client import RemotingClient
from rmqpy.remoting.protocol import RemotingError, RemotingProtocol

CONNECT_TIMEOUT = 3.0


class DeferredTransport:
    def __init__(self, reactor: Any, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.reactor = reactor
        self.client = RemotingClient(reactor, connect_timeout=connect_timeout)
        self.closed = False

    def invoke(self, call: Call) -> defer.Deferred[RemotingCommand | None]:
        if self.closed:
            return defer.fail(ClientError("the client is shut down"))
        started = self.reactor.seconds()

        def connected(proto: RemotingProtocol) -> Any:
            if call.oneway:
                proto.invoke_oneway(call.request)
                return None
            return proto.invoke(call.request, max(call.timeout - (self.reactor.seconds() - started), 0.001))

        def failed(f: Failure) -> Failure:
            if f.check(RemotingError, ValueError):
                return Failure(TransportError(f"{call.addr}: {f.getErrorMessage()}"))
            return f

        d: defer.Deferred[Any] = self.client.connection(call.addr)
        d.addCallback(connected)
        d.addErrback(failed)
        return d

    def close(self) -> None:
        self.closed = True
        self.client.close()


def run(transport: DeferredTransport, plan: Plan[T]) -> defer.Deferred[T]:
    """Drive ``plan`` with Deferreds; the result fires with its value or fails with ClientError."""
    result: defer.Deferred[T] = defer.Deferred()

    def step(answer: RemotingCommand | None, error: TransportError | None) -> None:
        try:
            call = plan.throw(error) if error is not None else plan.send(answer)
        except StopIteration as stop:
            result.callback(stop.value)
            return
        except BaseException:
            result.errback(Failure())
            return
        d = transport.invoke(call)

        def answered(value: RemotingCommand | None) -> None:
            step(value, None)

        def failed(f: Failure) -> None:
            if f.check(TransportError):
                step(None, f.value)
            else:
                result.errback(f)
        d.addCallbacks(answered, failed)

    step(None, None)
    return result


class _Form:
    _transport: DeferredTransport

    def _run(self, plan: Plan[T]) -> defer.Deferred[T]:
        return run(self._transport, plan)


class Producer(_Form):
    """:class:`rmqpy.client.Producer` with Deferreds (same arguments after ``reactor``)."""

    def __init__(self, reactor: Any, name_server: str, group: str = "DEFAULT_PRODUCER", send_timeout_ms: int = 3000,
                 retries: int = 2, credentials: tuple[str, str] | None = None, **options: Any) -> None:
        clock: Callable[[], float] = reactor.seconds
        self.core = ProducerCore(name_server, group, send_timeout_ms, retries, credentials, clock, **options)
        self._transport = DeferredTransport(reactor)

    def send(self, msg: Message, queue: MessageQueue | None = None) -> defer.Deferred[SendResult | None]:
        return self._run(self.core.send_plan(msg, queue))

    def send_batch(self, msgs: list[Message], queue: MessageQueue | None = None) -> defer.Deferred[SendResult | None]:
        return self._run(self.core.batch_plan(msgs, queue))

    def send_oneway(self, msg: Message, queue: MessageQueue | None = None) -> defer.Deferred[SendResult | None]:
        return self._run(self.core.send_plan(msg, queue, oneway=True))

    def shutdown(self) -> None:
        self._transport.close()


class PullConsumer(_Form):
    """:class:`rmqpy.client.PullConsumer` with Deferreds (same arguments after ``reactor``)."""

    def __init__(self, reactor: Any, name_server: str, group: str = "DEFAULT_CONSUMER",
                 credentials: tuple[str, str] | None = None, *, timeout_ms: int = 3000) -> None:
        self.core = ConsumerCore(name_server, group, credentials, reactor.seconds, timeout_ms=timeout_ms)
        self._transport = DeferredTransport(reactor)

    def fetch_queues(self, topic: str) -> defer.Deferred[list[MessageQueue]]:
        return self._run(self.core.fetch_queues_plan(topic))

    def min_offset(self, mq: MessageQueue) -> defer.Deferred[int]:
        return self._run(self.core.min_offset_plan(mq))

    def max_offset(self, mq: MessageQueue) -> defer.Deferred[int]:
        return self._run(self.core.max_offset_plan(mq))

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, sub_expression: str = "*",
             timeout_ms: int = 10000, suspend_ms: int = 0) -> defer.Deferred[PullResult]:
        return self._run(self.core.pull_plan(mq, offset, max_nums, sub_expression, timeout_ms, suspend_ms))

    def commit_offset(self, mq: MessageQueue, offset: int) -> defer.Deferred[None]:
        return self._run(self.core.commit_offset_plan(mq, offset))

    def query_offset(self, mq: MessageQueue) -> defer.Deferred[int]:
        return self._run(self.core.query_offset_plan(mq))

    def shutdown(self) -> defer.Deferred[None]:
        """Unregister from the brokers (best effort), then close the connections."""
        d = self._run(self.core.shutdown_plan())
        d.addBoth(lambda _: self._transport.close())
        return d
