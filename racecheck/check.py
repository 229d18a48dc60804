"""The pipeline: load a file → trace each program's ranks → decide → execute the
reference → judge → report. `check` reads as that list; each step lives in its own
module. One program at one P is checked on every path its steering values can take
(`racecheck.paths`), and every verdict is set by `racecheck.judge.decide`. With
`--jobs N` the (program, P) units are checked in worker processes (`racecheck.workers`);
what depends on several units — the cross-P step, `--ranks all`'s choice of the next P
to check — is decided here, from their results in order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import sys
import time
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass

from racecheck import clock, gate, judge, reference, rounds, symbolic_inputs
from racecheck.analysis import Hazard, find_hazards
from racecheck.assumptions import Assumption, gathered, stated
from racecheck.cosim import Execution, RoundRobinPolicy, SchedulePolicy, simulate
from racecheck.cosim.execution import TensorRole
from racecheck.dsl.summary_state import loops as summary_loops
from racecheck.dsl.summary_state import revealed, summary_run
from racecheck.dsl.types import TensorType
from racecheck.dsl.watchdog import Overrun, within
from racecheck.engines import prepare
from racecheck.engines.base import OrderOracle
from racecheck.engines.deadline import DeadlineOracle
from racecheck.errors import (
    EngineUnknown,
    ProgramRejected,
    TracingError,
    UnsupportedConstruct,
    UserError,
)
from racecheck.events import Schedule, Trace
from racecheck.file_goldens import golden_notes
from racecheck.findings import Finding, FindingKind, ProgramResult, Report, noted
from racecheck.judge import Outcome
from racecheck.load import ProgramInstance, ProgramSpec, load_programs
from racecheck.models import parse_model
from racecheck.models.file_golden import file_golden_notes
from racecheck.options import EveryP, Options
from racecheck.paths import Path, PathOracle, PathOutcome, explore
from racecheck.project_imports import describe_import, forget_project_modules
from racecheck.report.reasons import ReasonCode, has_code, reason
from racecheck.rounds import Calls
from racecheck.session import Session
from racecheck.steering import open_reads
from racecheck.while_loops import while_notes
from racecheck.workers import Workers

Progress = Callable[[str, int], None]


def check(path: str, options: Options, *, progress: Progress | None = None) -> Report:
    with Workers(options.jobs) as workers, Session():
        return _check_file(_File(path=path, options=options, workers=workers), progress)


@dataclass(frozen=True, slots=True, kw_only=True)
class _File:
    """The file being checked, with what every program of it is checked with."""

    path: str
    options: Options
    workers: Workers


@dataclass(frozen=True, slots=True, kw_only=True)
class _Unit:
    """One program at one P, as a worker process gets it: the program is found again by
    its place among the file's programs (`_programs`), with the same options."""

    path: str
    program: int
    ranks: int
    options: Options


@dataclass(frozen=True, slots=True, kw_only=True)
class _Checked:
    outcome: Outcome
    error: str | None = None  # a program the DSL could not follow at this P
    printed: str = ""  # what the user's code printed while a worker checked the unit


def _check_file(file: _File, progress: Progress | None) -> Report:
    options = file.options
    if options.expect is not None:
        parse_model(options.expect)  # a bad model name is a usage error before any work
    specs = _programs(file.path, options)
    imported_with = describe_import(options.import_config, file.path)  # before units reload
    errors: list[str] = []
    single = {spec.name for spec in specs if spec.single_device}
    if options.every_p is not None:
        results = [
            result
            for index, spec in enumerate(specs)
            for result in (
                _check_ranks(file, specs, index, (1,), errors, progress)
                if spec.single_device
                else _check_every_p(file, specs, index, options.every_p, errors, progress)
            )
        ]
    else:
        units = [
            (index, ranks)
            for index, spec in enumerate(specs)
            for ranks in ((1,) if spec.single_device else options.ranks)
        ]
        results = _check_units(file, specs, units, errors, progress)
    results = [
        noted(result, judge.SINGLE_DEVICE_NOTE) if result.program in single else result
        for result in results
    ]
    results = gate.demand(results, options, single)
    # how a Python while was followed (PyPTO compiles it), and the file's own inputs and golden
    notes = (*while_notes(file.path), *golden_notes(file.path))
    results = [dataclasses.replace(result, notes=(*result.notes, *notes)) for result in results]
    return Report(
        file=file.path,
        results=tuple(results),
        errors=tuple(dict.fromkeys(errors)),
        imported_with=imported_with,
    )


