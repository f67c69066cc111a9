"""The broker of the broker unit tests: a started broker on a ``task.Clock`` with a real store in a
temp dir (helpers.make_broker), shut down after the test."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from twisted.internet import task

from rmqpy.broker.controller import BrokerController
from tests.unit.broker.helpers import make_broker


@pytest.fixture
def broker_overrides() -> dict[str, Any]:
    """Config keys set on top of make_broker's; a test module overrides this fixture to change them."""
    return {}


@pytest.fixture
def clocked_broker(tmp_path, broker_overrides: dict[str, Any]) -> Iterator[tuple[BrokerController, task.Clock]]:
    """The broker and its clock; ``broker.clock`` is the clock too."""
    b, clock = make_broker(tmp_path, **broker_overrides)
    b.clock = clock  # type: ignore[attr-defined]
    yield b, clock
    b.shutdown()


@pytest.fixture
def broker(clocked_broker: tuple[BrokerController, task.Clock]) -> BrokerController:
    return clocked_broker[0]
