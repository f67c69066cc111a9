import pytest

from rmqpy.broker.filter import sql92

# "f > 2" is False: Java converts "2.5" with Integer.valueOf, which throws, so it does not match
PROPS = {"a": "5", "b": "abc", "TAGS": "TagA", "f": "2.5", "flag": "true"}


@pytest.mark.parametrize("expr, expected", [
    ("a > 3", True), ("a >= 5", True), ("a < 5", False), ("a <= 5.0", True),
    ("a BETWEEN 0 AND 3", False), ("a between 4 and 6", True), ("a NOT BETWEEN 4 AND 6", False),
    ("b = 'abc'", True), ("b <> 'abc'", False), ("a = 5", True), ("5 = a", True), ("a = '5'", True),
    ("b IN ('x', 'abc')", True), ("b NOT IN ('x', 'abc')", False), ("a IN ('5')", True),
    ("c IS NULL", True), ("c IS NOT NULL", False), ("b IS NOT NULL", True),
    ("a = 5 AND b = 'abc'", True), ("a = 4 OR b = 'abc'", True), ("NOT (a > 3)", False),
    ("c = 1", False), ("NOT (c = 1)", False), ("c > 1 OR a > 3", True), ("c > 1 AND a > 3", False),
    ("f > 2", False), ("f > 2.4", True), ("b > 1", False), ("TRUE", True), ("FALSE", False),
    ("flag = TRUE", True), ("TAGS = 'TagA' AND (a > 10 OR b = 'abc')", True), ("-a < 0", False),
    ("a > -1", True), ("b = 'it''s'", False), ("a > 3 -- comment\n", True), ("A > 3", False),
])
def test_evaluate(expr, expected):
    assert sql92.evaluate(expr, PROPS) is expected


@pytest.mark.parametrize("expr", [
    "", "a >", "a > 'x'", "a = NULL", "5", "'abc'", "a in (1, 2)", "a between 5 and 1", "a != 3",
    "a = 1 b", "(a = 1", "a = 1)", "NOT a > 3", "a IS 5",
])
def test_parse_errors(expr):
    with pytest.raises(sql92.SQLParseError):
        sql92.compile(expr)


def test_property_alone_is_not_a_match():
    assert sql92.evaluate("flag", PROPS) is False
