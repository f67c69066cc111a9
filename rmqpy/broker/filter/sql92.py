"""The SQL92 message selector RocketMQ brokers evaluate against message properties.

The grammar is RocketMQ's subset of the JMS selector language::

    expr     := and ( OR and )*
    and      := equality ( AND equality )*
    equality := compare ( ( '=' | '<>' ) compare | IS [NOT] NULL )*
    compare  := unary ( ('>'|'>='|'<'|'<=') unary | [NOT] BETWEEN unary AND unary
                        | [NOT] IN '(' string (',' string)* ')' )*
    unary    := '+' unary | '-' unary | NOT unary | primary
    primary  := literal | identifier | '(' expr ')'

Keywords are case-insensitive; string literals are single-quoted with ``''`` for a quote;
integers (optionally suffixed ``L``) and decimals are numbers; identifiers name message
properties, whose values are strings converted to the other operand's type when compared.
Three-valued logic as in Java: an unknown (null) result never matches.

No expression can exhaust Python's recursion, however long or deep (the depth at which Java's
parser gives up is its thread stack's, several thousand levels; a chain of ``AND``/``OR`` terms
is a loop in both): the parser runs its grammar functions as generators on an explicit stack
(:func:`_trampoline`), a chain of one operator is one n-ary node, and an expression nested
deeper than :data:`SHALLOW_DEPTH` is evaluated on an explicit stack too (:func:`_evaluate_deep`),
its subtrees of at most that depth by plain recursion.

:func:`compile` raises :class:`SQLParseError` for what Java's parser refuses; the message
text becomes the remark of SUBSCRIPTION_PARSE_FAILED.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Generator, Mapping

__all__ = ["SQLParseError", "Expression", "compile", "evaluate"]


class SQLParseError(ValueError):
    pass


class _EvalError(Exception):
    """A runtime error (bad number conversion...): the message does not match."""


_TOKENS = r"""
    (?P<ws>\s+|/\*.*?\*/{line_comment})
  | (?P<float>(?:\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+))
  | (?P<int>(?:0|[1-9]\d*)[lL]?)
  | (?P<str>'(?:''|[^'])*')
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|>=|<=|[=<>(),+-])
"""
_TOKEN = re.compile(_TOKENS.format(line_comment=r"|--[^\n\r]*(?:\r\n|\n|\r)"), re.X | re.S)
#: after the last line break a "--" cannot start a comment (Java's ends at a line break): without
#: the alternative there, each "-" of a run is not scanned to the end again (quadratic)
_TOKEN_NO_LINE_COMMENT = re.compile(_TOKENS.format(line_comment=""), re.X | re.S)

_KEYWORDS = {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"}


def _tokenize(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    last_break = max(text.rfind("\n"), text.rfind("\r"))
    while pos < len(text):
        m = (_TOKEN if pos < last_break else _TOKEN_NO_LINE_COMMENT).match(text, pos)
        if m is None:
            raise SQLParseError(f"Lexical error at column {pos + 1}.  Encountered: {text[pos]!r}")
        kind = m.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group
        val = m.group()
        pos = m.end()
        if kind == "ws":
            continue
        if kind == "id" and val.upper() in _KEYWORDS:
            out.append(("kw", val.upper()))
        elif kind == "int":
            digits = val.rstrip("lL")
            n = int(digits)
            if n > 2**63 - 1:
                raise SQLParseError(f"For input string: \"{digits}\"")
            out.append(("num", n))
        elif kind == "float":
            out.append(("num", float(val)))
        elif kind == "str":
            out.append(("str", val[1:-1].replace("''", "'")))
        else:
            out.append((kind, val))
    out.append(("eof", None))
    return out


# ------------------------------------------------------------------------------ AST
#: A node's evaluation as a generator (the explicit-stack path): it yields the child nodes whose
#: values it needs, one at a time, is sent each value, and returns its own.
_Steps = Generator["Expression", Any, Any]

#: Nodes at most this deep are evaluated by plain recursion (one Python frame a level, well within
#: the interpreter's limit of 1,000 on top of the reactor's own frames); deeper ones by
#: :func:`_evaluate_deep`.
SHALLOW_DEPTH = 100


class Expression:
    is_boolean = False
    #: levels of nodes down to the deepest leaf (a leaf: 1)
    depth = 1

    def eval(self, props: Mapping[str, str]) -> Any:
        raise NotImplementedError

    def steps(self, props: Mapping[str, str]) -> _Steps:
        """:meth:`eval` for :func:`_evaluate_deep`; a leaf's is its value."""
        return self.eval(props)
        yield  # pragma: no cover - makes this a generator

    def evaluate(self, props: Mapping[str, str]) -> Any:
        """The value (True/False/None for a boolean expression), whatever the depth."""
        if self.depth <= SHALLOW_DEPTH:
            return self.eval(props)
        return _evaluate_deep(self, props)

    def matches(self, props: Mapping[str, str]) -> bool:
        try:
            return self.evaluate(props) is True
        except _EvalError:
            return False

    def __repr__(self) -> str:  # not recursive: an operand in a parse error's text
        return f"<{type(self).__name__.lstrip('_')} expression>"


