"""Every P: one proof for all rank counts, or the smallest P that fails (issue 12).

`prove_every_p(spec, low)` traces the program once per branch path with a symbolic
world size N and rank (`paths`, `tracer`, `shadow`), merges the paths into event
templates (`templates`) and discharges the obligations (`obligations`) for every
N >= low with z3 (`solver`, the only module here that imports it). The answer is a
proof with the assumptions it rests on, a counter-model (the smallest N at which an
obligation fails, for the caller to confirm concretely), or the reason no all-P
answer is possible (then the caller checks a concrete range instead).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum

from racecheck.allp.expr import WORLD, All, Cmp, Const, Not, OutsideFragment, Rel, Var
from racecheck.allp.obligations import Obligation, Prover
from racecheck.allp.paths import trace_protocol
from racecheck.allp.solver import Undecided, counter_model, satisfiable
from racecheck.load import ProgramSpec

EXECUTION_MODEL = (
    "the execution model of SPEC §2: one kernel task per rank in program order,"
    " notify/wait as release/acquire, windows zeroed per call, one call (--repeat 1)"
)
SCOPE = (
    "proved: races, deadlocks, out-of-bounds accesses;"
    " the golden-model comparison and stale-read warnings are per P (run a concrete range)"
)


BUDGET = 5.0  # seconds for one all-P attempt before falling back


class Answer(Enum):
    PROVED = "proved"
    REFUTED = "refuted"
    FALLBACK = "fallback"


@dataclass(frozen=True, slots=True, kw_only=True)
class EveryPOutcome:
    answer: Answer
    low: int
    reason: str = ""  # FALLBACK: why no all-P answer; REFUTED: the failed obligation
    smallest: int | None = None  # REFUTED: the smallest N of the counter-model
    assumptions: tuple[str, ...] = ()
    templates: int = 0


def prove_every_p(
    spec: ProgramSpec, low: int, *, repeat: int = 1, budget: float = BUDGET
) -> EveryPOutcome:
    if repeat != 1:
        reason = "--repeat runs are outside the symbolic fragment (one call only)"
        return EveryPOutcome(answer=Answer.FALLBACK, low=low, reason=reason)
    if spec.origin is None:
        reason = "the program's origin is unknown"
        return EveryPOutcome(answer=Answer.FALLBACK, low=low, reason=reason)
    try:
        deadline = time.monotonic() + budget
        protocol = trace_protocol(spec.origin, low, satisfiable, deadline)
        rejected = tuple(Not(rejection.guard) for rejection in protocol.rejections)
        assumption = All(rejected)
        base = All((Cmp(Rel.LE, Const(low), Var(WORLD)), assumption))
        if counter_model(base, low) is None:
            raise OutsideFragment(f"the program rejects every P >= {low}")
        failures = list(Prover(protocol, low, assumption, deadline).failures())
    except OutsideFragment as outside:
        return EveryPOutcome(answer=Answer.FALLBACK, low=low, reason=outside.reason)
    except Undecided as undecided:
        return EveryPOutcome(
            answer=Answer.FALLBACK,
            low=low,
            reason=f"z3 could not decide an obligation ({undecided})",
        )
    if failures:
        first = min(failures, key=lambda failure: failure.model.world)
        where = ", ".join(f"line {location.line}" for location in first.locations)
        return EveryPOutcome(
            answer=Answer.REFUTED,
            low=low,
            reason=f"no proof that {first.obligation.value}: counter-model at P={first.model.world}"
            f" ({where})",
            smallest=first.model.world,
            templates=len(protocol.templates),
        )
    assumptions = [
        f"P >= {low}",
        *(
            f"the program accepts P (else skipped: {message})"
            for message in dict.fromkeys(r.message for r in protocol.rejections)
        ),
        EXECUTION_MODEL,
        SCOPE,
        *(f"discharged for every P: {obligation.value}" for obligation in Obligation),
    ]
    return EveryPOutcome(
        answer=Answer.PROVED,
        low=low,
        assumptions=tuple(assumptions),
        templates=len(protocol.templates),
    )
