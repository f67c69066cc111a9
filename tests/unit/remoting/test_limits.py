"""Bounded connections (issue 11 rows 7 and 8): flow control, unsent bytes, idle and half-sent
connections, the partial-frame budget, the frame size checked before buffering."""
from __future__ import annotations

import struct

from twisted.internet import task
from twisted.internet.testing import StringTransport

from rmqpy.protocol import command as codec
from rmqpy.protocol.codes import RequestCode, ResponseCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.remoting.dispatch import RequestDispatcher
from rmqpy.remoting.limits import ChannelSweeper, ConnectionLimits
from rmqpy.remoting.protocol import RemotingServerFactory

KiB = 1024


class BigReply:
    """Answers every request with a 40 KiB body, as a pull of many messages would."""

    def process_request(self, channel, request):
        return request.response(ResponseCode.SUCCESS, body=b"m" * (40 * KiB))


class BufferingTransport(StringTransport):
    """A StringTransport that, like Twisted's TCP transport, pauses its streaming producer when
    more than ``bufferSize`` bytes wait, and resumes it once a peer has read them all."""

    bufferSize = 64 * KiB
    producer_paused = False  # as FileDescriptor.producerPaused

    def write(self, data: bytes) -> None:
        super().write(data)
        if self.producer is not None and len(self.value()) > self.bufferSize and not self.producer_paused:
            self.producer_paused = True
            self.producer.pauseProducing()

    def peer_reads_all(self) -> bytes:
        data = self.value()
        self.clear()
        if self.producer is not None and self.producer_paused:
            self.producer_paused = False
            self.producer.resumeProducing()
        return data

    # the protocol stops reading through these (the transport's IPushProducer side)
    def pauseProducing(self) -> None:
        self.producerState = "paused"

    def resumeProducing(self) -> None:
        self.producerState = "producing"


def frames(data: bytes) -> list[RemotingCommand]:
    out, pos = [], 0
    while pos < len(data):
        (n,) = struct.unpack_from(">I", data, pos)
        out.append(codec.decode(data[pos + 4:pos + 4 + n]))
        pos += 4 + n
    return out


def server(limits: ConnectionLimits | None = None, clock: task.Clock | None = None,
           max_frame: int = codec.DEFAULT_MAX_FRAME) -> RemotingServerFactory:
    dispatcher = RequestDispatcher()
    dispatcher.register(RequestCode.PULL_MESSAGE, BigReply())
    dispatcher.register(RequestCode.HEART_BEAT, BigReply())
    return RemotingServerFactory(dispatcher, clock or task.Clock(), max_frame, limits)


def connect(factory: RemotingServerFactory, transport: StringTransport | None = None):
    proto = factory.buildProtocol(None)
    transport = transport or BufferingTransport()
    proto.makeConnection(transport)
    return proto, transport


def requests(n: int) -> bytes:
    out = b""
    for i in range(n):
        cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE)
        cmd.opaque = i
        out += codec.encode(cmd)
    return out


# ------------------------------------------------------------------ flow control
def test_a_client_that_does_not_read_is_not_read_either():
    proto, transport = connect(server())
    assert transport.producer is proto and transport.streaming
    proto.dataReceived(requests(50))  # one read with 50 pipelined requests
    # two 40 KiB replies pass the 64 KiB mark: the connection stops reading and parsing
    assert [f.opaque for f in frames(transport.value())] == [0, 1]
    assert transport.producerState == "producing"  # nothing more came: no need to stop reading yet
    more = requests(60)[len(requests(50)):]
    proto.dataReceived(more)  # the peer sends more while its replies wait: it is not read any more
    assert transport.producerState == "paused"
    assert [f.opaque for f in frames(transport.value())] == [0, 1]
    answered = [f.opaque for f in frames(transport.peer_reads_all())]
    while transport.value():
        answered += [f.opaque for f in frames(transport.peer_reads_all())]
    assert answered == list(range(60))  # all answered, in order, once the peer read
    assert transport.producerState == "producing" and proto.connected_


def test_replies_past_the_unsent_limit_close_the_connection():
    factory = server(ConnectionLimits(max_unsent_bytes=100 * KiB))
    proto, transport = connect(factory)
    proto.dataReceived(requests(2))
    proto.dataReceived(requests(1))
    assert transport.producerState == "paused"
    reply = RemotingCommand.request(RequestCode.PULL_MESSAGE).response(ResponseCode.SUCCESS, body=b"x" * (40 * KiB))
    proto.send_command(reply)  # e.g. held pulls answered while the peer still does not read
    proto.send_command(reply)
    assert not transport.disconnected
    proto.send_command(reply)  # 120 KiB above the high-water mark
    assert transport.disconnected and not proto.connected_
    assert factory.closed_unsent == 1
    before = len(transport.value())
    proto.send_command(reply)
    assert len(transport.value()) == before


