"""What AutoSwitch HA needs of the store and what it offers the broker.

:class:`ReplicaStore` is the part of the store the HA pieces call (the default store,
:class:`rmqpy.store.message_store.MessageStore`, has it). :class:`AutoSwitchHA` is the seam of
the broker's controller client (Java ``ReplicasManager``, which calls ``AutoSwitchHAService``):
it turns the store into the master of an epoch or a replica of a master, reads the in-sync
replica set and each replica's acknowledged offset, and hears when the set should change, to
report it to the controller (``ALTER_SYNC_STATE_SET``) and hand the controller's answer back
with :meth:`AutoSwitchHA.set_sync_state_set`. :class:`AutoSwitchSettings` holds the
``MessageStoreConfig`` keys it reads, by their Java names.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

from twisted.internet import defer

from rmqpy.store.epoch import EPOCH_FILE_NAME, EpochEntry
from rmqpy.store.ha.autoswitch.wire import State


class ReplicaStore(Protocol):
    def get_max_phy_offset(self) -> int: ...

    def get_min_phy_offset(self) -> int: ...

    def get_commit_log_data(self, offset: int, max_size: int | None = None) -> bytes | None:
        """Commit log bytes from ``offset`` to the end of written data in its file, at most
        ``max_size``; None when there are none."""
        ...

    def append_to_commit_log(self, start: int, data: bytes) -> bool:
        """A replica: append the master's bytes at ``start`` (the log's end) and dispatch them."""
        ...

    def truncate_files(self, offset: int) -> defer.Deferred[bool]:
        """Cut the commit log, consume queues and index at ``offset`` (False: no record starts
        there); nothing is appended until it fires."""
        ...

    def truncate_dirty_files(self, offset: int) -> defer.Deferred[bool]:
        """:meth:`truncate_files` where no whole record starts at ``offset`` (a half-sent one)."""
        ...

    def incomplete_tail_offset(self) -> int:
        """Where a record the master had not finished sending starts at the log's end; -1: none."""
        ...

    def set_replica_confirm_offset(self, offset: int | None) -> None:
        """A replica: dispatch replicated records only up to ``offset``; None: no limit."""
        ...

    def add_arrive_listener(self, callback: Callable[..., None], batch: Callable[..., None] | None = None) -> None:
        """A master: ``callback`` runs after each record is written (to wake the connections); ``batch``
        once for a batch put's records instead when given."""
        ...

    def remove_arrive_listener(self, callback: Callable[..., None]) -> None: ...


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"


@dataclass
class AutoSwitchSettings:
    """The ``MessageStoreConfig`` keys of AutoSwitch HA (Java names and defaults)."""
    storePathEpochFile: str
    haSendHeartbeatInterval: int = 5000
    haHousekeepingInterval: int = 20000
    haTransferBatchSize: int = 32768
    mappedFileSizeCommitLog: int = 1024 * 1024 * 1024
    #: a new replica (request offset 0) copies from the master's last file, not its first
    syncFromLastFile: bool = False
    #: this replica never joins the in-sync set
    asyncLearner: bool = False
    #: a master's confirm offset is what every in-sync replica acknowledged (else its max offset)
    allAckInSyncStateSet: bool = False
    #: a replica that has not caught up for this long leaves the in-sync set
    haMaxTimeSlaveNotCatchup: int = 15000

    @classmethod
    def from_store_config(cls, config: Any, props: Mapping[str, str] | None = None) -> "AutoSwitchSettings":
        """From the store's config (paths, HA timings, file size, ``allAckInSyncStateSet``) and
        the broker's properties for the controller-mode keys the store config does not carry."""
        props = props or {}
        epoch_path = props.get("storePathEpochFile") or os.path.join(config.storePathRootDir, EPOCH_FILE_NAME)
        return cls(
            storePathEpochFile=epoch_path,
            haSendHeartbeatInterval=config.haSendHeartbeatInterval,
            haHousekeepingInterval=config.haHousekeepingInterval,
            haTransferBatchSize=config.haTransferBatchSize,
            mappedFileSizeCommitLog=config.mappedFileSizeCommitLog,
            syncFromLastFile=(_bool(props["syncFromLastFile"]) if "syncFromLastFile" in props
                              else bool(getattr(config, "syncFromLastFile", False))),
            asyncLearner=(_bool(props["asyncLearner"]) if "asyncLearner" in props
                          else bool(getattr(config, "asyncLearner", False))),
            allAckInSyncStateSet=(_bool(props["allAckInSyncStateSet"]) if "allAckInSyncStateSet" in props
                                  else bool(config.allAckInSyncStateSet)),
            haMaxTimeSlaveNotCatchup=int(props.get("haMaxTimeSlaveNotCatchup",
                                                   getattr(config, "haMaxTimeSlaveNotCatchup", 15000))),
        )


