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
- runtime info: a master's connected replicas and in-sync set, a replica's master and connection.
"""
from __future__ import annotations

from typing import Any

from rmqpy.store.ha.autoswitch.service import AutoSwitchHAService
from rmqpy.store.role import BrokerRole


class AutoSwitchReplication:
    """:class:`rmqpy.broker.api.ReplicationSide` over an :class:`AutoSwitchHAService`."""

    def __init__(self, service: AutoSwitchHAService) -> None:
        self.service = service

    def apply_role(self, role: BrokerRole) -> None:
        """The replicas manager changed the service's role before the broker's role switch."""

    def start(self) -> None:
        pass

    def shutdown(self) -> None:
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
                "haSyncStateSet": ",".join(str(i) for i in sorted(s.sync_state_set())),
                "haInSyncReplicas": str(s.in_sync_replicas_nums()),
                "haConfirmOffset": str(s.confirm_offset())}
