"""The broker of the ACL and auth tests: the broker unit tests' fixture (a started broker on a
``task.Clock``), each module choosing its keys with ``broker_overrides``."""
from tests.unit.broker.conftest import broker, broker_overrides, clocked_broker

__all__ = ["broker", "broker_overrides", "clocked_broker"]
