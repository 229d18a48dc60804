"""Symbolic integers for the all-P tracer: expression trees over the world size `N`,
the rank and loop indices, and the Python-facing `Sym` that user code computes with.

Expressions are plain frozen data (no z3 here: `solver` translates them). `Sym`
behaves like a device integer (`%` and `//` truncate toward zero); comparing two
`Sym`s gives a `SymBool` whose truth value is decided by the tracer, which follows
both sides of a branch on separate runs. Any use that needs a concrete integer
(`range(sym)`, indexing a Python list, hashing) leaves the symbolic fragment, and
so does text made of one (`str(n) == "12"` would be false on every path) except in a
`raise` statement or an `assert` message, or racecheck's own.
"""

from __future__ import annotations

import ast
import functools
import linecache
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Protocol, TypeVar, dataclass_transform

from racecheck.allp.reasons import needs_concrete
from racecheck.dsl.scalars import truncating_div, truncating_mod
from racecheck.events import INT32_MAX, INT32_MIN
from racecheck.report.reasons import ReasonCode, reason

WORLD = "N"


class Opaque:
    """A value whose contents the tracer does not follow (a tile's data)."""

    __slots__ = ()


class OutsideFragment(Exception):
    """The program does something the symbolic tracer does not model: no all-P proof."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_T = TypeVar("_T")


@dataclass_transform(frozen_default=True)
def _node(cls: type[_T]) -> type[_T]:
    """A frozen tree node whose hash is computed once: the solver's term cache and the
    obligations' dictionaries hash whole trees, which recomputed would cost the
    square of their size."""
    cls.__annotations__["_hash"] = "int"
    cls._hash = field(init=False, repr=False, compare=False, default=0)  # type: ignore[attr-defined]

    def post_init(self: Any) -> None:
        values = tuple(getattr(self, f) for f in self.__dataclass_fields__ if f != "_hash")
        object.__setattr__(self, "_hash", hash((cls.__name__, *values)))

    def cached(self: Any) -> int:
        return self._hash  # type: ignore[no-any-return]

    cls.__post_init__ = post_init  # type: ignore[attr-defined]
    cls.__hash__ = cached  # type: ignore[assignment,method-assign]
    return dataclass(frozen=True, slots=True)(cls)


class Op(Enum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    TDIV = "//"  # truncating, as on the device
    TMOD = "%"
    MIN = "min"  # pl.min / pl.max of two scalars: no branch, exact in z3
    MAX = "max"


class Rel(Enum):
    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="


@_node
class Const:
    value: int

    def __str__(self) -> str:
        return str(self.value)


@_node
class Var:
    name: str

    def __str__(self) -> str:
        return self.name


@_node
class Bin:
    op: Op
    left: Expr
    right: Expr

    def __str__(self) -> str:
        if self.op in (Op.MIN, Op.MAX):
            return f"{self.op.value}({self.left}, {self.right})"
        return f"({self.left} {self.op.value} {self.right})"


Expr = Const | Var | Bin


@_node
class Cmp:
    rel: Rel
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return f"{self.left} {self.rel.value} {self.right}"


@_node
class Not:
    inner: Cond

    def __str__(self) -> str:
        return f"not ({self.inner})"


@_node
class All:
    parts: tuple[Cond, ...]

    def __str__(self) -> str:
        return " and ".join(f"({part})" for part in self.parts) or "true"


@_node
class Any_:
    parts: tuple[Cond, ...]

    def __str__(self) -> str:
        return " or ".join(f"({part})" for part in self.parts) or "false"


@_node
class Exists:
    names: tuple[str, ...]
    body: Cond

    def __str__(self) -> str:
        return f"exists {', '.join(self.names)}: {self.body}"


Cond = Cmp | Not | All | Any_ | Exists
TRUE: Cond = All(())
FALSE: Cond = Any_(())


@functools.lru_cache(maxsize=1 << 16)  # trees share subtrees: each is walked once
def variables(item: Expr | Cond) -> frozenset[str]:
    """The free variable names of an expression or condition."""
    if isinstance(item, Var):
        return frozenset({item.name})
    if isinstance(item, Const):
        return frozenset()
    if isinstance(item, (Bin, Cmp)):
        return variables(item.left) | variables(item.right)
    if isinstance(item, Not):
        return variables(item.inner)
    if isinstance(item, Exists):
        return variables(item.body) - set(item.names)
    return frozenset().union(*(variables(part) for part in item.parts))


def renamed(item: Expr, names: dict[str, str]) -> Expr:
    if isinstance(item, Var):
        return Var(names.get(item.name, item.name))
    if isinstance(item, Const):
        return item
    return Bin(item.op, renamed(item.left, names), renamed(item.right, names))


def renamed_cond(item: Cond, names: dict[str, str]) -> Cond:
    if isinstance(item, Cmp):
        return Cmp(item.rel, renamed(item.left, names), renamed(item.right, names))
    if isinstance(item, Not):
        return Not(renamed_cond(item.inner, names))
    if isinstance(item, Exists):
        inner = {key: value for key, value in names.items() if key not in item.names}
        return Exists(item.names, renamed_cond(item.body, inner))
    parts = tuple(renamed_cond(part, names) for part in item.parts)
    return All(parts) if isinstance(item, All) else Any_(parts)


_FOLD: dict[Op, Callable[[int, int], int]] = {
    Op.ADD: lambda a, b: a + b,
    Op.SUB: lambda a, b: a - b,
    Op.MUL: lambda a, b: a * b,
    Op.TDIV: truncating_div,
    Op.TMOD: truncating_mod,
    Op.MIN: min,
    Op.MAX: max,
}


class Decide(Protocol):
    """Decides branches: `bool` of a condition, or which of exclusive cases holds."""

    def __call__(self, cond: Cond) -> bool: ...

    def choose(self, options: tuple[Cond, ...]) -> int: ...

    def computed(self, value: Expr) -> None:
        """The program computed the device scalar `value` (which must fit INT32)."""
        ...


def to_expr(value: object) -> Expr:
    if isinstance(value, (Const, Var, Bin)):
        return value
    if isinstance(value, Sym):
        return value.expr
    if isinstance(value, int) and not isinstance(value, bool):
        return Const(int(value))
    if hasattr(value, "__index__") and not isinstance(value, (float, bool)):
        return Const(value.__index__())  # type: ignore[union-attr]
    raise OutsideFragment(reason(ReasonCode.OUTSIDE_NOT_INTEGER, value=repr(value)))


def _combine(op: Op, left: Expr, right: Expr, decide: Decide) -> Operand:
    if isinstance(left, Const) and isinstance(right, Const):
        if op in (Op.TDIV, Op.TMOD) and right.value == 0:
            raise ZeroDivisionError("integer division or modulo by zero")
        return _FOLD[op](left.value, right.value)
    if op is Op.ADD and right == Const(0):
        return Sym(left, decide)
    if op in (Op.TDIV, Op.TMOD) and not isinstance(right, Const):
        return _split_division(op, left, right, decide)
    return Sym(Bin(op, left, right), decide)


MAX_QUOTIENTS = 256


def _split_division(op: Op, left: Expr, right: Expr, decide: Decide) -> Operand:
    """`a // b`, `a % b` with a symbolic b > 0, as a case split on the quotient: each
    case is a branch the tracer follows, and within it the result is linear."""
    zero = Const(0)
    if not decide(Cmp(Rel.LT, zero, right)):
        raise OutsideFragment(reason(ReasonCode.OUTSIDE_DIVISOR_SIGN, divisor=str(right)))
    multiple = _multiple_of(left, right)
    if multiple is not None:  # (k * b) // b is k and (k * b) % b is 0 for b > 0
        return multiple if op is Op.TDIV else 0
    if isinstance(left, Const):
        quotients = (
            range(0, abs(left.value) + 1) if left.value >= 0 else range(0, left.value - 1, -1)
        )
        if len(quotients) > MAX_QUOTIENTS:
            raise OutsideFragment(
                reason(ReasonCode.OUTSIDE_DIVISION_CASES, left=str(left), right=str(right))
            )
    else:
        quotients = range(-1, 2)
    cases = tuple(quotient_is(quotient, left, right) for quotient in quotients)
    chosen = decide.choose((*cases, Not(Any_(cases))))
    if chosen < len(cases):
        quotient = quotients[chosen]
        if op is Op.TDIV:
            return quotient
        product = _combine(Op.MUL, Const(quotient), right, decide)
        return _combine(Op.SUB, left, to_expr(product), decide)
    split = f"{quotients[0]}..{quotients[-1]}"
    raise OutsideFragment(
        reason(
            ReasonCode.OUTSIDE_QUOTIENT,
            left=str(left),
            op=op.value,
            right=str(right),
            split=split,
        )
    )


def _multiple_of(left: Expr, right: Expr) -> int | None:
    """k if `left` is written `k * right` or `right * k` for a constant k (a block
    size `(P * M) // P`), else None."""
    if not (isinstance(left, Bin) and left.op is Op.MUL):
        return None
    for factor, other in ((left.left, left.right), (left.right, left.left)):
        if other == right and isinstance(factor, Const):
            return factor.value
    return None


def quotient_is(quotient: int, left: Expr, right: Expr) -> Cond:
    """The truncating quotient of left by right (right > 0) is `quotient`."""
    low = Bin(Op.MUL, Const(quotient), right) if quotient else Const(0)
    if quotient > 0 or (quotient == 0 and not (isinstance(left, Const) and left.value < 0)):
        high = Bin(Op.MUL, Const(quotient + 1), right)
        positive = All(
            (Cmp(Rel.LE, Const(0), left), Cmp(Rel.LE, low, left), Cmp(Rel.LT, left, high))
        )
        if quotient == 0:
            negative = All(
                (Cmp(Rel.LT, left, Const(0)), Cmp(Rel.LT, Bin(Op.SUB, Const(0), right), left))
            )
            return Any_((positive, negative))
        return positive
    # quotient < 0 (or 0 for a negative constant): -(|q|+1)*b < a <= q*b, a < 0
    floor = Bin(Op.MUL, Const(quotient - 1), right)
    return All((Cmp(Rel.LT, left, Const(0)), Cmp(Rel.LT, floor, left), Cmp(Rel.LE, left, low)))


Bound = int | None  # None: unbounded on that side
Span = tuple[Bound, Bound]


def span_of(item: Expr, spans: dict[str, Span]) -> Span:
    """An interval holding every value of `item` when each variable of `spans` lies in
    its interval (any other variable ranges over all integers): interval arithmetic,
    sound and coarse (no guard is consulted)."""
    if isinstance(item, Const):
        return item.value, item.value
    if isinstance(item, Var):
        return spans.get(item.name, (None, None))
    left, right = span_of(item.left, spans), span_of(item.right, spans)
    if item.op is Op.ADD:
        return _plus(left[0], right[0]), _plus(left[1], right[1])
    if item.op is Op.SUB:
        return _plus(left[0], _negated(right[1])), _plus(left[1], _negated(right[0]))
    if item.op in (Op.MIN, Op.MAX):
        pick = min if item.op is Op.MIN else max
        return _pick(pick, left[0], right[0], item.op is Op.MAX), _pick(
            pick, left[1], right[1], item.op is Op.MIN
        )
    if item.op is Op.MUL:
        return _product(left, right)
    if not isinstance(item.right, Const) or item.right.value == 0:
        return None, None
    return _divided(item.op, left, item.right.value)


def _plus(left: Bound, right: Bound) -> Bound:
    return None if left is None or right is None else left + right


def _negated(bound: Bound) -> Bound:
    return None if bound is None else -bound


def _pick(pick: Callable[[int, int], int], left: Bound, right: Bound, either: bool) -> Bound:
    """min or max of two bounds on one side; with `either`, one finite bound bounds the
    result (the max of lower bounds, the min of upper bounds)."""
    if left is None or right is None:
        return (right if left is None else left) if either else None
    return pick(left, right)


def _product(left: Span, right: Span) -> Span:
    if (0, 0) in (left, right):
        return 0, 0
    corners = (*left, *right)
    if any(corner is None for corner in corners):
        return None, None
    products = [a * b for a in left for b in right]  # type: ignore[operator]
    return min(products), max(products)


def _divided(op: Op, left: Span, divisor: int) -> Span:
    """`left // divisor` or `left % divisor`, truncating, by a nonzero constant."""
    if op is Op.TMOD:
        largest = abs(divisor) - 1
        low = 0 if left[0] is not None and left[0] >= 0 else -largest
        high = 0 if left[1] is not None and left[1] <= 0 else largest
        return low, high
    ends = [None if end is None else truncating_div(end, divisor) for end in left]
    return (ends[0], ends[1]) if divisor > 0 else (ends[1], ends[0])


def int32_span(span: Span) -> tuple[int, int]:
    """What an INT32 cell holds after storing a value of `span`: the span itself inside
    INT32, else any INT32 value (the device casts to the cell's type, docs/model.md)."""
    low, high = span
    if low is None or high is None or low < INT32_MIN or high > INT32_MAX:
        return INT32_MIN, INT32_MAX
    return low, high


def int32_for_ranks(*values: Expr) -> Cond:
    """Each of `values` is an INT32 number, or N is beyond 2^31: ranks are INT32
    scalars, so no such N runs and nothing needs to hold there."""
    in_range = [Cmp(Rel.LE, Const(INT32_MIN), value) for value in values] + [
        Cmp(Rel.LE, value, Const(INT32_MAX)) for value in values
    ]
    return Any_((Cmp(Rel.LT, Const(INT32_MAX + 1), Var(WORLD)), All(tuple(in_range))))


def _computed(op: Op, left: Expr, right: Expr, decide: Decide) -> Operand:
    """`left op right` computed by the program, each such result a device scalar that
    must fit INT32 (docs/model.md): symbolic, `decide` records the obligation; a
    constant outside it leaves the fragment (the concrete check names it)."""
    result = _combine(op, left, right, decide)
    if isinstance(result, Sym):
        decide.computed(result.expr)
    elif not INT32_MIN <= result <= INT32_MAX:
        raise OutsideFragment(
            reason(
                ReasonCode.OUTSIDE_INT32,
                left=str(left),
                op=op.value,
                right=str(right),
                result=result,
            )
        )
    return result


def extremum(op: Op, left: object, right: object) -> Operand:
    """`pl.min` (Op.MIN) or `pl.max` (Op.MAX) of two device scalars, a `Sym` if either
    is: exact in z3, no branch, and within the range of its operands (no INT32 check)."""
    if not (_is_operand(left) and _is_operand(right)):
        raise OutsideFragment(reason(ReasonCode.SHADOW_SCALAR_ARITHMETIC))
    symbolic = next((value for value in (left, right) if isinstance(value, Sym)), None)
    if symbolic is None:
        return _FOLD[op](int(left), int(right))  # type: ignore[call-overload]
    return _combine(op, to_expr(left), to_expr(right), symbolic.decide)


def _is_operand(value: object) -> bool:
    return isinstance(value, Sym) or (isinstance(value, int) and not isinstance(value, bool))


class Sym:
    """A symbolic device integer; `decide` settles branches on it."""

    __slots__ = ("expr", "decide")

    def __init__(self, expr: Expr, decide: Decide) -> None:
        self.expr = expr
        self.decide = decide

    def _binary(self, op: Op, other: object, *, reflected: bool = False) -> Operand:
        if not _is_operand(other):
            return NotImplemented
        left, right = (to_expr(other), self.expr) if reflected else (self.expr, to_expr(other))
        return _computed(op, left, right, self.decide)

    def __add__(self, other: object) -> Operand:
        return self._binary(Op.ADD, other)

    def __radd__(self, other: object) -> Operand:
        return self._binary(Op.ADD, other, reflected=True)

    def __sub__(self, other: object) -> Operand:
        return self._binary(Op.SUB, other)

    def __rsub__(self, other: object) -> Operand:
        return self._binary(Op.SUB, other, reflected=True)

    def __mul__(self, other: object) -> Operand:
        return self._binary(Op.MUL, other)

    def __rmul__(self, other: object) -> Operand:
        return self._binary(Op.MUL, other, reflected=True)

    def __floordiv__(self, other: object) -> Operand:
        return self._binary(Op.TDIV, other)

    def __rfloordiv__(self, other: object) -> Operand:
        return self._binary(Op.TDIV, other, reflected=True)

    def __mod__(self, other: object) -> Operand:
        return self._binary(Op.TMOD, other)

    def __rmod__(self, other: object) -> Operand:
        return self._binary(Op.TMOD, other, reflected=True)

    def __neg__(self) -> Operand:
        return _computed(Op.SUB, Const(0), self.expr, self.decide)

    def __pos__(self) -> Sym:
        return self

    def _compare(self, rel: Rel, left: object, right: object) -> SymBool:
        if not (_is_operand(left) and _is_operand(right)):
            raise OutsideFragment(
                reason(ReasonCode.OUTSIDE_COMPARISON, left=repr(left), right=repr(right))
            )
        return SymBool(Cmp(rel, to_expr(left), to_expr(right)), self.decide)

    def __eq__(self, other: object) -> SymBool:  # type: ignore[override]
        return self._compare(Rel.EQ, self, other)

    def __ne__(self, other: object) -> SymBool:  # type: ignore[override]
        return self._compare(Rel.NE, self, other)

    def __lt__(self, other: object) -> SymBool:
        return self._compare(Rel.LT, self, other)

    def __le__(self, other: object) -> SymBool:
        return self._compare(Rel.LE, self, other)

    def __gt__(self, other: object) -> SymBool:
        return self._compare(Rel.LT, other, self)

    def __ge__(self, other: object) -> SymBool:
        return self._compare(Rel.LE, other, self)

    def __bool__(self) -> bool:
        return self.decide(Cmp(Rel.NE, self.expr, Const(0)))

    def __index__(self) -> int:
        raise OutsideFragment(needs_concrete(str(self.expr)))

    __int__ = __index__

    def __hash__(self) -> int:
        raise OutsideFragment(reason(ReasonCode.OUTSIDE_HASHED_VALUE, value=str(self.expr)))

    def __repr__(self) -> str:
        return _text(self.expr)

    def __format__(self, spec: str) -> str:
        return _text(self.expr)


Operand = int | Sym


class SymBool:
    """A symbolic comparison; `bool()` of it is a branch the tracer follows both ways."""

    __slots__ = ("cond", "decide")

    def __init__(self, cond: Cond, decide: Decide) -> None:
        self.cond = cond
        self.decide = decide

    def __bool__(self) -> bool:
        return self.decide(self.cond)

    def __hash__(self) -> int:
        raise OutsideFragment(reason(ReasonCode.OUTSIDE_HASHED_CONDITION, cond=str(self.cond)))

    def __repr__(self) -> str:
        return _text(self.cond)


_OWN = str(Path(__file__).resolve().parents[1])


def _text(item: Expr | Cond) -> str:
    """`item` as text for a message: its symbolic form. A program that computes with
    the text (compares it, measures it, parses it) would see the same text at every
    P, so only racecheck's own messages, `raise` statements and `assert` messages may."""
    frame = sys._getframe(2)  # the code that asked: `_text` <- the dunder <- it
    where = frame.f_code.co_filename
    if not where.startswith(_OWN) and frame.f_lineno not in _message_lines(where):
        raise OutsideFragment(
            reason(ReasonCode.OUTSIDE_AS_TEXT, value=str(item), line=frame.f_lineno)
        )
    return str(item)


@functools.cache
def _message_lines(filename: str) -> frozenset[int]:
    """The lines of the `raise` statements and `assert` messages of a source file."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except SyntaxError:
        return frozenset()
    messages = [
        node if isinstance(node, ast.Raise) else node.msg
        for node in ast.walk(tree)
        if isinstance(node, ast.Raise | ast.Assert)
    ]
    return frozenset(
        line
        for node in messages
        if node is not None
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    )
