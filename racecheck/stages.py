"""One path of one program at one P, as its stages: build the instance (load) → run it
(co-simulate) → order its events (engines) → find hazards (analysis) → replay each
finding's witness against the golden (reference) → the values another path may take
(alternatives) → the path's outcome (verdict). `check_path` reads as that list; the
file-level stages around it are `racecheck.pipeline`'s, the search over a program's
paths is `racecheck.paths.Exploration`, driven by `racecheck.pipeline`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Container, Sequence
from dataclasses import dataclass

from racecheck import clock, judge, reference, rounds, symbolic_inputs
from racecheck.analysis import Hazard, find_hazards
from racecheck.assumptions import Assumption, gathered, stated
from racecheck.cosim import Execution, SchedulePolicy, Simulator
from racecheck.cosim.execution import TensorRole
from racecheck.dsl.summary_state import loops as summary_loops
from racecheck.dsl.summary_state import revealed, summary_run
from racecheck.dsl.types import TensorType
from racecheck.dsl.watchdog import Overrun, within
from racecheck.engines import prepare
from racecheck.engines.base import OrderOracle
from racecheck.engines.deadline import DeadlineOracle
from racecheck.errors import EngineUnknown, ProgramRejected, TracingError, UserError
from racecheck.events import Schedule, Trace
from racecheck.findings import Finding, FindingKind
from racecheck.judge import Outcome
from racecheck.load import ProgramInstance, ProgramSpec
from racecheck.models.file_golden import file_golden_notes
from racecheck.options import Options
from racecheck.paths import Path, PathOracle, PathOutcome
from racecheck.reference import Golden
from racecheck.report.reasons import ReasonCode, reason
from racecheck.rounds import Calls
from racecheck.steering import open_reads


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """A path's co-simulation: the run, and the way back into it for replays."""

    simulator: Simulator
    execution: Execution


def check_path(
    spec: ProgramSpec,
    ranks: int,
    options: Options,
    path: Path,
    deadline: float,
    known: set[tuple[object, ...]],
) -> PathOutcome:
    started = time.monotonic()
    try:
        run = _co_simulate(spec, ranks, options, path, deadline)
    except ProgramRejected as rejected:
        return PathOutcome(outcome=outcome_of(spec, ranks, started, skipped=rejected.message))
    except clock.Overtime as cut:
        unknown = outcome_of(spec, ranks, started, unknown=cut.reason, events=cut.events)
        return PathOutcome(outcome=unknown)
    trace = run.execution.trace
    try:
        engine, oracle = _engines(run, path, deadline)
        hazards = find_hazards(trace, oracle, deadline=deadline)
        findings = _findings(run, oracle, hazards, path, known)
        opened = tuple(open_reads(run.execution, oracle))
        summary = _summary_problems(path, run.execution, oracle)
    except EngineUnknown as unknown:
        return PathOutcome(
            outcome=outcome_of(spec, ranks, started, unknown=unknown.reason, events=trace.size)
        )
    outcome = _verdict(spec, ranks, started, run, findings, engine, summary)
    return PathOutcome(
        outcome=outcome,
        opened=opened,
        schedule=run.execution.schedule,
        decisions=run.execution.flow.decisions,
        summary=summary,
    )


def _co_simulate(
    spec: ProgramSpec,
    ranks: int,
    options: Options,
    path: Path,
    deadline: float,
) -> _Run:
    """The program built at `ranks` with `path`'s values applied, and its run under the
    path's policy: load and co-simulate."""
    clock.check(deadline, reason(ReasonCode.STAGE_BUILDING, program=spec.name, ranks=ranks))
    built = _instantiate(spec, ranks, clock.left(deadline))
    assumed = _assumed(built, options)
    instance = path.applied(
        dataclasses.replace(
            built, assumed=assumed, calls=calls_of(built, options), cores=options.cores
        )
    )
    with summary_run(path.summarised):
        execution = Simulator(instance, options).run(path.policy(), timeout=clock.left(deadline))
    if execution.plan is not None:  # replays and paths run its tasks as threads too
        instance = dataclasses.replace(instance, thread_plan=execution.plan)
    return _Run(simulator=Simulator(instance, options), execution=execution)


def _engines(run: _Run, path: Path, deadline: float) -> tuple[str, PathOracle]:
    """The engine that orders the path's events, its answers bounded by the deadline."""
    trace = run.execution.trace
    engine, prepared = prepare(run.simulator.options.engine, trace, deadline=deadline)
    oracle = PathOracle(
        DeadlineOracle(prepared, deadline, trace),
        path,
        lambda policy: _realised(run.simulator, policy),
        steered=bool(trace.control_reads),
    )
    return engine, oracle


