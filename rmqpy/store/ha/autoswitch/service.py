"""AutoSwitchHAService: a store's replication in controller mode (Java ``AutoSwitchHAService``).

One object per store, for either role, switched at run time by the broker's controller client
through :class:`~rmqpy.store.ha.autoswitch.api.AutoSwitchHA` (which it implements). It owns
the epoch file, the connections of replicas (it is the Twisted factory of ``haListenPort``;
whoever opens the port listens with it), the replica client when this store is a replica, the
in-sync replica set and the confirm offset.

The in-sync set follows Java's bookkeeping: the controller's set (``set_sync_state_set``), and
a set this master asked for and the controller has not answered yet; while one is pending
(``is_synchronizing_sync_state_set``) the confirm offset and the replica count use the union
of both. A replica that reports at least the confirm offset, and at least the start of the
current epoch, should join: the listeners hear the grown set. A replica of the set that
disconnects, or that has not caught up for ``haMaxTimeSlaveNotCatchup``
(:meth:`maybe_shrink_sync_state_set`), should leave.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

from twisted.internet import defer, protocol

from rmqpy.remoting.ratelimit import limiter_for
from rmqpy.store.epoch import EpochEntry, EpochFile
from rmqpy.store.ha.autoswitch.api import (
    AutoSwitchHA,
    AutoSwitchSettings,
    ReplicaInfo,
    ReplicaStore,
    SyncStateSetListener,
)
from rmqpy.store.ha.autoswitch.client import AutoSwitchHAClient
from rmqpy.store.ha.autoswitch.connection import AutoSwitchHAConnection
from rmqpy.store.ha.gate import ReplicaGate

log = logging.getLogger(__name__)


class AutoSwitchHAService(protocol.ServerFactory):
    def __init__(self, clock: Any, store: ReplicaStore, settings: AutoSwitchSettings,
                 in_thread: Callable[..., defer.Deferred[Any]], *, gate: ReplicaGate | None = None,
                 connect: Callable[[str, protocol.Protocol], Any] | None = None) -> None:
        """``in_thread(fn, *args)`` runs blocking file writes off the reactor (the store's
        ``blocking.run``); ``gate`` decides who may connect as a replica (default: everyone, at
        most 64 at once); ``connect`` replaces the replica's TCP connect (tests)."""
        self.clock = clock
        self.store = store
        self.settings = settings
        self.gate = gate if gate is not None else ReplicaGate(clock, what="AutoSwitch HA")
        self.epochs = EpochFile(settings.storePathEpochFile, in_thread)
        self.connections: list[AutoSwitchHAConnection] = []
        self.client: AutoSwitchHAClient | None = None
        self.local_broker_id: int | None = None
        self.is_master = False
        self.is_slave = False
        self._connect = connect
        self._sync_state_set: set[int] = set()
        self._remote_sync_state_set: set[int] = set()
        self.is_synchronizing_sync_state_set = False
        self._caught_up: dict[int, float] = {}
        self._listeners: list[SyncStateSetListener] = []
        self._confirm_offset = -1
        #: the outcome of the last change_to_master: the new epoch's entry, None when refused
        self.role_change: defer.Deferred[EpochEntry | None] = defer.succeed(None)
        #: called with (broker id, offset) on every replica report (a SYNC put's waiters)
        self.ack_listeners: list[Callable[[int, int], None]] = []

    # ------------------------------------------------------------------ factory
    def buildProtocol(self, addr: Any) -> AutoSwitchHAConnection | None:  # noqa: N802 (Twisted's name)
        if not self.gate.admit(addr, len(self.connections)):
            return None
        conn = AutoSwitchHAConnection(self)
        self.connections.append(conn)
        return conn

    def connection_lost(self, conn: AutoSwitchHAConnection) -> None:
        """Java ``removeConnection``: a replica of the in-sync set that goes should leave it (the
        local set drops it at once, as 5.5.1 does)."""
        if conn in self.connections:
            self.connections.remove(conn)
        if conn.slave_id in self._sync_state_set and self.is_master:
            new = set(self._sync_state_set)
            new.discard(conn.slave_id)
            self._mark_synchronizing(new)
            self._sync_state_set = new
            self._notify(new)

    def wakeup_all(self, *_: Any) -> None:
        """Data was appended: connections idle at the end send it now, not at their next poll."""
        for conn in self.connections:
            conn.wakeup()

    def destroy_connections(self) -> None:
        for conn in list(self.connections):
            conn.close("this broker changes role")
        self.connections.clear()

    def shutdown(self) -> None:
        self.destroy_connections()
        if self.client is not None:
            self.client.stop()
            self.client = None
        self.store.remove_arrive_listener(self.wakeup_all)

    # ------------------------------------------------------------------ roles
    def change_to_master(self, epoch: int) -> None:
        """See :class:`AutoSwitchHA`; :attr:`role_change` fires with the new epoch's entry (None:
        refused or failed) once a half-replicated record is cut and the epoch appended."""
        self.role_change = self._become_master(epoch)

    def _become_master(self, epoch: int) -> defer.Deferred[EpochEntry | None]:
        last = self.epochs.last_epoch()
        if epoch < last:
            log.warning("AutoSwitch HA: new master epoch %d < last epoch %d: not changing to master", epoch, last)
            return defer.succeed(None)
        self.destroy_connections()
        if self.client is not None:
            self.client.stop()
            self.client = None
        tail = self.store.incomplete_tail_offset()
        cut: defer.Deferred[bool] = self.store.truncate_dirty_files(tail) if tail >= 0 else defer.succeed(True)

        def become(ok: bool) -> EpochEntry | None:
            if not ok:
                log.error("AutoSwitch HA: cutting a half-replicated record at %d failed", tail)
                return None
            self.is_master, self.is_slave = True, False
            self.store.set_replica_confirm_offset(None)  # what waited for a confirm offset is dispatched
            self.set_confirm_offset(self.compute_confirm_offset())
            if tail >= 0:
                self.epochs.truncate_suffix_by_offset(tail)
            entry = self._append_epoch(epoch)
            self.store.remove_arrive_listener(self.wakeup_all)
            self.store.add_arrive_listener(self.wakeup_all, batch=self.wakeup_all)  # once a batch
            log.info("AutoSwitch HA: master of epoch %d from offset %d (cut at %d, confirm offset %d)", epoch,
                     entry.start_offset, tail, self.confirm_offset())
            return entry

        return cut.addCallback(become)

    def _append_epoch(self, epoch: int) -> EpochEntry:
        entry = EpochEntry(epoch, self.store.get_max_phy_offset())
        if self.epochs.last_epoch() >= epoch:
            self.epochs.truncate_suffix_by_epoch(epoch)
        self.epochs.append(entry)
        return entry

    def change_to_master_when_last_role_is_master(self, epoch: int) -> None:
        last = self.epochs.last_epoch()
        if epoch < last:
            log.warning("AutoSwitch HA: new master epoch %d < last epoch %d: not changing to master", epoch, last)
            return
        entry = self._append_epoch(epoch)
        log.info("AutoSwitch HA: still master, epoch %d from offset %d", epoch, entry.start_offset)
        self.wakeup_all()

    def change_to_slave(self, master_address: str, epoch: int, broker_id: int,
                        master_ha_address: str | None = None) -> None:
        last = self.epochs.last_epoch()
        if epoch < last:
            log.warning("AutoSwitch HA: new master epoch %d < last epoch %d: not changing to replica", epoch, last)
            return
        self.destroy_connections()
        self.store.remove_arrive_listener(self.wakeup_all)
        if self.client is not None:
            self.client.stop()
        self.is_master, self.is_slave = False, True
        self.set_confirm_offset(self.store.get_max_phy_offset())  # what it holds is dispatched
        self.client = AutoSwitchHAClient(self.clock, self.store, self.epochs, self.settings, broker_id,
                                         self.set_confirm_offset, self._connect)
        self.client.update_master_address(master_address)
        self.client.start()
        if master_ha_address:
            self.client.update_ha_master_address(master_ha_address)
        log.info("AutoSwitch HA: replica (broker id %d) of master %s in epoch %d", broker_id, master_address, epoch)

    def change_to_slave_when_master_not_change(self, master_address: str, epoch: int) -> None:
        last = self.epochs.last_epoch()
        if epoch < last:
            log.warning("AutoSwitch HA: new master epoch %d < last epoch %d", epoch, last)
            return
        log.info("AutoSwitch HA: still a replica of %s, epoch %d", master_address, epoch)

    def set_local_broker_id(self, broker_id: int) -> None:
        self.local_broker_id = broker_id

    def update_ha_master_address(self, address: str) -> None:
        if self.client is not None:
            self.client.update_ha_master_address(address)

    # ------------------------------------------------------------------ in-sync set
    def sync_state_set(self) -> frozenset[int]:
        if self.is_synchronizing_sync_state_set:
            return frozenset(self._sync_state_set | self._remote_sync_state_set)
        return frozenset(self._sync_state_set)

    def local_sync_state_set(self) -> frozenset[int]:
        return frozenset(self._sync_state_set)

    def set_sync_state_set(self, broker_ids: set[int] | frozenset[int]) -> None:
        self.is_synchronizing_sync_state_set = False
        self._sync_state_set = set(broker_ids)
        self.set_confirm_offset(self.compute_confirm_offset())

    def add_sync_state_set_listener(self, listener: SyncStateSetListener) -> None:
        self._listeners.append(listener)

    def _mark_synchronizing(self, new: set[int]) -> None:
        self.is_synchronizing_sync_state_set = True
        self._remote_sync_state_set = set(new)

    def _notify(self, new: set[int]) -> None:
        frozen = frozenset(new)
        log.info("AutoSwitch HA: the in-sync set should become %s", sorted(frozen))
        for listener in list(self._listeners):
            self.clock.callLater(0, self._call_listener, listener, frozen)

    def _call_listener(self, listener: SyncStateSetListener, new: frozenset[int]) -> None:
        try:
            listener(new)
        except Exception:  # noqa: BLE001
            log.exception("AutoSwitch HA: in-sync set listener %r failed", listener)

    def update_caught_up_time(self, broker_id: int, when: float) -> None:
        self._caught_up[broker_id] = max(self._caught_up.get(broker_id, 0.0), when)

    def maybe_expand_sync_state_set(self, broker_id: int, slave_max_offset: int) -> None:
        current = set(self._sync_state_set)
        if broker_id in current:
            return
        confirm = self.confirm_offset()
        last = self.epochs.last()
        if slave_max_offset >= confirm and last is not None and slave_max_offset >= last.start_offset:
            log.info("AutoSwitch HA: replica %d caught up: offset %d, confirm offset %d, epoch %d from %d", broker_id,
                     slave_max_offset, confirm, last.epoch, last.start_offset)
            current.add(broker_id)
            self._mark_synchronizing(current)
            self._notify(current)

    def maybe_shrink_sync_state_set(self) -> set[int]:
        new = set(self._sync_state_set)
        changed = False
        limit = self.settings.haMaxTimeSlaveNotCatchup / 1000.0
        now = self.clock.seconds()
        for broker_id, when in self._caught_up.items():
            if broker_id in new and now - when > limit:
                new.discard(broker_id)
                changed = True
        for broker_id in list(new):
            if broker_id != self.local_broker_id and broker_id not in self._caught_up:
                new.discard(broker_id)
                changed = True
        if changed:
            self._mark_synchronizing(new)
        return new

    def in_sync_replicas_nums(self) -> int:
        if self.is_synchronizing_sync_state_set:
            return max(len(self._sync_state_set), len(self._remote_sync_state_set))
        return len(self._sync_state_set)

    def replicas(self) -> list[ReplicaInfo]:
        local = self._sync_state_set
        return [ReplicaInfo(c.slave_id, c.client_addr, c.state, c.slave_ack_offset, c.slave_id in local,
                            c.next_transfer_from) for c in self.connections]

    def replica_acked(self, conn: AutoSwitchHAConnection, offset: int) -> None:
        """A replica reported ``offset`` (Java ``updateConfirmOffsetWhenSlaveAck`` + ``notifyTransferSome``)."""
        if conn.slave_id in self._sync_state_set:
            self.set_confirm_offset(self.compute_confirm_offset())
        for listener in list(self.ack_listeners):
            listener(conn.slave_id, offset)

    # ------------------------------------------------------------------ offsets
    def max_offset(self) -> int:
        return self.store.get_max_phy_offset()

    def compute_confirm_offset(self) -> int:
        """The least offset the in-sync replicas acknowledged, at most the max offset; the
        current confirm offset unchanged while a replica of the set is not connected (Java
        ``computeConfirmOffset``)."""
        current = self.sync_state_set()
        ids = {c.slave_id for c in self.connections}
        for broker_id in current:
            if broker_id not in ids and self.local_broker_id is not None and broker_id != self.local_broker_id:
                if limiter_for(self.clock).allow("autoswitch-confirm-lost"):
                    log.warning("AutoSwitch HA: replica %d is in the in-sync set but not connected: the confirm "
                                "offset stays %d", broker_id, self._confirm_offset)
                return self._confirm_offset
        confirm = self.store.get_max_phy_offset()
        for c in self.connections:
            if c.slave_id in current and c.slave_ack_offset > 0:
                confirm = min(confirm, c.slave_ack_offset)
        return confirm

    def set_confirm_offset(self, offset: int) -> None:
        self._confirm_offset = offset
        if self.is_slave:
            self.store.set_replica_confirm_offset(offset)

    def confirm_offset(self) -> int:
        if not self.is_slave:
            if len(self._sync_state_set) == 1 or not self.settings.allAckInSyncStateSet:
                return self.store.get_max_phy_offset()
            if self._confirm_offset < 0:
                self._confirm_offset = self.compute_confirm_offset()
        return self._confirm_offset

    # ------------------------------------------------------------------ epochs
    def last_epoch(self) -> int:
        return self.epochs.last_epoch()

    def epoch_entries(self) -> list[EpochEntry]:
        return self.epochs.entries()

    def truncate_epoch_file_prefix(self, offset: int) -> None:
        """The commit log's files before ``offset`` were deleted (Java calls it from the clean
        service with the new min offset - 1)."""
        self.epochs.truncate_prefix_by_offset(offset)


if TYPE_CHECKING:
    from rmqpy.store.message_store import MessageStore

    def _conforms(store: MessageStore, service: AutoSwitchHAService) -> tuple[ReplicaStore, AutoSwitchHA]:
        """mypy checks here that the default store is a ReplicaStore and this service an AutoSwitchHA."""
        return store, service
