"""How pytest-xdist spreads the suite: which tests stay together, and the most expensive first.

``./test.sh`` runs the suite with ``--dist loadgroup`` and puts every test in a group
(:func:`group_of`): its module, and the parameters of the module's parametrized module-scoped
fixtures (the server target of test_grpc_java, the client version of test_namesrv_java, ...).
A group goes whole to one worker, so a module-scoped server starts once, as in a serial run,
while the targets of one module run side by side. Groups are handed out in collection order, to
whichever worker is free. A long module handed out last would run alone
at the end while the other workers idle, so the modules are sorted by the wall time they took in
a measured run (``module_seconds.json`` beside this file), longest first: the classic
longest-processing-time-first rule, which keeps the tail short. A module missing from the table
(a new one) counts as free and runs last; refresh the table from a full run's durations with::

    python3 -m pytest --durations=0 ... > run.log
    python3 -m tests.module_costs run.log
"""
from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

TABLE = Path(__file__).with_name("module_seconds.json")
#: a line of pytest's --durations report: "12.34s call     tests/x/test_y.py::test_z[p]"
DURATION_RE = re.compile(r"^\s*([0-9.]+)s\s+(setup|call|teardown)\s+(\S+?\.py)::")


def load() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(TABLE.read_text()).items()}
    except (OSError, ValueError):
        return {}


def order_by_cost(items: list, costs: dict[str, float]) -> None:
    """Sort ``items`` in place: modules by descending cost, tests within a module as collected."""
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        first_seen.setdefault(item.nodeid.split("::", 1)[0], index)

    def key(item) -> tuple[float, int]:
        module = item.nodeid.split("::", 1)[0]
        return (-costs.get(module, 0.0), first_seen[module])

    items.sort(key=key)


def group_of(item) -> str:
    """The module of ``item`` plus the values of its parameters that are wider than a test.

    A module- or session-scoped parametrized fixture is set up once per value and kept for the
    tests that share it; tests with other values use a set-up of their own, so they can run on
    another worker without starting anything twice. The name must be the same in every worker
    (xdist compares them), so a value that is not plain data is named by its index instead.
    """
    module = item.nodeid.split("::", 1)[0]
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return module
    # pytest records the scope of each parameter (an indirect one takes its fixture's scope)
    scopes = getattr(callspec, "_arg2scope", {})
    wide = [f"{name}={_stable(callspec.params[name], callspec.indices[name])}" for name in sorted(callspec.params)
            if getattr(scopes.get(name), "value", "function") != "function"]
    # xdist reads the group after the last "@" of a node id, and only when no "]" follows it
    return UNSAFE.sub("_", module + ("|" + ",".join(wide) if wide else ""))


UNSAFE = re.compile(r"[\[\]@\s]")


def _stable(value: object, index: int) -> str:
    plain = (str, int, float, bool, type(None))
    if isinstance(value, plain):
        return str(value)
    if isinstance(value, tuple) and all(isinstance(v, plain) for v in value):
        return "/".join(map(str, value))
    return f"#{index}"


def from_durations(text: str) -> dict[str, float]:
    """Seconds per module, summed over setup, call and teardown of its tests."""
    totals: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        match = DURATION_RE.match(line)
        if match:
            totals[match.group(3)] += float(match.group(1))
    return {module: round(seconds, 1) for module, seconds in sorted(totals.items())}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    table = from_durations(Path(argv[0]).read_text())
    TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"{TABLE}: {len(table)} modules, {sum(table.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
