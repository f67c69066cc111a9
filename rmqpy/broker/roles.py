"""The services a broker's role runs, chosen from the role (Java ``changeToMaster`` /
``changeToSlave`` / ``changeSpecialServiceStatus``).

A master delivers timer and scheduled messages, checks transactions, revives POP messages and
logs how far its slaves fall behind; a slave copies its master's topics, groups and offsets every
10 s. Replication's side (rmqpy/store/ha/replication.py) follows the role as well. What a slave
refuses per request (puts, END_TRANSACTION, offset commits) is read from the role at each
request (rmqpy/store/role.py), so it follows a switch at once.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from twisted.application import service

from rmqpy.broker.periodic import PeriodicJob
from rmqpy.store.role import BrokerRole, RoleState

if TYPE_CHECKING:
    from rmqpy.broker.controller import BrokerController


class Started(service.Service):
    """A component with its own start() and stop() as a service of the tree."""

    def __init__(self, name: str, start: Callable[[], Any], stop: Callable[[], Any]) -> None:
        self.setName(name)
        self._start = start
        self._stop = stop

    def startService(self) -> None:  # noqa: N802 (Twisted's name)
        super().startService()
        self._start()

    def stopService(self) -> None:  # noqa: N802 (Twisted's name)
        super().stopService()
        self._stop()


class RoleServices(service.MultiService):
    """The role's services as children; :meth:`switch` swaps them on a running broker."""

    def __init__(self, broker: BrokerController) -> None:
        super().__init__()
        self.setName("role")
        self.broker = broker
        self.role: BrokerRole | None = None

    def _build(self, role: BrokerRole) -> list[service.Service]:
        b = self.broker
        if role.is_slave:  # Java handleSlaveSynchronize: every 10 s after 3 s
            return [PeriodicJob("slave-sync", b.reactor, 3.0, 10.0, b.slave_synchronize.sync_all)]
        return [
            Started("schedule", b.schedule_message_service.start, b.schedule_message_service.stop),
            Started("transaction-check", b.transactional_message_service.start, b.transactional_message_service.stop),
            Started("timer-delivery", b.timer_message_service.start, b.timer_message_service.stop),
            Started("pop-revive", b.pop_revive_service.start, b.pop_revive_service.stop),
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
