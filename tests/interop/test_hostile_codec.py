"""Decoders that only raise the frame error, and a bad request is one rate-limited log line
(issue 11, rows 5 and 6), against real ``twistd rmq-namesrv`` and ``rmq-broker`` processes.

Before the fix ``{"code":1e999}`` and a 50,000-deep header let OverflowError/RecursionError
escape the frame-error path ("Unhandled Error"), and 500 malformed JSON bodies wrote 974 KB
of log (a critical-level traceback each).
"""
from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest

from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.ratelimit import DEFAULT_SUMMARY_INTERVAL
from rmqpy.tools.blocking_client import BlockingClient

from .servers import Cluster, ServerProcess

pytestmark = pytest.mark.interop

ROUNDS = 500
#: what the log may grow by for 3 x 500 bad requests: the rate limiter's burst and rate for
#: the run's few seconds (the unlimited logs wrote ~2 KB per bad body, ~1 MB per 500)
LOG_GROWTH_LIMIT = 64 * 1024


def _raw_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


HUGE_CODE = _raw_frame(b'{"code":1e999,"flag":0,"language":"JAVA","opaque":1,"version":409}')
DEEP = _raw_frame(b'{"code":105,"x":' + b"[" * 50_000 + b"]" * 50_000 + b"}")


def _closed_without_answer(addr: str, frame: bytes) -> bool:
    """Send one frame on a new connection; True if the server closed it without a reply."""
    host, _, port = addr.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(frame)
        try:
            return sock.recv(1) == b""
        except ConnectionResetError:
            return True


def _malformed_body_request(server: str) -> RemotingCommand:
    if server == "broker":  # a HeartbeatData body that is not JSON
        return RemotingCommand.request(RequestCode.HEART_BEAT, body=b'{"clientID":"c","consumerDataSet":[{')
    return RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, body=b'{"counter":[[[{', ext_fields={
        "brokerName": "b", "brokerAddr": "10.0.0.1:10911", "clusterName": "c", "brokerId": "0"})


def _good_request(server: str) -> RemotingCommand:
    if server == "broker":
        return RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
    return RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)


@pytest.mark.parametrize("which", ["namesrv", "broker"])
def test_hostile_headers_and_bodies_are_refused_quietly_while_others_are_served(tmp_path: Path, which: str) -> None:
    with Cluster(tmp_path, "127.0.0.1") as cluster:
        server: ServerProcess = cluster.ns if which == "namesrv" else cluster.broker
        addr = server.addr
        log_before = server.log.stat().st_size
        good_latencies: list[float] = []
        with BlockingClient(addr) as good, BlockingClient(addr) as bad_bodies:
            for i in range(ROUNDS):
                assert _closed_without_answer(addr, HUGE_CODE), f"round {i}: {{'code':1e999}} was not refused"
                assert _closed_without_answer(addr, DEEP), f"round {i}: the 50,000-deep header was not refused"
                answer = bad_bodies.invoke(_malformed_body_request(which))
                assert answer.code == ResponseCode.SYSTEM_ERROR and "Error" in (answer.remark or ""), answer
                if i % 25 == 0:  # another client is served meanwhile, promptly
                    start = time.monotonic()
                    reply = good.invoke(_good_request(which))
                    good_latencies.append(time.monotonic() - start)
                    assert reply.code == ResponseCode.SUCCESS, reply
        assert server.proc.poll() is None, f"{which} died"
        assert max(good_latencies) < 2.0, good_latencies
        time.sleep(DEFAULT_SUMMARY_INTERVAL + 0.5)  # the "suppressed N similar log lines" summaries are written
        log = server.log.read_text(errors="replace")
        grown = server.log.stat().st_size - log_before
    print(f"{which}: log grew by {grown} bytes for {3 * ROUNDS} bad requests; "
          f"the other client's slowest answer {max(good_latencies) * 1000:.0f} ms")
    assert "Traceback" not in log and "Unhandled Error" not in log, log[-3000:]
    assert grown < LOG_GROWTH_LIMIT, f"{which} log grew by {grown} bytes"
    assert "closing connection from 127.0.0.1" in log and "infinity" in log  # one line says what happened
    assert "suppressed" in log and "similar log lines (bad-frame)" in log
    assert "similar log lines (bad-request)" in log
