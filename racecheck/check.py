"""The pipeline: load a file → trace each program's ranks → decide → execute the
reference → report. `check` reads as that list; each step lives in its own module.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable

from racecheck import reference
from racecheck.allp import Answer, EveryPOutcome, prove_every_p
from racecheck.analysis import Hazard, find_hazards, to_finding
from racecheck.cosim import (
    DefaultPolicy,
    Execution,
    HoldPolicy,
    ReplayPolicy,
    RoundRobinPolicy,
    ScheduleDivergence,
    simulate,
)
from racecheck.engines import prepare
from racecheck.engines.base import OrderOracle
from racecheck.errors import EngineUnknown, ProgramRejected, TracingError, UnsupportedConstruct
from racecheck.events import NotifyOp, Schedule, Trace
from racecheck.findings import EveryPProof, Finding, FindingKind, ProgramResult, Report, Verdict
from racecheck.load import ProgramInstance, ProgramSpec, discover, load_file
from racecheck.models import parse_model
from racecheck.options import EveryP, Options

Progress = Callable[[str, int], None]


def check(path: str, options: Options, *, progress: Progress | None = None) -> Report:
    if options.expect is not None:
        parse_model(options.expect)  # a bad model name is a usage error before any work
    loaded = load_file(path)
    specs = discover(loaded, programs=options.programs, args=dict(options.args))
    results: list[ProgramResult] = []
    errors: list[str] = []
    for spec in specs:
        every_p = options.every_p
        if every_p is not None:
            run = functools.partial(check_every_p, spec, options, every_p)
            results.extend(_contained(spec, every_p.low, errors, run))
            continue
        for ranks in options.ranks:
            if progress is not None:
                progress(spec.name, ranks)
            run = functools.partial(_checked_at, spec, ranks, options)
            results.extend(_contained(spec, ranks, errors, run))
    return Report(file=path, results=tuple(results), errors=tuple(dict.fromkeys(errors)))


def _checked_at(spec: ProgramSpec, ranks: int, options: Options) -> list[ProgramResult]:
    return [check_program(spec, ranks, options)]


def _contained(
    spec: ProgramSpec, ranks: int, errors: list[str], run: Callable[[], list[ProgramResult]]
) -> list[ProgramResult]:
    try:
        return run()
    except (UnsupportedConstruct, TracingError) as error:
        # One program the DSL cannot follow must not hide the file's other programs.
        errors.append(error.render())
        return [
            ProgramResult(
                program=spec.name, ranks=ranks, verdict=Verdict.UNKNOWN, message=error.message
            )
        ]


def check_every_p(spec: ProgramSpec, options: Options, every_p: EveryP) -> list[ProgramResult]:
    """One all-P proof (with the golden model compared at its lowest P), or the smallest
    failing P confirmed by the concrete pipeline, or the fallback range with the reason."""
    started = time.monotonic()
    outcome = prove_every_p(spec, every_p.low, repeat=options.repeat)
    if outcome.answer is Answer.PROVED:
        return [_proved_every_p(spec, options, every_p, outcome, started)]
    reason = outcome.reason
    if outcome.answer is Answer.REFUTED and outcome.smallest is not None:
        for ranks in dict.fromkeys((every_p.low, outcome.smallest)):
            found = check_program(spec, ranks, options)
            if found.verdict is Verdict.BUG:
                why = reason if ranks == outcome.smallest else "the concrete check at the lowest P"
                return [_noted(found, f"smallest failing P={ranks}: {why}")]
        reason += (
            ", but the concrete check at that P finds no bug (a longer causal chain may order it)"
        )
    note = f"not proved for every P: {reason}; checked P={_span(every_p.fallback)} instead"
    return [_noted(check_program(spec, ranks, options), note) for ranks in every_p.fallback]


def _proved_every_p(
    spec: ProgramSpec,
    options: Options,
    every_p: EveryP,
    outcome: EveryPOutcome,
    started: float,
) -> ProgramResult:
    first = check_program(spec, every_p.low, options)
    if first.verdict is Verdict.BUG:
        return _noted(first, f"--ranks all: the proof holds, but P={every_p.low} fails")
    compared = f"golden model compared at P={every_p.low}: {first.model or 'matches no model'}"
    return dataclasses.replace(
        first,
        every_p=EveryPProof(low=every_p.low, assumptions=(*outcome.assumptions, compared)),
        events=outcome.templates,  # for an all-P result: the number of event templates
        seconds=round(time.monotonic() - started, 4),
        engine="allp",
    )


def _noted(result: ProgramResult, note: str) -> ProgramResult:
    return dataclasses.replace(result, notes=(note, *result.notes))


def _span(ranks: tuple[int, ...]) -> str:
    contiguous = list(ranks) == list(range(ranks[0], ranks[-1] + 1))
    return (
        f"{ranks[0]}..{ranks[-1]}" if contiguous and len(ranks) > 1 else ",".join(map(str, ranks))
    )


def check_program(spec: ProgramSpec, ranks: int, options: Options) -> ProgramResult:
    started = time.monotonic()
    deadline = started + options.timeout
    try:
        instance = spec.instantiate(ranks)
        execution = simulate(
            instance, repeat=options.repeat, seed=options.seed, timeout=options.timeout
        )
    except ProgramRejected as rejected:
        return _result(spec, ranks, started, verdict=Verdict.SKIPPED, message=rejected.message)
    trace = execution.trace
    try:
        engine, oracle = prepare(options.engine, trace, deadline=deadline)
        hazards = find_hazards(trace, oracle)
        golden = (options.expect or _model_of(instance, execution, options)) if hazards else None
        findings = [
            _confirmed(instance, trace, oracle, hazard, golden, options) for hazard in hazards
        ]
    except EngineUnknown as unknown:
        return _result(
            spec, ranks, started, verdict=Verdict.UNKNOWN, message=unknown.reason, trace=trace
        )
    return _judge(spec, ranks, started, options, engine, execution, findings)


def _judge(
    spec: ProgramSpec,
    ranks: int,
    started: float,
    options: Options,
    engine: str,
    execution: Execution,
    findings: list[Finding],
) -> ProgramResult:
    """Verdict from the findings, plus the functional check of a determinate run."""
    trace = execution.trace
    io = reference.host_io(execution)
    model = None
    if not findings and execution.forced:
        return _result(
            spec,
            ranks,
            started,
            verdict=Verdict.UNKNOWN,
            message="the traced run hung but no engine found the deadlock; refusing to answer",
            trace=trace,
            engine=engine,
        )
    if not findings and io is not None:
        if options.expect is not None:
            diff = reference.difference(options.expect, io, repeat=options.repeat)
            if diff is not None:
                findings.append(_wrong_result(options.expect, diff))
            else:
                model = options.expect
        else:
            model = reference.identify(io, repeat=options.repeat)
    verdict = Verdict.BUG if findings else Verdict.PROVED
    return _result(
        spec,
        ranks,
        started,
        verdict=verdict,
        findings=tuple(findings),
        model=model,
        trace=trace,
        engine=engine,
        notes=_notes(trace, options),
    )


def _model_of(instance: ProgramInstance, execution: Execution, options: Options) -> str | None:
    """The model the traced run matches or, failing that, a fully interleaved run: the
    golden a racy program's wrong output is shown against."""
    io = reference.host_io(execution)
    model = reference.identify(io, repeat=options.repeat) if io is not None else None
    if model is None:
        interleaved = reference.host_io(_interleaved(instance, options))
        if interleaved is not None:
            model = reference.identify(interleaved, repeat=options.repeat)
    return model


