"""How ./test.sh spreads the suite over xdist workers (tests/module_costs.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from tests import module_costs


class _Scope(Enum):
    function = "function"
    module = "module"


@dataclass
class _CallSpec:
    params: dict
    indices: dict
    _arg2scope: dict = field(default_factory=dict)


@dataclass
class _Item:
    nodeid: str
    callspec: _CallSpec | None = None


def test_modules_run_longest_first_and_keep_their_tests_in_order() -> None:
    items = [_Item("tests/a.py::t1"), _Item("tests/b.py::t1"), _Item("tests/a.py::t2"), _Item("tests/c.py::t1"),
             _Item("tests/b.py::t2")]
    module_costs.order_by_cost(items, {"tests/b.py": 50.0, "tests/c.py": 10.0})
    assert [i.nodeid for i in items] == ["tests/b.py::t1", "tests/b.py::t2", "tests/c.py::t1", "tests/a.py::t1",
                                         "tests/a.py::t2"]


def test_a_module_scoped_parameter_splits_its_module_and_a_test_parameter_does_not() -> None:
    wide = _CallSpec({"env": ("rmqpy", "4.9.8"), "n": 3}, {"env": 0, "n": 1},
                     {"env": _Scope.module, "n": _Scope.function})
    assert module_costs.group_of(_Item("tests/m.py::t[x]", wide)) == "tests/m.py|env=rmqpy/4.9.8"
    narrow = _CallSpec({"n": 3}, {"n": 1}, {"n": _Scope.function})
    assert module_costs.group_of(_Item("tests/m.py::t[3]", narrow)) == "tests/m.py"
    assert module_costs.group_of(_Item("tests/m.py::t")) == "tests/m.py"
    # a value without a stable text is named by its index; nothing xdist would misread is kept
    odd = _CallSpec({"srv": object()}, {"srv": 2}, {"srv": _Scope.module})
    assert module_costs.group_of(_Item("tests/m.py::t[a]", odd)) == "tests/m.py|srv=#2"
    spaced = _CallSpec({"srv": "a b]@c"}, {"srv": 0}, {"srv": _Scope.module})
    assert module_costs.group_of(_Item("tests/m.py::t[a]", spaced)) == "tests/m.py|srv=a_b__c"


def test_the_table_is_summed_per_module_from_a_durations_report() -> None:
    report = ("12.50s call     tests/interop/test_x.py::test_a[4.9.8]\n"
              "2.00s setup    tests/interop/test_x.py::test_a[4.9.8]@tests/interop/test_x.py\n"
              "0.30s call     tests/unit/test_y.py::test_b\n"
              "(3 durations < 0.005s hidden.)\n")
    assert module_costs.from_durations(report) == {"tests/interop/test_x.py": 14.5, "tests/unit/test_y.py": 0.3}
