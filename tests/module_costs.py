"""The order in which pytest-xdist hands out test modules: the most expensive first.

``./test.sh`` runs the suite in two workers (``RMQPY_TEST_WORKERS``) with ``--dist loadscope``: each module goes
whole to one worker, so its module-scoped servers start once, as in one process; modules are
handed out in collection order, to whichever worker is free.

(``--dist loadgroup``, which could also split a module by the values of its module-scoped
parametrized fixtures, does not work with pytest 9.2 and pytest-xdist 3.8.0: xdist marks a
group by rewriting ``item._nodeid``, which pytest 9.2's node ids no longer read, so every test
became a group of its own and module fixtures were set up again on every worker that drew one
of their tests.) A long module handed out last would run alone
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
