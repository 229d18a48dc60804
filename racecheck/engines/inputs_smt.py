"""Inputs for the other side of a branch: z3 over the symbolic decisions of a run.

Given the decisions a run made (`racecheck.dsl.symbolic`), `solve` finds input
element values under which the first ones go the same way and the last goes the other
way. Float elements are reals (the run rounds the chosen value to the tensor's dtype;
the explorer checks that the branch really flipped), integer elements integers. This
is the only module that imports z3 for inputs; it is imported only when a run has an
input-dependent decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import z3  # type: ignore[import-untyped]

from racecheck.dsl.symbolic import Const, Decision, Expr, Op, Var

_SOLVER_MS = 2000


class Answer(Enum):
    FOUND = "found"
    INFEASIBLE = "infeasible"  # no input takes the other side
    UNDECIDED = "undecided"  # z3 could not tell (timeout, non-linear)


@dataclass(frozen=True, slots=True, kw_only=True)
class Solution:
    answer: Answer
    values: tuple[tuple[str, int, float], ...] = ()  # (tensor, flat index, value)


def solve(kept: Sequence[Decision], flipped: Decision, *, seconds: float) -> Solution:
    """Inputs under which every `kept` decision goes as it went and `flipped` the other way."""
    symbols: dict[Var, z3.ArithRef] = {}
    solver = z3.Solver()
    solver.set("timeout", max(1, int(min(seconds * 1000, _SOLVER_MS))))
    for made in kept:
        solver.add(_holds(made.condition, made.taken, symbols))
    solver.add(_holds(flipped.condition, not flipped.taken, symbols))
    for var, symbol in symbols.items():
        if not var.is_float:
            solver.add(symbol >= -(2**31), symbol < 2**31)  # INT32 and smaller elements
    result = solver.check()
    if result == z3.unsat:
        return Solution(answer=Answer.INFEASIBLE)
    if result != z3.sat:
        return Solution(answer=Answer.UNDECIDED)
    model = solver.model()
    chosen = {var: model.eval(symbol, model_completion=True) for var, symbol in symbols.items()}
    if not all(z3.is_int_value(value) or z3.is_rational_value(value) for value in chosen.values()):
        return Solution(answer=Answer.UNDECIDED)  # an irrational root: no input to run
    values = tuple(
        (var.tensor, var.index, _number(value, var))
        for var, value in sorted(chosen.items(), key=lambda item: (item[0].tensor, item[0].index))
    )
    return Solution(answer=Answer.FOUND, values=values)


def _holds(condition: Expr, taken: bool, symbols: dict[Var, z3.ArithRef]) -> z3.BoolRef:
    term = _term(condition, symbols)
    assert isinstance(term, z3.BoolRef)
    return term if taken else z3.Not(term)


def _term(expr: Expr, symbols: dict[Var, z3.ArithRef]) -> z3.ExprRef:
    if isinstance(expr, Var):
        if expr not in symbols:
            name = f"{expr.tensor}[{expr.index}]"
            symbols[expr] = z3.Real(name) if expr.is_float else z3.Int(name)
        return symbols[expr]
    if isinstance(expr, Const):
        value = expr.value
        return z3.RealVal(value) if isinstance(value, float) else z3.IntVal(int(value))
    args = [_term(arg, symbols) for arg in expr.args]
    if expr.op is Op.NEG:
        return -args[0]
    left, right = _aligned(args[0], args[1])
    return _BINARY[expr.op](left, right)


def _aligned(left: z3.ExprRef, right: z3.ExprRef) -> tuple[z3.ExprRef, z3.ExprRef]:
    """Mixed int and real operands compare and combine as reals."""
    if z3.is_int(left) and z3.is_real(right):
        return z3.ToReal(left), right
    if z3.is_real(left) and z3.is_int(right):
        return left, z3.ToReal(right)
    return left, right


_BINARY = {
    Op.ADD: lambda a, b: a + b,
    Op.SUB: lambda a, b: a - b,
    Op.MUL: lambda a, b: a * b,
    Op.DIV: lambda a, b: a / b,
    Op.LT: lambda a, b: a < b,
    Op.LE: lambda a, b: a <= b,
    Op.GT: lambda a, b: a > b,
    Op.GE: lambda a, b: a >= b,
    Op.EQ: lambda a, b: a == b,
    Op.NE: lambda a, b: a != b,
}


def _number(value: z3.ExprRef, var: Var) -> float:
    if not var.is_float:
        return float(value.as_long())  # type: ignore[attr-defined]
    fraction = value.as_fraction()  # type: ignore[attr-defined]
    return float(fraction.numerator) / float(fraction.denominator)
