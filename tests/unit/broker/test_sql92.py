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


# ---------------------------------------------------------------- Java's three-valued logic
@pytest.mark.parametrize("expr, expected", [
    # LogicExpression.createAND: null AND FALSE is FALSE, so its NOT matches
    ("NOT (c = 1 AND a = 4)", True), ("NOT (a = 4 AND c = 1)", True), ("NOT (c = 1 AND a = 5)", False),
    # createOR: null OR FALSE is null, so its NOT does not match
    ("NOT (c = 1 OR a = 4)", False), ("NOT (a = 4 OR c = 1)", False), ("NOT (c = 1 OR a = 5)", False),
    # createBooleanCast: a property (a string) as a boolean is FALSE, not an error
    ("NOT flag", True), ("flag OR a = 5", True), ("NOT c", False),
    # createNotBetween is (a < low OR a > high)
    ("a NOT BETWEEN 6 AND 7", True), ("NOT (c BETWEEN 1 AND 2)", False), ("c NOT BETWEEN 1 AND 2", False),
])
def test_three_valued_logic_as_java(expr, expected):
    assert sql92.evaluate(expr, PROPS) is expected


# ---------------------------------------------------------------- long and deep expressions (issue 31 case 4)
def _terms(n: int) -> tuple[str, dict[str, str]]:
    props = {f"p{i}": str(i) for i in range(n)}
    return " AND ".join(f"p{i} = {i}" for i in range(n)), props


@pytest.mark.parametrize("n", [700, 5000])
def test_a_long_chain_of_and_terms_parses_and_evaluates(n):
    text, props = _terms(n)
    expr = sql92.compile(text)
    assert expr.matches(props) is True
    assert expr.matches({**props, f"p{n - 1}": "-1"}) is False  # the last term decides
    assert expr.evaluate({k: v for k, v in props.items() if k != "p0"}) is None  # null AND TRUE...
    ors = sql92.compile(" OR ".join(f"p{i} = -1" for i in range(n)) + f" OR p{n - 1} = {n - 1}")
    assert ors.matches(props) is True and ors.matches({}) is False


def _nested(n: int) -> str:
    """n levels of parentheses, the operator alternating: (((p0 = 0 OR p1 = 1) AND p2 = 2) OR ..."""
    return "(" * n + "p0 = 0" + "".join(f" {'AND' if i % 2 == 0 else 'OR'} p{i} = {i})" for i in range(1, n + 1))


def _nested_value(n: int, props: dict[str, str]) -> bool:
    value = props.get("p0") == "0"
    for i in range(1, n + 1):
        term = props.get(f"p{i}") == str(i)
        value = (value and term) if i % 2 == 0 else (value or term)
    return value


@pytest.mark.parametrize("n", [150, 3000])
def test_deep_nesting_parses_and_evaluates_without_recursion(n):
    expr = sql92.compile(_nested(n))
    assert expr.depth > n
    props = {f"p{i}": str(i) for i in range(n + 1)}
    for wrong in ([], [n], [n - 1], [0, n - 1], list(range(0, n + 1, 3))):
        p = {**props, **{f"p{i}": "-1" for i in wrong}}
        assert expr.matches(p) is _nested_value(n, p)


def test_runs_of_prefix_operators():
    # NOT takes a unary operand, as in Java: "NOT a = 5" is "(NOT a) = 5"
    assert sql92.evaluate("NOT " * 10001 + "(a = 5)", PROPS) is False
    assert sql92.evaluate("NOT " * 10000 + "(a = 5)", PROPS) is True
    assert sql92.evaluate("a = " + "-" * 10000 + "5", PROPS) is True
    assert sql92.evaluate("a = " + "- (" * 3001 + "5" + ")" * 3001, PROPS) is False  # -5
    assert sql92.evaluate("a = " + "- (" * 3000 + "5" + ")" * 3000, PROPS) is True


def test_the_explicit_stack_path_evaluates_as_the_recursive_one(monkeypatch):
    """Every expression of this module evaluated again with every node on the explicit stack."""
    cases = [c for c in test_evaluate.pytestmark[0].args[1]] + \
            [c for c in test_three_valued_logic_as_java.pytestmark[0].args[1]]
    def value(expr: str) -> object:
        try:
            return sql92.compile(expr).evaluate(PROPS)
        except sql92._EvalError as e:
            return str(e)

    expected = {expr: value(expr) for expr, _ in cases}
    monkeypatch.setattr(sql92, "SHALLOW_DEPTH", 0)
    for expr, _ in cases:
        assert value(expr) == expected[expr], expr
    assert "For input string" in str(expected["f > 2"])


def test_an_error_deep_in_the_expression_is_no_match():
    # "f > 2": Integer.valueOf("2.5") throws, at any depth
    assert sql92.evaluate("(" * 500 + "f > 2" + ")" * 500, PROPS) is False
    assert sql92.evaluate("NOT (" * 500 + "f > 2" + ")" * 500, PROPS) is False


def test_a_run_of_minus_signs_is_tokenized_in_linear_time():
    """Each "-" of a run once started a "--" line comment scanned to the end of the text for its
    line break (quadratic: 10,000 signs took 1.2 s, 30,000 about 10 s, on the reactor)."""
    import time
    started = time.perf_counter()
    assert sql92.evaluate("a = " + "-" * 30000 + "5", PROPS) is True
    assert time.perf_counter() - started < 1.5
    assert sql92.evaluate("a = 5 -- a comment\n", PROPS) is True
    assert sql92.evaluate("a = 5 --" + "-" * 30000 + "\r\n AND b = 'abc'", PROPS) is True
