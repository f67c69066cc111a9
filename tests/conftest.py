"""Hooks for the whole suite, loaded by every pytest process (the xdist controller too)."""
from __future__ import annotations

# the compatibility table (RMQPY_COMPAT_REPORT): the hooks live in compat_report.py; they are
# here, not in tests/interop/conftest.py, because under xdist only the controller sees every
# report and it loads this conftest but not the interop one
from tests.interop.compat_report import (  # noqa: F401
    pytest_runtest_logreport,
    pytest_runtest_makereport,
    pytest_sessionfinish,
)
