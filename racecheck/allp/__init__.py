"""Every P: one proof for all rank counts, or the smallest P that fails (issue 12).

`prove_every_p(spec, low)` traces the program once per branch path with a symbolic
world size N and rank (`paths`, `tracer`, `shadow`), merges the paths into event
templates (`templates`) and discharges the obligations (`obligations`) for every
N >= low with z3 (`solver`, the only module here that imports it). The answer is a
proof with the assumptions it rests on and the P its concrete checks must cover, a
refutation (the P at which some obligation fails, smallest first, for the caller to
confirm concretely), or the reason no all-P answer is possible (then the caller
checks a concrete range instead). `driver` runs `--ranks all` with these answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

from racecheck.allp.expr import WORLD, All, Any_, Cmp, Cond, Const, Not, OutsideFragment, Rel, Var
from racecheck.allp.obligations import Failure, Obligation, Prover, conflict_situations
from racecheck.allp.paths import trace_protocol
from racecheck.allp.solver import (
    ATTEMPT_RLIMIT,
    Undecided,
    begin,
    counter_model,
    model_of,
    satisfiable,
)
from racecheck.allp.templates import Case, Effect, Protocol, Template, WindowRead
from racecheck.assumptions import in_file, parse_assumption
from racecheck.clock import Overtime
from racecheck.clock import deadline as current_deadline
from racecheck.events import NotifyOp, WaitCmp
from racecheck.load import ProgramSpec
from racecheck.report.reasons import ReasonCode, reason

EXECUTION_MODEL = reason(ReasonCode.ASSUME_MODEL)
SCOPE = reason(ReasonCode.ASSUME_SCOPE)
REPRESENTATIVE_CAP = 32  # the largest P checked concretely as a case's smallest member
BEYOND_CAP = 4096  # the largest P a path first taken past REPRESENTATIVE_CAP is looked for at
MAX_FAILING = 12  # failing P the concrete checks try to confirm, smallest first


class Answer(Enum):
    PROVED = "proved"
    REFUTED = "refuted"
    FALLBACK = "fallback"


@dataclass(frozen=True, slots=True, kw_only=True)
class EveryPOutcome:
    answer: Answer
    low: int
    reason: str = ""  # FALLBACK: why no all-P answer; REFUTED: the failed obligation
    assumptions: tuple[str, ...] = ()
    templates: int = 0
    high: int | None = None  # PROVED: only below this P (a device scalar leaves INT32 there)
    # PROVED: the smallest P (up to REPRESENTATIVE_CAP) of each case of the program's
    # branches on P, for the caller to check concretely
    representatives: tuple[int, ...] = ()
    # REFUTED: the P at which some obligation fails, smallest first, on demand
    refutation: Refutation | None = None

    @property
    def smallest(self) -> int | None:
        """REFUTED: the smallest P at which an obligation fails."""
        return None if self.refutation is None else self.refutation.first[0]


class Refutation:
    """The P at which some obligation fails, ascending, each with the first obligation
    failing there: the caller confirms them concretely in this order, so the smallest
    failing P it reports is the smallest over every failed obligation. The first is
    known at once; the later ones, needed only when the first is not confirmed, are
    looked for over every obligation's failures (each call with a budget of its own)."""

    def __init__(
        self, prover: Prover, failures: list[Failure], rest: Iterator[Failure], base: Cond
    ) -> None:
        self._prover, self._failures, self._rest, self._base = prover, failures, rest, base
        smallest = min(failures, key=lambda failure: failure.model.world)
        self.first = (smallest.model.world, _why(smallest, smallest.model.world))

    def after(self, world: int, budget: int = ATTEMPT_RLIMIT) -> tuple[int, str] | None:
        """The smallest P beyond `world` at which some obligation fails, or None (also
        when z3 cannot tell within `budget` resource units, an attempt of its own)."""
        begin(budget)
        deadline = current_deadline()
        self._prover.deadline = deadline
        try:
            self._failures += list(self._rest)
            union = Any_(tuple(failure.cond for failure in self._failures))
            beyond = All((self._base, union, Cmp(Rel.LT, Const(world), Var(WORLD))))
            model = counter_model(beyond, world + 1, deadline=deadline)
            if model is None:
                return None
            at = All((self._base, Cmp(Rel.EQ, Var(WORLD), Const(model.world))))
            first = next(
                (f for f in self._failures if model_of(All((at, f.cond)), deadline=deadline)),
                self._failures[0],
            )
        except Undecided:
            return None
        return model.world, _why(first, model.world)


