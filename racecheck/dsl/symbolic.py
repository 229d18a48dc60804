"""Symbolic values over input elements, carried beside the concrete values (concolic).

A scalar read from an input host tensor (before anything wrote that tensor) is a
`Var` naming the element, and keeps it when written to memory and read back whole
(`racecheck.dsl.memory`); + - * (and / of floats) of such values and constants build
`Apply` nodes, as do `//` and `%` of integers (the device's, truncating toward zero:
docs/model.md), and a comparison is a condition. When a symbolic value steers the
program its `Decision` (condition, outcome) is recorded, so that a solver can pick
inputs that take the other side. Anything else (`//` and `%` of floats, tile
arithmetic, memory that does not keep the form) has no symbolic form: the value is then opaque,
and the steering analysis says so. Plain data, no solver here (see racecheck/engines/inputs_smt.py).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, TypeGuard

import numpy as np

from racecheck.events import INT32_MAX, INT32_MIN


class Op(Enum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"
    TRUNC_DIV = "//"  # integers only, truncating toward zero as on the device
    TRUNC_MOD = "%"  # integers only: left - right * (left // right), the sign of left
    NEG = "neg"
    WHEN = "when"  # integers only: 1 where its one argument, a condition, holds, else 0
    MIN = "min"  # integers only: the lesser operand (`pl.min`, a clamp), with no branch
    MAX = "max"
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "=="
    NE = "!="

    @property
    def compares(self) -> bool:
        return self in _COMPARISONS

    @property
    def divides(self) -> bool:
        """Whether a zero right operand makes it undefined (the run raises there)."""
        return self in _DIVISIONS


_COMPARISONS = frozenset({Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE})
_DIVISIONS = frozenset({Op.DIV, Op.TRUNC_DIV, Op.TRUNC_MOD})
_INTEGER_ONLY = frozenset({Op.TRUNC_DIV, Op.TRUNC_MOD, Op.MIN, Op.MAX})


INT32_LIMITS = (INT32_MIN, INT32_MAX)


@dataclass(frozen=True, slots=True)
class Var:
    """Element `index` (flat, row-major) of the input host tensor `tensor`; an integer
    element holds any value within `limits` (its dtype's, both ends included)."""

    tensor: str
    index: int
    is_float: bool
    limits: tuple[int, int] = INT32_LIMITS


@dataclass(frozen=True, slots=True)
class Const:
    value: int | float


@dataclass(frozen=True, slots=True)
class Apply:
    op: Op
    args: tuple[Expr, ...]


Expr = Var | Const | Apply


@dataclass(frozen=True, slots=True, eq=False)
class InputBlock:
    """The symbols of a block of input elements, each `Var` made only when asked for:
    `elements` holds each position's flat index into `tensor` (-1: none, as padding).
    A tile loaded from an input can be thousands of elements wide; few are ever read
    back as scalars."""

    tensor: str
    elements: np.ndarray
    is_float: bool
    limits: tuple[int, int] = INT32_LIMITS  # as `Var.limits`

    def __getitem__(self, key: Any) -> InputBlock | Var | None:
        picked = self.elements[key]
        if isinstance(picked, np.ndarray):
            return replace(self, elements=picked)
        return None if picked < 0 else self._var(picked)

    def block(self, key: tuple[slice, ...]) -> InputBlock:
        return replace(self, elements=self.elements[key])

    def reshape(self, shape: Any) -> InputBlock:
        return replace(self, elements=self.elements.reshape(shape))

    def padded(self, shape: tuple[int, ...]) -> InputBlock:
        """The block at the start of a larger tile of `shape`; the rest has none."""
        elements = np.full(shape, -1, dtype=np.int64)
        elements[tuple(slice(0, size) for size in self.elements.shape)] = self.elements
        return replace(self, elements=elements)

    def forms(self) -> np.ndarray:
        """Each position's `Var` (or None), as an object array."""
        forms = np.empty(self.elements.shape, dtype=object)
        for position, element in np.ndenumerate(self.elements):
            if element >= 0:
                forms[position] = self._var(element)
        return forms

    def _var(self, element: int) -> Var:
        return Var(self.tensor, int(element), self.is_float, self.limits)


def fits(expr: object, limits: tuple[int, int] | None) -> TypeGuard[Var]:
    """Whether `expr` is an integer input element whose every value lies within
    `limits` (an integer dtype's; None: not one): stored or cast there, it is itself."""
    if limits is None or not isinstance(expr, Var) or expr.is_float:
        return False
    low, high = expr.limits
    return limits[0] <= low and high <= limits[1]


# per-element symbolic forms: an object array (Expr or None) or an input block
Forms = np.ndarray | InputBlock


def first_form(forms: Forms | None) -> Expr | None:
    """The form of the first element of `forms` (None: it has none)."""
    found = None if forms is None else forms.reshape(-1)[0]
    return found if isinstance(found, Var | Const | Apply) else None


@dataclass(frozen=True, slots=True)
class Decision:
    """The program went the `taken` way of `condition`."""

    condition: Expr
    taken: bool


_OPS: dict[Callable[[Any, Any], Any], Op] = {
    operator.add: Op.ADD,
    operator.sub: Op.SUB,
    operator.mul: Op.MUL,
    operator.truediv: Op.DIV,
    operator.floordiv: Op.TRUNC_DIV,
    operator.mod: Op.TRUNC_MOD,
    operator.lt: Op.LT,
    operator.le: Op.LE,
    operator.gt: Op.GT,
    operator.ge: Op.GE,
    operator.eq: Op.EQ,
    operator.ne: Op.NE,
}


def operand(value: object, symbolic: Expr | None) -> Expr | None:
    """The symbolic form of an operand: its own, or a constant for a plain number."""
    if symbolic is not None:
        return symbolic
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return Const(value)


def combine(
    function: Callable[[Any, Any], Any], left: Expr | None, right: Expr | None
) -> Expr | None:
    op = _OPS.get(function)
    if op is None or left is None or right is None:
        return None
    if isinstance(left, Const) and isinstance(right, Const):
        return None  # no input in it: the caller's value carries no symbol
    floats = _is_float(left) or _is_float(right)
    if op is Op.DIV and not floats:
        return None  # `/` of integers: not modelled
    if op in _INTEGER_ONLY and floats:
        return None  # `//` and `%` of floats round toward minus infinity: not modelled
    return Apply(op, (left, right))


def negated(symbolic: Expr | None) -> Expr | None:
    return None if symbolic is None else Apply(Op.NEG, (symbolic,))


def decision(symbolic: Expr, value: object, *, as_bool: bool) -> Decision:
    """What revealing `value` decided: a branch (`as_bool`) or one concrete value."""
    if as_bool:
        if isinstance(symbolic, Apply) and symbolic.op.compares:
            return Decision(condition=symbolic, taken=bool(value))
        return Decision(condition=Apply(Op.NE, (symbolic, Const(0))), taken=bool(value))
    return Decision(condition=Apply(Op.EQ, (symbolic, Const(value))), taken=True)  # type: ignore[arg-type]


def realises(made: Decision, forced: Decision) -> bool:
    """Whether a run that made `made` went the way `forced` asks: the same decision, or
    (`forced` the other side of a pinned value, `decision(..., as_bool=False)`) the same
    expression pinned to another value."""
    if made == forced:
        return True
    pinned, avoided = made.condition, forced.condition
    return (
        made.taken
        and not forced.taken
        and isinstance(pinned, Apply)
        and isinstance(avoided, Apply)
        and pinned.op is Op.EQ
        and avoided.op is Op.EQ
        and pinned.args[0] == avoided.args[0]
        and isinstance(pinned.args[1], Const)
        and isinstance(avoided.args[1], Const)
        and pinned.args[1].value != avoided.args[1].value
    )


def _is_float(expr: Expr) -> bool:
    if isinstance(expr, Var):
        return expr.is_float
    if isinstance(expr, Const):
        return isinstance(expr.value, float)
    if expr.op is Op.WHEN:
        return False
    return any(_is_float(arg) for arg in expr.args)


def bounds(expr: Expr) -> tuple[int, int] | None:
    """The least and the greatest value an integer expression takes over its inputs'
    ranges, by intervals (may be wider than the true range; None: not an integer one)."""
    if isinstance(expr, Var):
        return None if expr.is_float else expr.limits
    if isinstance(expr, Const):
        value = expr.value
        return (value, value) if isinstance(value, int) else None
    if expr.op is Op.WHEN:
        return (0, 1)
    found = [bounds(arg) for arg in expr.args]
    if any(bound is None for bound in found):
        return None
    spans: list[tuple[int, int]] = found  # type: ignore[assignment]
    if expr.op.compares:
        return (0, 1)
    if expr.op is Op.NEG:
        return (-spans[0][1], -spans[0][0])
    (a, b), (c, d) = spans
    if expr.op is Op.ADD:
        return (a + c, b + d)
    if expr.op is Op.SUB:
        return (a - d, b - c)
    if expr.op is Op.MUL:
        products = (a * c, a * d, b * c, b * d)
        return (min(products), max(products))
    if expr.op is Op.MIN:
        return (min(a, c), min(b, d))
    if expr.op is Op.MAX:
        return (max(a, c), max(b, d))
    largest = max(abs(a), abs(b))  # |l // r| <= |l|, |l % r| <= |l|
    if expr.op is Op.TRUNC_MOD:
        largest = min(largest, max(abs(c), abs(d)) - 1)
    return None if expr.op is Op.DIV else (-largest, largest)


def in_type(expr: Expr | None, limits: tuple[int, int] | None) -> tuple[Expr, ...]:
    """The conditions under which the integer `expr` lies within `limits` (a device
    scalar type's), the ones its inputs' ranges do not already guarantee."""
    found = None if expr is None or limits is None else bounds(expr)
    if found is None:
        return ()
    assert expr is not None and limits is not None
    low, high = limits
    conditions: list[Expr] = []
    if found[0] < low:
        conditions.append(Apply(Op.GE, (expr, Const(low))))
    if found[1] > high:
        conditions.append(Apply(Op.LE, (expr, Const(high))))
    return tuple(conditions)


def within(expr: Expr | None, limits: tuple[int, int] | None) -> TypeGuard[Expr]:
    """Whether every value of the integer `expr` lies within `limits` (None: not an
    integer type): cast there, it is itself."""
    found = None if expr is None or limits is None else bounds(expr)
    return (
        found is not None and limits is not None and limits[0] <= found[0] <= found[1] <= limits[1]
    )


def chosen(op: Op, left: Expr | None, right: Expr | None) -> Expr | None:
    """The form of `min` or `max` (`op`) of two integer operands: an exact choice, no
    branch (None: an operand has no form, or is a float, or neither has an input)."""
    if left is None or right is None or _is_float(left) or _is_float(right):
        return None
    if isinstance(left, Const) and isinstance(right, Const):
        return None
    return Apply(op, (left, right))


def settled(expr: Expr | None) -> TypeGuard[Expr]:
    """Whether the integer `expr` is exact for every input when kept in INT32 memory
    or beyond: every operation in it stays within INT32 and within each of its input
    elements' types, so none wrapped in the type it was computed in (at least as wide
    as its narrowest input element's)."""
    if expr is None:
        return False
    found = bounds(expr)
    low, high = INT32_LIMITS
    if found is None or found[0] < low or found[1] > high:
        return False
    for var in _all_vars(expr):
        low, high = max(low, var.limits[0]), min(high, var.limits[1])
    return _within_everywhere(expr, low, high)


def _within_everywhere(expr: Expr, low: int, high: int) -> bool:
    if not isinstance(expr, Apply):
        return True
    found = bounds(expr)
    if found is None or found[0] < low or found[1] > high:
        return False
    return all(_within_everywhere(arg, low, high) for arg in expr.args)


def counted(count: Expr | None, condition: Expr, step: int) -> Expr | None:
    """A counter's form after a bump by `step` under `condition` (a slot counter in a
    summary run, `racecheck.dsl.summary`): `count + step * when(condition)`, exact for
    every input whether or not the condition holds (None: the count has no form)."""
    if count is None:
        return None
    term: Expr = Apply(Op.WHEN, (condition,))
    if step != 1:
        term = Apply(Op.MUL, (Const(step), term))
    if isinstance(count, Const) and count.value == 0:
        return term
    return Apply(Op.ADD, (count, term))


def counts(expr: Expr) -> bool:
    """Whether `expr` holds a counter's `when` term (it exists only in a summary run)."""
    if isinstance(expr, Apply):
        return expr.op is Op.WHEN or any(counts(arg) for arg in expr.args)
    return False


def variables(expr: Expr) -> list[Var]:
    """The input elements `expr` is computed from, in order (repeats included)."""
    return _all_vars(expr)


def _all_vars(expr: Expr) -> list[Var]:
    if isinstance(expr, Var):
        return [expr]
    if isinstance(expr, Const):
        return []
    return [var for arg in expr.args for var in _all_vars(arg)]
