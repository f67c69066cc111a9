"""The broker's role, one typed value (Java ``BrokerRole`` with the ``brokerId``).

The ``brokerRole`` key stays a string in :class:`MessageStoreConfig` (it is read from and written
to broker.conf and answered by GET_BROKER_CONFIG as Java spells it); this module is the one place
that reads it, so every decision by role goes through :class:`BrokerRole`.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

MASTER_ID = 0  # Java MixAll.MASTER_ID


class BrokerRole(enum.Enum):
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"

    @property
    def is_slave(self) -> bool:
        return self is BrokerRole.SLAVE

    @property
    def is_master(self) -> bool:
        return self is not BrokerRole.SLAVE

    @classmethod
    def parse(cls, text: str) -> BrokerRole:
        """The role a config value names; ValueError names the bad value."""
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"bad brokerRole {text!r}") from None


@dataclass(frozen=True)
class RoleState:
    """What a broker is in its group: its role and its id (0 for a master)."""

    role: BrokerRole
    broker_id: int

    @property
    def is_slave(self) -> bool:
        return self.role.is_slave


def role_of(store_config: Any) -> BrokerRole:
    """The role a store config holds now (it changes at run time through a role switch)."""
    return BrokerRole(store_config.brokerRole)


def is_slave(store_config: Any) -> bool:
    return store_config.brokerRole == BrokerRole.SLAVE.value


def set_role(store_config: Any, role: BrokerRole) -> None:
    """Hold ``role`` in the store config: the one place the role lives."""
    store_config.brokerRole = role.value
