"""Hooks for the whole suite, loaded by every pytest process (the xdist controller too)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

# the compatibility table (RMQPY_COMPAT_REPORT): the hooks live in compat_report.py; they are
# here, not in tests/interop/conftest.py, because under xdist only the controller sees every
# report and it loads this conftest but not the interop one
from tests.interop.compat_report import (  # noqa: F401
    pytest_runtest_logreport,
    pytest_runtest_makereport,
    pytest_sessionfinish,
)

# Hypothesis's per-example deadline (200 ms) and its too_slow health check time each example on a
# shared machine: with the suite spread over workers on 2 cores an example is sometimes descheduled
# for longer, and the test fails for that alone ("FlakyFailure ... DeadlineExceeded"), although no
# property test here asserts a time. Every example still runs to the end and is checked.
settings.register_profile("rmqpy", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rmqpy")


def pytest_configure(config):
    """Reference runs proven on their inputs are skipped (tests/reference.py says when and why)."""
    from tests import reference

    config.pluginmanager.register(reference, "rmqpy-reference")


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(session, config, items):
    """In an xdist worker: the most expensive modules first (tests/module_costs.py says why)."""
    from tests import module_costs

    if hasattr(config, "workerinput"):  # one process: the suite runs in collection order
        module_costs.order_by_cost(items, module_costs.load())
    return (yield)
