"""The gRPC endpoint's server (rmqpy.proxy.grpc.server.grpc_server): calls that stay open, as every
client's Telemetry stream does, never leave a later call without a thread; a call over the limit is
refused at once with RESOURCE_EXHAUSTED instead of waiting."""
from __future__ import annotations

import threading
from typing import Any, Iterator

import grpc
import pytest

from rmqpy.proxy.grpc.server import grpc_server

LIMIT = 4


def _handler(release: threading.Event) -> Any:
    def hold(requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        yield b"open"
        release.wait(60)  # a stream that lasts, as a client's Telemetry stream lasts

    def ping(request: bytes, context: Any) -> bytes:
        return b"pong"

    return grpc.method_handlers_generic_handler("rmqpy.test.Pool", {
        "Hold": grpc.stream_stream_rpc_method_handler(hold),
        "Ping": grpc.unary_unary_rpc_method_handler(ping),
    })


@pytest.fixture
def endpoint() -> Iterator[tuple[grpc.Channel, threading.Event]]:
    release = threading.Event()
    server = grpc_server(LIMIT, 1 << 20)
    server.add_generic_rpc_handlers((_handler(release),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield channel, release
    finally:
        release.set()
        channel.close()
        server.stop(grace=None).wait(5)


def test_open_streams_leave_a_thread_for_every_admitted_call(endpoint) -> None:
    channel, _ = endpoint
    hold = channel.stream_stream("/rmqpy.test.Pool/Hold")
    ping = channel.unary_unary("/rmqpy.test.Pool/Ping")
    streams = [hold(iter(()), timeout=10) for _ in range(LIMIT - 1)]
    for s in streams:
        assert next(s) == b"open"  # each stream runs on a pool thread of its own
    # the old pool (64 threads for 1024 calls) let open streams take every thread: this call then
    # waited in the pool's queue until its deadline
    assert ping(b"", timeout=10) == b"pong"
    streams.append(hold(iter(()), timeout=10))
    assert next(streams[-1]) == b"open"


def test_a_call_over_the_limit_is_refused_at_once(endpoint) -> None:
    channel, _ = endpoint
    hold = channel.stream_stream("/rmqpy.test.Pool/Hold")
    streams = [hold(iter(()), timeout=10) for _ in range(LIMIT)]
    for s in streams:
        assert next(s) == b"open"
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary("/rmqpy.test.Pool/Ping")(b"", timeout=10)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
