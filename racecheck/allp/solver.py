"""z3 for the all-P prover: the one module of `racecheck.allp` that imports it.

Decides: satisfiability of a condition over integers (N, ranks, loop indices, byte
indices), and the smallest N of a satisfiable one. Model boundary: `Expr`/`Cond`
trees translate one to one; `%` and `//` truncate toward zero and have constant
divisors (the tracer refuses others); `Exists` becomes a z3 quantifier. Unknown
policy: `unknown` (z3's budget used up: `QUERY_RLIMIT` per query, `ATTEMPT_RLIMIT` for
one attempt, `begin`) raises `Undecided`, which the prover turns into "not proved for
every P" — never into "holds"; `--timeout` raises `Overtime`. Budgets are z3 resource
units, so an attempt decides alike on every machine: each attempt starts from a fresh
z3 context and solver, so what ran before in the process cannot change its course.
Limitations: quantified formulas (the
existence of a notify for every wait, one-hop ordering) rely on z3's quantifier
instantiation; when it gives up the answer is a fallback, not a proof.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

from racecheck.allp.expr import (
    WORLD,
    All,
    Any_,
    Cmp,
    Cond,
    Const,
    Exists,
    Expr,
    Not,
    Op,
    Rel,
    Var,
    variables,
)
from racecheck.engines.solving import limited_check

QUERY_RLIMIT = 20_000_000
"""z3 resource units one query of an every-P proof may use (docs/model.md, "Budgets")."""
ATTEMPT_RLIMIT = 20_000_000
"""z3 resource units one every-P attempt may use in all (docs/model.md, "Budgets")."""


class Undecided(Exception):
    """z3 answered unknown: the condition is neither proved nor refuted."""


class BudgetUsedUp(Undecided):
    """The attempt's budget is used up: no query of it can be decided any more."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CounterModel:
    """A satisfying assignment: the world size N and the other variables' values."""

    world: int
    values: tuple[tuple[str, int], ...]

    def value(self, name: str) -> int | None:
        return dict(self.values).get(name)


def _z3() -> Any:
    import z3  # type: ignore[import-untyped]  # loaded only when an all-P proof is attempted

    return z3


class _Translator:
    """Expression and condition trees to z3 terms, each distinct subtree once: the
    obligations repeat guards and footprints across many queries. A bound variable
    is the z3 constant of its name, which `Exists` abstracts (so terms are the same
    inside and outside a quantifier and can be shared)."""

    LIMIT = 200_000  # cached subtrees before the cache starts over

    def __init__(self, context: Any) -> None:
        self.z3 = _z3()
        self.context = context
        self.terms: dict[Expr | Cond, Any] = {}

    def __call__(self, item: Expr | Cond) -> Any:
        term = self.terms.get(item)
        if term is None:
            if len(self.terms) > self.LIMIT:
                self.terms.clear()
            term = (
                self._cond(item)
                if isinstance(item, (Cmp, Not, All, Any_, Exists))
                else self._expr(item)
            )
            self.terms[item] = term
        return term

    def _expr(self, item: Expr) -> Any:
        if isinstance(item, Const):
            return self.z3.IntVal(item.value, self.context)
        if isinstance(item, Var):
            return self.z3.Int(item.name, self.context)
        left, right = self(item.left), self(item.right)
        if item.op is Op.ADD:
            return left + right
        if item.op is Op.SUB:
            return left - right
        if item.op is Op.MUL:
            return left * right
        if item.op in (Op.MIN, Op.MAX):
            smaller = left <= right if item.op is Op.MIN else right <= left
            return self.z3.If(smaller, left, right, self.context)
        from racecheck.engines.inputs_smt import truncating_div_term, truncating_mod_term

        divide = truncating_div_term if item.op is Op.TDIV else truncating_mod_term
        return divide(left, right)

    def _cond(self, item: Cond) -> Any:
        z3 = self.z3
        if isinstance(item, Cmp):
            left, right = self(item.left), self(item.right)
            return {
                Rel.EQ: lambda: left == right,
                Rel.NE: lambda: left != right,
                Rel.LT: lambda: left < right,
                Rel.LE: lambda: left <= right,
            }[item.rel]()
        if isinstance(item, Not):
            return z3.Not(self(item.inner))
        if isinstance(item, All):
            return z3.And([self(part) for part in item.parts], self.context)
        if isinstance(item, Any_):
            return z3.Or([self(part) for part in item.parts], self.context)
        body = self(item.body)
        bound = [z3.Int(name, self.context) for name in item.names]
        return z3.Exists(bound, body) if bound else body