def _why(failure: Failure, world: int) -> str:
    where = ", ".join(f"line {location.line}" for location in failure.locations)
    return reason(
        ReasonCode.EVERY_P_REFUTED, obligation=failure.obligation.value, world=world, where=where
    )


def prove_every_p(
    spec: ProgramSpec,
    low: int,
    *,
    repeat: int = 1,
    budget: int = ATTEMPT_RLIMIT,
    fresh: Callable[[], ProgramSpec] | None = None,
    assume: tuple[str, ...] = (),
) -> EveryPOutcome:
    """The all-P answer for `spec`, within `budget` z3 resource units and the
    `--timeout` in force (`racecheck.clock.unit`); past either, a fallback naming it.
    With `fresh`, each branch path after the first is traced on a fresh import of the
    program's file."""
    if repeat != 1:
        return EveryPOutcome(
            answer=Answer.FALLBACK, low=low, reason=reason(ReasonCode.EVERY_P_REPEAT)
        )
    if spec.origin is None:
        return EveryPOutcome(
            answer=Answer.FALLBACK, low=low, reason=reason(ReasonCode.EVERY_P_NO_ORIGIN)
        )
    try:
        begin(budget)
        deadline = current_deadline()
        reload = None if fresh is None else lambda: fresh().origin
        assumed = (
            *(parse_assumption(text) for text in assume),
            *(found for _, found in in_file(spec.origin.loaded.path)),
        )
        protocol = trace_protocol(spec.origin, low, satisfiable, deadline, reload, assumed)
        _require_fragment(protocol)
        rejected = tuple(Not(rejection.guard) for rejection in protocol.rejections)
        assumption = All(rejected)
        base = All((Cmp(Rel.LE, Const(low), Var(WORLD)), assumption))
        if counter_model(base, low, deadline=deadline) is None:
            raise OutsideFragment(reason(ReasonCode.EVERY_P_REJECTS_ALL, low=low))
        below = _int32_limit(protocol, base, low, deadline)
        if below is not None:
            base = All((base, Cmp(Rel.LT, Var(WORLD), Const(below[0]))))
        prover = Prover(protocol, low, assumption, deadline)
        rest = prover.failures()
        failures = []
        for failure in rest:
            failures.append(failure)
            if failure.model.world == low:
                break  # the smallest P there is: the others only if it is not confirmed
        representatives, unchecked = (
            ((), ()) if failures else _representatives(protocol, base, low, deadline)
        )
    except OutsideFragment as outside:
        return EveryPOutcome(answer=Answer.FALLBACK, low=low, reason=outside.reason)
    except Overtime as overtime:
        return EveryPOutcome(answer=Answer.FALLBACK, low=low, reason=overtime.reason)
    except Undecided as undecided:
        return EveryPOutcome(
            answer=Answer.FALLBACK,
            low=low,
            reason=reason(ReasonCode.EVERY_P_UNDECIDED, why=str(undecided)),
        )
    if failures:
        return EveryPOutcome(
            answer=Answer.REFUTED,
            low=low,
            reason=(refutation := Refutation(prover, failures, rest, base)).first[1],
            refutation=refutation,
            templates=len(protocol.templates),
        )
    assumptions = [
        reason(ReasonCode.ASSUME_LOW, low=low),
        *(
            (reason(ReasonCode.ASSUME_INPUTS, ranges=", ".join(protocol.inputs)),)
            if protocol.inputs
            else ()
        ),
        *(
            reason(
                ReasonCode.ASSUME_WINDOW_READ,
                memory=read.memory,
                line=read.location.line,
                values=_values(read.low, read.high),
            )
            for read in protocol.window_reads
        ),
        *(() if below is None else (below[1],)),
        *(
            reason(ReasonCode.ASSUME_ACCEPTS, message=message)
            for message in dict.fromkeys(r.message for r in protocol.rejections)
        ),
        EXECUTION_MODEL,
        SCOPE,
        *unchecked,
        *(reason(ReasonCode.ASSUME_DISCHARGED, obligation=o.value) for o in Obligation),
    ]
    return EveryPOutcome(
        answer=Answer.PROVED,
        low=low,
        assumptions=tuple(assumptions),
        templates=len(protocol.templates),
        representatives=representatives,
        high=None if below is None else below[0],
    )