def test_write_buffer_high_water_mark_is_the_transports_buffer_size():
    proto, transport = connect(server(ConnectionLimits(write_high_water=1 * KiB * KiB)))
    assert transport.bufferSize == 1024 * KiB
    proto.dataReceived(requests(20))  # 800 KiB of replies: under the mark
    assert len(frames(transport.value())) == 20 and transport.producerState == "producing"


def test_a_graceful_close_is_not_held_open_by_the_producer():
    proto, transport = connect(server())
    proto.close()
    assert transport.producer is None and transport.disconnecting


# ------------------------------------------------------------------ frame size
def test_frame_length_over_the_maximum_closes_before_buffering():
    proto, transport = connect(server(max_frame=1024 * KiB))
    proto.dataReceived(struct.pack(">I", 2 * 1024 * KiB) + b"\0" * 1000)
    assert transport.disconnecting and len(proto._buffer) == 0


# ------------------------------------------------------------------ the sweep
def sweeper(limits: ConnectionLimits) -> tuple[task.Clock, RemotingServerFactory, ChannelSweeper]:
    clock = task.Clock()
    factory = server(limits, clock)
    sweep = ChannelSweeper(clock, limits, [factory])
    sweep.start()
    return clock, factory, sweep


def seconds(clock: task.Clock, n: int, each=None) -> None:
    for _ in range(n):
        clock.advance(1)
        if each is not None:
            each()


def test_idle_connections_are_closed_active_ones_kept():
    clock, factory, sweep = sweeper(ConnectionLimits(max_idle_seconds=2))
    idle, idle_t = connect(factory, StringTransport())
    half, half_t = connect(factory, StringTransport())
    busy, busy_t = connect(factory, StringTransport())
    half.dataReceived(b"\x00\x00\x01")  # a frame begun, then silence
    seconds(clock, 5, lambda: busy.dataReceived(requests(1)))
    assert idle_t.disconnected and half_t.disconnected
    assert not busy_t.disconnecting and busy in factory.channels
    assert sweep.closed_idle == 2


def test_a_closing_connection_whose_peer_does_not_read_is_aborted_when_idle():
    clock, factory, sweep = sweeper(ConnectionLimits(max_idle_seconds=2))
    proto, transport = connect(factory)
    # a reply the peer never reads, then a bad frame: a graceful close that cannot finish
    proto.dataReceived(requests(1) + struct.pack(">I", 0))
    assert len(transport.value()) > 40 * KiB
    assert transport.disconnecting and not transport.disconnected
    seconds(clock, 4)
    assert transport.disconnected and sweep.closed_idle == 1


def test_idle_time_zero_never_closes():
    clock, factory, _ = sweeper(ConnectionLimits(max_idle_seconds=0))
    _, t = connect(factory, StringTransport())
    seconds(clock, 300)
    assert not t.disconnecting


def test_a_half_sent_frame_times_out_even_if_bytes_trickle_in():
    clock, factory, sweep = sweeper(ConnectionLimits(partial_frame_timeout=10))
    slow, slow_t = connect(factory, StringTransport())
    fine, fine_t = connect(factory, StringTransport())
    slow.dataReceived(struct.pack(">I", 100_000))
    frame = requests(1)

    def tick() -> None:
        slow.dataReceived(b"x")  # one byte a second keeps it from being idle
        fine.dataReceived(frame[:10])  # whole frames, each sent in two halves
        fine.dataReceived(frame[10:])
        fine.dataReceived(frame[:10])  # and one left half-sent at each sweep

    seconds(clock, 9, tick)
    assert not slow_t.disconnected
    fine.dataReceived(frame[10:])
    seconds(clock, 3, tick)
    assert slow_t.disconnected and not fine_t.disconnected
    assert sweep.closed_partial == 1


def begin_frame(proto, size: int, sent: int = 10 * KiB, first: int = 4) -> None:
    """Declare a frame of ``size`` bytes and send ``sent`` bytes of it, the first ``first`` alone."""
    data = struct.pack(">I", size - 4) + b"\0" * (sent - 4)
    proto.dataReceived(data[:first])
    proto.dataReceived(data[first:])


