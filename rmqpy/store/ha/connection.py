"""HAConnection: the master's side of one slave (Java ``HAConnection``).

Reads the slave's 8-byte reports (only whole reports count, the last one wins; the first one
says where to start: 0 means the start of the master's last commit log file) and streams the
commit log from there in blocks of at most ``haTransferBatchSize`` bytes, each a 12-byte header
and the bytes. It is a Twisted streaming producer on the slave's transport: blocks are written
only while the transport has not asked it to pause, so a slow slave buffers at most about one
transport buffer plus one block, and a catching-up slave never holds the reactor for long
(at most ``_BLOCKS_PER_TURN`` blocks per reactor turn). Idle, it sends a heartbeat header with
size 0 every ``haSendHeartbeatInterval``; it closes a connection whose slave reported nothing for
``haHousekeepingInterval``, or reported more than the master has (its first report too: a
slave whose log is longer than the master's holds records the master does not).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from twisted.internet import protocol
from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

from rmqpy.remoting.channel import address_text
from rmqpy.remoting.ratelimit import limiter_for
from rmqpy.store.ha.flow import ByteRate
from rmqpy.store.ha.gate import impossible_report
from rmqpy.store.ha.wire import HEADER, REPORT

log = logging.getLogger(__name__)

_BLOCKS_PER_TURN = 16
_POLL_S = 0.1  # Java's WriteSocketService waits 100 ms for new data when it has none


@dataclass
class MasterLog:
    """What a connection reads of the master's store."""
    max_offset: Callable[[], int]
    #: bytes from an offset to the end of written data in its file, at most max_size; None: none
    read: Callable[[int, int], bytes | None]
    file_size: int


@dataclass
class HATimings:
    heartbeat_ms: int = 5000
    housekeeping_ms: int = 20000
    batch_size: int = 32768


@implementer(IPushProducer)
class HAConnection(protocol.Protocol):
    transport: Any  # a TCP transport (ITCPTransport + IConsumer) once connected

    def __init__(self, clock: Any, log_: MasterLog, timings: HATimings,
                 on_ack: Callable[["HAConnection", int], None], on_lost: Callable[["HAConnection"], None]) -> None:
        self.clock = clock
        self.store = log_
        self.timings = timings
        self.on_ack = on_ack
        self.on_lost = on_lost
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from = -1
        self.client_addr = "?"
        #: bytes written to the slave (haStatus's TransferSpeed; Java's classic master counts only the headers)
        self.flow = ByteRate(clock)
        self._buf = b""
        self._paused = False
        self._closed = False
        self._last_read = 0.0
        self._last_write = 0.0
        self._poll: Any = None
        self._housekeeping: Any = None
        self._pending: Any = None  # a transfer scheduled for the next reactor turn

    # ------------------------------------------------------------------ connection
    def connectionMade(self) -> None:  # noqa: N802 (Twisted's name)
        peer = self.transport.getPeer()
        self.client_addr = address_text(peer)
        now = self.clock.seconds()
        self._last_read = self._last_write = now
        self.transport.registerProducer(self, True)
        self._housekeeping = self.clock.callLater(1.0, self._housekeep)
        log.info("HA: slave %s connected", self.client_addr)

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self._closed = True
        for call in (self._poll, self._housekeeping, self._pending):
            if call is not None and call.active():
                call.cancel()
        log.info("HA: slave %s disconnected (acknowledged %d)", self.client_addr, self.slave_ack_offset)
        self.on_lost(self)

    def close(self, why: str) -> None:
        if self._closed:
            return
        if limiter_for(self.clock).allow("ha-connection-close"):
            log.warning("HA: closing slave %s: %s", self.client_addr, why)
        self._closed = True
        self.transport.loseConnection()

    # ------------------------------------------------------------------ reports
    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        if self._closed:
            return
        buf = self._buf + data
        whole = len(buf) - len(buf) % 8
        self._buf = buf[whole:]  # at most 7 bytes stay
        if not whole:
            return
        self._last_read = self.clock.seconds()
        offset, = REPORT.unpack_from(buf, whole - 8)
        why = impossible_report(offset, self.store.max_offset())
        if why is not None:  # the first report too: a slave ahead of its master holds another log
            self.close(why)
            return
        self.slave_ack_offset = offset
        if self.slave_request_offset < 0:
            self.slave_request_offset = offset
            self._start_transfer()
        self.on_ack(self, offset)

    def _start_transfer(self) -> None:
        if self.slave_request_offset == 0:
            end = self.store.max_offset()
            self.next_transfer_from = max(0, end - end % self.store.file_size)
        else:
            self.next_transfer_from = self.slave_request_offset
        log.info("HA: slave %s requested offset %d, transfer starts at %d", self.client_addr,
                 self.slave_request_offset, self.next_transfer_from)
        self.transfer()

    # ------------------------------------------------------------------ transfer
    def wakeup(self) -> None:
        """New data was appended: send it unless paused or not started."""
        if self.next_transfer_from >= 0 and not self._paused and not self._closed and self._pending is None:
            self._pending = self.clock.callLater(0, self._run_pending)

    def _run_pending(self) -> None:
        self._pending = None
        self.transfer()

    def transfer(self) -> None:
        if self._closed or self._paused or self.next_transfer_from < 0:
            return
        if self._poll is not None and self._poll.active():
            self._poll.cancel()
        self._poll = None
        sent = 0
        while sent < _BLOCKS_PER_TURN and not self._paused and not self._closed:
            data = self.store.read(self.next_transfer_from, self.timings.batch_size)
            if not data:
                break
            start = self.next_transfer_from
            self.next_transfer_from += len(data)
            self.transport.write(HEADER.pack(start, len(data)) + data)
            self.flow.add(HEADER.size + len(data))
            sent += 1
        now = self.clock.seconds()
        if sent:
            self._last_write = now
        elif now - self._last_write >= self.timings.heartbeat_ms / 1000.0:
            self.transport.write(HEADER.pack(self.next_transfer_from, 0))
            self.flow.add(HEADER.size)
            self._last_write = now
        if self._closed or self._paused:
            return
        if sent == _BLOCKS_PER_TURN:
            self.wakeup()  # more may be there: continue on the next reactor turn
        else:
            self._poll = self.clock.callLater(_POLL_S, self.transfer)

    # IPushProducer: the transport pauses us while its buffer is above its high-water mark
    def pauseProducing(self) -> None:  # noqa: N802
        self._paused = True

    def resumeProducing(self) -> None:  # noqa: N802
        self._paused = False
        self.transfer()

    def stopProducing(self) -> None:  # noqa: N802
        self._paused = True

    def _housekeep(self) -> None:
        self._housekeeping = None
        if self._closed:
            return
        if self.clock.seconds() - self._last_read > self.timings.housekeeping_ms / 1000.0:
            self.close(f"no report for {self.timings.housekeeping_ms} ms")
            return
        self._housekeeping = self.clock.callLater(1.0, self._housekeep)