def _int32_limit(
    protocol: Protocol, base: Cond, low: int, deadline: float
) -> tuple[int, str] | None:
    """The smallest P at which some device scalar the program computes leaves INT32,
    where the device wraps or is undefined (docs/model.md), with the assumption that P
    stays below it; None if there is no such P. Such a P up to REPRESENTATIVE_CAP
    leaves the fragment (the concrete check names the line): the proof would cover
    too few P to stand for every P."""
    fails = {check: All((check.guard, Not(check.holds))) for check in protocol.scalars}
    int32_world = Cmp(Rel.LT, Var(WORLD), Const(2**31))  # P is an INT32 scalar itself
    failing = All((base, int32_world, Any_(tuple(fails.values()))))
    if not fails or model_of(failing, deadline=deadline) is None:
        return None
    world = _smallest_world(failing, low, deadline)
    at = All((base, Cmp(Rel.EQ, Var(WORLD), Const(world))))
    check = next(c for c, fail in fails.items() if model_of(All((at, fail)), deadline=deadline))
    facts: dict[str, str | int] = {"world": world, "line": check.location.line, "what": check.what}
    if world <= REPRESENTATIVE_CAP:
        raise OutsideFragment(reason(ReasonCode.EVERY_P_INT32, **facts))
    return world, reason(ReasonCode.ASSUME_BELOW, **facts)


def _smallest_world(cond: Cond, low: int, deadline: float, *, ceiling: int = 2**31) -> int:
    """The smallest N >= `low` satisfying `cond` (which some N <= `ceiling` does), by
    bisection."""
    floor = low  # cond fails below floor; some N <= ceiling satisfies it
    while floor < ceiling:
        middle = (floor + ceiling) // 2
        bounded = All((cond, Cmp(Rel.LE, Var(WORLD), Const(middle))))
        if model_of(bounded, deadline=deadline) is None:
            floor = middle + 1
        else:
            ceiling = middle
    return ceiling


