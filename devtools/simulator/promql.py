"""A small PromQL evaluator: the subset gpufinops' collector sends, with Prometheus 2.x semantics.

Supported (anything else raises ``PromQLError``, never a guess):

* instant vector selectors ``metric{label="v", label!="v", label=~"re", label!~"re"}``, also
  ``{__name__=~"a|b"}``; a selector needs one matcher that does not match the empty string. An instant
  selector at t reads each series' latest sample in [t - 5m, t] (the lookback delta);
* range selectors ``selector[R]`` (R in ``ms``, ``s``, ``m``, ``h``, ``d``, ``w``, ``y``, also compound such as
  ``1h30m``) reading the samples in [t - R, t], both ends included (Prometheus 2.x);
* subqueries ``expr[R:S]`` (``[R:]`` is not supported): ``expr`` evaluated at the multiples of S in [t - R, t];
* ``avg_over_time``, ``max_over_time``, ``min_over_time``, ``count_over_time``, ``sum_over_time``,
  ``last_over_time`` over a range selector or subquery; ``timestamp(v)`` (of a selector: the samples' own
  timestamps); every function but ``last_over_time`` drops the metric name;
* aggregations ``sum``, ``min``, ``max``, ``avg``, ``count`` with ``by (...)`` or ``without (...)``, before or
  after the argument;
* ``a or b`` between instant vectors (matching on all labels but the metric name);
* comparisons ``== != > < >= <=`` between an instant vector and a scalar, as filters (no ``bool``);
* arithmetic ``+ - * / %`` between scalars, between a vector and a scalar, and between two instant vectors
  matched one-to-one on all labels but the metric name (no ``on``/``ignoring``/``group_*``; a match group
  with several series on one side is an execution error, as in Prometheus); every arithmetic result drops
  the metric name; unary minus; division by zero gives +Inf/-Inf/NaN (Go float semantics);
* number literals, parentheses.

Times are integer milliseconds. Samples come from a ``Storage`` (``ListStorage`` here; the simulator's
``prometheus_api.SimulatedTSDB`` computes them from a scenario). Range samples are handed over as *runs*
``(first_ms, last_ms, count, value)``: ``count`` samples of one value, evenly spaced from first to last.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

LOOKBACK_MS = 5 * 60 * 1000


class PromQLError(ValueError):
    """A query outside the supported subset, or invalid PromQL."""


# ------------------------------------------------------------------------------------------ lexer
_DURATION = re.compile(r"(?:\d+(?:ms|s|m|h|d|w|y))+")
_DURATION_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000,
            "y": 31_536_000_000}
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_OPERATORS = ("=~", "!~", "!=", "==", ">=", "<=", "=", ">", "<", "+", "-", "*", "/", "%", "^",
              "(", ")", "{", "}", "[", "]", ",", ":", "@")
_STRING_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
                   '"': '"', "'": "'"}


@dataclass(frozen=True)
class Token:
    kind: str  # ident, number, duration, string, op, eof
    text: str
    pos: int
    value: object = None


def _unquote(body: str, quote: str, pos: int) -> str:
    if quote == "`":
        return body
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        i += 1
        if i >= len(body):
            raise PromQLError(f"unterminated escape in string at {pos}")
        c = body[i]
        if c in _STRING_ESCAPES:
            out.append(_STRING_ESCAPES[c])
            i += 1
        elif c in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[c]
            digits = body[i + 1 : i + 1 + width]
            if len(digits) != width or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise PromQLError(f"invalid escape \\{c} in string at {pos}")
            out.append(chr(int(digits, 16)))
            i += 1 + width
        elif c in "01234567":
            digits = body[i : i + 3]
            if len(digits) != 3 or not all(d in "01234567" for d in digits):
                raise PromQLError(f"invalid octal escape in string at {pos}")
            out.append(chr(int(digits, 8)))
            i += 3
        else:
            raise PromQLError(f"unknown escape sequence \\{c} in string at {pos}")
    return "".join(out)


def tokenize(query: str) -> list[Token]:
    tokens, i, n, brackets = [], 0, len(query), 0
    while i < n:
        c = query[i]
        if c.isspace():
            i += 1
            continue
        if c == "#":  # comment to the end of the line
            while i < n and query[i] != "\n":
                i += 1
            continue
        if c in "\"'`":
            j = i + 1
            while j < n and query[j] != c:
                j += 2 if query[j] == "\\" and c != "`" else 1
            if j >= n:
                raise PromQLError(f"unterminated string starting at {i}")
            tokens.append(Token("string", query[i : j + 1], i, _unquote(query[i + 1 : j], c, i)))
            i = j + 1
            continue
        if c.isdigit() or (c == "." and i + 1 < n and query[i + 1].isdigit()):
            m = _DURATION.match(query, i)
            if m and not (m.end() < n and (query[m.end()].isalnum() or query[m.end()] in "_.")):
                ms = sum(int(v) * _UNIT_MS[u] for v, u in _DURATION_PART.findall(m.group()))
                tokens.append(Token("duration", m.group(), i, ms))
                i = m.end()
                continue
            m = _NUMBER.match(query, i)
            text = m.group()
            value = float(int(text, 16)) if text[:2] in ("0x", "0X") else float(text)
            tokens.append(Token("number", text, i, value))
            i = m.end()
            continue
        m = None if c == ":" and brackets else _IDENT.match(query, i)  # [range:step]
        if m:
            tokens.append(Token("ident", m.group(), i))
            i = m.end()
            continue
        for op in _OPERATORS:
            if query.startswith(op, i):
                brackets += {"[": 1, "]": -1}.get(op, 0)
                tokens.append(Token("op", op, i))
                i += len(op)
                break
        else:
            raise PromQLError(f"unexpected character {c!r} at {i}")
    tokens.append(Token("eof", "", n))
    return tokens


# ------------------------------------------------------------------------------------------ syntax tree
@dataclass(frozen=True)
class Matcher:
    name: str
    op: str  # = != =~ !~
    value: str

    def matches(self, value: str) -> bool:
        if self.op == "=":
            return value == self.value
        if self.op == "!=":
            return value != self.value
        hit = _regex(self.value).fullmatch(value) is not None
        return hit if self.op == "=~" else not hit


@lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise PromQLError(f"invalid regular expression {pattern!r}: {exc}") from exc


@dataclass(frozen=True)
class NumberLiteral:
    value: float


@dataclass(frozen=True)
class VectorSelector:
    matchers: tuple[Matcher, ...]


@dataclass(frozen=True)
class MatrixSelector:
    selector: VectorSelector
    range_ms: int


@dataclass(frozen=True)
class Subquery:
    expr: object
    range_ms: int
    step_ms: int


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple


@dataclass(frozen=True)
class Aggregate:
    op: str
    expr: object
    grouping: tuple[str, ...]
    without: bool


@dataclass(frozen=True)
class Binary:
    op: str
    lhs: object
    rhs: object


@dataclass(frozen=True)
class Unary:
    op: str
    expr: object


RANGE_FUNCTIONS = ("avg_over_time", "max_over_time", "min_over_time", "count_over_time", "sum_over_time",
                   "last_over_time")
AGGREGATIONS = ("sum", "min", "max", "avg", "count")
UNSUPPORTED_AGGREGATIONS = ("group", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values")
COMPARISONS = ("==", "!=", ">", "<", ">=", "<=")
ARITHMETIC = ("+", "-", "*", "/", "%", "^")
KEYWORDS = ("by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
            "unless", "atan2")


class _Parser:
    def __init__(self, query: str):
        self.query = query
        self.tokens = tokenize(query)
        self.i = 0

    def peek(self, k: int = 0) -> Token:
        return self.tokens[min(self.i + k, len(self.tokens) - 1)]

    def next(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def error(self, message: str, tok: Token | None = None) -> PromQLError:
        tok = tok or self.peek()
        return PromQLError(f"{message} at position {tok.pos} ({tok.text or 'end of query'!r})")

    def expect(self, kind: str, text: str | None = None) -> Token:
        tok = self.peek()
        if tok.kind != kind or (text is not None and tok.text != text):
            raise self.error(f"expected {text or kind}")
        return self.next()

    def is_op(self, *texts: str) -> bool:
        tok = self.peek()
        return tok.kind == "op" and tok.text in texts

    def is_word(self, *words: str) -> bool:
        tok = self.peek()
        return tok.kind == "ident" and tok.text in words

    # expr := or_expr
    def parse(self):
        expr = self.parse_or()
        if self.peek().kind != "eof":
            raise self.error("unexpected token")
        return expr

    def parse_or(self):
        lhs = self.parse_and()
        while self.is_word("or"):
            self.next()
            self._refuse_vector_matching()
            lhs = Binary("or", lhs, self.parse_and())
        return lhs

    def parse_and(self):
        """`and` and `unless` bind tighter than `or`, looser than comparisons (Prometheus' precedence)."""
        lhs = self.parse_comparison()
        while self.is_word("and", "unless"):
            op = self.next().text
            self._refuse_vector_matching()
            lhs = Binary(op, lhs, self.parse_comparison())
        return lhs

    def parse_comparison(self):
        lhs = self.parse_additive()
        while True:
            if self.is_op(*COMPARISONS):
                op = self.next().text
                if self.is_word("bool"):
                    raise self.error("the bool modifier is not supported")
                self._refuse_vector_matching()
                lhs = Binary(op, lhs, self.parse_additive())
            else:
                return lhs

    def parse_additive(self):
        lhs = self.parse_multiplicative()
        while self.is_op("+", "-"):
            lhs = self._arithmetic(lhs, self.parse_multiplicative)
        return lhs

    def parse_multiplicative(self):
        lhs = self.parse_unary()
        while True:
            if self.is_op("*", "/", "%"):
                lhs = self._arithmetic(lhs, self.parse_unary)
            elif self.is_op("^") or self.is_word("atan2"):
                raise self.error(f"arithmetic operator {self.peek().text!r} is not supported")
            else:
                return lhs

    def _arithmetic(self, lhs, operand):
        tok = self.next()
        self._refuse_vector_matching()
        rhs = operand()
        for side in (lhs, rhs):
            if isinstance(side, (MatrixSelector, Subquery)):
                raise self.error("binary expression must contain only scalar and instant vector types", tok)
        return Binary(tok.text, lhs, rhs)

    def _refuse_vector_matching(self) -> None:
        if self.is_word("on", "ignoring", "group_left", "group_right"):
            raise self.error(f"vector matching ({self.peek().text}) is not supported")

    def parse_unary(self):
        if self.is_op("-", "+"):
            sign = -1.0 if self.next().text == "-" else 1.0
            tok = self.peek()
            if tok.kind == "number":
                self.next()
                return self.parse_postfix(NumberLiteral(sign * tok.value))
            if tok.kind == "ident" and tok.text.lower() in ("inf", "nan"):
                self.next()
                return NumberLiteral(sign * float(tok.text))
            operand = self.parse_unary()
            if isinstance(operand, (MatrixSelector, Subquery)):
                raise self.error("unary expression only allowed on expressions of type scalar or instant vector")
            return operand if sign > 0 else Unary("-", operand)
        return self.parse_postfix(self.parse_primary())

    def parse_postfix(self, expr):
        while self.is_op("["):
            open_tok = self.next()
            rng = self.expect("duration").value
            if self.is_op(":"):
                self.next()
                if not self.peek().kind == "duration":
                    raise self.error("subqueries need an explicit step ([range:step])")
                step = self.next().value
                self.expect("op", "]")
                if step <= 0:
                    raise self.error("subquery step must be positive", open_tok)
                self._check_instant(expr, "subquery")
                expr = Subquery(expr, rng, step)
            else:
                self.expect("op", "]")
                if not isinstance(expr, VectorSelector):
                    raise self.error("ranges are only allowed on vector selectors", open_tok)
                if rng <= 0:
                    raise self.error("range must be positive", open_tok)
                expr = MatrixSelector(expr, rng)
        if self.is_word("offset") or self.is_op("@"):
            raise self.error(f"the {self.peek().text!r} modifier is not supported")
        return expr

    def parse_primary(self):
        tok = self.peek()
        if tok.kind == "number":
            self.next()
            return NumberLiteral(tok.value)
        if tok.kind == "string":
            raise self.error("string literals are not supported here")
        if self.is_op("("):
            self.next()
            expr = self.parse_or()
            self.expect("op", ")")
            if self.is_op("[") and self.peek(2).kind == "op" and self.peek(2).text == "]":
                raise self.error("ranges are only allowed on vector selectors")  # (x)[5m]; (x)[5m:1m] is fine
            return expr
        if self.is_op("{"):
            return self.parse_selector(None)
        if tok.kind == "ident":
            name = tok.text
            if name.lower() in ("inf", "nan"):
                self.next()
                return NumberLiteral(float(name))
            if name in AGGREGATIONS or name in UNSUPPORTED_AGGREGATIONS:
                if name in UNSUPPORTED_AGGREGATIONS:
                    raise self.error(f"aggregation {name!r} is not supported")
                return self.parse_aggregation()
            if self.peek(1).kind == "op" and self.peek(1).text == "(":
                return self.parse_call()
            if name in KEYWORDS:
                raise self.error(f"unexpected keyword {name!r}")
            self.next()
            return self.parse_selector(name)
        raise self.error("unexpected token")

    def parse_selector(self, name: str | None) -> VectorSelector:
        matchers = [] if name is None else [Matcher("__name__", "=", name)]
        if self.is_op("{"):
            self.next()
            while not self.is_op("}"):
                label = self.expect("ident").text
                if not self.is_op("=", "!=", "=~", "!~"):
                    raise self.error("expected a label matching operator")
                op = self.next().text
                value = self.expect("string").value
                if op in ("=~", "!~"):
                    _regex(value)
                if label == "__name__" and name is not None:
                    raise self.error("metric name given twice")
                matchers.append(Matcher(label, op, value))
                if self.is_op(","):
                    self.next()
                elif not self.is_op("}"):
                    raise self.error("expected ',' or '}'")
            self.next()
        if not any(not m.matches("") for m in matchers):
            raise self.error("vector selector must contain at least one non-empty matcher")
        return VectorSelector(tuple(matchers))

    def parse_grouping(self) -> tuple[bool, tuple[str, ...]]:
        without = self.next().text == "without"
        self.expect("op", "(")
        labels = []
        while not self.is_op(")"):
            labels.append(self.expect("ident").text)
            if self.is_op(","):
                self.next()
            elif not self.is_op(")"):
                raise self.error("expected ',' or ')'")
        self.next()
        return without, tuple(labels)

    def parse_aggregation(self) -> Aggregate:
        op = self.next().text
        grouping: tuple[bool, tuple[str, ...]] | None = None
        if self.is_word("by", "without"):
            grouping = self.parse_grouping()
        self.expect("op", "(")
        expr = self.parse_or()
        if self.is_op(","):
            raise self.error(f"{op} takes one argument")
        self.expect("op", ")")
        if self.is_word("by", "without"):
            if grouping is not None:
                raise self.error("grouping given twice")
            grouping = self.parse_grouping()
        self._check_instant(expr, f"aggregation {op}")
        without, labels = grouping or (False, ())
        return Aggregate(op, expr, labels, without)

    def parse_call(self) -> Call:
        tok = self.next()
        name = tok.text
        if name not in RANGE_FUNCTIONS and name != "timestamp":
            raise self.error(f"function {name!r} is not supported", tok)
        self.expect("op", "(")
        args = []
        while not self.is_op(")"):
            args.append(self.parse_or())
            if self.is_op(","):
                self.next()
            elif not self.is_op(")"):
                raise self.error("expected ',' or ')'")
        self.next()
        if len(args) != 1:
            raise self.error(f"{name} takes exactly one argument", tok)
        if name in RANGE_FUNCTIONS and not isinstance(args[0], (MatrixSelector, Subquery)):
            raise self.error(f"expected a range vector in call to {name}", tok)
        if name == "timestamp":
            self._check_instant(args[0], name)
        return Call(name, tuple(args))

    def _check_instant(self, expr, where: str) -> None:
        if isinstance(expr, (MatrixSelector, Subquery)):
            raise self.error(f"expected an instant vector in {where}, got a range vector")
        if isinstance(expr, NumberLiteral):
            raise self.error(f"expected an instant vector in {where}, got a scalar")


@lru_cache(maxsize=512)
def parse(query: str):
    """The syntax tree of ``query``; ``PromQLError`` when it is invalid or outside the supported subset."""
    return _Parser(query).parse()


# ------------------------------------------------------------------------------------------ storage
Labels = dict  # label name -> value, with "__name__"; empty values are absent labels
Key = tuple  # the canonical identity of a label set: tuple(sorted(labels.items()))
Run = tuple  # (first_ms, last_ms, count, value)


def label_key(labels: Labels) -> Key:
    return tuple(sorted(labels.items()))


class Storage(Protocol):
    def select_range(self, matchers: tuple[Matcher, ...], mint: int, maxt: int) -> Iterable[tuple[Key, Labels, list]]:
        """Every series matching ``matchers`` with samples in [mint, maxt]: (key, labels, runs in time order)."""

    def select_instant(
        self, matchers: tuple[Matcher, ...], t: int, lookback: int
    ) -> Iterable[tuple[Key, Labels, int, float]]:
        """Every series matching ``matchers`` with a sample in [t - lookback, t]: (key, labels, time of the
        latest such sample, its value)."""


def matches(matchers: Iterable[Matcher], labels: Labels) -> bool:
    return all(m.matches(labels.get(m.name, "")) for m in matchers)


class ListStorage:
    """Samples held in lists, the reference implementation: ``add(labels, t_ms, value)``."""

    def __init__(self) -> None:
        self.series: dict[Key, tuple[Labels, list[int], list[float]]] = {}

    def add(self, labels: Labels, t: int, value: float) -> None:
        labels = {k: v for k, v in labels.items() if v != ""}
        _labels, times, values = self.series.setdefault(label_key(labels), (labels, [], []))
        i = bisect_right(times, t)
        if i and times[i - 1] == t:
            values[i - 1] = value
        else:
            times.insert(i, t)
            values.insert(i, value)

    def select_range(self, matchers, mint, maxt):
        for key, (labels, times, values) in self.series.items():
            if matches(matchers, labels):
                lo, hi = bisect_left(times, mint), bisect_right(times, maxt)
                if lo < hi:
                    yield key, labels, [(times[i], times[i], 1, values[i]) for i in range(lo, hi)]

    def select_instant(self, matchers, t, lookback):
        for key, (labels, times, values) in self.series.items():
            if matches(matchers, labels):
                i = bisect_right(times, t) - 1
                if i >= 0 and times[i] >= t - lookback:
                    yield key, labels, times[i], values[i]


# ------------------------------------------------------------------------------------------ evaluation
class PromQLExecutionError(PromQLError):
    """A valid query that Prometheus refuses while evaluating it (answered 422, errorType "execution")."""


@dataclass
class Sample:
    key: Key
    labels: Labels
    value: float


class Evaluator:
    """Evaluates parsed queries over a ``Storage`` at instants (ms)."""

    def __init__(self, storage: Storage, lookback_ms: int = LOOKBACK_MS):
        self.storage = storage
        self.lookback = lookback_ms
        self._unnamed: dict[Key, tuple[Key, Labels]] = {}

    def query(self, query: str, t: int) -> tuple[str, object]:
        """("vector", [Sample]) or ("scalar", float) for an instant query at ``t`` ms."""
        result = self.eval(parse(query), t)
        if isinstance(result, float):
            return "scalar", result
        return "vector", result

    def eval(self, node, t: int):
        if isinstance(node, NumberLiteral):
            return node.value
        if isinstance(node, VectorSelector):
            return [Sample(key, labels, v)
                    for key, labels, _ts, v in self.storage.select_instant(node.matchers, t, self.lookback)]
        if isinstance(node, Call):
            return self._call(node, t)
        if isinstance(node, Aggregate):
            return self._aggregate(node, self._vector(node.expr, t))
        if isinstance(node, Binary):
            return self._binary(node, t)
        if isinstance(node, Unary):
            value = self.eval(node.expr, t)
            if isinstance(value, float):
                return -value
            return [Sample(*self.drop_name(s.key, s.labels), -s.value) for s in value]
        raise PromQLError(f"cannot evaluate {type(node).__name__} as an instant query")

    def drop_name(self, key: Key, labels: Labels) -> tuple[Key, Labels]:
        if "__name__" not in labels:
            return key, labels
        hit = self._unnamed.get(key)
        if hit is None:
            if len(self._unnamed) > 100_000:
                self._unnamed.clear()
            hit = self._unnamed[key] = (
                tuple(kv for kv in key if kv[0] != "__name__"),
                {k: v for k, v in labels.items() if k != "__name__"},
            )
        return hit

    # ---- functions
    def _call(self, node: Call, t: int) -> list[Sample]:
        arg = node.args[0]
        if node.func == "timestamp":
            if isinstance(arg, VectorSelector):
                rows = self.storage.select_instant(arg.matchers, t, self.lookback)
                out = [Sample(*self.drop_name(key, labels), ts / 1000.0) for key, labels, ts, _v in rows]
            else:
                out = [Sample(*self.drop_name(s.key, s.labels), t / 1000.0) for s in self._vector(arg, t)]
        else:
            fn = _RANGE_FN[node.func]
            if node.func == "last_over_time":  # keeps the metric name
                out = [Sample(key, labels, fn(runs)) for key, labels, runs in self._range(arg, t)]
            else:
                out = [Sample(*self.drop_name(key, labels), fn(runs)) for key, labels, runs in self._range(arg, t)]
        if len({s.key for s in out}) != len(out):
            raise PromQLExecutionError("vector cannot contain metrics with the same labelset")
        return out

    def _range(self, node, t: int) -> Iterable[tuple[Key, Labels, list]]:
        if isinstance(node, MatrixSelector):
            return self.storage.select_range(node.selector.matchers, t - node.range_ms, t)
        # Subquery: the inner expression at every multiple of the step in [t - range, t].
        step = node.step_ms
        start = (t - node.range_ms) // step * step
        if start < t - node.range_ms:
            start += step
        steps = range(start, t + 1, step)
        return [(key, labels, [(ts, ts, 1, v) for ts, v in points])
                for key, labels, points in self._over_steps(node.expr, steps)]

    def _over_steps(self, node, steps: range) -> Iterable[tuple[Key, Labels, list]]:
        """An instant-vector expression at each of ``steps``: (key, labels, [(step, value), ...]) per series.

        A selector (bare or inside ``timestamp``) reads its series once for all steps; anything else is
        evaluated step by step."""
        selector = node.args[0] if isinstance(node, Call) and node.func == "timestamp" else node
        if isinstance(selector, VectorSelector) and len(steps):
            stamp = selector is not node
            for key, labels, points in self._selector_over_steps(selector, steps):
                if stamp:
                    key, labels = self.drop_name(key, labels)
                    points = [(s, ts / 1000.0) for s, ts, _v in points]
                else:
                    points = [(s, v) for s, _ts, v in points]
                yield key, labels, points
            return
        series: dict[Key, tuple[Key, Labels, list]] = {}
        for ts in steps:
            for s in self._vector(node, ts):
                entry = series.get(s.key)
                if entry is None:
                    series[s.key] = (s.key, s.labels, [(ts, s.value)])
                else:
                    entry[2].append((ts, s.value))
        yield from series.values()

    def _selector_over_steps(self, selector: VectorSelector, steps: range):
        """Each series' latest sample within the lookback of every step: (key, labels, [(step, ts, value)])."""
        rows = self.storage.select_range(selector.matchers, steps[0] - self.lookback, steps[-1])
        first_step, step = steps[0], steps.step
        for key, labels, runs in rows:
            points = []
            for i, (first, last, count, value) in enumerate(runs):
                # Steps whose latest sample is in this run: from its first sample until the next run starts,
                # or until the lookback has passed its last sample.
                until = runs[i + 1][0] - 1 if i + 1 < len(runs) else last + self.lookback
                lo = max(0, -(-(first - first_step) // step))
                hi = min(len(steps) - 1, (min(until, steps[-1]) - first_step) // step)
                if hi < lo:
                    continue
                spacing = (last - first) // (count - 1) if count > 1 else 1
                for s in steps[lo : hi + 1]:
                    ts = last if s >= last else first + (s - first) // spacing * spacing
                    if ts >= s - self.lookback:
                        points.append((s, ts, value))
            if points:
                yield key, labels, points

    def _vector(self, node, t: int) -> list[Sample]:
        value = self.eval(node, t)
        if isinstance(value, float):
            raise PromQLError("expected an instant vector, got a scalar")
        return value

    # ---- aggregation
    def _aggregate(self, node: Aggregate, samples: list[Sample]) -> list[Sample]:
        groups: dict[Key, list] = {}
        for s in samples:
            if node.without:
                labels = {k: v for k, v in s.labels.items() if k not in node.grouping and k != "__name__"}
            else:
                labels = {k: s.labels[k] for k in node.grouping if s.labels.get(k, "") != ""}
            key = label_key(labels)
            group = groups.get(key)
            if group is None:
                groups[key] = [labels, s.value, 1]
                continue
            group[2] += 1
            if node.op == "sum":
                group[1] += s.value
            elif node.op == "avg":  # Prometheus 2.x: incremental mean
                group[1] += s.value / group[2] - group[1] / group[2]
            elif node.op == "max":
                if group[1] < s.value or math.isnan(group[1]):
                    group[1] = s.value
            elif node.op == "min" and (group[1] > s.value or math.isnan(group[1])):
                group[1] = s.value
        if node.op == "count":
            return [Sample(key, labels, float(n)) for key, (labels, _v, n) in groups.items()]
        return [Sample(key, labels, value) for key, (labels, value, _n) in groups.items()]

    # ---- binary operators
    def _binary(self, node: Binary, t: int):
        lhs, rhs = self.eval(node.lhs, t), self.eval(node.rhs, t)
        if node.op in _ARITHMETIC:
            return self._arithmetic(node.op, lhs, rhs)
        if node.op == "or":
            if isinstance(lhs, float) or isinstance(rhs, float):
                raise PromQLError("'or' is only defined between instant vectors")
            seen = {self.drop_name(s.key, s.labels)[0] for s in lhs}
            return lhs + [s for s in rhs if self.drop_name(s.key, s.labels)[0] not in seen]
        if node.op in ("and", "unless"):  # the left side's samples (names kept) with / without a match on the right
            if isinstance(lhs, float) or isinstance(rhs, float):
                raise PromQLError(f"set operator {node.op!r} not allowed in binary scalar expression")
            right = {self.drop_name(s.key, s.labels)[0] for s in rhs}
            keep = node.op == "and"
            return [s for s in lhs if (self.drop_name(s.key, s.labels)[0] in right) == keep]
        compare = _COMPARE[node.op]
        if isinstance(lhs, float) and isinstance(rhs, float):
            raise PromQLError("comparisons between scalars must use the bool modifier (not supported)")
        if isinstance(rhs, float):
            return [s for s in lhs if compare(s.value, rhs)]
        if isinstance(lhs, float):
            return [s for s in rhs if compare(lhs, s.value)]
        raise PromQLError("comparisons between two instant vectors are not supported")


    def _arithmetic(self, op: str, lhs, rhs):
        fn = _ARITHMETIC[op]
        if isinstance(lhs, float) and isinstance(rhs, float):
            return fn(lhs, rhs)
        if isinstance(rhs, float):
            return [Sample(*self.drop_name(s.key, s.labels), fn(s.value, rhs)) for s in lhs]
        if isinstance(lhs, float):
            return [Sample(*self.drop_name(s.key, s.labels), fn(lhs, s.value)) for s in rhs]
        # One-to-one on every label but the metric name (Prometheus' VectorBinop without on/ignoring).
        right: dict = {}
        for s in rhs:
            sig = self.drop_name(s.key, s.labels)[0]
            if sig in right:
                raise PromQLExecutionError(
                    f"found duplicate series for the match group {dict(sig)} on the right hand-side of the "
                    "operation;many-to-many matching not allowed: matching labels must be unique on one side")
            right[sig] = s
        out, matched = [], set()
        for s in lhs:
            key, labels = self.drop_name(s.key, s.labels)
            other = right.get(key)
            if other is None:
                continue
            if key in matched:
                raise PromQLExecutionError("multiple matches for labels: many-to-one matching must be explicit "
                                           "(group_left/group_right)")
            matched.add(key)
            out.append(Sample(key, labels, fn(s.value, other.value)))
        return out


def _divide(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _modulo(a: float, b: float) -> float:
    """Go's math.Mod: the sign of the dividend; NaN for a zero divisor or an infinite dividend."""
    if b == 0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
        return math.nan
    return math.fmod(a, b)


_ARITHMETIC = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _divide,
    "%": _modulo,
}


def _avg(runs: list) -> float:
    return sum(r[2] * r[3] for r in runs) / sum(r[2] for r in runs)


def _max(runs: list) -> float:
    best = runs[0][3]
    for r in runs:
        if r[3] > best or math.isnan(best):
            best = r[3]
    return best


def _min(runs: list) -> float:
    best = runs[0][3]
    for r in runs:
        if r[3] < best or math.isnan(best):
            best = r[3]
    return best


_RANGE_FN = {
    "avg_over_time": _avg,
    "max_over_time": _max,
    "min_over_time": _min,
    "count_over_time": lambda runs: float(sum(r[2] for r in runs)),
    "sum_over_time": lambda runs: float(sum(r[2] * r[3] for r in runs)),
    "last_over_time": lambda runs: runs[-1][3],
}
_COMPARE = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
}


def format_value(v: float) -> str:
    """A sample value as Prometheus' JSON writes it (Go's strconv.FormatFloat(v, 'f', -1, 64))."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == int(v) and abs(v) < 1e21:
        return str(int(v))
    text = repr(v)
    if "e" in text or "E" in text:
        from decimal import Decimal

        text = format(Decimal(text), "f")
    return text