def _programs(path: str, options: Options) -> list[ProgramSpec]:
    """The file's programs, from a fresh import of it and of the project modules it
    imports."""
    forget_project_modules()
    return load_programs(path, options)


def _check_units(
    file: _File,
    specs: Sequence[ProgramSpec],
    units: Sequence[tuple[int, int]],
    errors: list[str],
    progress: Progress | None,
) -> list[ProgramResult]:
    """The programs at the P of `units` (program index, P) — in worker processes with
    `--jobs` — each program's P judged together (the cross-P step) in this process."""
    checked: Iterator[_Checked]
    work = [
        _Unit(path=file.path, program=index, ranks=ranks, options=file.options)
        for index, ranks in units
    ]
    # Each unit imports the file afresh, in a worker or here: what one unit's run leaves
    # in the user's module (a program memoised per size) never reaches another, so the
    # report is the same for every --jobs.
    if len(units) == 1 or not file.workers.parallel:
        checked = map(_check_unit, work)
    else:
        checked = file.workers.map(_check_unit, work)
    outcomes: dict[int, list[Outcome]] = {}
    for index, ranks in units:
        if progress is not None:
            progress(specs[index].name, ranks)
        found = next(checked)
        sys.stdout.write(found.printed)
        if found.error is not None:
            errors.append(found.error)
        outcomes.setdefault(index, []).append(found.outcome)
    return [
        judge.decide(outcome)
        for program in outcomes.values()
        for outcome in judge.across_ranks(program, file.options)
    ]


def _check_unit(unit: _Unit) -> _Checked:
    """A worker process's unit, in a session of its own. What the user's code prints
    goes where it goes inline: loading's output once (the parent loaded the file), the
    check's output to the parent, which prints it in the units' order."""
    with Session():
        with contextlib.redirect_stdout(io.StringIO()):
            specs = _programs(unit.path, unit.options)
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            checked = _checked(specs[unit.program], unit.ranks, unit.options)
        return dataclasses.replace(checked, printed=printed.getvalue())


def _checked(spec: ProgramSpec, ranks: int, options: Options) -> _Checked:
    started = time.monotonic()
    try:
        return _Checked(outcome=_check_one(spec, ranks, options))
    except (UnsupportedConstruct, TracingError) as error:
        # One program the DSL cannot follow must not hide the file's other programs.
        unknown = _outcome(spec, ranks, started, unknown=error.message)
        return _Checked(outcome=unknown, error=error.render())


def _check_ranks(
    file: _File,
    specs: Sequence[ProgramSpec],
    index: int,
    counts: tuple[int, ...],
    errors: list[str],
    progress: Progress | None,
) -> list[ProgramResult]:
    """One program at each P of `counts`, judged together."""
    return _check_units(file, specs, [(index, ranks) for ranks in counts], errors, progress)


def _check_every_p(
    file: _File,
    specs: Sequence[ProgramSpec],
    index: int,
    every_p: EveryP,
    errors: list[str],
    progress: Progress | None,
) -> list[ProgramResult]:
    """`--ranks all` (`racecheck.allp.driver`), its concrete checks by this pipeline."""
    from racecheck.allp.driver import check_every_p  # only --ranks all: 40 ms

    def concrete(counts: tuple[int, ...]) -> list[ProgramResult]:
        return _check_ranks(file, specs, index, counts, errors, progress)

    def fresh() -> ProgramSpec:
        with contextlib.redirect_stdout(io.StringIO()):  # loading printed once already
            return _programs(file.path, file.options)[index]

    options = file.options
    return check_every_p(
        fresh(),
        every_p,
        repeat=2 if options.per_call else options.repeat,  # per-call values: one call each
        timeout=options.timeout,
        concrete=concrete,
        fresh=fresh,
    )


def check_program(spec: ProgramSpec, ranks: int, options: Options) -> ProgramResult:
    """One program at one P, judged on its own (without the cross-P step)."""
    return judge.decide(_check_one(spec, ranks, options))


def _check_one(spec: ProgramSpec, ranks: int, options: Options) -> Outcome:
    with clock.unit(options.timeout):  # one --timeout for the program at this P
        return _check_within(spec, ranks, options)