def _depth(*children: Expression) -> int:
    return 1 + max(c.depth for c in children)


def _run_on_stack(first: Generator[Any, Any, Any],
                  step: Callable[[Any], tuple[Generator[Any, Any, Any] | None, Any]]) -> Any:
    """Run the generator ``first`` and those it asks for on an explicit stack: each value a
    generator yields goes to ``step``, which answers either a generator to run next (its result is
    sent back to the one that asked) or, with None, the value to send back at once. Nesting of
    the input never nests Python calls."""
    stack = [first]
    value: Any = None
    while True:
        try:
            asked = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            if not stack:
                return done.value
            value = done.value
            continue
        sub, value = step(asked)
        if sub is not None:
            stack.append(sub)


def _evaluate_deep(root: Expression, props: Mapping[str, str]) -> Any:
    """``root.eval(props)`` with one stack frame whatever the depth: the :meth:`Expression.steps`
    generators of the nodes deeper than :data:`SHALLOW_DEPTH` on a list, the shallower subtrees
    they ask for evaluated by recursion. An exception of a node ends the evaluation, as a Java
    exception unwinds every ``evaluate`` (no node catches one)."""
    def step(child: Expression) -> tuple[Generator[Any, Any, Any] | None, Any]:
        if child.depth <= SHALLOW_DEPTH:
            return None, child.eval(props)
        return child.steps(props), None
    return _run_on_stack(root.steps(props), step)


class _Const(Expression):
    def __init__(self, value: Any) -> None:
        self.value = value

    def eval(self, props: Mapping[str, str]) -> Any:
        return self.value

    def __repr__(self) -> str:
        if isinstance(self.value, str):
            return "'" + self.value.replace("'", "''") + "'"
        if self.value is None:
            return "NULL"
        if isinstance(self.value, bool):
            return "TRUE" if self.value else "FALSE"
        return str(self.value)


class _BoolConst(_Const):
    is_boolean = True


class _Prop(Expression):
    def __init__(self, name: str) -> None:
        self.name = name

    def eval(self, props: Mapping[str, str]) -> Any:
        return props.get(self.name)

    def __repr__(self) -> str:
        return self.name


class _PropAsBool(Expression):
    """``UnaryExpression.createBooleanCast``: null stays null, a Boolean is itself, any other
    value (a property's is a string) is FALSE."""
    is_boolean = True

    def __init__(self, prop: _Prop) -> None:
        self.prop = prop
        self.depth = 2

    def eval(self, props: Mapping[str, str]) -> Any:
        value = props.get(self.prop.name)
        if value is None or isinstance(value, bool):
            return value
        return False

    def __repr__(self) -> str:
        return self.prop.name


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _convert_string(s: str, like: Any) -> Any:
    """Java ``Integer.valueOf``/``Long.valueOf``/``Double.valueOf``/``Boolean.valueOf`` of ``s``."""
    if isinstance(like, bool):
        return s.lower() == "true"
    if isinstance(like, int):
        if not re.fullmatch(r"[+-]?\d+", s):
            raise _EvalError(f"For input string: \"{s}\"")
        return int(s)
    if isinstance(like, float):
        try:
            return float(s.strip())
        except ValueError:
            raise _EvalError(f"For input string: \"{s}\"") from None
    raise _EvalError("incomparable")


