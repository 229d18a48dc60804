"""The pipeline: load a file → trace each program's ranks → decide → execute the
reference → judge → report. `check` reads as that list; each step lives in its own
module, and every verdict is set by `racecheck.judge.decide`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from racecheck import judge, reference
from racecheck.analysis import find_hazards
from racecheck.cosim import Execution, RoundRobinPolicy, simulate
from racecheck.engines import prepare
from racecheck.errors import EngineUnknown, ProgramRejected, TracingError, UnsupportedConstruct
from racecheck.findings import ProgramResult, Report
from racecheck.judge import Outcome
from racecheck.load import ProgramInstance, ProgramSpec, discover, load_file
from racecheck.models import parse_model
from racecheck.options import Options

Progress = Callable[[str, int], None]


def check(path: str, options: Options, *, progress: Progress | None = None) -> Report:
    if options.expect is not None:
        parse_model(options.expect)  # a bad model name is a usage error before any work
    loaded = load_file(path)
    specs = discover(
        loaded, programs=options.programs, args=dict(options.args), rank_param=options.rank_param
    )
    results: list[ProgramResult] = []
    errors: list[str] = []
    for spec in specs:
        outcomes = []
        for ranks in options.ranks:
            if progress is not None:
                progress(spec.name, ranks)
            try:
                outcomes.append(_check_one(spec, ranks, options))
            except (UnsupportedConstruct, TracingError) as error:
                # One program the DSL cannot follow must not hide the file's other programs.
                errors.append(error.render())
                outcomes.append(_outcome(spec, ranks, time.monotonic(), unknown=error.message))
        results += [judge.decide(outcome) for outcome in judge.across_ranks(outcomes, options)]
    return Report(file=path, results=tuple(results), errors=tuple(dict.fromkeys(errors)))


def check_program(spec: ProgramSpec, ranks: int, options: Options) -> ProgramResult:
    """One program at one P, judged on its own (without the cross-P step)."""
    return judge.decide(_check_one(spec, ranks, options))


def _check_one(spec: ProgramSpec, ranks: int, options: Options) -> Outcome:
    started = time.monotonic()
    deadline = started + options.timeout
    try:
        instance = spec.instantiate(ranks)
        execution = simulate(
            instance, repeat=options.repeat, seed=options.seed, timeout=options.timeout
        )
    except ProgramRejected as rejected:
        return _outcome(spec, ranks, started, skipped=rejected.message)
    trace = execution.trace
    facts = {"events": trace.size}
    try:
        engine, oracle = prepare(options.engine, trace, deadline=deadline)
        hazards = find_hazards(trace, oracle)
        golden = (options.expect or _model_of(instance, execution, options)) if hazards else None
        findings = tuple(
            judge.confirm(instance, trace, oracle, hazard, golden, options) for hazard in hazards
        )
    except EngineUnknown as unknown:
        return _outcome(spec, ranks, started, unknown=unknown.reason, **facts)
    outcome = _outcome(
        spec,
        ranks,
        started,
        findings=findings,
        hung=bool(execution.forced),
        io=reference.host_io(execution),
        engine=engine,
        notes=judge.notes(trace, options),
        **facts,
    )
    return dataclasses.replace(judge.functional(outcome, options), seconds=_since(started))


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


def _outcome(spec: ProgramSpec, ranks: int, started: float, **facts) -> Outcome:
    return Outcome(
        program=spec.name,
        ranks=ranks,
        rank_param=spec.rank_param,
        seconds=_since(started),
        **facts,
    )


def _since(started: float) -> float:
    return round(time.monotonic() - started, 4)