def _check_within(spec: ProgramSpec, ranks: int, options: Options) -> Outcome:
    if options.reset_windows and options.repeat > 1:
        carried = _assumed_state(spec, ranks, options)
        if carried is not None:
            why = reason(ReasonCode.RESET_ASSUMED_STATE, tensor=carried)
            return _outcome(spec, ranks, time.monotonic(), unknown=why)
        # Each call starts after the previous one ended, from zeroed windows: the calls
        # are independent, and checking one is checking them all (docs/model.md).
        outcome = _check_one(spec, ranks, dataclasses.replace(options, repeat=1))
        notes = tuple(n for n in outcome.notes if not has_code(n, ReasonCode.SINGLE_USE))
        return dataclasses.replace(outcome, notes=(*notes, judge.RESET_NOTE))
    return _check_order(spec, ranks, options)


def _check_order(
    spec: ProgramSpec,
    ranks: int,
    options: Options,
) -> Outcome:
    """Every path of the program. Its
    tasks are threads, decided in every order the runtime allows, its dispatches under
    each rank's dispatch lock (`racecheck.cosim.threads`)."""
    known: set[tuple[object, ...]] = set()

    def check_path(path: Path, deadline: float) -> PathOutcome:
        checked = _check_path(spec, ranks, options, path, deadline, known)
        if not path.summarised:  # a summary's findings may be its extra iterations'
            known.update(finding.identity for finding in checked.outcome.findings)
        return checked

    return explore(check_path, timeout=options.timeout, summarise=options.expect is None)


def _confirmed(
    instance: ProgramInstance,
    trace: Trace,
    oracle: OrderOracle,
    hazards: Sequence[Hazard],
    golden: Callable[[], str | None],
    options: Options,
    known: Container[tuple[object, ...]],
) -> tuple[Finding, ...]:
    """The hazards as findings, each witness replayed once per finding: a hazard whose
    finding an earlier one of this path already is (the same lines in another
    `--repeat` call) is reported as that one, which the merge keeps."""
    done: set[tuple[object, ...]] = set()
    findings = []
    for hazard in hazards:
        skip = done if hazard.identity in done else known
        findings.append(judge.confirm(instance, trace, oracle, hazard, golden, options, known=skip))
        done.add(hazard.identity)
    return tuple(findings)


def _check_path(
    spec: ProgramSpec,
    ranks: int,
    options: Options,
    path: Path,
    deadline: float,
    known: set[tuple[object, ...]],
) -> PathOutcome:
    started = time.monotonic()
    try:
        clock.check(deadline, f"building {spec.name} for P={ranks}")
        built = _instantiate(spec, ranks, clock.left(deadline))
        assumed = _assumed(built, options)
        instance = path.applied(
            dataclasses.replace(
                built,
                assumed=assumed,
                calls=calls_of(built, options),
                cores=options.cores,
            )
        )
        with summary_run(path.summarised):
            execution = simulate(
                instance,
                policy=path.policy(),
                repeat=options.repeat,
                seed=options.seed,
                timeout=clock.left(deadline),
                rules=options.runtime_order,
            )
        if execution.plan is not None:  # replays and paths run its tasks as threads too
            instance = dataclasses.replace(instance, thread_plan=execution.plan)
    except ProgramRejected as rejected:
        return PathOutcome(outcome=_outcome(spec, ranks, started, skipped=rejected.message))
    except clock.Overtime as cut:
        unknown = _outcome(spec, ranks, started, unknown=cut.reason, events=cut.events)
        return PathOutcome(outcome=unknown)
    trace = execution.trace
    facts = {"events": trace.size}
    try:
        engine, prepared = prepare(options.engine, trace, deadline=deadline)
        oracle = PathOracle(
            DeadlineOracle(prepared, deadline, trace),
            path,
            lambda policy: _realised(instance, policy, options),
            steered=bool(trace.control_reads),
        )
        hazards = find_hazards(trace, oracle, deadline=deadline)
        golden = functools.cache(lambda: options.expect or _model_of(instance, execution, options))
        findings = _confirmed(instance, trace, oracle, hazards, golden, options, known)
        if findings and not path.inputs and execution.flow.decisions:  # the routing shown
            shown = symbolic_inputs.steering_inputs(execution)
            findings = tuple(dataclasses.replace(found, inputs=shown) for found in findings)
        opened = tuple(open_reads(execution, oracle))
        summary = _summary_problems(path, execution, oracle)
    except EngineUnknown as unknown:
        return PathOutcome(outcome=_outcome(spec, ranks, started, unknown=unknown.reason, **facts))
    outcome = _outcome(
        spec,
        ranks,
        started,
        findings=findings,
        hung=bool(execution.forced),
        io=reference.host_io(execution),
        engine=engine,
        notes=(
            *judge.notes(trace, options),
            *execution.notes,
            *_summary_notes(summary),
            *((stated(instance.assumed),) if instance.assumed else ()),
            *file_golden_notes(instance, execution),
        ),
        **facts,
    )
    outcome = _inexact(judge.functional(outcome, options), execution)
    return PathOutcome(
        outcome=dataclasses.replace(outcome, seconds=_since(started)),
        opened=opened,
        schedule=execution.schedule,
        decisions=execution.flow.decisions,
        summary=summary,
    )


