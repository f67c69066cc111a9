"""What grpcio's asyncio server costs alone, without rmqpy: a unary call vs a server stream of 34 responses.

    python bench/grpc_aio_stream_cost.py [--calls 200] [--stream 32]

A bare ``grpc.aio`` server in a child process answers Heartbeat at once and ReceiveMessage with what a
ReceiveMessage of a batch of 32 streams (a status, 32 messages of 128 bytes, the delivery timestamp),
all on its loop, no reactor; a ``grpc.aio`` client makes the two calls in turn, one at a time, and
prints each one's median round trip. grpcio's asyncio server awaits each streamed response's write
(a batch on grpc core's completion queue, its completion back through grpcio's polling thread), so a
stream costs about one such round trip per response on top of a unary call.
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import statistics
import time
from typing import Any, AsyncIterator


def _serve(port: int, stream: int) -> None:
    import grpc
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as spb
    message = spb.ReceiveMessageResponse(message=pb.Message(topic=pb.Resource(name="T"), body=b"x" * 128))

    async def heartbeat(request: Any, context: Any) -> Any:
        return spb.HeartbeatResponse(status=pb.Status(code=pb.Code.OK, message="OK"))

    async def receive(request: Any, context: Any) -> AsyncIterator[Any]:
        yield spb.ReceiveMessageResponse(status=pb.Status(code=pb.Code.OK))
        for _ in range(stream):
            yield message
        yield spb.ReceiveMessageResponse()

    async def main() -> None:
        server = grpc.aio.server()
        handlers = {
            "Heartbeat": grpc.unary_unary_rpc_method_handler(
                heartbeat, request_deserializer=spb.HeartbeatRequest.FromString,
                response_serializer=spb.HeartbeatResponse.SerializeToString),
            "ReceiveMessage": grpc.unary_stream_rpc_method_handler(
                receive, request_deserializer=spb.ReceiveMessageRequest.FromString,
                response_serializer=spb.ReceiveMessageResponse.SerializeToString)}
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("apache.rocketmq.v2.MessagingService", handlers),))
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        await server.wait_for_termination()
    asyncio.run(main())


async def _client(port: int, calls: int) -> str:
    import grpc
    from rocketmq.grpc_protocol import service_pb2 as spb
    from rocketmq.grpc_protocol import service_pb2_grpc as sgrpc
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        await channel.channel_ready()
        for _ in range(50):
            await stub.Heartbeat(spb.HeartbeatRequest())
        unary, streamed, n = [], [], 0
        for _ in range(calls):
            t = time.perf_counter()
            await stub.Heartbeat(spb.HeartbeatRequest())
            unary.append(time.perf_counter() - t)
            t, n = time.perf_counter(), 0
            async for _response in stub.ReceiveMessage(spb.ReceiveMessageRequest()):
                n += 1
            streamed.append(time.perf_counter() - t)
    return (f"unary call p50 {statistics.median(unary) * 1e3:.2f} ms; "
            f"stream of {n} responses p50 {statistics.median(streamed) * 1e3:.2f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--stream", type=int, default=32, help="messages in the streamed answer")
    a = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = multiprocessing.Process(target=_serve, args=(port, a.stream), daemon=True)
    server.start()
    try:
        print(asyncio.run(_client(port, a.calls)))
    finally:
        server.terminate()
        server.join(10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
