"""Bounded connections (issue 11 rows 7 and 8) against real ``twistd rmq-broker`` / ``rmq-namesrv``.

Hostile clients are raw sockets; the well-behaved one is rmqpy's BlockingClient. Before the
fix 4,000 pulls from a client that never read its replies grew the broker by 1.0 GB, 40
stalled 15 MiB partial frames by 614 MB, and the name server closed none of 2,334 idle or
half-sent connections.
"""
from __future__ import annotations

import errno
import select
import socket
import ssl
import struct
import time
from pathlib import Path

import pytest

from rmqpy.protocol import command as codec
from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.tools.blocking_client import BlockingClient

from .servers import Cluster, start_namesrv

pytestmark = pytest.mark.interop

TOPIC = "TBounded"
MiB = 1024 * 1024


def status_kb(pid: int, field: str) -> int:
    """``VmRSS`` (resident now) or ``VmHWM`` (the peak) of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def send_message(client: BlockingClient, i: int, body: bytes) -> None:
    ext = {"a": "PGBounded", "b": TOPIC, "c": "TBW102", "d": "1", "e": "0", "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": f"KEYS\x01k{i}\x02WAIT\x01true\x02",
           "j": "0", "k": "false", "m": "false", "n": "broker-py"}
    r = client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, body=body, ext_fields=ext))
    assert r.code == 0, r.remark


def pull_frame() -> bytes:
    ext = {"consumerGroup": "GBounded", "topic": TOPIC, "queueId": "0", "queueOffset": "0",
           "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
           "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, ext_fields=ext)
    cmd.opaque = 7
    return codec.encode(cmd)


def served_within(addr: str, code: int, ext: dict[str, str], seconds: float) -> float:
    """Latency of one request on a fresh connection; fails if not answered within ``seconds``."""
    start = time.monotonic()
    with BlockingClient(addr, timeout=seconds) as client:
        r = client.invoke(RemotingCommand.request(code, ext_fields=ext))
    assert r.is_response
    return time.monotonic() - start


def push_without_reading(sock: socket.socket, data: bytes, seconds: float) -> int:
    """Send as much of ``data`` as the peer takes within ``seconds``; never read. Bytes sent."""
    sock.setblocking(False)
    sent, deadline = 0, time.monotonic() + seconds
    while sent < len(data) and time.monotonic() < deadline:
        try:
            sent += sock.send(data[sent:sent + 256 * 1024])
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            select.select([], [sock], [], 0.05)
        except OSError:
            break
    return sent


def still_open(socks: list[socket.socket], seconds: float) -> list[socket.socket]:
    """The sockets the server has not closed (EOF or reset) within ``seconds``; what the server
    sent is read and thrown away."""
    remaining = list(socks)
    for s in remaining:
        s.setblocking(False)
    deadline = time.monotonic() + seconds
    while remaining and time.monotonic() < deadline:
        readable, _, _ = select.select(remaining, [], [], 0.1)
        for s in readable:
            try:
                while s.recv(1 << 20):
                    pass
            except (BlockingIOError, ssl.SSLWantReadError):
                continue
            except ssl.SSLError:
                pass  # the connection was cut mid-record
            except OSError as exc:
                if exc.errno not in (errno.ECONNRESET, errno.EPIPE):
                    raise
            remaining.remove(s)
    return remaining


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
def test_pulls_never_read_do_not_grow_the_broker(tmp_path: Path, tls: bool) -> None:
    props: dict[str, object] = {"serverChannelMaxIdleTimeSeconds": 3}
    if tls:  # TLS and plaintext on one port; the hostile client speaks TLS
        props.update({"tls.server.mode": "permissive", "tls.test.mode.enable": True})
    with Cluster(tmp_path, "127.0.0.1", broker_props=props) as cluster:
        pid = cluster.broker.proc.pid
        with BlockingClient(cluster.broker_addr, timeout=10) as client:
            for i in range(64):  # each pull answers 32 of these: about 135 KB
                send_message(client, i, b"p" * 4096)
        time.sleep(0.5)
        before = status_kb(pid, "VmHWM")
        hostile = socket.create_connection(("127.0.0.1", cluster.broker.port))
        hostile.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        if tls:
            ctx = ssl.create_default_context()
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            hostile = ctx.wrap_socket(hostile)
        sent = push_without_reading(hostile, pull_frame() * 4000, seconds=4)
        # another client is served meanwhile
        latency = served_within(cluster.broker_addr, RequestCode.GET_MAX_OFFSET,
                                {"topic": TOPIC, "queueId": "0"}, seconds=3)
        time.sleep(1.5)  # time to answer all it has read
        grown = (status_kb(pid, "VmHWM") - before) / 1024
        print(f"hostile sent {sent} bytes of 4000 pulls; broker peak RSS +{grown:.1f} MB; other client {latency:.3f}s")
        assert grown < 64, f"broker RSS grew {grown:.0f} MB for pulls that are never read"
        # the hostile connection reads nothing and is read no more: idle, closed after 3 s
        port = hostile.getsockname()[1]
        deadline = time.monotonic() + 8
        while f"NETTY SERVER PIPELINE: IDLE exception [127.0.0.1:{port}]" not in cluster.broker.log_tail(200_000):
            assert time.monotonic() < deadline, cluster.broker.log_tail()
            time.sleep(0.2)
        assert not still_open([hostile], 5)
        hostile.close()
        assert cluster.broker.proc.poll() is None


def test_route_queries_never_read_do_not_grow_the_name_server(tmp_path: Path) -> None:
    ns = start_namesrv(tmp_path / "ns")
    try:
        with BlockingClient(ns.addr, timeout=10) as admin:  # a namespace whose list is 400 KB
            for i in range(50):
                r = admin.invoke(RemotingCommand.request(RequestCode.PUT_KV_CONFIG, ext_fields={
                    "namespace": "NSBounded", "key": f"k{i}", "value": "v" * 8000}))
                assert r.code == 0, r.remark
        time.sleep(0.5)
        before = status_kb(ns.proc.pid, "VmHWM")
        query = RemotingCommand.request(RequestCode.GET_KVLIST_BY_NAMESPACE, ext_fields={"namespace": "NSBounded"})
        hostile = socket.create_connection(("127.0.0.1", ns.port))
        hostile.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sent = push_without_reading(hostile, codec.encode(query) * 4000, seconds=3)
        latency = served_within(ns.addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}, seconds=3)
        time.sleep(1.5)
        grown = (status_kb(ns.proc.pid, "VmHWM") - before) / 1024
        print(f"hostile sent {sent} bytes of 4000 queries; name server peak RSS +{grown:.1f} MB; "
              f"other client {latency:.3f}s")
        assert grown < 64, f"name server RSS grew {grown:.0f} MB for answers that are never read"
        hostile.close()
        assert ns.proc.poll() is None
    finally:
        ns.stop()


def test_stalled_partial_frames_are_bounded_and_closed(tmp_path: Path) -> None:
    props = {"serverPartialFramesMaxBytes": 64 * MiB, "serverPartialFrameTimeoutSeconds": 3}
    with Cluster(tmp_path, "127.0.0.1", broker_props=props) as cluster:
        pid = cluster.broker.proc.pid
        before = status_kb(pid, "VmHWM")
        socks = []
        frame_start = struct.pack(">I", 15 * MiB) + b"\0" * (15 * MiB - 1024)  # 1 KiB short of whole
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", cluster.broker.port))
            push_without_reading(s, frame_start, seconds=1)
            socks.append(s)
        latency = served_within(cluster.broker_addr, RequestCode.GET_MAX_OFFSET,
                                {"topic": "TBW102", "queueId": "0"}, seconds=3)
        peak = (status_kb(pid, "VmHWM") - before) / 1024
        print(f"broker peak RSS +{peak:.1f} MB for 40 stalled 15 MiB frames; other client {latency:.3f}s")
        assert peak < 64 + 64, f"broker peak RSS grew {peak:.0f} MB"
        # the budget closed most at once; the partial-frame timeout closes the rest
        open_after = still_open(socks, 8)
        assert not open_after, f"{len(open_after)} stalled connections still open"
        log = cluster.broker.log_tail(500_000)
        assert "serverPartialFramesMaxBytes=67108864" in log and "serverPartialFrameTimeoutSeconds=3" in log
        for s in socks:
            s.close()
        assert cluster.broker.proc.poll() is None


def test_namesrv_closes_idle_and_half_sent_connections(tmp_path: Path) -> None:
    ns = start_namesrv(tmp_path / "ns", props={"serverChannelMaxIdleTimeSeconds": 2})
    try:
        idle = [socket.create_connection(("127.0.0.1", ns.port)) for _ in range(100)]
        half = []
        for _ in range(100):
            s = socket.create_connection(("127.0.0.1", ns.port))
            s.sendall(struct.pack(">I", 200) + b"{")  # a frame begun, never finished
            half.append(s)
        start = time.monotonic()
        with BlockingClient(ns.addr, timeout=3) as active:
            while time.monotonic() - start < 5:  # one request every half second: not idle
                r = active.invoke(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
                assert r.code == 0
                time.sleep(0.5)
            left = still_open(idle + half, 1)
            assert not left, f"{len(left)} of 200 idle or half-sent connections still open after 5 s"
            r = active.invoke(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
            assert r.code == 0  # the active client was kept
        assert "NETTY SERVER PIPELINE: IDLE exception" in ns.log_tail(200_000)
    finally:
        for s in idle + half:
            s.close()
        ns.stop()
