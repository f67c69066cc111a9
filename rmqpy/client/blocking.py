"""The blocking form: a Producer and a PullConsumer whose calls block the calling thread on a
socket, every wait bounded. Safe to share between threads (one request at a time per broker
connection); do not call it from inside a running reactor or event loop."""
from __future__ import annotations

import select
import socket
import struct
import threading
from typing import TYPE_CHECKING, Any, Callable

from rmqpy.client import requests as R
from rmqpy.client.core import Call, ConsumerCore, Plan, ProducerCore, T, monotonic
from rmqpy.client.errors import ClientError, TransportError
from rmqpy.client.model import Message, MessageQueue, PullResult, SendResult
from rmqpy.protocol import command as codec
from rmqpy.protocol.command import DEFAULT_MAX_FRAME, FrameError, RemotingCommand
from rmqpy.remoting.protocol import next_opaque

if TYPE_CHECKING:
    from rmqpy.client.pullstream import PullStream

_LENGTH = struct.Struct(">I")
CONNECT_TIMEOUT = 3.0   # NettyClientConfig.connectTimeoutMillis


class _Connection:
    def __init__(self, addr: str, timeout: float, max_frame: int) -> None:
        host, _, port = addr.rpartition(":")
        self.addr = addr
        self.max_frame = max_frame
        self.lock = threading.Lock()
        try:
            self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        except OSError as exc:
            raise TransportError(f"connect to {addr} failed: {exc}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def closed_by_peer(self) -> bool:
        """True when the server closed this idle connection (brokers drop idle ones after 120 s):
        checked before each request, so that a send is not lost on a socket known to be dead."""
        try:
            poller = select.poll()
            poller.register(self.sock, select.POLLIN)
            if not poller.poll(0):
                return False
            self.sock.settimeout(0)
            return not self.sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return False
        except (OSError, ValueError):
            return True

    def invoke(self, request: RemotingCommand, timeout: float, oneway: bool) -> RemotingCommand | None:
        deadline = monotonic() + timeout
        request.opaque = next_opaque()
        try:
            self.sock.settimeout(timeout)
            self.sock.sendall(codec.encode(request))
            if oneway:
                return None
            while True:
                (length,) = _LENGTH.unpack(self._exactly(4, deadline))
                if length > self.max_frame:
                    raise TransportError(f"{self.addr} sent a frame of {length} bytes, over {self.max_frame}")
                response = codec.decode(self._exactly(length, deadline))
                if response.is_response and response.opaque == request.opaque:
                    return response
        except socket.timeout:
            raise TransportError(f"wait response on {self.addr} timed out after {timeout * 1000:.0f} ms") from None
        except FrameError as exc:
            raise TransportError(f"undecodable answer from {self.addr}: {exc}") from None
        except OSError as exc:
            raise TransportError(f"connection to {self.addr} failed: {exc}") from None

    def _exactly(self, n: int, deadline: float) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise socket.timeout()
            self.sock.settimeout(remaining)
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise TransportError(f"connection to {self.addr} closed by the server")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class BlockingTransport:
    """One cached connection per address; a connection that failed or timed out is closed (a late
    answer must not be read as the next one's)."""

    def __init__(self, connect_timeout: float = CONNECT_TIMEOUT, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.connect_timeout = connect_timeout
        self.max_frame = max_frame
        self._conns: dict[str, _Connection] = {}
        self._lock = threading.Lock()
        self._closed = False

    def _get(self, addr: str, timeout: float) -> _Connection:
        with self._lock:
            if self._closed:
                raise ClientError("the client is shut down")
            conn = self._conns.get(addr)
        if conn is None:
            fresh = _Connection(addr, min(timeout, self.connect_timeout), self.max_frame)
            with self._lock:
                if self._closed:
                    fresh.close()
                    raise ClientError("the client is shut down")
                conn = self._conns.setdefault(addr, fresh)
                if conn is not fresh:
                    fresh.close()
        return conn

    def invoke(self, call: Call) -> RemotingCommand | None:
        deadline = monotonic() + call.timeout
        conn = self._get(call.addr, call.timeout)
        if not conn.lock.acquire(timeout=max(deadline - monotonic(), 0.001)):
            raise TransportError(f"wait for the connection to {call.addr} timed out")
        if conn.closed_by_peer():
            conn.lock.release()
            self._drop(conn)
            conn = self._get(call.addr, max(deadline - monotonic(), 0.001))
            if not conn.lock.acquire(timeout=max(deadline - monotonic(), 0.001)):
                raise TransportError(f"wait for the connection to {call.addr} timed out")
        try:
            return conn.invoke(call.request, max(deadline - monotonic(), 0.001), call.oneway)
        except TransportError:
            self._drop(conn)
            raise
        finally:
            conn.lock.release()

    def _drop(self, conn: _Connection) -> None:
        with self._lock:
            if self._conns.get(conn.addr) is conn:
                del self._conns[conn.addr]
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conns = list(self._conns.values())
            self._conns.clear()
        for conn in conns:
            conn.close()


def run(transport: BlockingTransport, plan: Plan[T]) -> T:
    """Drive ``plan`` to its end with blocking calls."""
    answer: RemotingCommand | None = None
    error: TransportError | None = None
    while True:
        try:
            call = plan.throw(error) if error is not None else plan.send(answer)
        except StopIteration as stop:
            return stop.value
        answer, error = None, None
        try:
            answer = transport.invoke(call)
        except TransportError as exc:
            error = exc


class _Blocking:
    _transport: BlockingTransport

    def _run(self, plan: Plan[T]) -> T:
        return run(self._transport, plan)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        self._transport.close()


class Producer(_Blocking):
    """``DefaultMQProducer``: ``send`` retries ``retries`` times on other brokers within
    ``send_timeout_ms`` in all; ``send_oneway`` and sends to a given queue are tried once."""

    def __init__(self, name_server: str, group: str = "DEFAULT_PRODUCER", send_timeout_ms: int = 3000,
                 retries: int = 2, credentials: tuple[str, str] | None = None, *,
                 compress_over: int = 4096, max_message_size: int = 4 * 1024 * 1024,
                 send_latency_fault_enable: bool = False,
                 retry_another_broker_when_not_store_ok: bool = False,
                 clock: Callable[[], float] = monotonic) -> None:
        self.core = ProducerCore(name_server, group, send_timeout_ms, retries, credentials, clock,
                                 compress_over=compress_over, max_message_size=max_message_size,
                                 send_latency_fault_enable=send_latency_fault_enable,
                                 retry_another_broker_when_not_store_ok=retry_another_broker_when_not_store_ok)
        self._transport = BlockingTransport()

    def start(self) -> "Producer":
        """Nothing to start (connections open on first use); kept for Java's shape."""
        return self

    def __enter__(self) -> "Producer":
        return self

    def send(self, msg: Message, queue: MessageQueue | None = None) -> SendResult:
        result = self._run(self.core.send_plan(msg, queue))
        assert result is not None
        return result

    def send_batch(self, msgs: list[Message], queue: MessageQueue | None = None) -> SendResult:
        result = self._run(self.core.batch_plan(msgs, queue))
        assert result is not None
        return result

    def send_oneway(self, msg: Message, queue: MessageQueue | None = None) -> None:
        self._run(self.core.send_plan(msg, queue, oneway=True))

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        """The queues ``send`` chooses from (TBW102's first four per broker for a new topic)."""
        return self._run(self.core.publish_route_plan(topic)).publish_queues()


class PullConsumer(_Blocking):
    """``DefaultMQPullConsumer`` with the group's offsets kept on the brokers."""

    def __init__(self, name_server: str, group: str = "DEFAULT_CONSUMER",
                 credentials: tuple[str, str] | None = None, *, timeout_ms: int = 3000,
                 clock: Callable[[], float] = monotonic) -> None:
        self.core = ConsumerCore(name_server, group, credentials, clock, timeout_ms=timeout_ms)
        self._transport = BlockingTransport()

    def start(self) -> "PullConsumer":
        return self

    def __enter__(self) -> "PullConsumer":
        return self

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self.core.fetch_queues_plan(topic))

    def min_offset(self, mq: MessageQueue) -> int:
        return self._run(self.core.min_offset_plan(mq))

    def max_offset(self, mq: MessageQueue) -> int:
        return self._run(self.core.max_offset_plan(mq))

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, sub_expression: str = "*",
             timeout_ms: int = 10000, suspend_ms: int = 0) -> PullResult:
        """One PULL_MESSAGE; ``suspend_ms`` > 0 lets the broker hold it that long for new messages."""
        return self._run(self.core.pull_plan(mq, offset, max_nums, sub_expression, timeout_ms, suspend_ms))

    def pull_raw(self, mq: MessageQueue, offset: int, max_nums: int = 32, sub_expression: str = "*",
                 timeout_ms: int = 10000, suspend_ms: int = 0) -> PullResult:
        """As :meth:`pull`, the records left undecoded for a reader that decodes many at once: the
        result's ``body`` (FOUND: the stored records as the broker sent them, no tag filter applied
        here) and ``offset_delta``; ``rmqpy.client.requests.decode_pull_body`` gives what :meth:`pull` does."""
        return self._run(self.core.pull_plan(mq, offset, max_nums, sub_expression, timeout_ms, suspend_ms,
                                             decode=False))

    def pull_stream(self, mq: MessageQueue, sub_expression: str = "*", timeout_ms: int = 10000) -> PullStream:
        """Suspend-free raw pulls of ``mq`` with several in flight, on a connection of their own
        (:class:`rmqpy.client.pullstream.PullStream`), to the broker :meth:`pull` would ask; each
        answer's suggested broker steers the pulls after the stream, as :meth:`pull`'s does."""
        if not isinstance(timeout_ms, int) or timeout_ms <= 0:
            raise ClientError(f"timeout_ms must be an int > 0, not {timeout_ms!r}")
        from rmqpy.client.pullstream import PullStream  # it imports this module
        sub = R.subscription(mq.topic if isinstance(mq, MessageQueue) else "", sub_expression)
        addr = self._run(self.core.pull_addr_plan(mq))
        hook = self.core.hook
        return PullStream(addr, self.core.group, mq, sub, timeout_ms, sign=hook,
                          on_suggest=lambda broker_id: self.core.suggest(mq, broker_id))

    def commit_offset(self, mq: MessageQueue, offset: int) -> None:
        self._run(self.core.commit_offset_plan(mq, offset))

    def query_offset(self, mq: MessageQueue) -> int:
        return self._run(self.core.query_offset_plan(mq))

    def shutdown(self) -> None:
        try:
            self._run(self.core.shutdown_plan())
        except ClientError:
            pass
        finally:
            self._transport.close()
