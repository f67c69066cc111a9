"""The services a broker's role runs, chosen from the role (Java ``changeToMaster`` /
``changeToSlave`` / ``changeSpecialServiceStatus``).

A master delivers timer and scheduled messages, checks transactions, revives POP messages and
logs how far its slaves fall behind; a slave copies its master's topics, groups and offsets every
10 s. Replication's side (rmqpy/store/ha/replication.py) follows the role as well. What a slave
refuses per request (puts, END_TRANSACTION, offset commits) is read from the role at each
request (rmqpy/store/role.py), so it follows a switch at once.
"""
from __future__ import annotations

from typing import Any, Protocol

from twisted.application import service

from rmqpy.broker.periodic import PeriodicJob
from rmqpy.broker.steps import Step
from rmqpy.store.role import BrokerRole, RoleState


class RoleHost(Protocol):
    """What the role's services need of the broker (RoleHost)."""

    reactor: Any
    log: Any
    slave_synchronize: Any
    schedule_message_service: Any
    transactional_message_service: Any
    timer_message_service: Any
    pop_revive_service: Any
    replication: Any
    store_config: Any

    def hold_role(self, state: RoleState) -> None: ...


class RoleServices(service.MultiService):
    """The role's services as children; :meth:`switch` swaps them on a running broker."""

    def __init__(self, broker: RoleHost) -> None:
        super().__init__()
        self.setName("role")
        self.broker = broker
        self.role: BrokerRole | None = None

    def _build(self, role: BrokerRole) -> list[service.Service]:
        b = self.broker
        if role.is_slave:  # Java handleSlaveSynchronize: every 10 s after 3 s; 5.x's timer checkpoint every 3 s
            jobs: list[service.Service] = [PeriodicJob("slave-sync", b.reactor, 3.0, 10.0, b.slave_synchronize.sync_all)]
            if b.store_config.timerWheelEnable:
                jobs.append(PeriodicJob("timer-checkpoint-sync", b.reactor, 3.0, 3.0,
                                        b.slave_synchronize.sync_timer_checkpoint))
            return jobs
        return [
            Step("schedule", b.schedule_message_service.start, b.schedule_message_service.stop),
            Step("transaction-check", b.transactional_message_service.start, b.transactional_message_service.stop),
            Step("timer-delivery", b.timer_message_service.start, b.timer_message_service.stop),
            Step("pop-revive", b.pop_revive_service.start, b.pop_revive_service.stop),
            # Java printMasterAndSlaveDiff
            PeriodicJob("master-slave-diff", b.reactor, 10.0, 60.0, lambda: b.log.info(
                "Slave fall behind master: {diff} bytes", diff=b.replication.slave_fall_behind_much())),
        ]

    def choose(self, role: BrokerRole) -> None:
        """The children of ``role`` (before start, or after :meth:`stopService`)."""
        for child in list(self):
            child.disownServiceParent()
        for child in self._build(role):
            child.setServiceParent(self)
        self.role = role

    def names(self) -> list[str]:
        return [child.name for child in self if child.name is not None]

    def switch(self, state: RoleState) -> None:
        """Stop what the old role ran, hold the new role, start what it needs (no restart)."""
        b = self.broker
        running = self.running
        if running:
            self.stopService()  # the components' stop() are synchronous
        b.hold_role(state)
        b.replication.apply_role(state.role)
        if state.role.is_master:  # Java handleSlaveSynchronize(master): no master to copy from
            b.slave_synchronize.master_addr = None
        self.choose(state.role)
        if running:
            self.startService()
