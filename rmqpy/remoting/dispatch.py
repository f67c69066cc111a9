"""Request dispatch: a processor per request code, as NettyRemotingServer does it.

A processor is any object with ``process_request(channel, request)`` that returns a
response :class:`RemotingCommand`, ``None`` (no answer: oneway), or a Deferred of either
(or anything else ``maybeDeferred`` accepts). Synchronous answers skip the Deferreds.
Unknown codes get REQUEST_CODE_NOT_SUPPORTED; a processor that raises gets SYSTEM_ERROR
with the exception text, and the connection stays open. A bad request (a header or body
the client got wrong) is one warning line with the peer and the code; any other exception
is a bug and logs its traceback; both are rate-limited (:mod:`rmqpy.remoting.ratelimit`),
as a peer can send them as fast as it likes. Request hooks (:class:`RequestHook`: the broker's
ACL) run first and may answer instead of the processor, as Java's server RPC hooks do.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from rmqpy.protocol.codes import RequestCode, ResponseCode, code_name
from rmqpy.protocol.command import RPC_ONEWAY, RPC_RESPONSE, BadRequestError, RemotingCommand
from rmqpy.protocol.fastjson import JSONDecodeError
from rmqpy.remoting.ratelimit import LogRateLimiter, limiter_for
from rmqpy.remoting.replay import ReplayMemo

if TYPE_CHECKING:
    from rmqpy.remoting.protocol import RemotingProtocol


class RequestProcessor(Protocol):
    def process_request(self, channel: "RemotingProtocol", request: RemotingCommand
                        ) -> RemotingCommand | None | defer.Deferred[Any]: ...


class RequestHook(Protocol):
    """Java's server ``RPCHook.doBeforeRequest``: runs before the processor of every request
    that has one; a returned command is the answer and the processor does not run (ACL)."""

    def before_request(self, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand | None: ...


class ChannelListener(Protocol):
    """Told of each connection made and lost (Java ``ChannelEventListener``)."""
    def channel_connected(self, channel: "RemotingProtocol") -> None: ...

    def channel_closed(self, channel: "RemotingProtocol") -> None: ...


class RpcObserver(Protocol):
    """Told of each answer written (the metrics' ``rocketmq_rpc_latency``, rmqpy/common/metrics.py)."""

    def record(self, request: RemotingCommand, response: RemotingCommand, read_at: float | None,
               deferred: bool) -> None: ...


class RequestDispatcher:
    """Maps request codes to processors and tells listeners about closed connections.

    ``rpc_observer``, when set, is told of every answer with the time its request was read, as
    Java's ``writeResponse`` records ``rocketmq_rpc_latency``.
    """

    log = Logger()

    def __init__(self) -> None:
        self._processors: dict[int, RequestProcessor] = {}
        self._default: RequestProcessor | None = None
        self._listeners: list[ChannelListener] = []
        self._hooks: list[RequestHook] = []
        #: answers kept for the codes a processor names (:meth:`replay_answers`); the connections read it
        self.memo = ReplayMemo()
        self._observer: RpcObserver | None = None

    @property
    def rpc_observer(self) -> RpcObserver | None:
        return self._observer

    @rpc_observer.setter
    def rpc_observer(self, observer: RpcObserver | None) -> None:
        self._observer = observer
        self.memo.observer = observer  # a replayed answer is recorded as a dispatched one

    def register(self, codes: int | Iterable[int], processor: RequestProcessor) -> None:
        for code in ([codes] if isinstance(codes, int) else codes):
            self._processors[int(code)] = processor

    def register_default(self, processor: RequestProcessor) -> None:
        self._default = processor

    def registered_codes(self) -> list[int]:
        return sorted(self._processors)

    def add_request_hook(self, hook: RequestHook) -> None:
        self._hooks.append(hook)
        self.memo.disable()  # a hook may answer differently per connection

    def replay_answers(self, codes: Iterable[int], stamp_of: Callable[[], object]) -> None:
        """Answer the requests of ``codes`` from :class:`ReplayMemo` when their frame was answered
        before: the processor's answers to them depend only on the request's bytes (its opaque
        aside) and on what ``stamp_of()`` returns, which changes whenever such an answer may."""
        if not self._hooks:
            self.memo.enable(codes, stamp_of)

    def add_channel_listener(self, listener: ChannelListener) -> None:
        self._listeners.append(listener)

    # -------------------------------------------------------------- called by the protocol
    def channel_connected(self, channel: "RemotingProtocol") -> None:
        for listener in self._listeners:
            listener.channel_connected(channel)

    def channel_closed(self, channel: "RemotingProtocol") -> None:
        for listener in self._listeners:
            try:
                listener.channel_closed(channel)
            except Exception:
                self.log.failure("channel listener {listener!r} failed", listener=listener)

    def dispatch(self, channel: "RemotingProtocol", request: RemotingCommand) -> defer.Deferred[Any] | None:
        """Run the request's processor and send its answer.

        A processor that answers synchronously (a RemotingCommand or None, or raises) is
        answered right here, without Deferreds: nothing is returned. A processor that
        returns anything else (a Deferred, a Failure, a coroutine) goes through the
        Deferred chain as ``maybeDeferred`` would build it, and that Deferred is returned.
        Either way the answers, error responses and log lines are the same.
        """
        memo = self.memo
        miss = memo.pending
        stamp_of = None  # set when the processor's synchronous answer may be kept (replay.py)
        processor = self._processors.get(request.code, self._default)
        if miss is not None:  # a frame the memo could not answer
            memo.pending = None
            if miss.request is request and processor is not None:
                stamp_of = memo.stamp_of(request.code)
                if stamp_of is not None:
                    stamp = stamp_of()
        if processor is None:
            _limiter(channel).warn("unsupported-code", self.log, "{peer}: request code {code} not supported",
                                   peer=channel.remote_address, code=request.code)
            # an answer, None, a Failure, or whatever else maybeDeferred accepts
            result: Any = request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                      f" request type {request.code} not supported")
        else:
            try:
                result = None
                for hook in self._hooks:
                    result = hook.before_request(channel, request)
                    if result is not None:
                        break
                if result is None:
                    result = processor.process_request(channel, request)
            except BaseException:  # as maybeDeferred catches
                result = Failure()  # type: ignore[no-untyped-call]  # Twisted: Failure.__init__ unannotated
                stamp_of = None  # the error answer is not the processor's: never kept
            else:
                if result is not None and type(result) is not RemotingCommand:
                    d = defer.maybeDeferred(_same, result)
                    d.addErrback(self._on_error, channel, request)
                    if self._observer is not None:
                        d.addCallback(self._observed, request, channel.read_at, self._observer)
                    d.addCallback(self._reply, channel, request)
                    d.addErrback(self._reply_failed, channel)
                    return d
        try:
            if type(result) is Failure:
                result = self._on_error(result, channel, request)
            self._reply(result, channel, request)
            if self._observer is not None and result is not None:
                self._observer.record(request, result, channel.read_at, False)
            if stamp_of is not None and type(result) is RemotingCommand and stamp_of() == stamp:
                memo.keep(miss, request, result, stamp_of, stamp)  # type: ignore[arg-type]  # set with stamp_of
        except BaseException:  # as the Deferred chain caught it
            self._reply_failed(Failure(), channel)  # type: ignore[no-untyped-call]
        return None

    def _reply_failed(self, failure: Failure, channel: "RemotingProtocol") -> None:
        _limiter(channel).failure("reply-failed", self.log, "reply to {peer} failed", failure,
                                  peer=channel.remote_address)

    def _on_error(self, failure: Failure, channel: "RemotingProtocol", request: RemotingCommand) -> RemotingCommand:
        if failure.check(BadRequestError, JSONDecodeError):  # type: ignore[no-untyped-call]  # the client's mistake
            _limiter(channel).warn("bad-request", self.log, "{peer}: bad {code} request: {err}",
                                   peer=channel.remote_address, code=code_name(request.code, RequestCode),
                                   err=_short(failure.value))
        else:  # a bug: its traceback, but not one per request either
            _limiter(channel).failure("processor-failure", self.log, "{peer}: processing {code} failed", failure,
                                      peer=channel.remote_address, code=code_name(request.code, RequestCode))
        return request.response(ResponseCode.SYSTEM_ERROR, f"{type(failure.value).__name__}: {failure.value}")

    @staticmethod
    def _observed(response: RemotingCommand | None, request: RemotingCommand, read_at: float | None,
                  observer: RpcObserver) -> RemotingCommand | None:
        if response is not None:
            observer.record(request, response, read_at, True)
        return response

    @staticmethod
    def _reply(response: RemotingCommand | None, channel: "RemotingProtocol", request: RemotingCommand) -> None:
        if response is None or request.flag & RPC_ONEWAY:
            return
        response.opaque = request.opaque
        response.flag |= RPC_RESPONSE
        response.serialize_type = request.serialize_type
        channel.send_command(response)


def _limiter(channel: "RemotingProtocol") -> LogRateLimiter:
    """The process's log limiter on the channel's clock."""
    return limiter_for(channel.clock)


def _short(error: BaseException, limit: int = 200) -> str:
    """An exception's text cut to ``limit`` characters: it may quote what the peer sent."""
    text = str(error)
    return text if len(text) <= limit else text[:limit] + "..."


def _same(result: Any) -> Any:
    """What maybeDeferred calls to wrap a result that is already there."""
    return result