def test_the_partial_frame_budget_closes_the_biggest_declared_frame_before_it_is_buffered():
    clock, factory, sweep = sweeper(ConnectionLimits(max_partial_bytes_total=450 * KiB))
    conns = {}
    for name, size in (("small", 100), ("big", 300), ("mid", 200)):
        proto, t = connect(factory, StringTransport())
        begin_frame(proto, size * KiB, first=2 if name == "mid" else 4)  # mid's length comes in two reads
        conns[name] = t
    # closed as the third frame is declared: not a second later, and with 10 KiB of each received
    assert conns["big"].disconnected
    assert not conns["small"].disconnected and not conns["mid"].disconnected
    assert sweep.closed_budget == 1 and sweep.partial_bytes == 300 * KiB


def test_the_budget_counts_frames_being_received_not_those_done():
    clock, factory, sweep = sweeper(ConnectionLimits(max_partial_bytes_total=450 * KiB))
    first, first_t = connect(factory, StringTransport())
    begin_frame(first, 400 * KiB)
    first.connectionLost(None)  # the peer went away: its frame is given back
    second, second_t = connect(factory, StringTransport())
    whole = codec.encode(RemotingCommand.request(RequestCode.HEART_BEAT, body=b"\0" * (400 * KiB)))
    for _ in range(5):  # whole 400 KiB frames in pieces: each given back when done
        second.dataReceived(whole[:10 * KiB])
        second.dataReceived(whole[10 * KiB:])
    assert not second_t.disconnecting and sweep.closed_budget == 0 and sweep.partial_bytes == 0
    begin_frame(second, 400 * KiB)
    assert sweep.partial_bytes == 400 * KiB
    third, third_t = connect(factory, StringTransport())
    begin_frame(third, 100 * KiB)
    assert second_t.disconnected and not third_t.disconnected


def test_config_changes_apply_at_the_next_sweep():
    from rmqpy.namesrv.config import NettyServerConfig
    netty = NettyServerConfig(serverChannelMaxIdleTimeSeconds=100)
    clock = task.Clock()
    limits = ConnectionLimits.from_config(netty)
    factory = server(limits, clock)
    ChannelSweeper(clock, limits, [factory], netty).start()
    _, t = connect(factory, StringTransport())
    seconds(clock, 5)
    assert not t.disconnecting
    netty.serverChannelMaxIdleTimeSeconds = 2  # as UPDATE_NAMESRV_CONFIG sets it
    netty.serverChannelMaxUnsentBytes = 1234
    seconds(clock, 1)
    assert t.disconnected and factory.limits.max_unsent_bytes == 1234


def test_limits_from_netty_config_keys():
    from rmqpy.broker.config import NettyServerConfig as BrokerNetty
    from rmqpy.namesrv.config import NettyServerConfig as NamesrvNetty
    for cls in (BrokerNetty, NamesrvNetty):
        cfg = cls(serverChannelMaxIdleTimeSeconds=7, writeBufferHighWaterMark=1000, serverChannelMaxUnsentBytes=5,
                  serverPartialFrameTimeoutSeconds=3, serverPartialFramesMaxBytes=9)
        assert ConnectionLimits.from_config(cfg) == ConnectionLimits(
            max_idle_seconds=7, write_high_water=1000, max_unsent_bytes=5, partial_frame_timeout=3,
            max_partial_bytes_total=9)


def test_the_remoting_ports_cap_one_address_at_half_the_port(monkeypatch) -> None:
    """serverMaxConnections(PerAddress)=0: the open-file limit less the store's reserve, one descriptor a
    connection, and half of that per address (an application host runs many clients: a quarter, the
    gRPC port's share, refused 1,253 of one host's 5,000 consumers)."""
    from twisted.internet import task

    from rmqpy.common import fdlimit
    from rmqpy.remoting.connection_limits import remoting_cap
    from rmqpy.remoting.netty_config import NettyServerConfig
    monkeypatch.setattr(fdlimit, "soft_limit", lambda: 20000)  # port_caps reads them from the module
    monkeypatch.setattr(fdlimit, "open_files", lambda: 30)
    cap = remoting_cap(NettyServerConfig(), task.Clock(), "broker")
    assert (cap.max_total, cap.max_per_address) == (14970, 7485)
    netty = NettyServerConfig()
    netty.serverMaxConnections, netty.serverMaxConnectionsPerAddress = -1, -1
    cap = remoting_cap(netty, task.Clock(), "broker")
    assert (cap.max_total, cap.max_per_address) == (0, 0)  # no cap