def _compare(lv: Any, rv: Any) -> int:
    """``ComparisonExpression.__compare`` with string conversion on: -1/0/1."""
    if type(lv) is not type(rv) and not (_is_number(lv) and _is_number(rv)):
        if isinstance(lv, str) and (_is_number(rv) or isinstance(rv, bool)):
            lv = _convert_string(lv, rv)
        elif isinstance(rv, str) and (_is_number(lv) or isinstance(lv, bool)):
            if isinstance(lv, bool):
                rv = rv.lower() == "true"
            else:
                rv = _convert_string(rv, lv)
        else:
            return -1
    if isinstance(lv, str) and isinstance(rv, str):
        return (lv > rv) - (lv < rv)
    try:
        return (lv > rv) - (lv < rv)
    except TypeError:
        return -1


def _equal_values(lv: Any, rv: Any) -> Any:
    if (lv is None) != (rv is None):
        return None if lv is None else False
    if lv is None or lv == rv and type(lv) is type(rv):
        return True
    return _compare(lv, rv) == 0


class _Equal(Expression):
    """``doCreateEqual``: both sides are evaluated."""
    is_boolean = True

    def __init__(self, left: Expression, right: Expression) -> None:
        self.left, self.right = left, right
        self.depth = _depth(left, right)

    def eval(self, props: Mapping[str, str]) -> Any:
        return _equal_values(self.left.eval(props), self.right.eval(props))

    def steps(self, props: Mapping[str, str]) -> _Steps:
        lv = yield self.left
        rv = yield self.right
        return _equal_values(lv, rv)


def _not_value(v: Any) -> Any:
    if v is None:
        return None
    if not isinstance(v, bool):
        raise _EvalError("not a boolean")
    return not v


class _Not(Expression):
    is_boolean = True

    def __init__(self, expr: Expression) -> None:
        self.expr = expr
        self.depth = _depth(expr)

    def eval(self, props: Mapping[str, str]) -> Any:
        return _not_value(self.expr.eval(props))

    def steps(self, props: Mapping[str, str]) -> _Steps:
        return _not_value((yield self.expr))


def _order_values(lv: Any, rv: Any, test: Callable[[int], bool]) -> Any:
    if isinstance(lv, str) and isinstance(rv, str):
        try:
            lv, rv = float(lv.strip()), float(rv.strip())
        except ValueError:
            raise _EvalError("It's illegal to compare string by '>=', '>', '<', '<='") from None
    return test(_compare(lv, rv))


class _Order(Expression):
    """``>``, ``>=``, ``<``, ``<=``: null on the left is null without evaluating the right."""
    is_boolean = True

    def __init__(self, left: Expression, right: Expression, test: Callable[[int], bool]) -> None:
        for e in (left, right):
            if isinstance(e, _Const) and not _is_number(e.value) or e.is_boolean:
                raise SQLParseError(f"Value '{e!r}' cannot be compared.")
        self.left, self.right, self.test = left, right, test
        self.depth = _depth(left, right)

    def eval(self, props: Mapping[str, str]) -> Any:
        lv = self.left.eval(props)
        if lv is None:
            return None
        rv = self.right.eval(props)
        if rv is None:
            return None
        return _order_values(lv, rv, self.test)

    def steps(self, props: Mapping[str, str]) -> _Steps:
        lv = yield self.left
        if lv is None:
            return None
        rv = yield self.right
        if rv is None:
            return None
        return _order_values(lv, rv, self.test)


def _bool(expr: Expression) -> Expression:
    """``asBooleanExpression``."""
    if expr.is_boolean:
        return expr
    if isinstance(expr, _Prop):
        return _PropAsBool(expr)
    raise SQLParseError(f"Expression will not result in a boolean value: {expr!r}")


class _Chain(Expression):
    """A chain of one associative operator in Java's three-valued logic: the first operand that is
    ``decisive`` ends it with that value, else null if any was null, else ``not decisive``."""
    is_boolean = True
    decisive: bool

    def __init__(self, operands: list[Expression]) -> None:
        self.operands = operands
        self.depth = _depth(*operands)

    def eval(self, props: Mapping[str, str]) -> Any:
        unknown = False
        for op in self.operands:
            v = op.eval(props)
            if v is self.decisive:
                return self.decisive
            if v is None:
                unknown = True
        return None if unknown else not self.decisive

    def steps(self, props: Mapping[str, str]) -> _Steps:
        unknown = False
        for op in self.operands:
            v = yield op
            if v is self.decisive:
                return self.decisive
            if v is None:
                unknown = True
        return None if unknown else not self.decisive


class _And(_Chain):
    """A chain of ``AND``: Java's left-deep ``LogicExpression.createAND`` nodes as one node, which
    gives the same value, evaluating the same operands in the same order: the first FALSE ends it
    (FALSE), else null if any was null, else TRUE."""
    decisive = False


