"""Reference runs: a scenario run against Apache's own servers alone, proven once per set of inputs.

Many interop scenarios also run against the real Java broker or Apache's proxy + Java broker, to
show that what the rmqpy test demands is what Java does. Such a run executes no rmqpy server code:
its outcome depends only on the test's own code, the harnesses and the pinned Java/Go artifacts
under ``tests/``, and the rmqpy codec a test may use to build a request by hand. Running it again on
every CI run proves nothing new and costs about a tenth of the suite's time (JVM start-ups, the
proxy's waits); so a test marked ``@pytest.mark.reference`` (or a parameter carrying the mark) is
skipped when :data:`RECORD` says it passed on exactly the inputs it has now, and runs as any other
test otherwise: change a scenario, a harness, a pinned version or the codec, and CI runs the
references of every module that depends on it until someone records them again.

``RMQPY_REFERENCES``: unset, the rule above; ``run``, every reference runs; ``record``, every
reference runs and those that pass are written to :data:`RECORD` at the end of the session
(``bench/reference_runs.sh`` does that). The compatibility table (compat_report.py) leaves
reference runs out: they say nothing of rmqpy.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: test node id -> the inputs digest it passed on
RECORD = ROOT / "tests" / "reference_proven.json"
#: what a reference run's outcome can depend on besides its own module (paths from ROOT)
#: (rmqpy/protocol: the only rmqpy package the reference modules and the harness modules import, to
#: build a request by hand; tests/unit/test_reference.py fails when another one is imported)
SHARED_INPUTS = ("tests/interop", "tests/conftest.py", "tests/ports.py", "tests/reference.py", "rmqpy/protocol")
#: the user property that tells the controller a report is a reference run's, with the digest of the
#: inputs it ran on (taken where it ran, when it was collected)
PROPERTY = "rmqpy_reference"
MARK = "reference"

#: set on a reference run skipped as proven, at collection
_PROVEN = pytest.StashKey[bool]()

_digests: dict[str, str] = {}
#: node id -> the digest it passed on, or None (it failed, or its phases ran on different inputs)
_outcomes: dict[str, str | None] = {}


def mode() -> str:
    return os.environ.get("RMQPY_REFERENCES", "")


def _files() -> list[Path]:
    """The tracked files under :data:`SHARED_INPUTS` (git's list, so that a clone and the checkout it
    came from agree whatever was built beside them), test modules left out."""
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--", *SHARED_INPUTS], capture_output=True,
                         check=True).stdout.decode()
    return [ROOT / rel for rel in sorted(filter(None, out.split("\0")))
            if not re.fullmatch(r"test_.*\.py", rel.rsplit("/", 1)[-1])]


def digest(module: str) -> str:
    """The digest of what a reference run of ``module`` (a path from ROOT) depends on: the module
    and :data:`SHARED_INPUTS` (other test modules excluded), names and contents."""
    if module not in _digests:
        h = hashlib.sha256()
        files = [ROOT / module] + _files()
        for p in files:
            h.update(p.relative_to(ROOT).as_posix().encode() + b"\0")
            h.update(p.read_bytes() + b"\0")
        _digests[module] = h.hexdigest()
    return _digests[module]


def load() -> dict[str, str]:
    try:
        return json.loads(RECORD.read_text())
    except FileNotFoundError:
        return {}


def is_reference(item: pytest.Item) -> bool:
    return item.get_closest_marker(MARK) is not None


def is_proven(item: pytest.Item) -> bool:
    """A reference run skipped as proven."""
    return item.stash.get(_PROVEN, False)


def to_run(request: pytest.FixtureRequest) -> Iterator[pytest.Item]:
    """The selected tests of the requesting module that this session runs: what a module-scoped
    fixture asks before it starts servers ahead of the tests that need them (a reference proven on
    its inputs needs none)."""
    return (item for item in request.session.items
            if getattr(item, "module", None) is request.module and not is_proven(item))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARK}: runs against Apache's servers alone (tests/reference.py)")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    references = [item for item in items if is_reference(item)]
    for item in references:  # taken now, so that an edit while the session runs is not mistaken for its input
        digest(item.nodeid.split("::")[0])
    if mode():
        return
    record = load()
    for item in references:
        if record.get(item.nodeid) == digest(item.nodeid.split("::")[0]):
            item.stash[_PROVEN] = True
            item.add_marker(pytest.mark.skip(reason="reference: passed on these very inputs "
                                                    "(tests/reference_proven.json); RMQPY_REFERENCES=run runs it"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    if is_reference(item):
        outcome.get_result().user_properties.append((PROPERTY, digest(item.nodeid.split("::")[0])))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Where every report is seen (the xdist controller, or the one process): a reference passed
    only if none of its phases failed or was skipped and its call went as the test expects."""
    ran_on = next((str(value) for name, value in report.user_properties if name == PROPERTY), None)
    if mode() != "record" or ran_on is None:
        return
    # an expected failure (xfail) is the outcome the test expects of the reference
    ok = report.passed or (report.when == "call" and report.skipped and hasattr(report, "wasxfail"))
    if report.when == "call":
        _outcomes[report.nodeid] = ran_on if ok and _outcomes.get(report.nodeid, ran_on) == ran_on else None
    elif not ok:
        _outcomes[report.nodeid] = None


def pytest_sessionfinish(session: pytest.Session, exitstatus) -> None:
    if mode() != "record" or hasattr(session.config, "workerinput") or not _outcomes:
        return
    record = load()
    for nodeid, ran_on in _outcomes.items():
        if ran_on is not None:
            record[nodeid] = ran_on
        else:
            record.pop(nodeid, None)
    RECORD.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n")