def _representatives(
    protocol: Protocol, base: Cond, low: int, deadline: float
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Concrete P at which every branch side, every case of a division or modulus, every
    event template and every overlap of two instances of one writing template occurs
    (the smallest P of each): every path the proof speaks of runs
    concretely at least once, so its numbers meet the golden model. A path first taken beyond
    REPRESENTATIVE_CAP (on rank 40 only, say) is not run: the second part names it."""
    found = {low}
    beyond: dict[int, list[int]] = {}  # first P beyond the cap: lines first taken there
    situations = {item.guard: item.location.line for item in reversed(_situations(protocol))}
    for cond, location in conflict_situations(protocol):
        situations.setdefault(cond, location.line)
    for guard, line in situations.items():
        holds = All((base, guard))
        within = model_of(
            All((holds, Cmp(Rel.LE, Var(WORLD), Const(REPRESENTATIVE_CAP)))), deadline=deadline
        )
        if within is not None:
            found.add(_smallest_world(holds, low, deadline, ceiling=within.world))
        elif (world := _beyond(holds, beyond, low, deadline)) is not None:
            beyond.setdefault(world, []).append(line)
    unchecked = tuple(_unchecked(world, lines) for world, lines in sorted(beyond.items()))
    return tuple(sorted(found)), unchecked


def _unchecked(world: int, lines: list[int]) -> str:
    where = ", line ".join(map(str, dict.fromkeys(lines)))
    return reason(ReasonCode.ASSUME_UNCHECKED, lines=where, cap=REPRESENTATIVE_CAP, world=world)


def _beyond(holds: Cond, known: dict[int, list[int]], low: int, deadline: float) -> int | None:
    """A P beyond the cap, up to BEYOND_CAP, at which `holds`: one already named if any,
    else the smallest; None if there is none. Every query bounds P: z3's nonlinear
    arithmetic over an unbounded P can run past its resource limit (example 20)."""
    for world in sorted(known):
        if model_of(All((holds, _one_of((world,)))), deadline=deadline) is not None:
            return world
    beyond = All((holds, Cmp(Rel.LT, Const(REPRESENTATIVE_CAP), Var(WORLD))))
    bounded = All((beyond, Cmp(Rel.LE, Var(WORLD), Const(BEYOND_CAP))))
    model = model_of(bounded, deadline=deadline)
    if model is None:
        return None
    return _smallest_world(beyond, max(low, REPRESENTATIVE_CAP + 1), deadline, ceiling=model.world)


def _one_of(worlds: Iterable[int]) -> Cond:
    return Any_(tuple(Cmp(Rel.EQ, Var(WORLD), Const(world)) for world in sorted(worlds)))


def _situations(protocol: Protocol) -> tuple[Case | Template, ...]:
    return (*protocol.cases, *protocol.templates)


def _require_fragment(protocol: Protocol) -> None:
    """Signal cells only notifies write, one notify op per signal window and signed
    waits: the obligations reason about nothing else (the rest is checked per P)."""
    ops: dict[str, set[NotifyOp | None]] = {}
    for template in protocol.templates:
        memory = template.footprint.memory
        if template.effect is Effect.NOTIFY:
            ops.setdefault(memory, set()).add(template.notify_op)
        if template.cmp is WaitCmp.GE_UNSIGNED:
            raise OutsideFragment(reason(ReasonCode.EVERY_P_DEFER_WAIT))
    signal = set(ops) | {t.footprint.memory for t in protocol.templates if t.effect is Effect.WAIT}
    for template in protocol.templates:
        if template.effect.writes and template.footprint.memory in protocol.read_inputs:
            # a value read after such a write is the write's, not the input's
            raise OutsideFragment(
                reason(
                    ReasonCode.EVERY_P_INPUT_WRITTEN,
                    memory=template.footprint.memory,
                    line=template.location.line,
                )
            )
        if (
            template.effect in (Effect.WRITE, Effect.ATOMIC_ADD)
            and template.footprint.memory in signal
        ):
            raise OutsideFragment(
                reason(
                    ReasonCode.EVERY_P_SIGNAL_STORE,
                    memory=template.footprint.memory,
                    line=template.location.line,
                )
            )
    for memory, found in ops.items():
        if len(found) > 1:
            raise OutsideFragment(reason(ReasonCode.EVERY_P_SET_ADD, memory=memory))
    waited = {t.footprint.memory for t in protocol.templates if t.effect is Effect.WAIT}
    for template in protocol.templates:
        if (
            template.effect is Effect.NOTIFY
            and template.inputs
            and template.footprint.memory in waited
        ):
            # a wait's obligations compare its threshold with the notify's value
            raise OutsideFragment(
                reason(
                    ReasonCode.EVERY_P_INPUT_WAITED,
                    memory=template.footprint.memory,
                    line=template.location.line,
                )
            )
    for read in protocol.window_reads:
        _require_covered(read, protocol.templates)


def _require_covered(read: WindowRead, templates: tuple[Template, ...]) -> None:
    """The value a `pl.read` of a window was given, 0 or in `read.low..read.high`, covers
    every value the cell can hold: every writer of its memory on every path is a Set
    notify or a `pl.write` of an INT32 cell whose values lie in that interval."""
    for template in templates:
        if template.footprint.memory != read.memory or not template.effect.writes:
            continue
        facts: dict[str, str | int] = {
            "memory": read.memory,
            "line": template.location.line,
            "read": read.location.line,
        }
        span = template.span
        if span is None or template.footprint.itemsize != read.itemsize:
            raise OutsideFragment(reason(ReasonCode.EVERY_P_WINDOW_WRITER, **facts))
        if read.low is None or read.high is None or not read.low <= span[0] <= span[1] <= read.high:
            raise OutsideFragment(
                reason(ReasonCode.EVERY_P_WINDOW_VALUE, values=_values(*span), **facts)
            )


def _values(low: int | None, high: int | None) -> str:
    return "none" if low is None or high is None else f"{low}..{high}"
