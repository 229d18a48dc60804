"""Judging: from what a check found to its verdict, in one place.

`decide` is the only function that sets a program's verdict (and so, through
`findings.exit_code_of`, the exit status):

* skipped when the program rejected the P;
* bug when an error finding is confirmed, on any path `racecheck.paths` checked: a
  race or deadlock whose witness the co-simulation replayed, an out-of-bounds access,
  a wrong result;
* unknown when an engine could not decide, or a value that steered the program may
  differ on a path no check covered (`racecheck.paths`);
* unknown when a race or deadlock did not replay (an internal inconsistency: the
  analysis and the co-simulation disagree, so neither answer can be trusted), or when
  the traced run hung and no engine found the deadlock;
* proved otherwise, with any warnings listed. A stale read alone is a warning (a
  window is zero-initialised per call, and reading zeros can be intended); it becomes
  an error, named as the likely cause, when the functional check at that P fails.

`confirm` replays a hazard's witness; `functional` compares the outputs with the
golden; `across_ranks` is the cross-P step: P whose outputs match no model while
at least two other P >= 3 of the same program match one are wrong results against
that model.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Container, Sequence
from dataclasses import dataclass

from racecheck import reference
from racecheck.analysis import Hazard, to_finding
from racecheck.cells import after_write
from racecheck.cosim import Execution, Simulator
from racecheck.engines.base import OrderOracle
from racecheck.engines.skeleton import signal_cells
from racecheck.errors import UsageError
from racecheck.events import CellIndex, CellKey, CellOp, Trace, cell_effect
from racecheck.findings import (
    Finding,
    FindingKind,
    OutputDiff,
    ProgramResult,
    Severity,
    Verdict,
)
from racecheck.models import ModelNotApplicable
from racecheck.options import Options
from racecheck.reference import Golden, HostIO
from racecheck.report.reasons import ReasonCode, reason
from racecheck.rounds import Rounds

_REPLAYED_KINDS = (FindingKind.RACE, FindingKind.DEADLOCK)
REPEAT_NOTE = reason(ReasonCode.REPEAT)
RESET_NOTE = reason(ReasonCode.RESET_WINDOWS)
ROUNDS_NOTE = reason(ReasonCode.ROUNDS_JOINED)
SINGLE_DEVICE_NOTE = reason(ReasonCode.SINGLE_DEVICE)
SINGLE_USE_NOTE = reason(ReasonCode.SINGLE_USE)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """The facts of one program at one P, before judging."""

    program: str
    ranks: int
    rank_param: str | None = None
    findings: tuple[Finding, ...] = ()
    skipped: str | None = None  # the program's own rejection message
    unknown: str | None = None  # why no engine could decide
    hung: bool = False  # the traced run needed a forced wait
    io: HostIO | None = None
    model: str | None = None  # the golden the outputs match
    events: int = 0
    seconds: float = 0.0
    engine: str = ""
    notes: tuple[str, ...] = ()


def decide(outcome: Outcome) -> ProgramResult:
    """The verdict of one program at one P; see the module docstring."""
    verdict, message, findings, notes = _verdict(outcome)
    return ProgramResult(
        program=outcome.program,
        ranks=outcome.ranks,
        verdict=verdict,
        findings=findings,
        model=outcome.model if verdict is Verdict.PROVED else None,
        events=outcome.events,
        seconds=outcome.seconds,
        engine=outcome.engine,
        message=message,
        notes=outcome.notes + notes,
        rank_param=outcome.rank_param,
    )


def shows_bug(outcome: Outcome) -> bool:
    """Is `outcome` a bug, whatever other paths show (a bug is never overruled)?"""
    return _verdict(outcome)[0] is Verdict.BUG


def _verdict(outcome: Outcome) -> tuple[Verdict, str, tuple[Finding, ...], tuple[str, ...]]:
    if outcome.skipped is not None:
        return Verdict.SKIPPED, outcome.skipped, (), ()
    errors = [f for f in outcome.findings if f.severity is Severity.ERROR]
    unconfirmed = [f for f in errors if f.kind in _REPLAYED_KINDS and not f.confirmed]
    shown = tuple(f for f in outcome.findings if f not in unconfirmed)
    dropped = tuple(_unconfirmed_note(f) for f in unconfirmed)
    if len(unconfirmed) < len(errors):
        return Verdict.BUG, "", shown, dropped + _unchecked(outcome)
    if outcome.unknown is not None:
        return Verdict.UNKNOWN, outcome.unknown, (), ()
    if unconfirmed:
        return Verdict.UNKNOWN, _unconfirmed_note(unconfirmed[0]), shown, dropped[1:]
    if outcome.hung:
        return Verdict.UNKNOWN, reason(ReasonCode.HUNG_UNFOUND), shown, ()
    return Verdict.PROVED, "", shown, ()


def _unchecked(outcome: Outcome) -> tuple[str, ...]:
    """A bug shown while some executions went unchecked: there may be more to fix."""
    if outcome.unknown is None:
        return ()
    return (reason(ReasonCode.MORE_UNCHECKED, why=outcome.unknown),)


def _unconfirmed_note(finding: Finding) -> str:
    where = f" at {finding.locations[0]}" if finding.locations else ""
    code = ReasonCode.WITNESS_DIVERGED if finding.diverged else ReasonCode.WITNESS_UNREPLAYED
    return reason(code, finding=finding.code.value, where=where)


# --- confirmation -----------------------------------------------------------------------


def confirm(
    simulator: Simulator,
    trace: Trace,
    oracle: OrderOracle,
    hazard: Hazard,
    golden: Golden,
    *,
    known: Container[tuple[object, ...]] = frozenset(),
) -> Finding:
    """The finding, its witness replayed by the co-simulation, and the output it produces.
    A finding `known` from an earlier path of the program is reported as that path found
    it (`racecheck.paths.merged`), so its witness is neither built nor replayed again.
    `golden` names the model the output is compared with; it is asked only when a replay
    needs it."""
    if hazard.identity in known:
        return to_finding(trace, oracle, hazard, witnessed=False)[0]
    finding, schedule = to_finding(trace, oracle, hazard)
    # a deadlock's witness is empty when the ranks block before anything else runs
    if not schedule and hazard.kind is not FindingKind.DEADLOCK:
        return finding
    replay = reference.replay_witness(simulator, hazard, schedule)
    if replay is None:  # with values that steer control, the witness may change them
        return dataclasses.replace(finding, diverged=bool(trace.control_reads))
    options = simulator.options
    # the output the race makes wrong; with --expect, the one its model describes
    output = None if options.expect else reference.changed_output(replay, golden.execution)
    io = reference.host_io(replay, output)
    model = golden.model(output) if io is not None and not replay.stalled else None
    diff = None if model is None or io is None else _difference(model, io, options)
    return dataclasses.replace(finding, confirmed=_shows(hazard, replay), diff=diff)


def _shows(hazard: Hazard, replay: Execution) -> bool:
    if hazard.kind is FindingKind.DEADLOCK:
        return bool(replay.stalled)
    if hazard.bad_first is None or hazard.bad_second is None:
        return False
    order = {ref: n for n, ref in enumerate(replay.schedule)}
    first = order.get(hazard.bad_first)
    second = order.get(hazard.bad_second)
    return first is not None and (second is None or first < second)


# --- the functional check ---------------------------------------------------------------


def functional(outcome: Outcome, options: Options) -> Outcome:
    """Compare a determinate run's outputs with the golden (`--expect` or identified)."""
    if outcome.io is None or any(f.severity is Severity.ERROR for f in outcome.findings):
        return outcome
    if options.expect is None:
        return dataclasses.replace(
            outcome, model=reference.identify(outcome.io, repeat=options.repeat)
        )
    diff = _difference(options.expect, outcome.io, options)
    if diff is None:
        return dataclasses.replace(outcome, model=options.expect)
    return with_wrong_result(outcome, diff)


