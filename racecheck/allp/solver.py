"""z3 for the all-P prover: the one module of `racecheck.allp` that imports it.

Decides: satisfiability of a condition over integers (N, ranks, loop indices, byte
indices), and the smallest N of a satisfiable one. Model boundary: `Expr`/`Cond`
trees translate one to one; `%` and `//` truncate toward zero and have constant
divisors (the tracer refuses others); `Exists` becomes a z3 quantifier. Unknown
policy: `unknown` (or a timeout) raises `Undecided`, which the prover turns into "not
proved for every P" — never into "holds". Limitations: quantified formulas (the
existence of a notify for every wait, one-hop ordering) rely on z3's quantifier
instantiation; when it gives up the answer is a fallback, not a proof.
"""

from __future__ import annotations

import time
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
from racecheck.report.reasons import ReasonCode, reason

TIMEOUT_MS = 20_000
MAX_SCAN = 256


class Undecided(Exception):
    """z3 answered unknown: the condition is neither proved nor refuted."""


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

    def __init__(self) -> None:
        self.z3 = _z3()
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
            return self.z3.IntVal(item.value)
        if isinstance(item, Var):
            return self.z3.Int(item.name)
        left, right = self(item.left), self(item.right)
        if item.op is Op.ADD:
            return left + right
        if item.op is Op.SUB:
            return left - right
        if item.op is Op.MUL:
            return left * right
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
            return z3.And([self(part) for part in item.parts])
        if isinstance(item, Any_):
            return z3.Or([self(part) for part in item.parts])
        body = self(item.body)
        bound = [z3.Int(name) for name in item.names]
        return z3.Exists(bound, body) if bound else body


class _Shared:
    """One translator and one incremental solver for the process: each query is pushed
    and popped again, which spares building a solver per query."""

    def __init__(self) -> None:
        self.translate = _Translator()
        self.solver = _z3().Solver()


_SHARED: list[_Shared] = []


def _shared() -> _Shared:
    if not _SHARED:
        _SHARED.append(_Shared())
    return _SHARED[0]


def satisfiable(cond: Cond, deadline: float | None = None) -> bool:
    """Whether some assignment satisfies `cond`; `unknown` counts as satisfiable (the
    tracer then follows a branch it may not need, which costs time, not soundness)."""
    try:
        return _check(cond, deadline) is not None
    except Undecided:
        return True


def model_of(cond: Cond, *, deadline: float | None = None) -> CounterModel | None:
    """Some assignment satisfying `cond`, or None; `unknown` raises `Undecided`."""
    return _check(cond, deadline)


def counter_model(cond: Cond, low: int, *, deadline: float | None = None) -> CounterModel | None:
    """An assignment satisfying `cond` with the smallest N (at least `low`), or None."""
    found = _check(cond, deadline)
    if found is None:
        return None
    for world in range(low, min(found.world, MAX_SCAN)):
        smaller = _check(All((cond, Cmp(Rel.EQ, Var(WORLD), Const(world)))), deadline)
        if smaller is not None:
            return smaller
    return found


def _check(cond: Cond, deadline: float | None) -> CounterModel | None:
    z3 = _z3()
    budget = TIMEOUT_MS
    if deadline is not None:
        budget = min(budget, int((deadline - time.monotonic()) * 1000))
        if budget <= 0:
            raise Undecided(reason(ReasonCode.EVERY_P_BUDGET))
    shared = _shared()
    solver = shared.solver
    solver.set("timeout", budget)
    solver.push()
    try:
        solver.add(shared.translate(cond))
        answer = solver.check()
        if answer == z3.unsat:
            return None
        if answer != z3.sat:
            raise Undecided(solver.reason_unknown())
        model = solver.model()
        values = {
            name: model.eval(z3.Int(name), model_completion=True).as_long()
            for name in sorted(variables(cond))
        }
    finally:
        solver.pop()
    return CounterModel(world=values.get(WORLD, 0), values=tuple(values.items()))
