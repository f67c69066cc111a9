"""How ./test.sh spreads the suite over xdist workers (tests/module_costs.py)."""
from __future__ import annotations

from dataclasses import dataclass

from tests import module_costs


@dataclass
class _Item:
    nodeid: str


def test_modules_run_longest_first_and_keep_their_tests_in_order() -> None:
    items = [_Item("tests/a.py::t1"), _Item("tests/b.py::t1"), _Item("tests/a.py::t2"), _Item("tests/c.py::t1"),
             _Item("tests/b.py::t2")]
    module_costs.order_by_cost(items, {"tests/b.py": 50.0, "tests/c.py": 10.0})
    assert [i.nodeid for i in items] == ["tests/b.py::t1", "tests/b.py::t2", "tests/c.py::t1", "tests/a.py::t1",
                                         "tests/a.py::t2"]


def test_the_table_is_summed_per_module_from_a_durations_report() -> None:
    report = ("12.50s call     tests/interop/test_x.py::test_a[4.9.8]\n"
              "2.00s setup    tests/interop/test_x.py::test_a[4.9.8]\n"
              "0.30s call     tests/unit/test_y.py::test_b\n"
              "(3 durations < 0.005s hidden.)\n")
    assert module_costs.from_durations(report) == {"tests/interop/test_x.py": 14.5, "tests/unit/test_y.py": 0.3}
