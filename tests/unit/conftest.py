"""Fixtures shared by the unit tests."""
from __future__ import annotations

import pytest
from twisted.logger import globalLogPublisher


@pytest.fixture
def logged():
    """Every Twisted log event emitted while the test runs."""
    events: list[dict] = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)
