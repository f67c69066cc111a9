"""The master's side of one replica (Java ``AutoSwitchHAConnection``).

States as Java's: HANDSHAKE until the replica's first offset report, then TRANSFER. Each
handshake the replica sends is answered with the master's max offset, last epoch and epoch
list. The first report says where to start: 0 means the master's first commit log file (its
last with the replica's ``isSyncFromLastFile``), else the reported offset. From there the
commit log goes out in frames of at most ``haTransferBatchSize`` bytes, never across an
epoch's end: each frame names the epoch its bytes belong to, that epoch's start offset, and
the confirm offset. A report moves the replica's acknowledged offset; one that reaches what
the master had when it last sent asks the service to add the replica to the in-sync set.

Like the classic :class:`rmqpy.store.ha.connection.HAConnection` it is a Twisted streaming
producer on the socket (frames are written only while the transport is not paused, at most
:data:`_FRAMES_PER_TURN` per reactor turn), polls every 100 ms when it has nothing to send,
sends a heartbeat frame (body size 0) after ``haSendHeartbeatInterval`` without a write, and
closes a connection silent for ``haHousekeepingInterval``. Unlike Java it also closes one whose
report no replica can send (:func:`~rmqpy.store.ha.gate.impossible_report`, or a report before
the handshake that names the replica's broker id).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from twisted.internet import protocol
from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

from rmqpy.remoting.channel import address_text
from rmqpy.remoting.ratelimit import limiter_for
from rmqpy.store.epoch import LAST_EPOCH_END_OFFSET, EpochEntry
from rmqpy.store.ha.autoswitch.wire import (
    EPOCH_ENTRY,
    MASTER_HANDSHAKE,
    MASTER_TRANSFER,
    MAX_EPOCH_ENTRIES,
    SLAVE_HANDSHAKE,
    SLAVE_REPORT,
    State,
)
from rmqpy.store.ha.flow import ByteRate
from rmqpy.store.ha.gate import impossible_report

if TYPE_CHECKING:
    from rmqpy.store.ha.autoswitch.service import AutoSwitchHAService

log = logging.getLogger(__name__)

_FRAMES_PER_TURN = 16
_POLL_S = 0.1
_RETRY_S = 0.5  # Java waits 500 ms when it finds no epoch for the start offset


@implementer(IPushProducer)
class AutoSwitchHAConnection(protocol.Protocol):
    transport: Any  # a TCP transport (ITCPTransport + IConsumer) once connected

    def __init__(self, service: "AutoSwitchHAService") -> None:
        self.service = service
        self.clock = service.clock
        self.settings = service.settings
        self.state = State.HANDSHAKE
        self.slave_id = -1
        self.sync_from_last_file = False
        self.async_learner = False
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from = -1
        self.current_epoch = -1
        #: the master's max offset and the time when it last sent data (Java lastMasterMaxOffset)
        self.last_master_max_offset = -1
        self.last_transfer_time = 0.0
        self.client_addr = "?"
        #: bytes written to the replica, every frame (haStatus's TransferSpeed, as Java's writer hook)
        self.flow = ByteRate(self.clock)
        self._buf = bytearray()
        self._handshaken = False
        self._paused = False
        self._closed = False
        self._last_read = 0.0
        self._last_write = 0.0
        self._poll: Any = None
        self._housekeeping: Any = None
        self._pending: Any = None

    # ------------------------------------------------------------------ connection
    def connectionMade(self) -> None:  # noqa: N802 (Twisted's name)
        self.client_addr = address_text(self.transport.getPeer())
        self._last_read = self._last_write = self.clock.seconds()
        self.transport.registerProducer(self, True)
        self._housekeeping = self.clock.callLater(1.0, self._housekeep)
        log.info("AutoSwitch HA: replica %s connected", self.client_addr)

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self._closed = True
        self.state = State.SHUTDOWN
        for call in (self._poll, self._housekeeping, self._pending):
            if call is not None and call.active():
                call.cancel()
        log.info("AutoSwitch HA: replica %s (broker id %d) disconnected, acknowledged %d", self.client_addr,
                 self.slave_id, self.slave_ack_offset)
        self.service.connection_lost(self)

    def close(self, why: str) -> None:
        if self._closed:
            return
        if limiter_for(self.clock).allow("autoswitch-connection-close"):
            log.warning("AutoSwitch HA: closing replica %s (broker id %d): %s", self.client_addr, self.slave_id, why)
        self._closed = True
        self.transport.loseConnection()

    # ------------------------------------------------------------------ the replica's frames
    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        if self._closed:
            return
        self._last_read = self.clock.seconds()
        buf = self._buf
        buf += data
        pos = 0
        while len(buf) - pos >= SLAVE_REPORT.size and not self._closed:
            raw_state = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            if raw_state == State.HANDSHAKE:
                if len(buf) - pos < SLAVE_HANDSHAKE.size:
                    break
                _, from_last, learner, slave_id = SLAVE_HANDSHAKE.unpack_from(buf, pos)
                pos += SLAVE_HANDSHAKE.size
                self._handshake(slave_id, from_last == 1, learner == 1)
            elif raw_state == State.TRANSFER:
                _, offset = SLAVE_REPORT.unpack_from(buf, pos)
                pos += SLAVE_REPORT.size
                self._report(offset)
            else:
                self.close(f"a frame in state {raw_state}, neither HANDSHAKE nor TRANSFER")
                return
        del buf[:pos]

    def _handshake(self, slave_id: int, from_last: bool, learner: bool) -> None:
        self.slave_id, self.sync_from_last_file, self.async_learner = slave_id, from_last, learner
        self._handshaken = True
        log.info("AutoSwitch HA: handshake of replica %s: broker id %d, syncFromLastFile %s, asyncLearner %s",
                 self.client_addr, slave_id, from_last, learner)
        if self.state is not State.HANDSHAKE:
            log.warning("AutoSwitch HA: replica %s went back from %s to HANDSHAKE", self.client_addr, self.state.name)
            self.state = State.HANDSHAKE
        epochs = self.service.epochs
        entries = epochs.entries()[-MAX_EPOCH_ENTRIES:]
        max_offset = self.service.store.get_max_phy_offset()
        body = b"".join(EPOCH_ENTRY.pack(e.epoch, e.start_offset) for e in entries)
        self._write(MASTER_HANDSHAKE.pack(State.HANDSHAKE, len(body), max_offset, epochs.last_epoch()) + body)
        self._last_write = self.clock.seconds()

    def _report(self, offset: int) -> None:
        why = impossible_report(offset, self.service.store.get_max_phy_offset()) if self._handshaken \
            else "a report before any handshake"
        if why is not None:  # no real replica sends it (Java takes it; a fake one would answer SYNC puts)
            self.close(why)
            return
        if self.state is not State.TRANSFER:
            log.info("AutoSwitch HA: replica %s (broker id %d) in TRANSFER, first report %d", self.client_addr,
                     self.slave_id, offset)
            self.state = State.TRANSFER
        self.slave_ack_offset = offset
        first = self.slave_request_offset < 0
        if first:
            self.slave_request_offset = offset
        if not self.async_learner and offset >= self.last_master_max_offset:
            now = self.clock.seconds()
            caught_up = now if self.service.store.get_max_phy_offset() == offset else self.last_transfer_time
            self.service.update_caught_up_time(self.slave_id, caught_up)
            self.service.maybe_expand_sync_state_set(self.slave_id, offset)
        self.service.replica_acked(self, offset)
        if first:
            self.transfer()

    # ------------------------------------------------------------------ transfer
    def _start_point(self) -> bool:
        """Where the transfer starts and its epoch; False (retry later) when not known yet."""
        store = self.service.store
        if self.next_transfer_from < 0:
            if self.slave_request_offset == 0:
                if self.sync_from_last_file:
                    end = store.get_max_phy_offset()
                    self.next_transfer_from = max(0, end - end % self.settings.mappedFileSizeCommitLog)
                else:
                    self.next_transfer_from = store.get_min_phy_offset()
            else:
                self.next_transfer_from = self.slave_request_offset
        entry = self.service.epochs.find_by_offset(self.next_transfer_from)
        if entry is None:
            if limiter_for(self.clock).allow("autoswitch-no-epoch"):
                log.error("AutoSwitch HA: no epoch holds offset %d, where replica %s starts", self.next_transfer_from,
                          self.client_addr)
            return False
        self.current_epoch = entry.epoch
        log.info("AutoSwitch HA: transfer to replica %s starts at %d in epoch %d", self.client_addr,
                 self.next_transfer_from, entry.epoch)
        return True

    def _epoch_entry(self) -> EpochEntry | None:
        epochs = self.service.epochs
        entry = epochs.get(self.current_epoch)
        return entry if entry is not None else epochs.first()

    def _frame(self, offset: int, body: bytes) -> bytes:
        entry = self._epoch_entry()
        epoch, start = (entry.epoch, entry.start_offset) if entry is not None else (-1, 0)
        return MASTER_TRANSFER.pack(State.TRANSFER, len(body), offset, epoch, start,
                                    self.service.confirm_offset()) + body

    def _write(self, data: bytes) -> None:
        self.transport.write(data)
        self.flow.add(len(data))

    def wakeup(self) -> None:
        """New data was appended: send it unless paused or not started."""
        if self.next_transfer_from >= 0 and self.current_epoch >= 0 and not self._paused and not self._closed \
                and self._pending is None:
            self._pending = self.clock.callLater(0, self._run_pending)

    def _run_pending(self) -> None:
        self._pending = None
        self.transfer()

    def transfer(self) -> None:
        if self._closed or self._paused or self.state is not State.TRANSFER or self.slave_request_offset < 0:
            return
        if self._poll is not None and self._poll.active():
            self._poll.cancel()
        self._poll = None
        if self.current_epoch < 0 and not self._start_point():
            self._heartbeat_if_due()
            self._poll = self.clock.callLater(_RETRY_S, self.transfer)
            return
        store = self.service.store
        sent = 0
        while sent < _FRAMES_PER_TURN and not self._paused and not self._closed:
            entry = self.service.epochs.get(self.current_epoch)
            if entry is None:
                self.close(f"epoch {self.current_epoch} of the transfer is gone from the epoch list")
                return
            end = entry.end_offset
            if end != LAST_EPOCH_END_OFFSET and self.next_transfer_from >= end:
                nxt = self.service.epochs.next_entry(self.current_epoch)
                if nxt is None:
                    break
                self.current_epoch = nxt.epoch  # the frames after an epoch's end name the next
                continue
            size = self.settings.haTransferBatchSize
            if end != LAST_EPOCH_END_OFFSET:
                size = min(size, end - self.next_transfer_from)
            data = store.get_commit_log_data(self.next_transfer_from, size)
            if not data:
                break
            start = self.next_transfer_from
            self.next_transfer_from += len(data)
            self.last_master_max_offset = store.get_max_phy_offset()
            self.last_transfer_time = self.clock.seconds()
            self._write(self._frame(start, data))
            sent += 1
        now = self.clock.seconds()
        if sent:
            self._last_write = now
        else:
            # nothing to send: caught up as of now (Java updates lastCaughtUpTime when size is 0)
            self.service.update_caught_up_time(self.slave_id, now)
            self._heartbeat_if_due()
        if self._closed or self._paused:
            return
        if sent == _FRAMES_PER_TURN:
            self.wakeup()
        else:
            self._poll = self.clock.callLater(_POLL_S, self.transfer)

    def _heartbeat_if_due(self) -> None:
        now = self.clock.seconds()
        if now - self._last_write > self.settings.haSendHeartbeatInterval / 1000.0:
            self._write(self._frame(self.next_transfer_from, b""))
            self._last_write = now

    # IPushProducer
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
        if self.clock.seconds() - self._last_read > self.settings.haHousekeepingInterval / 1000.0:
            self.close(f"nothing read for {self.settings.haHousekeepingInterval} ms")
            return
        self._housekeeping = self.clock.callLater(1.0, self._housekeep)