def _difference(model: str, io: HostIO, options: Options) -> OutputDiff | None:
    try:
        return reference.difference(model, io, repeat=options.repeat)
    except ModelNotApplicable as why:
        raise UsageError(
            reason(
                ReasonCode.EXPECT_NOT_APPLICABLE, model=model, ranks=len(io.inputs), why=str(why)
            )
        ) from None


def with_wrong_result(outcome: Outcome, diff: OutputDiff) -> Outcome:
    """The outcome with a wrong result; its stale reads become errors, named as the cause."""
    stale = [f for f in outcome.findings if f.kind is FindingKind.STALE_READ]
    cause = stale[0].locations[0] if stale else None
    where = cause if cause is not None else diff.store  # code scanning needs a line
    wrong = Finding(
        kind=FindingKind.WRONG_RESULT,
        detail="",
        locations=(where,) if where is not None else (),
        ranks=(diff.rank,),
        diff=diff,
        cause=cause,
    )
    raised = tuple(dataclasses.replace(f, severity=Severity.ERROR) for f in outcome.findings)
    return dataclasses.replace(outcome, findings=(*raised, wrong), model=None)


def across_ranks(outcomes: Sequence[Outcome], options: Options) -> list[Outcome]:
    """The cross-P step for one program (see the module docstring). The reference model
    is the one most P >= 3 match, provided at least two do. At P=1 most models
    degenerate to the identity, at P=2 many coincide (shift+1, shift-1 and a pair swap
    are one permutation), and a correct collective can coincide with a model at one
    larger P (the exchange with rank r ^ 2 is shift+2 at P=4 only), so a model matched
    by fewer is evidence only for a P whose run also read stale bytes."""
    if options.expect is not None:
        return list(outcomes)
    matched = Counter(o.model for o in outcomes if o.model is not None and o.ranks >= 3)
    anywhere = Counter(o.model for o in outcomes if o.model is not None)
    common = matched.most_common(1)
    strong = common[0][0] if common and common[0][1] >= 2 else None
    weak = anywhere.most_common(1)[0][0] if anywhere else None
    return [
        _against(outcome, strong or (weak if _stale(outcome) else None), options)
        for outcome in outcomes
    ]