class _Shared:
    """One z3 context, translator and incremental solver for an attempt: each query is
    pushed and popped again, which spares building a solver per query; `left` is what
    is left of the attempt's budget."""

    def __init__(self, budget: int) -> None:
        z3 = _z3()
        context = z3.Context()
        self.translate = _Translator(context)
        self.solver = z3.Solver(ctx=context)
        self.budget = budget
        self.left = budget

    def used_up(self) -> BudgetUsedUp:
        return BudgetUsedUp(
            f"the every-P proof used up its budget of {self.budget:,} z3 resource units"
        )


_SHARED: list[_Shared] = []


def begin(budget: int = ATTEMPT_RLIMIT) -> None:
    """Start an attempt: a fresh context and solver, `budget` resource units for all its
    queries."""
    _SHARED[:] = [_Shared(budget)]


def _shared() -> _Shared:
    """The attempt's; outside one (a query asked on its own), one with no budget of its
    own but each query's."""
    if not _SHARED:
        _SHARED.append(_Shared(budget=sys.maxsize))
    return _SHARED[0]


def satisfiable(cond: Cond, deadline: float | None = None, *, rlimit: int = QUERY_RLIMIT) -> bool:
    """Whether some assignment satisfies `cond` (within `rlimit` resource units);
    `unknown` counts as satisfiable (the tracer then follows a branch it may not need,
    which costs work, not soundness)."""
    try:
        return _check(cond, deadline, rlimit) is not None
    except BudgetUsedUp:
        raise
    except Undecided:
        return True


def model_of(
    cond: Cond, *, deadline: float | None = None, rlimit: int = QUERY_RLIMIT
) -> CounterModel | None:
    """Some assignment satisfying `cond` (within `rlimit` resource units), or None;
    `unknown` raises `Undecided`."""
    return _check(cond, deadline, rlimit)


def counter_model(cond: Cond, low: int, *, deadline: float | None = None) -> CounterModel | None:
    """An assignment satisfying `cond` with the smallest N (at least `low`), or None:
    bisection on `N <= bound`, whose answer only grows with the bound, so a counter-model
    at N = 2**20 costs about 20 queries, not one per smaller N."""
    found = _check(cond, deadline)
    if found is None:
        return None
    floor = low
    while floor < found.world:
        middle = (floor + found.world) // 2
        bounded = All((cond, Cmp(Rel.LE, Const(floor), Var(WORLD))))
        smaller = _check(All((bounded, Cmp(Rel.LE, Var(WORLD), Const(middle)))), deadline)
        if smaller is None:
            floor = middle + 1
        else:
            found = smaller
    return found


def _check(cond: Cond, deadline: float | None, rlimit: int = QUERY_RLIMIT) -> CounterModel | None:
    z3 = _z3()
    shared = _shared()
    if shared.left <= 0:
        raise shared.used_up()
    solver = shared.solver
    solver.push()
    try:
        solver.add(shared.translate(cond))
        checked = limited_check(
            solver,
            rlimit=min(rlimit, shared.left),
            deadline=math.inf if deadline is None else deadline,
            stage="proving every P (asking z3)",
        )
        shared.left -= checked.spent
        if checked.unsat:
            return None
        if not checked.sat and shared.left <= 0:
            raise shared.used_up()
        if not checked.sat:
            raise Undecided(checked.why)
        model = solver.model()
        values = {
            name: model.eval(z3.Int(name, solver.ctx), model_completion=True).as_long()
            for name in sorted(variables(cond))
        }
    finally:
        solver.pop()
    return CounterModel(world=values.get(WORLD, 0), values=tuple(values.items()))
