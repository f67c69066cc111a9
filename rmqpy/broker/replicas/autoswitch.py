"""The broker's replication in controller mode: the store's
:class:`~rmqpy.store.ha.autoswitch.service.AutoSwitchHAService` (Java ``AutoSwitchHAService``,
built by ``DefaultMessageStore`` when ``enableControllerMode`` is on) as the broker drives it.

The replicas manager changes its role (it satisfies the manager's
:class:`~rmqpy.broker.replicas.ha.ReplicaHA` itself); :class:`AutoSwitchReplication` is the rest,
what the broker asks of its ``replication`` (:class:`rmqpy.broker.api.ReplicationSide`):

- the HA port's factory (``service``): the tap listens on ``haListenPort`` with it, in every role,
  as Java's ``AutoSwitchHAService`` accepts replicas from its start;
- the master's HA address: in controller mode Java's broker takes it from every name server's
  registration answer (``updateMasterHAServerAddrPeriodically`` is always true there,
  ``handleRegisterBrokerResult``), the ``haServerAddr`` the name server holds for the set's brokerId 0;
  a change of role to replica forgets the old one (``changeToSlave`` sets it to null), so the
  registration that follows each role change names the new master's;
- nothing per role (:meth:`apply_role`): the role's replication changes come from the manager,
  before the broker's role switch;
- runtime info: a master's connected replicas and in-sync set, a replica's master and connection;
- when retention deletes commit log files, the epochs that ended before the new first offset leave
  the epoch file (Java's clean service calls ``truncateEpochFilePrefix(minPhyOffset - 1)``);
- with ``allAckInSyncStateSet=true``, a SYNC_MASTER's put that waits for the store (``WAIT`` true, as
  sends are by default) is answered once every other replica of the in-sync set acknowledged its
  end, or FLUSH_SLAVE_TIMEOUT after ``slaveTimeout`` (Java ``CommitLog.handleHA`` with
  ``ALL_ACK_IN_SYNC_STATE_SET`` and ``GroupTransferService.doWaitTransfer``); a set of the master
  alone answers at once. Without it Java waits for ``inSyncReplicas`` acks, the master's included:
  1 by default, so no put waits then; with ``inSyncReplicas=k`` above 1 a put is answered once k - 1
  connected replicas, in the set or not, acknowledged its end (Java counts connections alike), else
  FLUSH_SLAVE_TIMEOUT after ``slaveTimeout``;
- with ``minInSyncReplicas`` above 1, such a put is refused before it is written while the in-sync
  set is smaller (IN_SYNC_REPLICAS_NOT_ENOUGH: SYSTEM_ERROR "in-sync replicas not enough").
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.internet import defer

from rmqpy.protocol.bodies.ha import HARuntimeInfo
from rmqpy.store.ha.autoswitch.service import AutoSwitchHAService
from rmqpy.store.ha.group_transfer import GroupTransferService
from rmqpy.store.ha.runtime import master_info, slave_info
from rmqpy.store.results import PutMessageStatus
from rmqpy.store.role import BrokerRole


class AutoSwitchReplication:
    """:class:`rmqpy.broker.api.ReplicationSide` over an :class:`AutoSwitchHAService`; ``store``
    (its ``replica_wait``) and ``config`` (``allAckInSyncStateSet``, ``slaveTimeout``) for the SYNC
    puts' wait."""

    def __init__(self, service: AutoSwitchHAService, store: Any = None, config: Any = None) -> None:
        self.service = service
        self.store = store
        self.config = config
        #: a SYNC_MASTER's puts waiting for replicas (allAckInSyncStateSet, inSyncReplicas > 1); else None
        self.group_transfer: GroupTransferService[PutMessageStatus] | None = None
        #: how far the replicas a put waits for have all acknowledged (chosen with the role)
        self._acked_offset: Callable[[], int] = self.all_acked_offset
        service.ack_listeners.append(self._acked)
        clean = getattr(store, "clean_service", None)
        if clean is not None:  # Java's CleanCommitLogService: truncateEpochFilePrefix(minPhyOffset - 1)
            clean.deleted_listeners.append(lambda min_offset: service.truncate_epoch_file_prefix(min_offset - 1))

    def apply_role(self, role: BrokerRole) -> None:
        """The replicas manager changed the service's role before the broker's role switch; here
        only whether puts wait for the in-sync set."""
        if self.group_transfer is not None:
            self.group_transfer.shutdown()  # puts still waiting: FLUSH_SLAVE_TIMEOUT, as a Java role change
            self.group_transfer = None
        if self.store is None:
            return
        self.store.replica_wait = None
        self.store.replica_gate = None
        if role is not BrokerRole.SYNC_MASTER or self.config is None:
            return
        acks = getattr(self.config, "inSyncReplicas", 1)
        if self.config.allAckInSyncStateSet or acks > 1:
            self._acked_offset = (self.all_acked_offset if self.config.allAckInSyncStateSet
                                  else lambda: self.acked_by(acks - 1))
            self.group_transfer = GroupTransferService(self.service.clock, PutMessageStatus.PUT_OK,
                                                       PutMessageStatus.FLUSH_SLAVE_TIMEOUT)
            self.store.replica_wait = self.replica_wait
        if self.config.minInSyncReplicas > 1:  # a master is in its own set: 1 always holds
            self.store.replica_gate = self.enough_in_sync

    def enough_in_sync(self) -> PutMessageStatus:
        """Before a put that waits is written: the in-sync set (a pending change's larger side
        included, as Java's ``inSyncReplicasNums``) counts ``minInSyncReplicas``."""
        if self.service.in_sync_replicas_nums() < self.config.minInSyncReplicas:
            return PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
        return PutMessageStatus.PUT_OK

    def all_acked_offset(self) -> int:
        """How far every other replica of the in-sync set acknowledged: -1 while one of them is
        not connected, the store's end when the master is the set alone."""
        s = self.service
        others = s.sync_state_set() - {s.local_broker_id}
        if not others:
            return s.max_offset()
        acked: dict[int, int] = {}
        for r in s.replicas():
            if r.broker_id in others:
                acked[r.broker_id] = max(acked.get(r.broker_id, -1), r.ack_offset)
        return min(acked.values()) if len(acked) == len(others) else -1

    def acked_by(self, count: int) -> int:
        """How far at least ``count`` connected replicas acknowledged (-1: fewer are connected)."""
        acks = sorted((r.ack_offset for r in self.service.replicas()), reverse=True)
        return acks[count - 1] if len(acks) >= count else -1

    def replica_wait(self, end_offset: int) -> PutMessageStatus | defer.Deferred[PutMessageStatus]:
        """A SYNC put that ends at ``end_offset``: PUT_OK once the replicas it waits for hold it."""
        waiting = self.group_transfer
        if waiting is None or (self.config.allAckInSyncStateSet and len(self.service.sync_state_set()) <= 1):
            return PutMessageStatus.PUT_OK
        waiting.notify_transfer_some(self._acked_offset())
        self.service.wakeup_all()
        return waiting.wait(end_offset, self.config.slaveTimeout)

    def _acked(self, broker_id: int, offset: int) -> None:
        if self.group_transfer is not None:
            self.group_transfer.notify_transfer_some(self._acked_offset())

    def start(self) -> None:
        pass

    def shutdown(self) -> None:
        if self.group_transfer is not None:
            self.group_transfer.shutdown()
        self.service.shutdown()

    def registered(self, ha_server_addr: str | None) -> None:
        """A name server's answer: a replica's master HA address (Java ``updateHaMasterAddress``,
        a no-op on a master, which has no client)."""
        if ha_server_addr:
            self.service.update_ha_master_address(ha_server_addr)

    def slave_fall_behind_much(self) -> int:
        """Java ``slaveFallBehindMuch``: the master's end minus the most a replica acknowledged."""
        acked = [r.ack_offset for r in self.service.replicas() if r.ack_offset >= 0]
        return self.service.max_offset() - max(acked) if acked else 0

    def runtime_info(self) -> dict[str, Any]:
        s = self.service
        if s.is_slave:
            client = s.client
            return {"haMasterAddress": client.master_ha_address if client is not None else "",
                    "haConnectedToMaster": "true" if client is not None and client.is_connected() else "false",
                    "haConfirmOffset": str(s.confirm_offset())}
        replicas = s.replicas()
        acked = [r.ack_offset for r in replicas if r.ack_offset >= 0]
        return {"haSlaveConnections": str(len(replicas)),
                "haSlaveAckOffset": str(max(acked, default=-1)),
                "haSlaveFallBehind": str(self.slave_fall_behind_much()),
                # the controller's set, as last answered (a change reported and not answered yet is left out)
                "haSyncStateSet": ",".join(str(i) for i in sorted(s.local_sync_state_set())),
                "haInSyncReplicas": str(s.in_sync_replicas_nums()),
                "haConfirmOffset": str(s.confirm_offset())}

    def ha_runtime_info(self) -> HARuntimeInfo:
        """GET_BROKER_HA_STATUS (Java ``AutoSwitchHAService.getRuntimeInfo``): a replica's client, or
        a master's connections, in sync when in the controller's set as last answered, which counts
        the master too (``inSyncSlaveNums`` is its size - 1)."""
        s = self.service
        end = s.max_offset()
        if not s.is_master:  # a replica, or no role yet (Java's controller-mode broker starts as SLAVE)
            flushed = self.store.get_master_flushed_offset() if self.store is not None else 0
            return slave_info(s.client, end, flushed)
        local = s.local_sync_state_set()
        return master_info(end, s.connections, lambda c: c.slave_id in local, len(local) - 1)
