"""The seam between the replicas manager and the AutoSwitch HA side (Java ``AutoSwitchHAService``
as ``ReplicasManager`` uses it: the default store's
:class:`~rmqpy.store.ha.autoswitch.service.AutoSwitchHAService`), and a master-only side for a
store that cannot replicate (one given to ``BrokerController`` without the calls AutoSwitch HA needs).

:class:`ReplicaHA` is what the replicas manager asks of replication: it tells it the broker's id,
each role change with its epoch and the in-sync set the controller holds, and asks it for the
last epoch, the epoch list, the max and confirm offsets (heartbeats, GET_BROKER_EPOCH_CACHE) and
which slaves are in sync now (``maybeShrinkSyncStateSet``; the master adds itself).

:class:`MasterOnlyHA` is that side for a set of one replica: no HA port, no slave, every put acked
at once (a SyncStateSet of the master alone, ``minInSyncReplicas`` 1). Its epoch list lives in
memory only (the epoch file belongs to the AutoSwitch side): an epoch entry opens where the store
ends when the broker becomes master. As a slave it only records the master; nothing replicates.
It also stands in for the classic :class:`~rmqpy.store.ha.replication.Replication` the broker
holds as ``replication`` (role changes, runtime info), so a controller-mode SYNC_MASTER does not
wait for a classic slave.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from rmqpy.protocol.bodies.controller import LAST_EPOCH_END_OFFSET
from rmqpy.store.role import BrokerRole

log = logging.getLogger(__name__)


class EpochRange(Protocol):
    """One epoch of the epoch list (Java ``EpochEntry``)."""

    @property
    def epoch(self) -> int: ...
    @property
    def start_offset(self) -> int: ...
    @property
    def end_offset(self) -> int: ...


@dataclass(frozen=True)
class Epoch:
    epoch: int
    start_offset: int
    end_offset: int = LAST_EPOCH_END_OFFSET


class ReplicaHA(Protocol):
    """What :class:`~rmqpy.broker.replicas.manager.ReplicasManager` asks of replication."""

    def set_local_broker_id(self, broker_id: int) -> None: ...
    def change_to_master(self, epoch: int) -> None: ...
    def change_to_master_when_last_role_is_master(self, epoch: int) -> None: ...
    def change_to_slave(self, master_address: str, epoch: int, broker_id: int) -> None: ...
    def change_to_slave_when_master_not_change(self, master_address: str, epoch: int) -> None: ...
    def set_sync_state_set(self, ids: frozenset[int]) -> None: ...
    def maybe_shrink_sync_state_set(self) -> set[int]: ...
    def last_epoch(self) -> int: ...
    def epoch_entries(self) -> Sequence[EpochRange]: ...
    def max_offset(self) -> int: ...
    def confirm_offset(self) -> int: ...


class MasterOnlyHA:
    """:class:`ReplicaHA` for one replica; the broker's ``replication`` in controller mode."""

    service: Any = None  # no HA port: nothing connects to a set of one

    def __init__(self, max_phy_offset: Callable[[], int]) -> None:
        self._max_phy_offset = max_phy_offset
        self.local_broker_id: int | None = None
        self.sync_state_set: frozenset[int] = frozenset()
        self.master_address: str | None = None
        self._epochs: list[Epoch] = []

    # ------------------------------------------------------------------ ReplicaHA
    def set_local_broker_id(self, broker_id: int) -> None:
        self.local_broker_id = broker_id

    def _open_epoch(self, epoch: int) -> None:
        if self._epochs and self._epochs[-1].epoch >= epoch:
            return
        start = self._max_phy_offset()
        if self._epochs:
            last = self._epochs[-1]
            self._epochs[-1] = Epoch(last.epoch, last.start_offset, start)
        self._epochs.append(Epoch(epoch, start))

    def change_to_master(self, epoch: int) -> None:
        self.master_address = None
        self._open_epoch(epoch)

    def change_to_master_when_last_role_is_master(self, epoch: int) -> None:
        self._open_epoch(epoch)

    def change_to_slave(self, master_address: str, epoch: int, broker_id: int) -> None:
        self.master_address = master_address
        log.warning("controller mode: this broker is now a slave of %s (epoch %d), but its store cannot "
                    "replicate: it copies nothing from the master", master_address, epoch)

    def change_to_slave_when_master_not_change(self, master_address: str, epoch: int) -> None:
        self.master_address = master_address

    def set_sync_state_set(self, ids: frozenset[int]) -> None:
        self.sync_state_set = frozenset(ids)

    def maybe_shrink_sync_state_set(self) -> set[int]:
        """Java's: the set as held, less the connected slaves that fell behind (none connect here)."""
        return set(self.sync_state_set)

    def last_epoch(self) -> int:
        return self._epochs[-1].epoch if self._epochs else -1

    def epoch_entries(self) -> Sequence[EpochRange]:
        return list(self._epochs)

    def max_offset(self) -> int:
        return self._max_phy_offset()

    def confirm_offset(self) -> int:
        return self._max_phy_offset()  # the master alone is the whole in-sync set

    # ------------------------------------------------------------------ what the broker asks of replication
    def apply_role(self, role: BrokerRole) -> None:
        """Nothing to wait for: a put is acked at once in either master role."""

    def start(self) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def registered(self, ha_server_addr: str | None) -> None:
        pass

    def slave_fall_behind_much(self) -> int:
        return 0

    def runtime_info(self) -> dict[str, str]:
        return {"haSlaveConnections": "0"}

    def ha_runtime_info(self) -> None:
        """No HA service (Java answers GET_BROKER_HA_STATUS SYSTEM_ERROR without one)."""
        return None
