"""The published compatibility table: interop scenario x client, written at the end of a run.

A pytest plugin (loaded by tests/interop/conftest.py). When ``RMQPY_COMPAT_REPORT`` names a
file (``test.sh`` sets ``docs/compatibility.md``), the outcome of every interop test is
written there as a Markdown table: one row per scenario (module and test), one column per
client (the version parameter of the test, or the client the module drives). Hand-written
notes after :data:`NOTES_MARKER` (deliberate differences from a Java version, and why) are kept.

Under pytest-xdist the tests run in worker processes: a worker labels each report with its row
and column (``user_properties``, which travel to the controller with the report), and only the
process that sees every report (the controller, or the one process of a serial run) records
and writes the table.
"""
from __future__ import annotations

import os
import re
import time
from collections import defaultdict
from pathlib import Path

import pytest

VERSION_RE = re.compile(r"\b(4\.9\.8|5\.3\.3)\b")
MODULE_CLIENTS = {"test_go_client": "go v2", "test_python_client": "python (ours)", "test_grpc_java": "java grpc 5.0.8",
                  "test_grpc_go5": "go grpc 5.1.2"}
SYMBOL = {"passed": "pass", "failed": "FAIL", "skipped": "skip", "xfailed": "xfail (known gap)",
          "xpassed": "pass (xfail)"}

_results: dict[str, dict[str, str]] = defaultdict(dict)


def _client_of(item: pytest.Item) -> str:
    module = item.module.__name__.rsplit(".", 1)[-1] if getattr(item, "module", None) else ""
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        for value in callspec.params.values():
            match = VERSION_RE.search(str(value))
            if match:
                return f"java {match.group(1)}"
        match = VERSION_RE.search(callspec.id)
        if match:
            return f"java {match.group(1)}"
    return MODULE_CLIENTS.get(module, "any")


def _scenario_of(item: pytest.Item) -> str:
    module = item.module.__name__.rsplit(".", 1)[-1]
    return f"{module.removeprefix('test_')} :: {item.originalname.removeprefix('test_')}"


#: the user property that carries (scenario, client) from the process that ran a test
PROPERTY = "rmqpy_compat"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    # a reference run (tests/reference.py) tells of Apache's servers, not of rmqpy
    if "interop" in str(item.fspath) and item.get_closest_marker("reference") is None:
        report.user_properties.append((PROPERTY, (_scenario_of(item), _client_of(item))))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Called where reports are collected: the controller under xdist, the only process otherwise."""
    label = next((value for name, value in report.user_properties if name == PROPERTY), None)
    if label is None:
        return
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if hasattr(report, "wasxfail"):
            state = "xfailed" if report.skipped else "xpassed"
        else:
            state = report.outcome
        key, client = label
        # a scenario's row keeps the worst outcome per client (e.g. several params of one test)
        if _results[key].get(client) != "failed":
            _results[key][client] = state


def pytest_sessionfinish(session, exitstatus) -> None:
    target = os.environ.get("RMQPY_COMPAT_REPORT")
    if hasattr(session.config, "workerinput") or not target or not _results:
        return
    from tests.interop import isolation
    clients = sorted({c for row in _results.values() for c in row}, key=lambda c: (c == "any", c))
    lines = ["# Compatibility of rmqpy with official Apache RocketMQ clients", "",
             f"Written by the interop suite (`./test.sh`) on {time.strftime('%Y-%m-%d')}; "
             f"client isolation: {isolation.report_line()}.",
             "Rows are interop scenarios (test module :: test), columns the client that drove them; "
             "`any` marks tests that are not per client version. `xfail` marks a known gap with its "
             "reason in the test.", "",
             "| scenario | " + " | ".join(clients) + " |", "|---|" + "---|" * len(clients)]
    for scenario in sorted(_results):
        row = _results[scenario]
        lines.append(f"| {scenario} | " + " | ".join(SYMBOL.get(row.get(c, ""), "") for c in clients) + " |")
    path = Path(target)
    notes = kept_notes(path.read_text()) if path.exists() else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n" + notes)


#: the hand-written part of the report: this line and everything after it survive a rewrite
NOTES_MARKER = "<!-- hand-written notes below: kept by tests/interop/compat_report.py -->"


def kept_notes(text: str) -> str:
    """The hand-written notes of an existing report (from :data:`NOTES_MARKER` on), led by a blank line."""
    at = text.find(NOTES_MARKER)
    return "" if at < 0 else "\n" + text[at:]
