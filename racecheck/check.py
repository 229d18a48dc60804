"""The pipeline: load a file → trace each program's ranks → decide → execute the
reference → report. `check` reads as that list; each step lives in its own module.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from racecheck import reference
from racecheck.analysis import Hazard, find_hazards, to_finding
from racecheck.cosim import (
    DefaultPolicy,
    Execution,
    HoldPolicy,
    ReplayPolicy,
    RoundRobinPolicy,
    ScheduleDivergence,
    SchedulePolicy,
    simulate,
)
from racecheck.cosim.tasks import TaskOrders, reorderings, task_overlaps
from racecheck.dsl.watchdog import Overrun, within
from racecheck.engines import prepare
from racecheck.engines.base import OrderOracle
from racecheck.engines.deadline import DeadlineOracle
from racecheck.errors import EngineUnknown, ProgramRejected, TracingError, UnsupportedConstruct
from racecheck.events import NotifyOp, Schedule, Trace
from racecheck.findings import Finding, FindingKind, ProgramResult, Report, Verdict
from racecheck.load import ProgramInstance, ProgramSpec, discover, load_file
from racecheck.models import parse_model
from racecheck.options import Options
from racecheck.paths import Path, PathOracle, PathOutcome, explore
from racecheck.session import Session
from racecheck.steering import open_reads

Progress = Callable[[str, int], None]


def check(path: str, options: Options, *, progress: Progress | None = None) -> Report:
    with Session():
        return _check_file(path, options, progress)


def _check_file(path: str, options: Options, progress: Progress | None) -> Report:
    if options.expect is not None:
        parse_model(options.expect)  # a bad model name is a usage error before any work
    loaded = load_file(path, timeout=options.timeout)
    specs = discover(loaded, programs=options.programs, args=dict(options.args))
    results: list[ProgramResult] = []
    errors: list[str] = []
    for spec in specs:
        for ranks in options.ranks:
            if progress is not None:
                progress(spec.name, ranks)
            try:
                results.append(check_program(spec, ranks, options))
            except (UnsupportedConstruct, TracingError) as error:
                # One program the DSL cannot follow must not hide the file's other programs.
                errors.append(error.render())
                results.append(
                    ProgramResult(
                        program=spec.name,
                        ranks=ranks,
                        verdict=Verdict.UNKNOWN,
                        message=error.message,
                    )
                )
    return Report(file=path, results=tuple(results), errors=tuple(dict.fromkeys(errors)))


def check_program(spec: ProgramSpec, ranks: int, options: Options) -> ProgramResult:
    if options.reset_windows and options.repeat > 1:
        # Each call starts after the previous one ended, from zeroed windows: the calls
        # are independent, and checking one is checking them all (docs/model.md).
        result = check_program(spec, ranks, dataclasses.replace(options, repeat=1))
        notes = tuple(note for note in result.notes if note != _SINGLE_USE_NOTE)
        return dataclasses.replace(result, notes=(*notes, _RESET_NOTE))
    runs: list[Execution] = []
    result = _check_order(spec, ranks, options, (), runs)
    if result.verdict is not Verdict.PROVED or not runs:
        return result
    return _check_task_orders(spec, ranks, options, runs[0], result)


def _check_order(
    spec: ProgramSpec,
    ranks: int,
    options: Options,
    orders: TaskOrders,
    runs: list[Execution],
) -> ProgramResult:
    return explore(
        lambda path, deadline: _check_path(spec, ranks, options, path, deadline, orders, runs),
        timeout=options.timeout,
    )


def _check_task_orders(
    spec: ProgramSpec, ranks: int, options: Options, run: Execution, result: ProgramResult
) -> ProgramResult:
    """A program order proved is the answer only if no two tasks of a rank that the
    runtime leaves unordered could matter (`cosim.tasks`); else the other orders of
    those tasks are checked, and an overlap they do not decide is unknown. Every
    execution of such an order that does not hang is one the runtime can run."""
    trace, rules = run.trace, options.runtime_order
    found = task_overlaps(run.tasks, trace.events, rules, trace.memories)
    if not found:
        return result
    golden = dataclasses.replace(options, expect=options.expect or result.model)
    for orders, overlap in reorderings(run.tasks, trace.events, rules, trace.memories, found):
        reordered = _check_order(spec, ranks, golden, orders, [])
        # A task that blocks in this order could be unblocked by the one it overtook,
        # running alongside it: an order with a deadlock decides nothing.
        hangs = any(finding.kind is FindingKind.DEADLOCK for finding in reordered.findings)
        if reordered.verdict is Verdict.BUG and not hangs:
            note = overlap.describe() + "; the bug shows when it runs first"
            return dataclasses.replace(reordered, notes=(*reordered.notes, note))
    return dataclasses.replace(
        result,
        verdict=Verdict.UNKNOWN,
        findings=(),
        message=found[0].describe()
        + "; racecheck checks the orders of such tasks it can run, not their overlap",
    )


def _check_path(
    spec: ProgramSpec,
    ranks: int,
    options: Options,
    path: Path,
    deadline: float,
    orders: TaskOrders,
    runs: list[Execution],
) -> PathOutcome:
    started = time.monotonic()
    try:
        built = _instantiate(spec, ranks, deadline - started)
        instance = path.applied(dataclasses.replace(built, task_orders=orders))
        execution = simulate(
            instance,
            policy=path.policy(),
            repeat=options.repeat,
            seed=options.seed,
            timeout=deadline - time.monotonic(),
        )
    except ProgramRejected as rejected:
        return PathOutcome(
            result=_result(spec, ranks, started, verdict=Verdict.SKIPPED, message=rejected.message)
        )
    trace = execution.trace
    if not runs:
        runs.append(execution)
    try:
        engine, prepared = prepare(options.engine, trace, deadline=deadline)
        oracle = PathOracle(
            DeadlineOracle(prepared, deadline),
            path,
            lambda policy: _realised(instance, policy, options),
        )
        hazards = find_hazards(trace, oracle, deadline=deadline)
        golden = (options.expect or _model_of(instance, execution, options)) if hazards else None
        findings = [
            _confirmed(instance, trace, oracle, hazard, golden, options) for hazard in hazards
        ]
        opened = tuple(open_reads(execution, oracle))
    except EngineUnknown as unknown:
        return PathOutcome(
            result=_result(
                spec, ranks, started, verdict=Verdict.UNKNOWN, message=unknown.reason, trace=trace
            )
        )
    result = _judge(spec, ranks, started, options, engine, execution, findings)
    return PathOutcome(
        result=result,
        opened=opened,
        schedule=execution.schedule,
        decisions=execution.flow.decisions,
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
        )
    except TracingError:
        return None
    return execution.schedule


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
    then: DefaultPolicy | HoldPolicy = DefaultPolicy()
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


_REPEAT_NOTE = (
    "--repeat runs the calls back to back on the same windows, never zeroed: persistent"
    " windows without PyPTO's reset between requests (PyPTO's default zeroes them between"
    " calls: --reset-windows)"
)
_SINGLE_USE_NOTE = (
    "signal cells end non-zero: this kernel is single-use as written;"
    " if it runs in a loop, check it with --repeat 2"
)
_RESET_NOTE = (
    "--reset-windows: every call starts from zeroed windows after the previous one ended,"
    " so the calls are checked as one"
)


def _notes(trace: Trace, options: Options) -> tuple[str, ...]:
    if options.repeat != 1:
        return (_REPEAT_NOTE,)
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
    return (_SINGLE_USE_NOTE,)


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