class _Or(_Chain):
    """A chain of ``OR`` (``createOR``): the first TRUE ends it (TRUE), else null if any was
    null, else FALSE."""
    decisive = True


def _chain(cls: type[_And] | type[_Or], operands: list[Expression]) -> Expression:
    """One ``cls`` node of ``operands`` (each made boolean), those that are ``cls`` nodes
    themselves (a parenthesized chain) spliced in: the operator is associative in Java's
    three-valued logic, with the same evaluation order."""
    flat: list[Expression] = []
    for op in operands:
        op = _bool(op)
        if type(op) is cls:
            flat.extend(op.operands)
        else:
            flat.append(op)
    return cls(flat)


class _In(Expression):
    is_boolean = True

    def __init__(self, left: Expression, values: list[str], negate: bool) -> None:
        if not isinstance(left, _Prop):
            raise SQLParseError(f"Expected a property for In expression, got: {left!r}")
        self.name = left.name
        self.choices = set(values)
        self.negate = negate
        self.depth = 2

    def eval(self, props: Mapping[str, str]) -> Any:
        v = props.get(self.name)
        if v is None or not isinstance(v, str):
            return None
        return (v in self.choices) != self.negate


def _negate_value(v: Any) -> Any:
    return -v if _is_number(v) else None


class _Negate(Expression):
    def __init__(self, expr: Expression) -> None:
        self.expr = expr
        self.depth = _depth(expr)

    def eval(self, props: Mapping[str, str]) -> Any:
        return _negate_value(self.expr.eval(props))

    def steps(self, props: Mapping[str, str]) -> _Steps:
        return _negate_value((yield self.expr))


def _negate(expr: Expression) -> Expression:
    if isinstance(expr, _Const) and _is_number(expr.value):
        return _Const(-expr.value)
    return _Negate(expr)


def _ge(c: int) -> bool:
    return c >= 0


def _gt(c: int) -> bool:
    return c > 0


def _le(c: int) -> bool:
    return c <= 0


def _lt(c: int) -> bool:
    return c < 0


_ORDER_TESTS = {">": _gt, ">=": _ge, "<": _lt, "<=": _le}


# ------------------------------------------------------------------------------ parser
#: A grammar function as a generator: it yields the generator of each sub-rule it needs and is
#: sent that rule's result (:func:`_trampoline`).
_Rule = Generator[Any, Any, Expression]