def _interleaved(instance: ProgramInstance, options: Options) -> Execution:
    return simulate(
        instance,
        policy=RoundRobinPolicy(),
        repeat=options.repeat,
        seed=options.seed,
        timeout=options.timeout,
    )


def _confirmed(
    instance: ProgramInstance,
    trace: Trace,
    oracle: OrderOracle,
    hazard: Hazard,
    golden: str | None,
    options: Options,
) -> Finding:
    """The finding, its witness replayed by the co-simulation, and the output it produces."""
    finding, schedule = to_finding(trace, oracle, hazard)
    if not schedule:
        return finding
    replay = _replay(instance, hazard, schedule, options)
    if replay is None:
        return finding
    io = reference.host_io(replay)
    diff = None
    if golden is not None and io is not None and not replay.stalled:
        diff = reference.difference(golden, io, repeat=options.repeat)
    return dataclasses.replace(finding, confirmed=_shows(hazard, replay), diff=diff)


def _replay(
    instance: ProgramInstance, hazard: Hazard, schedule: Schedule, options: Options
) -> Execution | None:
    """Run the witness, then keep the event it must precede back as long as possible."""
    then = DefaultPolicy()
    if hazard.bad_second is not None:
        then = HoldPolicy(hazard.bad_second, then)
    try:
        return simulate(
            instance,
            policy=ReplayPolicy(schedule, then),
            force_waits=False,
            repeat=options.repeat,
            seed=options.seed,
            timeout=options.timeout,
        )
    except ScheduleDivergence:
        return None


def _shows(hazard: Hazard, replay: Execution) -> bool:
    if hazard.kind is FindingKind.DEADLOCK:
        return bool(replay.stalled)
    if hazard.bad_first is None or hazard.bad_second is None:
        return False
    order = {ref: n for n, ref in enumerate(replay.schedule)}
    first = order.get(hazard.bad_first)
    second = order.get(hazard.bad_second)
    return first is not None and (second is None or first < second)


def _wrong_result(model: str, diff) -> Finding:
    return Finding(
        kind=FindingKind.WRONG_RESULT,
        detail="",
        message=f"the outputs do not match {model}",
        locations=(),
        ranks=(diff.rank,),
        diff=diff,
    )


def _notes(trace: Trace, options: Options) -> tuple[str, ...]:
    if options.repeat != 1:
        return ()
    totals: dict[tuple[int, int, int], int] = {}
    for rank_events in trace.events:
        for event in rank_events:
            notify = event.notify
            if notify is None:
                continue
            if notify.op is not NotifyOp.ATOMIC_ADD:
                return ()
            key = (notify.cell.memory, notify.cell.owner, notify.cell.offset)
            totals[key] = totals.get(key, 0) + notify.value
    if not any(totals.values()):
        return ()
    return (
        "signal cells end non-zero: this kernel is single-use as written;"
        " if it runs in a loop, check it with --repeat 2",
    )


def _result(
    spec: ProgramSpec,
    ranks: int,
    started: float,
    *,
    verdict: Verdict,
    trace: Trace | None = None,
    **fields,
) -> ProgramResult:
    return ProgramResult(
        program=spec.name,
        ranks=ranks,
        verdict=verdict,
        events=trace.size if trace is not None else 0,
        seconds=round(time.monotonic() - started, 4),
        **fields,
    )
