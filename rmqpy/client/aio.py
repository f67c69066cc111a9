"""The asyncio form: the same Producer and PullConsumer with coroutine methods.

A connection per address carries many requests at once; answers are matched by opaque, a
request whose answer is late fails with ClientError and its answer is dropped when it comes.
"""
from __future__ import annotations

import asyncio
import struct
from typing import Any

from rmqpy.client.core import Call, ConsumerCore, Plan, ProducerCore, T
from rmqpy.client.errors import ClientError, TransportError
from rmqpy.client.model import Message, MessageQueue, PullResult, SendResult
from rmqpy.protocol import command as codec
from rmqpy.protocol.command import DEFAULT_MAX_FRAME, FrameError, RemotingCommand
from rmqpy.remoting.protocol import next_opaque

_LENGTH = struct.Struct(">I")
CONNECT_TIMEOUT = 3.0


class _Connection:
    def __init__(self, addr: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_frame: int) -> None:
        self.addr = addr
        self.reader, self.writer = reader, writer
        self.max_frame = max_frame
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.closed = False
        self.task = asyncio.ensure_future(self._read_loop())

    async def _read_loop(self) -> None:
        reason = "closed by the server"
        try:
            while True:
                (length,) = _LENGTH.unpack(await self.reader.readexactly(4))
                if not 4 <= length <= self.max_frame:
                    reason = f"sent a frame of {length} bytes (limit {self.max_frame})"
                    break
                cmd = codec.decode(await self.reader.readexactly(length))
                if cmd.is_response:
                    fut = self.pending.pop(cmd.opaque, None)
                    if fut is not None and not fut.done():
                        fut.set_result(cmd)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        except FrameError as exc:
            reason = f"sent an undecodable frame: {exc}"
        finally:
            self.close(reason)

    def close(self, reason: str = "closed") -> None:
        if not self.closed:
            self.closed = True
            self.writer.close()
        pending, self.pending = self.pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(TransportError(f"connection to {self.addr} {reason}"))


class AsyncTransport:
    def __init__(self, connect_timeout: float = CONNECT_TIMEOUT, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.connect_timeout = connect_timeout
        self.max_frame = max_frame
        self._conns: dict[str, _Connection] = {}
        self._connecting: dict[str, asyncio.Future[_Connection]] = {}
        self._closed = False

    async def _connect(self, addr: str, timeout: float) -> _Connection:
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        waiting = self._connecting.get(addr)
        if waiting is not None:
            return await asyncio.wait_for(asyncio.shield(waiting), timeout)
        fut: asyncio.Future[_Connection] = asyncio.get_running_loop().create_future()
        self._connecting[addr] = fut
        host, _, port = addr.rpartition(":")
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), int(port)),
                                                    min(timeout, self.connect_timeout))
        except (OSError, asyncio.TimeoutError, ValueError) as exc:
            error = TransportError(f"connect to {addr} failed: {exc or type(exc).__name__}")
            fut.set_exception(error)
            fut.exception()  # retrieved: nobody else may be waiting
            raise error from None
        finally:
            self._connecting.pop(addr, None)
        conn = _Connection(addr, reader, writer, self.max_frame)
        if self._closed:
            conn.close("closed: the client is shut down")
            raise ClientError("the client is shut down")
        self._conns[addr] = conn
        fut.set_result(conn)
        return conn

    async def invoke(self, call: Call) -> RemotingCommand | None:
        if self._closed:
            raise ClientError("the client is shut down")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + call.timeout
        conn = await self._connect(call.addr, call.timeout)
        request = call.request
        request.opaque = next_opaque()
        if call.oneway:
            request.flag |= codec.RPC_ONEWAY
        fut: asyncio.Future[RemotingCommand] | None = None
        if not call.oneway:
            fut = loop.create_future()
            conn.pending[request.opaque] = fut
        try:
            conn.writer.write(codec.encode(request))
            await asyncio.wait_for(conn.writer.drain(), max(deadline - loop.time(), 0.001))
            if fut is None:
                return None
            return await asyncio.wait_for(fut, max(deadline - loop.time(), 0.001))
        except asyncio.TimeoutError:
            raise TransportError(f"wait response on {call.addr} timed out after "
                                 f"{call.timeout * 1000:.0f} ms") from None
        except (ConnectionError, OSError) as exc:
            conn.close(f"failed: {exc}")
            raise TransportError(f"connection to {call.addr} failed: {exc}") from None
        finally:
            conn.pending.pop(request.opaque, None)

    async def close(self) -> None:
        self._closed = True
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close("closed: the client is shut down")
        for conn in conns:
            try:
                await asyncio.wait_for(conn.task, 1.0)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                conn.task.cancel()


async def run(transport: AsyncTransport, plan: Plan[T]) -> T:
    answer: RemotingCommand | None = None
    error: TransportError | None = None
    while True:
        try:
            call = plan.throw(error) if error is not None else plan.send(answer)
        except StopIteration as stop:
            return stop.value
        answer, error = None, None
        try:
            answer = await transport.invoke(call)
        except TransportError as exc:
            error = exc


def _clock() -> float:
    return asyncio.get_running_loop().time()


class _Form:
    _transport: AsyncTransport

    async def _run(self, plan: Plan[T]) -> T:
        return await run(self._transport, plan)

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def shutdown(self) -> None:
        await self._transport.close()


class Producer(_Form):
    """:class:`rmqpy.client.Producer` with coroutines; create it inside the running loop."""

    def __init__(self, name_server: str, group: str = "DEFAULT_PRODUCER", send_timeout_ms: int = 3000,
                 retries: int = 2, credentials: tuple[str, str] | None = None, **options: Any) -> None:
        self.core = ProducerCore(name_server, group, send_timeout_ms, retries, credentials, _clock, **options)
        self._transport = AsyncTransport()

    async def send(self, msg: Message, queue: MessageQueue | None = None) -> SendResult:
        result = await self._run(self.core.send_plan(msg, queue))
        assert result is not None
        return result

    async def send_batch(self, msgs: list[Message], queue: MessageQueue | None = None) -> SendResult:
        result = await self._run(self.core.batch_plan(msgs, queue))
        assert result is not None
        return result

    async def send_oneway(self, msg: Message, queue: MessageQueue | None = None) -> None:
        await self._run(self.core.send_plan(msg, queue, oneway=True))


class PullConsumer(_Form):
    """:class:`rmqpy.client.PullConsumer` with coroutines; create it inside the running loop."""

    def __init__(self, name_server: str, group: str = "DEFAULT_CONSUMER",
                 credentials: tuple[str, str] | None = None, *, timeout_ms: int = 3000) -> None:
        self.core = ConsumerCore(name_server, group, credentials, _clock, timeout_ms=timeout_ms)
        self._transport = AsyncTransport()

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        return await self._run(self.core.fetch_queues_plan(topic))

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self._run(self.core.min_offset_plan(mq))

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self._run(self.core.max_offset_plan(mq))

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, sub_expression: str = "*",
                   timeout_ms: int = 10000, suspend_ms: int = 0) -> PullResult:
        return await self._run(self.core.pull_plan(mq, offset, max_nums, sub_expression, timeout_ms, suspend_ms))

    async def commit_offset(self, mq: MessageQueue, offset: int) -> None:
        await self._run(self.core.commit_offset_plan(mq, offset))

    async def query_offset(self, mq: MessageQueue) -> int:
        return await self._run(self.core.query_offset_plan(mq))

    async def shutdown(self) -> None:
        try:
            await self._run(self.core.shutdown_plan())
        except ClientError:
            pass
        await self._transport.close()
