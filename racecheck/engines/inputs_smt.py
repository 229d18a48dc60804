"""Inputs for the other side of a branch: z3 over the symbolic decisions of a run.

Given the decisions a run made (`racecheck.dsl.symbolic`), `flips` finds, for each in
turn, input element values under which the ones before it go the same way and it goes
the other way. Float elements are reals (the run rounds the chosen value to the
tensor's dtype; the explorer checks that the branch really flipped), integer elements
integers. Any inputs on the other side would do; for the integer elements of the
flipped decision a negative value is asked for first, as a value a program forgot to
clamp from below is a usual bug (a negative count, docs/model.md), and boundary values
come from later flips anyway. This is the only module that imports z3 for inputs; it
is imported only when a run has an input-dependent decision.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum

import z3  # type: ignore[import-untyped]

from racecheck.dsl.symbolic import Apply, Const, Decision, Expr, Op, Var
from racecheck.engines.solving import limited_check
from racecheck.report.reasons import ReasonCode, reason

FLIP_RLIMIT = 4_000_000
"""z3 resource units for the inputs of one flipped decision (docs/model.md, "Budgets")."""


class Answer(Enum):
    FOUND = "found"
    INFEASIBLE = "infeasible"  # no input takes the other side
    UNDECIDED = "undecided"  # z3 could not tell (its budget used up, non-linear)


@dataclass(frozen=True, slots=True, kw_only=True)
class Solution:
    answer: Answer
    values: tuple[tuple[str, int, float], ...] = ()  # (tensor, flat index, value)


def flips(
    made: Sequence[Decision],
    first: int,
    *,
    deadline: float,
    avoided: Sequence[Decision] = (),
) -> Iterator[tuple[int, Solution]]:
    """For each decision n >= `first` of a run, in turn: inputs under which the
    decisions before it go as they went and it goes the other way, all of them with
    the `avoided` decisions too (the other values a pinned value already took). One
    solver holds the decisions before n (incremental); a decision the ones before it
    already made the same way cannot flip."""
    symbols: dict[Var, z3.ArithRef] = {}
    terms = [_holds(decided.condition, decided.taken, symbols) for decided in made]
    others = [_holds(decided.condition, not decided.taken, symbols) for decided in made]
    held = [_holds(decided.condition, decided.taken, symbols) for decided in avoided]
    solver = z3.Solver()
    for var, symbol in symbols.items():
        if not var.is_float:
            low, high = var.limits
            solver.add(symbol >= low, symbol <= high)  # the values its dtype holds
    solver.add(*held, *terms[:first])
    before = set(made[:first])
    involved = {var for decided in made[:first] for var in _vars(decided.condition)}
    for n in range(first, len(made)):
        involved |= _vars(made[n].condition)
        if made[n] in before:
            yield n, Solution(answer=Answer.INFEASIBLE)
            continue
        solver.push()
        solver.add(others[n])
        negative = [symbols[var] < 0 for var in _vars(made[n].condition) if not var.is_float]
        yield n, _solution(solver, {var: symbols[var] for var in involved}, negative, deadline)
        solver.pop()
        solver.add(terms[n])
        before.add(made[n])


def _solution(
    solver: z3.Solver,
    symbols: dict[Var, z3.ArithRef],
    preferred: list[z3.BoolRef],
    deadline: float,
) -> Solution:
    """A model of the solver's constraints, one that also meets `preferred` if any does."""
    stage = reason(ReasonCode.STAGE_CHOOSING_INPUTS)
    checked = limited_check(solver, preferred, rlimit=FLIP_RLIMIT, deadline=deadline, stage=stage)
    if preferred and not checked.sat:
        checked = limited_check(solver, rlimit=FLIP_RLIMIT, deadline=deadline, stage=stage)
    if checked.unsat:
        return Solution(answer=Answer.INFEASIBLE)
    if not checked.sat:
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


def _vars(expr: Expr) -> frozenset[Var]:
    if isinstance(expr, Var):
        return frozenset({expr})
    if isinstance(expr, Const):
        return frozenset()
    return frozenset().union(*(_vars(arg) for arg in expr.args))


def _holds(condition: Expr, taken: bool, symbols: dict[Var, z3.ArithRef]) -> z3.BoolRef:
    """The inputs under which the run goes the `taken` way of `condition`: those that
    make every divisor in it non-zero (with a zero one the run raises at the division,
    and z3's value for it is no value the run computes) and the condition `taken`."""
    term = _term(condition, symbols)
    assert isinstance(term, z3.BoolRef)
    defined = [_term(divisor, symbols) != 0 for divisor in _divisors(condition)]
    return z3.And(*defined, term if taken else z3.Not(term))


def _divisors(expr: Expr) -> list[Expr]:
    if not isinstance(expr, Apply):
        return []
    own = [expr.args[1]] if expr.op.divides else []
    return own + [divisor for arg in expr.args for divisor in _divisors(arg)]


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
    if expr.op is Op.WHEN:
        return z3.If(args[0], z3.IntVal(1), z3.IntVal(0))
    left, right = _aligned(args[0], args[1])
    return _BINARY[expr.op](left, right)


def _aligned(left: z3.ExprRef, right: z3.ExprRef) -> tuple[z3.ExprRef, z3.ExprRef]:
    """Mixed int and real operands compare and combine as reals."""
    if z3.is_int(left) and z3.is_real(right):
        return z3.ToReal(left), right
    if z3.is_real(left) and z3.is_int(right):
        return left, z3.ToReal(right)
    return left, right


def truncating_div_term(left: z3.ArithRef, right: z3.ArithRef) -> z3.ArithRef:
    """The device's integer `//` as a z3 term (also the every-P prover's): the quotient
    of the magnitudes (z3's `/` of non-negative integers is floor division), negated
    when exactly one operand is negative, as `racecheck.dsl.scalars.truncating_div`
    computes it. A zero divisor is the caller's to exclude."""
    quotient = z3.Abs(left) / z3.Abs(right)
    return z3.If((left < 0) == (right < 0), quotient, -quotient)


def truncating_mod_term(left: z3.ArithRef, right: z3.ArithRef) -> z3.ArithRef:
    return left - right * truncating_div_term(left, right)


_BINARY = {
    Op.ADD: lambda a, b: a + b,
    Op.SUB: lambda a, b: a - b,
    Op.MUL: lambda a, b: a * b,
    Op.DIV: lambda a, b: a / b,
    Op.TRUNC_DIV: truncating_div_term,
    Op.TRUNC_MOD: truncating_mod_term,
    Op.MIN: lambda a, b: z3.If(a <= b, a, b),
    Op.MAX: lambda a, b: z3.If(a >= b, a, b),
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
