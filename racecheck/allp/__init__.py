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

from racecheck.allp.expr import WORLD, All, Cmp, Cond, Const, Not, OutsideFragment, Rel, Var
from racecheck.allp.obligations import Obligation, Prover
from racecheck.allp.paths import trace_protocol
from racecheck.allp.solver import Undecided, counter_model, satisfiable
from racecheck.allp.templates import Effect, Protocol
from racecheck.events import NotifyOp, WaitCmp
from racecheck.load import ProgramSpec

EXECUTION_MODEL = (
    "the execution model of docs/model.md: notify/wait as release/acquire, windows zeroed"
    " per call, one call (--repeat 1); the tasks of a rank, values that steer the program"
    " and writes into signal cells other than notifies are checked at the concrete P below"
)
SCOPE = (
    "proved: races, deadlocks, out-of-bounds accesses;"
    " the golden-model comparison and stale-read warnings at the concrete P below only"
)
REPRESENTATIVE_CAP = 32  # the largest P checked concretely as a case's smallest member


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
    # PROVED: the smallest P (up to REPRESENTATIVE_CAP) of each case of the program's
    # branches on P, for the caller to check concretely
    representatives: tuple[int, ...] = ()


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
        _require_fragment(protocol)
        rejected = tuple(Not(rejection.guard) for rejection in protocol.rejections)
        assumption = All(rejected)
        base = All((Cmp(Rel.LE, Const(low), Var(WORLD)), assumption))
        if counter_model(base, low) is None:
            raise OutsideFragment(f"the program rejects every P >= {low}")
        failures = []
        for failure in Prover(protocol, low, assumption, deadline).failures():
            failures.append(failure)
            if failure.model.world == low:
                break  # the smallest P there is
        representatives = () if failures else _representatives(protocol, base, low, deadline)
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
        representatives=representatives,
    )


def _representatives(protocol: Protocol, base: Cond, low: int, deadline: float) -> tuple[int, ...]:
    """The smallest P of each case the program's branches on P alone tell apart (e.g.
    whether P divides a size, or the quotient of a size by P): every such case runs
    concretely at least once, so its numbers meet the golden model."""
    cases = dict.fromkeys(template.context for template in protocol.templates)
    found = set()
    for decisions in cases:
        case = All((base, *(cond if taken else Not(cond) for cond, taken in decisions)))
        model = counter_model(case, low, deadline=deadline)
        if model is not None and model.world <= REPRESENTATIVE_CAP:
            found.add(model.world)
    return tuple(sorted(found))


def _require_fragment(protocol: Protocol) -> None:
    """Signal cells only notifies write, one notify op per signal window and signed
    waits: the obligations reason about nothing else (the rest is checked per P)."""
    ops: dict[str, set[NotifyOp | None]] = {}
    for template in protocol.templates:
        memory = template.footprint.memory
        if template.effect is Effect.NOTIFY:
            ops.setdefault(memory, set()).add(template.notify_op)
        if template.cmp is WaitCmp.GE_UNSIGNED:
            raise OutsideFragment("a defer_wait compares unsigned")
    signal = set(ops) | {t.footprint.memory for t in protocol.templates if t.effect is Effect.WAIT}
    for template in protocol.templates:
        if (
            template.effect in (Effect.WRITE, Effect.ATOMIC_ADD)
            and template.footprint.memory in signal
        ):
            raise OutsideFragment(
                f"a store into signal window {template.footprint.memory} (line"
                f" {template.location.line}) besides its notifies"
            )
    for memory, found in ops.items():
        if len(found) > 1:
            raise OutsideFragment(f"Set and AtomicAdd notifies on one signal window ({memory})")
