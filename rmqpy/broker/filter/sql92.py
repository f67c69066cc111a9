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

:func:`compile` raises :class:`SQLParseError` for what Java's parser refuses; the message
text becomes the remark of SUBSCRIPTION_PARSE_FAILED.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping

__all__ = ["SQLParseError", "Expression", "compile", "evaluate"]


class SQLParseError(ValueError):
    pass


class _EvalError(Exception):
    """A runtime error (bad number conversion...): the message does not match."""


_TOKEN = re.compile(r"""
    (?P<ws>\s+|--[^\n\r]*(?:\r\n|\n|\r)|/\*.*?\*/)
  | (?P<float>(?:\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+))
  | (?P<int>(?:0|[1-9]\d*)[lL]?)
  | (?P<str>'(?:''|[^'])*')
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|>=|<=|[=<>(),+-])
""", re.X | re.S)

_KEYWORDS = {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"}


def _tokenize(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
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
class Expression:
    is_boolean = False

    def eval(self, props: Mapping[str, str]) -> Any:
        raise NotImplementedError

    def matches(self, props: Mapping[str, str]) -> bool:
        try:
            return self.eval(props) is True
        except _EvalError:
            return False


class _Const(Expression):
    def __init__(self, value: Any) -> None:
        self.value = value
        self.is_boolean = isinstance(value, bool) or value is None and False

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
    is_boolean = True

    def __init__(self, prop: _Prop) -> None:
        self.prop = prop

    def eval(self, props: Mapping[str, str]) -> Any:
        value = self.prop.eval(props)
        if value is None or isinstance(value, bool):
            return value
        raise _EvalError(f"{self.prop} is not a boolean")


class _Func(Expression):
    def __init__(self, fn: Callable[[Mapping[str, str]], Any], boolean: bool = True) -> None:
        self.fn = fn
        self.is_boolean = boolean

    def eval(self, props: Mapping[str, str]) -> Any:
        return self.fn(props)


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


def _equal(left: Expression, right: Expression) -> Expression:
    def fn(props: Mapping[str, str]) -> Any:
        lv = left.eval(props)
        rv = right.eval(props)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None or lv == rv and type(lv) is type(rv):
            return True
        return _compare(lv, rv) == 0
    return _Func(fn)


def _not(expr: Expression) -> Expression:
    def fn(props: Mapping[str, str]) -> Any:
        v = expr.eval(props)
        if v is None:
            return None
        if not isinstance(v, bool):
            raise _EvalError("not a boolean")
        return not v
    return _Func(fn)


def _order(left: Expression, right: Expression, test: Callable[[int], bool]) -> Expression:
    for e in (left, right):
        if isinstance(e, _Const) and not _is_number(e.value) or e.is_boolean:
            raise SQLParseError(f"Value '{e!r}' cannot be compared.")

    def fn(props: Mapping[str, str]) -> Any:
        lv = left.eval(props)
        if lv is None:
            return None
        rv = right.eval(props)
        if rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            try:
                lv, rv = float(lv.strip()), float(rv.strip())
            except ValueError:
                raise _EvalError("It's illegal to compare string by '>=', '>', '<', '<='") from None
        return test(_compare(lv, rv))
    return _Func(fn)


def _bool(expr: Expression) -> Expression:
    """``asBooleanExpression``."""
    if expr.is_boolean:
        return expr
    if isinstance(expr, _Prop):
        return _PropAsBool(expr)
    raise SQLParseError(f"Expression will not result in a boolean value: {expr!r}")


def _and(left: Expression, right: Expression) -> Expression:
    def fn(props: Mapping[str, str]) -> Any:
        lv = left.eval(props)
        if lv is None:
            return None
        if lv is False:
            return False
        rv = right.eval(props)
        return None if rv is None else rv
    return _Func(fn)


def _or(left: Expression, right: Expression) -> Expression:
    def fn(props: Mapping[str, str]) -> Any:
        lv = left.eval(props)
        if lv is True:
            return True
        rv = right.eval(props)
        return None if rv is None else rv
    return _Func(fn)


def _in(left: Expression, values: list[str], negate: bool) -> Expression:
    if not isinstance(left, _Prop):
        raise SQLParseError(f"Expected a property for In expression, got: {left!r}")
    choices = set(values)

    def fn(props: Mapping[str, str]) -> Any:
        v = left.eval(props)
        if v is None or not isinstance(v, str):
            return None
        return (v in choices) != negate
    return _Func(fn)


def _negate(expr: Expression) -> Expression:
    if isinstance(expr, _Const) and _is_number(expr.value):
        return _Const(-expr.value)

    def fn(props: Mapping[str, str]) -> Any:
        v = expr.eval(props)
        return -v if _is_number(v) else None
    return _Func(fn, boolean=False)


# ------------------------------------------------------------------------------ parser
class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.i = 0

    def peek(self, ahead: int = 0) -> tuple[str, Any]:
        return self.tokens[min(self.i + ahead, len(self.tokens) - 1)]

    def at(self, kind: str, value: Any = None, ahead: int = 0) -> bool:
        k, v = self.peek(ahead)
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
        expr = self.or_expr()
        if not self.at("eof"):
            k, v = self.peek()
            raise SQLParseError(f"Encountered {v!r} at token {self.i + 1}; expected end of expression")
        return _bool(expr)

    def or_expr(self) -> Expression:
        left = self.and_expr()
        while self.at("kw", "OR"):
            self.take("kw")
            left = _or(_bool(left), _bool(self.and_expr()))
        return left

    def and_expr(self) -> Expression:
        left = self.equality()
        while self.at("kw", "AND"):
            self.take("kw")
            left = _and(_bool(left), _bool(self.equality()))
        return left

    def equality(self) -> Expression:
        left = self.comparison()
        while True:
            if self.at("op", "="):
                self.take("op")
                right = self.comparison()
                self._check_equal(left, right)
                left = _equal(left, right)
            elif self.at("op", "<>"):
                self.take("op")
                right = self.comparison()
                self._check_equal(left, right)
                left = _not(_equal(left, right))
            elif self.at("kw", "IS") and self.at("kw", "NULL", 1):
                self.i += 2
                left = _equal(left, _Const(None))
            elif self.at("kw", "IS") and self.at("kw", "NOT", 1) and self.at("kw", "NULL", 2):
                self.i += 3
                left = _not(_equal(left, _Const(None)))
            else:
                return left

    @staticmethod
    def _check_equal(left: Expression, right: Expression) -> None:
        for e in (left, right):
            if isinstance(e, _Const) and e.value is None:
                raise SQLParseError(f"'{e!r}' cannot be compared.")
        if isinstance(left, _Const) and isinstance(right, _Const) and left.is_boolean and not right.is_boolean:
            raise SQLParseError(f"'{left!r}' cannot be compared with '{right!r}'")

    def comparison(self) -> Expression:
        left = self.unary()
        while True:
            if self.at("op") and self.peek()[1] in (">", ">=", "<", "<="):
                op = self.take("op")
                right = self.unary()
                test = {">": lambda c: c > 0, ">=": lambda c: c >= 0,
                        "<": lambda c: c < 0, "<=": lambda c: c <= 0}[op]
                left = _order(left, right, test)
            elif self.at("kw", "BETWEEN") or (self.at("kw", "NOT") and self.at("kw", "BETWEEN", 1)):
                negate = self.at("kw", "NOT")
                self.i += 2 if negate else 1
                low = self.unary()
                self.take("kw", "AND")
                high = self.unary()
                if isinstance(low, _Const) and isinstance(high, _Const) and _is_number(low.value) \
                        and _is_number(high.value) and low.value > high.value:
                    raise SQLParseError(f"Illegal values of between, left value({low.value}) must less than "
                                        f"or equal to right value({high.value})")
                expr = _and(_order(left, low, lambda c: c >= 0), _order(left, high, lambda c: c <= 0))
                left = _not(expr) if negate else expr
            elif self.at("kw", "IN") or (self.at("kw", "NOT") and self.at("kw", "IN", 1)):
                negate = self.at("kw", "NOT")
                self.i += 2 if negate else 1
                self.take("op", "(")
                values = [self.take("str")]
                while self.at("op", ","):
                    self.take("op")
                    values.append(self.take("str"))
                self.take("op", ")")
                left = _in(left, values, negate)
            else:
                return left

    def unary(self) -> Expression:
        if self.at("op", "+"):
            self.take("op")
            return self.unary()
        if self.at("op", "-"):
            self.take("op")
            return _negate(self.unary())
        if self.at("kw", "NOT"):
            self.take("kw")
            return _not(_bool(self.unary()))
        return self.primary()

    def primary(self) -> Expression:
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
            expr = self.or_expr()
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
