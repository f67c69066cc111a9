"""What a broker's store does for replication, by role (Java ``DefaultMessageStore``'s
``haService`` and ``BrokerController``'s role handling).

Every role listens on ``haListenPort`` (:class:`HAService`). A SYNC_MASTER store answers puts
that wait for the slave through :meth:`HAService.replica_wait`; a SLAVE runs an
:class:`HAClient` to the master, whose address is ``haMasterAddress`` when set (6 characters or
more, as Java checks) or else the one each name server registration answers with.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import protocol

from rmqpy.protocol.bodies.ha import HARuntimeInfo
from rmqpy.store.api import MessageStore
from rmqpy.store.config import MessageStoreConfig
from rmqpy.store.ha.client import HAClient
from rmqpy.store.ha.connection import HATimings, MasterLog
from rmqpy.store.ha.gate import ReplicaGate
from rmqpy.store.ha.runtime import master_info, slave_info
from rmqpy.store.ha.service import HAService
from rmqpy.store.message_store import PutMessageStatus
from rmqpy.store.role import BrokerRole, role_of

log = logging.getLogger(__name__)


class Replication:
    def __init__(self, store: MessageStore, config: MessageStoreConfig, clock: Any,
                 connect: Callable[[str, protocol.Protocol], Any] | None = None) -> None:
        """``connect`` dials the master as a slave (None: plain TCP; the broker's TLS dial for haUseTLS)."""
        self.config = config
        self.store = store
        timings = HATimings(config.haSendHeartbeatInterval, config.haHousekeepingInterval,
                            config.haTransferBatchSize)
        self.service: HAService[PutMessageStatus] = HAService(
            clock, MasterLog(store.get_max_phy_offset, store.get_commit_log_data, config.mappedFileSizeCommitLog),
            timings, fallbehind_max=config.haSlaveFallbehindMax, slave_timeout_ms=config.slaveTimeout,
            ok=PutMessageStatus.PUT_OK, not_available=PutMessageStatus.SLAVE_NOT_AVAILABLE,
            timeout=PutMessageStatus.FLUSH_SLAVE_TIMEOUT, gate=ReplicaGate.from_config(clock, config))
        self.client: HAClient | None = None
        self.update_master_ha_addr_periodically = False
        self._clock = clock
        self._timings = timings
        self._running = False
        self._connect = connect
        self.apply_role(role_of(config))

    def apply_role(self, role: BrokerRole) -> None:
        """The side of replication ``role`` runs (Java builds it once per role; a role switch calls
        this again): a slave's HAClient, or a master's wake-ups and, SYNC_MASTER, the put's wait."""
        config, store = self.config, self.store
        if self.client is not None:
            self.client.stop()
            self.client = None
        store.remove_arrive_listener(self.service.wakeup_all)
        store.replica_wait = None
        self.update_master_ha_addr_periodically = False
        if role.is_slave:
            self.service.shutdown()  # the slaves of the master this was
            fixed = config.haMasterAddress if len(config.haMasterAddress or "") >= 6 else ""
            self.update_master_ha_addr_periodically = not fixed
            self.client = HAClient(self._clock, store.get_max_phy_offset, store.append_to_commit_log,
                                   self._timings, fixed, self._connect)
            if self._running:
                self.client.start()
        else:
            store.add_arrive_listener(self.service.wakeup_all, batch=self.service.wakeup_all)  # once a batch
            if role is BrokerRole.SYNC_MASTER:
                store.replica_wait = self.service.replica_wait

    def start(self) -> None:
        self._running = True
        if self.client is not None:
            self.client.start()

    def shutdown(self) -> None:
        self._running = False
        if self.client is not None:
            self.client.stop()
        self.service.shutdown()

    def registered(self, ha_server_addr: str | None) -> None:
        """A name server answered a registration (Java ``doRegisterBrokerAll``)."""
        if self.client is not None and self.update_master_ha_addr_periodically and ha_server_addr:
            self.client.update_master_address(ha_server_addr)

    def slave_fall_behind_much(self) -> int:
        """Java ``slaveFallBehindMuch``: the master's end minus what a slave acknowledged."""
        return self.store.get_max_phy_offset() - self.service.push2slave_max_offset

    def runtime_info(self) -> dict[str, str]:
        if self.client is not None:
            conn = self.client.connection
            return {"haMasterAddress": self.client.master_address,
                    "haConnectedToMaster": "true" if conn is not None else "false"}
        return {"haSlaveConnections": str(len(self.service.replicas())),
                "haPush2SlaveMaxOffset": str(self.service.push2slave_max_offset),
                "haSlaveAckOffset": str(self.service.slave_ack_offset()),
                "haSlaveFallBehind": str(self.slave_fall_behind_much() if self.service.replicas() else 0)}

    def ha_runtime_info(self) -> HARuntimeInfo:
        """GET_BROKER_HA_STATUS (Java ``DefaultHAService.getRuntimeInfo``): a slave's client, or a
        master's connections, each in sync while less than ``haMaxGapNotInSync`` behind its end."""
        store = self.store
        end = store.get_max_phy_offset()
        if self.client is not None:
            return slave_info(self.client, end, store.get_master_flushed_offset())
        gap = self.config.haMaxGapNotInSync
        return master_info(end, self.service.connections, lambda c: end - c.slave_ack_offset < gap)
