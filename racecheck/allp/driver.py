"""`--ranks all`: the all-P proof and the concrete checks that make it stand.

The proof (`prove_every_p`) covers races, deadlocks and bounds for every P; what it
leaves out (the tasks of a rank, steering values, writes into signal cells other than
notifies, stale reads, the outputs against the golden model) is checked concretely at
the P the obligations name: the fallback range and the smallest P of each branch
side, each case of each division and modulus, each event template and each overlap
of two instances of one writing template. The headline says exactly that: races,
deadlocks and bounds for every P, outputs at the P checked. A refuted proof lists the
P at which some obligation fails, ascending; each is confirmed concretely in turn, so
the smallest failing P reported is the smallest over every failed obligation.
Otherwise the fallback range is checked, with the reason.

The caller supplies the concrete check (`Concrete`) and a fresh import of the
program (`Fresh`): every symbolic path runs on a module of its own, as every concrete
unit does, so nothing one run leaves in the user's module (a memo of programs per
size) reaches another.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

from racecheck import allp, clock
from racecheck.allp import MAX_FAILING, Answer, EveryPOutcome
from racecheck.errors import TracingError, UnsupportedConstruct
from racecheck.findings import EveryPProof, ProgramResult, Verdict, noted
from racecheck.load import ProgramSpec
from racecheck.options import EveryP

Concrete = Callable[[tuple[int, ...]], list[ProgramResult]]
Fresh = Callable[[], ProgramSpec]

PROVED_BUT_FAILS_HERE = (
    "--ranks all: no race, deadlock or out-of-bounds access at any P (proved), but the"
    " concrete check fails at this P"
)


def check_every_p(
    spec: ProgramSpec,
    every_p: EveryP,
    *,
    repeat: int,
    timeout: float,
    concrete: Concrete,
    fresh: Fresh,
    assume: tuple[str, ...] = (),
) -> list[ProgramResult]:
    """One all-P proof, which stands only if the concrete checks at the P it names
    prove what the symbolic fragment leaves out — or the smallest failing P confirmed
    concretely — or the fallback range, with the reason."""
    started = time.monotonic()
    try:
        with clock.unit(timeout):  # the proof's own --timeout; each concrete P has its own
            outcome = allp.prove_every_p(
                spec, every_p.low, repeat=repeat, fresh=fresh, assume=assume
            )
    except (UnsupportedConstruct, TracingError) as error:
        outcome = EveryPOutcome(answer=Answer.FALLBACK, low=every_p.low, reason=error.message)
    checked: dict[int, ProgramResult] = {}
    reason = outcome.reason
    if outcome.answer is Answer.PROVED:
        worlds = tuple(sorted({*every_p.fallback, *outcome.representatives, every_p.low}))
        results = concrete(worlds)
        checked.update((result.ranks, result) for result in results)  # not run again
        verdicts = {result.verdict for result in results}
        if verdicts <= {Verdict.PROVED, Verdict.SKIPPED} and results[0].verdict is Verdict.PROVED:
            return [_proved(results, every_p, outcome, started)]
        if Verdict.BUG in verdicts:
            return [
                noted(result, PROVED_BUT_FAILS_HERE) if result.verdict is Verdict.BUG else result
                for result in results
            ]
        undecided = next(r for r in results if r.verdict is not Verdict.PROVED)
        reason = f"the concrete check at P={undecided.ranks} is {undecided.verdict.value}"
    elif outcome.answer is Answer.REFUTED:
        found = _confirmed(outcome, every_p, concrete, checked)
        if found is not None:
            return found
        reason += (
            f", but the concrete check{'s' if len(checked) > 1 else ''} at"
            f" P={_span(tuple(sorted(checked)))} find{'' if len(checked) > 1 else 's'} no bug"
            " (a longer causal chain may order it)"
        )
    note = f"not proved for every P: {reason}; checked P={_span(every_p.fallback)} instead"
    return [noted(result, note) for result in _with(every_p.fallback, concrete, checked)]


def _confirmed(
    outcome: EveryPOutcome, every_p: EveryP, concrete: Concrete, checked: dict[int, ProgramResult]
) -> list[ProgramResult] | None:
    """The lowest P, then each P at which an obligation fails, smallest first (up to
    MAX_FAILING), checked concretely until one shows a bug — or is unknown, which
    ends the search there."""
    refutation = outcome.refutation
    if refutation is None:
        return None
    step: tuple[int, str] | None = refutation.first
    lowest = (every_p.low, "the concrete check at the lowest P")
    for world, why in (lowest,) if every_p.low < refutation.first[0] else ():
        (checked[world],) = concrete((world,))
        if checked[world].verdict is Verdict.BUG:
            return [noted(checked[world], f"smallest failing P={world}: {why}")]
    for _ in range(MAX_FAILING):
        if step is None:
            break
        world, why = step
        (found,) = concrete((world,))
        checked[world] = found
        if found.verdict is Verdict.BUG:
            return [noted(found, f"smallest failing P={world}: {why}")]
        if found.verdict is Verdict.UNKNOWN:
            note = (
                f"not proved for every P: {why}, and the concrete check at P={world} is"
                f" unknown; checked P={_span(every_p.fallback)} too"
            )
            return [noted(result, note) for result in _with(every_p.fallback, concrete, checked)]
        step = refutation.after(world)
    return None


def _with(
    worlds: tuple[int, ...], concrete: Concrete, checked: dict[int, ProgramResult]
) -> list[ProgramResult]:
    """The results at `worlds` and at the other P already checked, by P."""
    missing = tuple(world for world in worlds if world not in checked)
    results = [*(concrete(missing) if missing else ()), *checked.values()]
    return sorted(results, key=lambda result: result.ranks)


def _proved(
    concrete: Sequence[ProgramResult], every_p: EveryP, outcome: EveryPOutcome, started: float
) -> ProgramResult:
    first = concrete[0]
    proved = tuple(result.ranks for result in concrete if result.verdict is Verdict.PROVED)
    models = {result.model for result in concrete if result.verdict is Verdict.PROVED}
    model = first.model if len(models) == 1 else None  # one model at every P checked, or none
    compared = (
        f"checked concretely at P={_span(proved)} (the fallback range and the smallest P of"
        " each branch side, division case, event template and overlap of one template's"
        " instances; tasks, steering values, golden model; outputs at no other P):"
        f" {model or 'matches no model'}"
    )
    return dataclasses.replace(
        first,
        model=model,
        every_p=EveryPProof(
            low=every_p.low,
            assumptions=(*outcome.assumptions, compared),
            high=outcome.high,
            outputs_at=proved,
        ),
        events=outcome.templates,  # for an all-P result: the number of event templates
        seconds=round(time.monotonic() - started, 4),
        engine="allp",
    )


def _span(ranks: tuple[int, ...]) -> str:
    contiguous = list(ranks) == list(range(ranks[0], ranks[-1] + 1))
    return (
        f"{ranks[0]}..{ranks[-1]}" if contiguous and len(ranks) > 1 else ",".join(map(str, ranks))
    )