def _stale(outcome: Outcome) -> bool:
    return any(f.kind is FindingKind.STALE_READ for f in outcome.findings)


def _against(outcome: Outcome, model: str | None, options: Options) -> Outcome:
    unjudged = outcome.skipped is None and outcome.unknown is None and not outcome.hung
    if model is None or not unjudged or outcome.model is not None or outcome.io is None:
        return outcome
    if any(f.severity is Severity.ERROR for f in outcome.findings):
        return outcome
    try:
        diff = reference.difference(model, outcome.io, repeat=options.repeat)
    except ModelNotApplicable:
        return outcome  # the model has no golden at this P: nothing to compare with
    return outcome if diff is None else with_wrong_result(outcome, diff)


def notes(trace: Trace, options: Options) -> tuple[str, ...]:
    """What `--repeat`, `--rounds` and `--per-call` model; or a single-use kernel."""
    called = (
        (reason(ReasonCode.PER_CALL, values=" ".join(f"{n}={e}" for n, e in options.per_call)),)
        if options.per_call
        else ()
    )
    if options.repeat != 1:
        joined = (ROUNDS_NOTE,) if options.rounds is Rounds.JOINED else ()
        return (REPEAT_NOTE, *joined, *called)
    return (*called, *_single_use(trace))


def _single_use(trace: Trace) -> tuple[str, ...]:
    """A single-use kernel: its writes into signal cells are all adds
    (`events.cell_effect`), and they leave some cell non-zero."""
    near = CellIndex(signal_cells(trace))
    totals: dict[CellKey, int] = {}
    for rank_events in trace.events:
        for event in rank_events:
            for key in near.touching(event.access):
                effect = cell_effect(event, key)
                if effect is None:
                    continue
                if effect.op is not CellOp.ADD:
                    return ()  # a Set or a store: the end value is not a sum of adds
                totals[key] = after_write(totals.get(key, 0), effect.value, True)
    return (SINGLE_USE_NOTE,) if any(totals.values()) else ()