@dataclass(frozen=True)
class ReplicaInfo:
    """One replica connected to this master (Java ``HARuntimeInfo.HAConnectionRuntimeInfo``)."""
    broker_id: int
    address: str
    state: State
    #: the replica's last reported max offset; -1 before its first report
    ack_offset: int
    in_sync: bool
    #: where the next transfer frame starts; -1 before the transfer began
    transfer_from: int


#: called with the in-sync set (broker ids, this master's included) the master wants
SyncStateSetListener = Callable[[frozenset[int]], None]


class AutoSwitchHA(Protocol):
    """What the broker's controller client drives (Java ``AutoSwitchHAService`` as
    ``ReplicasManager`` uses it). The in-sync set holds broker ids, the master's own included.
    It is a superset of ``rmqpy.broker.replicas.ha.ReplicaHA``, the replicas manager's own view."""

    #: this broker's id, as the controller assigned it
    local_broker_id: int | None

    def set_local_broker_id(self, broker_id: int) -> None:
        """Java ``setLocalBrokerId``."""
        ...

    #: the outcome of the last :meth:`change_to_master`: fires with the new epoch's entry once it
    #: is appended, None when refused
    role_change: defer.Deferred[EpochEntry | None]

    def change_to_master(self, epoch: int) -> None:
        """Become the master of ``epoch``: replicas' connections and this broker's own client
        are dropped, a record left half-replicated at the log's end is cut, and the epoch is
        appended starting at the store's max offset (Java ``changeToMaster``). Refused (logged,
        nothing changes; Java returns false, which its ReplicasManager ignores) when ``epoch`` is
        below the last epoch this store has, as are the other changes below."""
        ...

    def change_to_master_when_last_role_is_master(self, epoch: int) -> None:
        """Already master, a new epoch (a re-election of this broker): the epoch is appended at the
        max offset, replicas stay connected."""
        ...

    def change_to_slave(self, master_address: str, epoch: int, broker_id: int,
                        master_ha_address: str | None = None) -> None:
        """Become a replica (broker id ``broker_id``) of the master at ``master_address`` in
        ``epoch``; its HA port is ``master_ha_address`` or, as in Java, set later with
        :meth:`update_ha_master_address` (from a name server registration's ``haServerAddr``)."""
        ...

    def change_to_slave_when_master_not_change(self, master_address: str, epoch: int) -> None:
        """Still a replica of the same master in a new ``epoch`` (Java's method of that name)."""
        ...

    def update_ha_master_address(self, address: str) -> None:
        """The master's ``host:haListenPort`` (a replica connects, and reconnects on a change)."""
        ...

    # ------------------------------------------------------------------ in-sync set (master)
    def sync_state_set(self) -> frozenset[int]:
        """The in-sync set the confirm offset is computed over: the controller's, united with
        the one reported and not answered yet (Java ``getSyncStateSet``)."""
        ...

    def local_sync_state_set(self) -> frozenset[int]:
        """The controller's in-sync set as last handed over (Java ``getLocalSyncStateSet``)."""
        ...

    def set_sync_state_set(self, broker_ids: set[int] | frozenset[int]) -> None:
        """The controller's in-sync set (after an election or an ALTER_SYNC_STATE_SET answer)."""
        ...

    def add_sync_state_set_listener(self, listener: SyncStateSetListener) -> None:
        """``listener(new set)`` runs when a replica caught up (the set should expand) or a
        replica in the set disconnected (it should shrink); the broker reports it to the controller."""
        ...

    def maybe_shrink_sync_state_set(self) -> set[int]:
        """The in-sync set without the replicas not caught up for ``haMaxTimeSlaveNotCatchup``
        or not connected (the broker calls it every ``checkSyncStateSetPeriod`` and reports a
        change; Java ``maybeShrinkSyncStateSet``)."""
        ...

    def in_sync_replicas_nums(self) -> int: ...

    def replicas(self) -> list[ReplicaInfo]:
        """The replicas connected to this master, with what each acknowledged."""
        ...

    # ------------------------------------------------------------------ offsets and epochs
    def max_offset(self) -> int:
        """The store's commit log max offset."""
        ...

    def confirm_offset(self) -> int:
        """The offset up to which the data is replicated as controller mode requires: a master's
        max offset, or with ``allAckInSyncStateSet`` and other in-sync replicas the least they
        acknowledged; a replica's, the last its master sent (Java ``CommitLog.getConfirmOffset``)."""
        ...

    def last_epoch(self) -> int: ...

    def epoch_entries(self) -> list[EpochEntry]: ...