def _assumed_state(spec: ProgramSpec, ranks: int, options: Options) -> str | None:
    """A host tensor the program writes whose value steers it, where one call's check
    does not cover the value the next call starts from: a `pl.Out` tensor (checked from
    zeros only) or an assumed `pl.InOut` one (checked inside the assumption only)."""
    try:
        instance = spec.instantiate(ranks)
        assumed = _assumed(instance, options)
        execution = simulate(
            dataclasses.replace(instance, assumed=assumed),
            seed=options.seed,
            timeout=options.timeout,
            stage="looking for host state that steers the next call",
        )
    except (ProgramRejected, UserError, clock.Overtime):
        return None  # the check proper says so
    trace = execution.trace
    steering = {
        access.memory
        for ref in trace.control_reads
        if (access := trace.event(ref).access) is not None
    }
    named = {a.tensor for a in assumed}
    carried = (
        tensor.name
        for tensor in execution.tensors
        if tensor.memory in steering
        and (
            tensor.role is TensorRole.OUTPUT
            or (tensor.role is TensorRole.INOUT and tensor.name in named)
        )
    )
    return next(carried, None)


def _assumed(instance: ProgramInstance, options: Options) -> tuple[Assumption, ...]:
    """The preconditions the program is checked under (`racecheck.assumptions`)."""
    inputs = {parameter.name for parameter in instance.parameters}
    return gathered(options.assume, instance.file, instance.name, inputs)


def _summary_problems(
    path: Path, execution: Execution, oracle: OrderOracle
) -> tuple[str, ...] | None:
    """A summary run's reasons not to stand for every input (None: not one)."""
    if not path.summarised:
        return None
    return tuple(symbolic_inputs.problems(execution, oracle, summary_loops(), revealed()))


def _summary_notes(summary: tuple[str, ...] | None) -> tuple[str, ...]:
    return (symbolic_inputs.assumption(summary_loops()),) if summary == () else ()


def _inexact(outcome: Outcome, execution: Execution) -> Outcome:
    """A run whose order stands for only some executions (`Execution.inexact`) proves
    nothing. Its races and wrong results are real, as it is one execution with more
    ordering than the device has; a deadlock or a stale read may be the extra order's.
    A run that computed what the device does not (`Execution.unfollowed`) proves and
    finds nothing."""
    reasons = (*execution.unfollowed, *execution.inexact)
    if not reasons:
        return outcome
    dropped = (FindingKind.DEADLOCK, FindingKind.STALE_READ)
    kept = () if execution.unfollowed else outcome.findings
    return dataclasses.replace(
        outcome,
        findings=tuple(f for f in kept if f.kind not in dropped),
        unknown=outcome.unknown or reasons[0],
    )


def _realised(
    instance: ProgramInstance, policy: SchedulePolicy, options: Options
) -> Schedule | None:
    try:
        execution = simulate(
            instance,
            policy=policy,
            force_waits=False,
            repeat=options.repeat,
            seed=options.seed,
            timeout=options.timeout,
            stage="replaying a witness on this path",
        )
    except TracingError:
        return None
    return execution.schedule


def calls_of(instance: ProgramInstance, options: Options) -> Calls:
    """`--rounds` and `--per-call` for the instance (racecheck.rounds)."""
    scalars = tuple(p.name for p in instance.parameters if not isinstance(p.annotation, TensorType))
    return rounds.calls_of(instance.name, scalars, options.rounds, options.per_call)


def _instantiate(spec: ProgramSpec, ranks: int, seconds: float) -> ProgramInstance:
    try:
        return within(lambda: spec.instantiate(ranks), seconds)
    except Overrun as overrun:
        where = overrun.where
        raise TracingError(
            f"building {spec.name} {overrun}",
            file=where.file if where else None,
            line=where.line if where else None,
        ) from None


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
        stage="running the ranks interleaved, for the golden model",
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