def _findings(
    run: _Run,
    oracle: PathOracle,
    hazards: Sequence[Hazard],
    path: Path,
    known: Container[tuple[object, ...]],
) -> tuple[Finding, ...]:
    """The hazards confirmed by their witnesses' replays (reference) and, when input
    values routed the run, named by those values."""
    execution = run.execution
    trace = execution.trace
    golden = Golden(run.simulator, execution)
    findings = _confirmed(run.simulator, trace, oracle, hazards, golden, known)
    if findings and not path.inputs and execution.flow.decisions:  # the routing shown
        shown = symbolic_inputs.steering_inputs(execution)
        findings = tuple(dataclasses.replace(found, inputs=shown) for found in findings)
    return findings


def _verdict(
    spec: ProgramSpec,
    ranks: int,
    started: float,
    run: _Run,
    findings: tuple[Finding, ...],
    engine: str,
    summary: tuple[str, ...] | None,
) -> Outcome:
    """The path's outcome: its findings, its run's outputs judged against the golden,
    and the notes that say what it stands for."""
    execution, options = run.execution, run.simulator.options
    instance = run.simulator.instance
    outcome = outcome_of(
        spec,
        ranks,
        started,
        findings=findings,
        hung=bool(execution.forced),
        io=reference.host_io(execution),
        engine=engine,
        notes=(
            *judge.notes(execution.trace, options),
            *execution.notes,
            *_summary_notes(summary),
            *((stated(instance.assumed),) if instance.assumed else ()),
            *file_golden_notes(instance, execution),
        ),
        events=execution.trace.size,
    )
    outcome = _inexact(judge.functional(outcome, options), execution)
    return dataclasses.replace(outcome, seconds=since(started))


def _confirmed(
    simulator: Simulator,
    trace: Trace,
    oracle: OrderOracle,
    hazards: Sequence[Hazard],
    golden: Golden,
    known: Container[tuple[object, ...]],
) -> tuple[Finding, ...]:
    """The hazards as findings, each witness replayed once per finding: a hazard whose
    finding an earlier one of this path already is (the same lines in another
    `--repeat` call) is reported as that one, which the merge keeps."""
    done: set[tuple[object, ...]] = set()
    findings = []
    for hazard in hazards:
        skip = done if hazard.identity in done else known
        findings.append(judge.confirm(simulator, trace, oracle, hazard, golden, known=skip))
        done.add(hazard.identity)
    return tuple(findings)


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


def _realised(simulator: Simulator, policy: SchedulePolicy) -> Schedule | None:
    try:
        stage = reason(ReasonCode.STAGE_PATH_REPLAY)
        execution = simulator.run(policy, force_waits=False, stage=stage)
    except TracingError:
        return None
    return execution.schedule


def _instantiate(spec: ProgramSpec, ranks: int, seconds: float) -> ProgramInstance:
    try:
        return within(lambda: spec.instantiate(ranks), seconds)
    except Overrun as overrun:
        where = overrun.where
        raise TracingError(
            reason(ReasonCode.BUILDING_OVERRUN, program=spec.name, overrun=str(overrun)),
            file=where.file if where else None,
            line=where.line if where else None,
        ) from None


def outcome_of(spec: ProgramSpec, ranks: int, started: float, **facts) -> Outcome:
    """An outcome of `spec` at `ranks` begun at `started`, with `facts`."""
    return Outcome(
        program=spec.name,
        ranks=ranks,
        rank_param=spec.rank_param,
        seconds=since(started),
        **facts,
    )


def since(started: float) -> float:
    return round(time.monotonic() - started, 4)


def calls_of(instance: ProgramInstance, options: Options) -> Calls:
    """`--rounds` and `--per-call` for the instance (racecheck.rounds)."""
    scalars = tuple(p.name for p in instance.parameters if not isinstance(p.annotation, TensorType))
    return rounds.calls_of(instance.name, scalars, options.rounds, options.per_call)


def assumed_state(spec: ProgramSpec, ranks: int, options: Options) -> str | None:
    """A host tensor the program writes whose value steers it, where one call's check
    does not cover the value the next call starts from: a `pl.Out` tensor (checked from
    zeros only) or an assumed `pl.InOut` one (checked inside the assumption only)."""
    try:
        instance = spec.instantiate(ranks)
        assumed = _assumed(instance, options)
        stage = reason(ReasonCode.STAGE_CARRIED_STATE)
        one_call = dataclasses.replace(options, repeat=1)
        simulator = Simulator(dataclasses.replace(instance, assumed=assumed), one_call)
        execution = simulator.run(stage=stage)
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