def _trampoline(rule: _Rule) -> Expression:
    """Run ``rule`` and the sub-rules it yields on an explicit stack (:func:`_run_on_stack`), so
    that the nesting of the expression (parentheses, NOT, signs) never nests Python calls."""
    result: Expression = _run_on_stack(rule, lambda sub: (sub, None))
    return result


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.tokens += self.tokens[-1:] * 2  # peek(2) past the end reads eof
        self.i = 0

    def peek(self, ahead: int = 0) -> tuple[str, Any]:
        return self.tokens[self.i + ahead]

    def at(self, kind: str, value: Any = None, ahead: int = 0) -> bool:
        k, v = self.tokens[self.i + ahead]
        return k == kind and (value is None or v == value)

    def take(self, kind: str, value: Any = None) -> Any:
        if not self.at(kind, value):
            k, v = self.peek()
            shown = "<EOF>" if k == "eof" else repr(v)
            raise SQLParseError(f"Encountered {shown} at token {self.i + 1}; expected "
                                f"{value if value is not None else kind}")
        tok = self.tokens[self.i]
        self.i += 1
        return tok[1]

    def parse(self) -> Expression:
        expr = _trampoline(self.or_expr())
        if not self.at("eof"):
            k, v = self.peek()
            raise SQLParseError(f"Encountered {v!r} at token {self.i + 1}; expected end of expression")
        return _bool(expr)

    def or_expr(self) -> _Rule:
        first = yield self.and_expr()
        if not self.at("kw", "OR"):
            return first
        operands = [first]
        while self.at("kw", "OR"):
            self.take("kw")
            operands.append((yield self.and_expr()))
        return _chain(_Or, operands)

    def and_expr(self) -> _Rule:
        first = yield self.equality()
        if not self.at("kw", "AND"):
            return first
        operands = [first]
        while self.at("kw", "AND"):
            self.take("kw")
            operands.append((yield self.equality()))
        return _chain(_And, operands)

    def equality(self) -> _Rule:
        left = yield self.comparison()
        while True:
            if self.at("op", "="):
                self.take("op")
                right = yield self.comparison()
                self._check_equal(left, right)
                left = _Equal(left, right)
            elif self.at("op", "<>"):
                self.take("op")
                right = yield self.comparison()
                self._check_equal(left, right)
                left = _Not(_Equal(left, right))
            elif self.at("kw", "IS") and self.at("kw", "NULL", 1):
                self.i += 2
                left = _Equal(left, _Const(None))
            elif self.at("kw", "IS") and self.at("kw", "NOT", 1) and self.at("kw", "NULL", 2):
                self.i += 3
                left = _Not(_Equal(left, _Const(None)))
            else:
                return left

    @staticmethod
    def _check_equal(left: Expression, right: Expression) -> None:
        for e in (left, right):
            if isinstance(e, _Const) and e.value is None:
                raise SQLParseError(f"'{e!r}' cannot be compared.")
        if isinstance(left, _Const) and isinstance(right, _Const) and left.is_boolean and not right.is_boolean:
            raise SQLParseError(f"'{left!r}' cannot be compared with '{right!r}'")

    def comparison(self) -> _Rule:
        left = yield self.unary()
        while True:
            if self.at("op") and self.peek()[1] in _ORDER_TESTS:
                op = self.take("op")
                right = yield self.unary()
                left = _Order(left, right, _ORDER_TESTS[op])
            elif self.at("kw", "BETWEEN") or (self.at("kw", "NOT") and self.at("kw", "BETWEEN", 1)):
                negate = self.at("kw", "NOT")
                self.i += 2 if negate else 1
                low = yield self.unary()
                self.take("kw", "AND")
                high = yield self.unary()
                if isinstance(low, _Const) and isinstance(high, _Const) and _is_number(low.value) \
                        and _is_number(high.value) and low.value > high.value:
                    raise SQLParseError(f"Illegal values of between, left value({low.value}) must less than "
                                        f"or equal to right value({high.value})")
                if negate:  # createNotBetween
                    left = _Or([_Order(left, low, _lt), _Order(left, high, _gt)])
                else:  # createBetween
                    left = _And([_Order(left, low, _ge), _Order(left, high, _le)])
            elif self.at("kw", "IN") or (self.at("kw", "NOT") and self.at("kw", "IN", 1)):
                negate = self.at("kw", "NOT")
                self.i += 2 if negate else 1
                self.take("op", "(")
                values = [self.take("str")]
                while self.at("op", ","):
                    self.take("op")
                    values.append(self.take("str"))
                self.take("op", ")")
                left = _In(left, values, negate)
            else:
                return left

    def unary(self) -> _Rule:
        # a run of signs and NOTs is a loop here, applied innermost first
        prefixes = []
        while True:
            if self.at("op", "+"):
                self.take("op")
            elif self.at("op", "-") or self.at("kw", "NOT"):
                prefixes.append(self.take(self.peek()[0]))
            else:
                break
        expr = yield self.primary()
        for prefix in reversed(prefixes):
            expr = _negate(expr) if prefix == "-" else _Not(_bool(expr))
        return expr

    def primary(self) -> _Rule:
        kind, value = self.peek()
        if kind in ("num", "str"):
            self.i += 1
            return _Const(value)
        if kind == "kw" and value in ("TRUE", "FALSE"):
            self.i += 1
            return _BoolConst(value == "TRUE")
        if kind == "kw" and value == "NULL":
            self.i += 1
            return _Const(None)
        if kind == "id":
            self.i += 1
            return _Prop(value)
        if self.at("op", "("):
            self.take("op")
            expr = yield self.or_expr()
            self.take("op", ")")
            return expr
        shown = "<EOF>" if kind == "eof" else repr(value)
        raise SQLParseError(f"Encountered {shown} at token {self.i + 1}; expected a literal, a property "
                            f"name or '('")


_cache: dict[str, Expression] = {}


def compile(text: str | None) -> Expression:  # noqa: A001 - mirrors FilterSpi.compile
    if text is None or not text.strip():
        raise SQLParseError("SQL92 expression is empty")
    expr = _cache.get(text)
    if expr is None:
        expr = _Parser(text).parse()
        if len(_cache) > 1000:
            _cache.clear()
        _cache[text] = expr
    return expr


def evaluate(text: str, props: Mapping[str, str]) -> bool:
    return compile(text).matches(props)
