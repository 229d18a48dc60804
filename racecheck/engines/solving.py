"""z3 under racecheck's budgets: the one place a z3 check gets its limits.

Each check is bounded in work, by z3's resource limit (`rlimit`: a count of z3's own
steps, the same on every machine, so a query decides or gives up alike everywhere),
and by the time left before `--timeout` (`racecheck.clock`), the only bound in seconds.
A check whose budget runs out is undecided with the budget named; one that `--timeout`
cuts raises `Overtime`. Each caller keeps its own unknown policy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import z3  # type: ignore[import-untyped]

from racecheck import clock
from racecheck.report.reasons import ReasonCode, reason

_NO_TIMEOUT = 2**32 - 1  # z3's "no timeout", in ms
_OUT_OF_RESOURCES = ("canceled", "max. resource limit exceeded", "resource limit")


@dataclass(frozen=True, slots=True, kw_only=True)
class Checked:
    """What one check answered: z3's result, and when it is `unknown`, why."""

    result: z3.CheckSatResult
    spent: int  # resource units the check used
    why: str = ""

    @property
    def sat(self) -> bool:
        return bool(self.result == z3.sat)

    @property
    def unsat(self) -> bool:
        return bool(self.result == z3.unsat)


def limited_check(
    solver: z3.Solver,
    assumptions: Sequence[z3.BoolRef] = (),
    *,
    rlimit: int,
    deadline: float,
    stage: str,
) -> Checked:
    """`solver.check(*assumptions)` within `rlimit` resource units and before `deadline`
    (a `clock.now()` value); past the deadline, before or during the check, `Overtime`
    naming `stage`."""
    clock.check(deadline, stage)
    left = clock.left(deadline)
    solver.set("rlimit", rlimit)
    solver.set(
        "timeout", _NO_TIMEOUT if math.isinf(left) else min(max(1, int(left * 1000)), _NO_TIMEOUT)
    )
    before = _units(solver)
    result = solver.check(*assumptions)
    spent = _units(solver) - before
    if result != z3.unknown:
        return Checked(result=result, spent=spent)
    clock.check(deadline, stage)
    why = solver.reason_unknown()
    if why in _OUT_OF_RESOURCES:
        why = reason(ReasonCode.Z3_BUDGET, units=rlimit)
    return Checked(result=result, spent=spent, why=why)


def _units(solver: z3.Solver) -> int:
    """The resource units the solver has used so far (0 before its first check)."""
    try:
        return int(solver.statistics().get_key_value("rlimit count"))
    except z3.Z3Exception:
        return 0
