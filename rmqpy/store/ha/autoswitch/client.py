"""A replica's side of AutoSwitch HA (Java ``AutoSwitchHAClient``).

Connected to the master's HA address, the replica sends its handshake (state, the
``syncFromLastFile`` and ``asyncLearner`` flags, its broker id) and waits for the master's
answer: its max offset and epoch list. With an epoch list of its own, the replica finds where
both logs agree (:meth:`rmqpy.store.epoch.EpochCache.find_consistent_point`, each list's last
epoch ending at its store's max offset), cuts its store there (commit log, consume queues,
index: :meth:`ReplicaStore.truncate_files`) and its epoch list after it; a replica with no
epoch list (a new one) keeps its log. It then reports its max offset in TRANSFER state and
appends the master's frames: each must start at its log's end (unless it is empty), a frame of
a new epoch adds that epoch to its list, and the frame's confirm offset (at most the replica's
end) becomes its confirm offset. It reports its max offset whenever it grew and every
``haSendHeartbeatInterval``; a master silent for ``haHousekeepingInterval``, a frame in another
state than its own, or a failed append or truncation drops the connection, and it reconnects
every 5 s. Before each connection a record left half-written by the last one is cut (Java's
``truncateInvalidMsg`` in READY state).

Java's replica reports nothing after the handshake until its heartbeat interval passed when
its log is empty (it reports only an offset above the last one); this one reports at once.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import defer, protocol

from rmqpy.remoting.ratelimit import limiter_for
from rmqpy.store.epoch import EpochCache, EpochEntry
from rmqpy.store.ha.autoswitch.api import AutoSwitchSettings, ReplicaStore
from rmqpy.store.ha.autoswitch.wire import (
    EPOCH_ENTRY,
    MASTER_HANDSHAKE,
    MASTER_TRANSFER,
    MAX_BODY,
    SLAVE_HANDSHAKE,
    SLAVE_REPORT,
    State,
)
from rmqpy.store.ha.redial import Redialer

log = logging.getLogger(__name__)



class AutoSwitchHAClientProtocol(protocol.Protocol):
    transport: Any

    def __init__(self, client: "AutoSwitchHAClient") -> None:
        self.client = client
        self.clock = client.clock
        self.state = State.HANDSHAKE
        self.reported = 0
        self.received_epoch = -1
        self._buf = bytearray()
        self._closed = False
        self._busy = False  # a truncation runs: frames wait in the buffer
        #: clock seconds of the last bytes read and the last frame written (haStatus shows them)
        self.last_read = 0.0
        self.last_write = 0.0
        self._timer: Any = None

    def connectionMade(self) -> None:  # noqa: N802 (Twisted's name)
        now = self.clock.seconds()
        self.last_read = now
        s = self.client.settings
        self._write(SLAVE_HANDSHAKE.pack(State.HANDSHAKE, int(s.syncFromLastFile), int(s.asyncLearner),
                                         self.client.broker_id))
        self._timer = self.clock.callLater(1.0, self._tick)

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self._closed = True
        self.state = State.READY
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self.client.lost(self)

    def close(self, why: str) -> None:
        if self._closed:
            return
        self._closed = True
        if limiter_for(self.clock).allow("autoswitch-client-close"):
            log.warning("AutoSwitch HA: closing the connection to master %s: %s", self.client.master_ha_address, why)
        self.transport.loseConnection()

    def _write(self, data: bytes) -> None:
        self.last_write = self.clock.seconds()
        self.transport.write(data)

    def report(self, offset: int) -> None:
        self.reported = offset
        self._write(SLAVE_REPORT.pack(State.TRANSFER, offset))

    def _report_max_offset(self) -> None:
        end = self.client.store.get_max_phy_offset()
        if end > self.reported:
            self.report(end)

    def _tick(self) -> None:
        self._timer = None
        if self._closed:
            return
        now = self.clock.seconds()
        s = self.client.settings
        if now - self.last_read > s.haHousekeepingInterval / 1000.0:
            self.close(f"master silent for {s.haHousekeepingInterval} ms")
            return
        if self.state is State.TRANSFER and now - self.last_write > s.haSendHeartbeatInterval / 1000.0:
            self.report(self.reported)
        self._timer = self.clock.callLater(1.0, self._tick)

    # ------------------------------------------------------------------ the master's frames
    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        if self._closed:
            return
        self.last_read = self.clock.seconds()
        self.client.flow.add(len(data))
        self._buf += data
        self._process()

    def _process(self) -> None:
        buf = self._buf
        pos = 0
        appended = False
        while not self._closed and not self._busy and len(buf) - pos >= MASTER_HANDSHAKE.size:
            master_state, size, offset, epoch = MASTER_HANDSHAKE.unpack_from(buf, pos)
            if master_state != self.state:
                self.close(f"the master sent a frame in state {master_state}, this replica is in {self.state.name}")
                return
            if size < 0 or size > MAX_BODY:
                self.close(f"bad frame body size {size}")
                return
            if self.state is State.HANDSHAKE:
                if len(buf) - pos < MASTER_HANDSHAKE.size + size:
                    break
                body = bytes(buf[pos + MASTER_HANDSHAKE.size:pos + MASTER_HANDSHAKE.size + size])
                pos += MASTER_HANDSHAKE.size + size
                entries = [EpochEntry(*EPOCH_ENTRY.unpack_from(body, i))
                           for i in range(0, size - size % EPOCH_ENTRY.size, EPOCH_ENTRY.size)]
                del buf[:pos]  # the truncation may end at once and process the rest itself
                self._busy = True
                self.client.truncate_to_master(entries, offset).addCallbacks(self._truncated, self._truncate_failed)
                return
            if len(buf) - pos < MASTER_TRANSFER.size + size:
                break
            _, _, _, _, epoch_start, confirm = MASTER_TRANSFER.unpack_from(buf, pos)
            body = bytes(buf[pos + MASTER_TRANSFER.size:pos + MASTER_TRANSFER.size + size])
            pos += MASTER_TRANSFER.size + size
            if not self._transfer(offset, epoch, epoch_start, confirm, body):
                return
            appended = appended or bool(size)
        del buf[:pos]
        if appended and not self._closed:
            self._report_max_offset()

    def _transfer(self, offset: int, epoch: int, epoch_start: int, confirm: int, body: bytes) -> bool:
        client = self.client
        store = client.store
        mine = store.get_max_phy_offset()
        if mine != 0 and mine != offset:
            self.close(f"the master sent offset {offset}, not this replica's end {mine}")
            return False
        if epoch != self.received_epoch:
            self.received_epoch = epoch
            if epoch != client.epochs.last_epoch():  # Java appends (and logs its refusal) even then
                client.epochs.append(EpochEntry(epoch, epoch_start))
        if body and not store.append_to_commit_log(offset, body):
            self.close(f"appending {len(body)} bytes at {offset} failed")
            return False
        client.set_confirm_offset(min(confirm, store.get_max_phy_offset()))
        return True

    def _truncated(self, ok: bool) -> None:
        self._busy = False
        if self._closed:
            return
        if not ok:
            self.close("no consistent point with the master's epochs, or the truncation failed")
            return
        self.state = State.TRANSFER
        self.report(self.client.store.get_max_phy_offset())
        self._process()

    def _truncate_failed(self, failure: Any) -> None:
        self._busy = False
        log.error("AutoSwitch HA: truncating to the master's log failed: %s", failure.getTraceback())
        self.close("the truncation failed")


class AutoSwitchHAClient(Redialer[AutoSwitchHAClientProtocol]):
    """The replica's connection manager: (re)connects to ``master_ha_address`` while started."""

    log_name = "AutoSwitch HA"
    stop_reason = "replica shutting down"

    def __init__(self, clock: Any, store: ReplicaStore, epochs: EpochCache, settings: AutoSwitchSettings,
                 broker_id: int, set_confirm_offset: Callable[[int], None],
                 connect: Callable[[str, protocol.Protocol], Any] | None = None) -> None:
        super().__init__(clock, connect)
        self.store = store
        self.epochs = epochs
        self.settings = settings
        self.broker_id = broker_id
        self.set_confirm_offset = set_confirm_offset
        self.master_address = ""
        self.last_truncate_offset = -1  # where the last handshake cut the log (-1: not cut)

    @property
    def master_ha_address(self) -> str:
        return self.dial_address

    # ------------------------------------------------------------------ truncation
    def truncate_to_master(self, master_entries: list[EpochEntry], master_end: int) -> defer.Deferred[bool]:
        """Cut this store where it agrees with the master's log (Java ``doTruncate``)."""
        log.info("AutoSwitch HA: master's max offset %d, epochs %s; this replica's epochs %s", master_end,
                 master_entries, self.epochs.entries())
        if not len(self.epochs):
            log.info("AutoSwitch HA: no epoch here (a new replica): nothing to truncate")
            return defer.succeed(True)
        master = EpochCache(master_entries)
        master.set_last_end_offset(master_end)
        local = EpochCache(self.epochs.entries())
        local.set_last_end_offset(self.store.get_max_phy_offset())
        point = local.find_consistent_point(master)
        if point < 0:
            log.error("AutoSwitch HA: no consistent point between the master's epochs %s and this replica's %s",
                      master_entries, self.epochs.entries())
            return defer.succeed(False)
        log.info("AutoSwitch HA: consistent point with the master at %d (this store ends at %d)", point,
                 self.store.get_max_phy_offset())

        def done(ok: bool) -> bool:
            if not ok:
                return False
            self.last_truncate_offset = point
            # 5.3.3 cuts the epochs after the point whether or not the log was cut; 5.5.1 only
            # when the log still ends after the point, which after a cut it never does, leaving
            # epochs the master's next frame cannot follow: 5.3.3's is kept here
            self.epochs.truncate_suffix_by_offset(point)
            return True

        d = self.store.truncate_files(point)
        return d.addCallback(done)

    def _truncate_invalid(self) -> defer.Deferred[bool]:
        tail = self.store.incomplete_tail_offset()
        if tail < 0:
            return defer.succeed(True)
        log.info("AutoSwitch HA: cutting a half-replicated record at %d", tail)

        def done(ok: bool) -> bool:
            if ok:
                self.epochs.truncate_suffix_by_offset(tail)
            return ok
        return self.store.truncate_dirty_files(tail).addCallback(done)

    # ------------------------------------------------------------------ connection
    def update_master_address(self, address: str) -> None:
        self.master_address = address or ""

    def update_ha_master_address(self, address: str | None) -> None:
        self.redial_to(address)

    def state(self) -> State:
        return self.connection.state if self.connection is not None else State.READY

    def new_protocol(self) -> AutoSwitchHAClientProtocol:
        return AutoSwitchHAClientProtocol(self)

    def before_dial(self) -> defer.Deferred[bool]:
        """A half-replicated record is cut before each connection (Java ``truncateInvalidMsg``)."""
        return self._truncate_invalid()

    def connected_line(self, address: str, proto: AutoSwitchHAClientProtocol) -> str:
        return f"AutoSwitch HA: connected to master {address} as broker id {self.broker_id}"
