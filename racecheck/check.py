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
import itertools
import sys
import time
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass

from racecheck import clock, gate, judge, reference, symbolic_inputs
from racecheck.analysis import Hazard, find_hazards
from racecheck.assumptions import Assumption, gathered, stated
from racecheck.cosim import Execution, RoundRobinPolicy, SchedulePolicy, simulate
from racecheck.cosim.tasks import (
    DispatchGraph,
    DispatchOrders,
    Overlap,
    TaskOrders,
    allowed_order,
    dispatch_graphs,
    name_tasks,
    reorderings,
    task_overlaps,
    unordered_conflict,
)
from racecheck.dsl.summary_state import loops as summary_loops
from racecheck.dsl.summary_state import revealed, summary_run
from racecheck.dsl.watchdog import Overrun, within
from racecheck.engines import prepare
from racecheck.engines.base import OrderOracle
from racecheck.engines.deadline import DeadlineOracle
from racecheck.errors import (
    EngineUnknown,
    ProgramRejected,
    TracingError,
    UnsupportedConstruct,
)
from racecheck.events import Event, Schedule, Trace
from racecheck.file_goldens import golden_notes
from racecheck.findings import Finding, FindingKind, ProgramResult, Report, Verdict, noted
from racecheck.judge import Outcome
from racecheck.load import ProgramInstance, ProgramSpec, load_programs
from racecheck.models import parse_model
from racecheck.options import EveryP, Options
from racecheck.paths import Path, PathOracle, PathOutcome, explore
from racecheck.project_imports import describe_import, forget_project_modules
from racecheck.report.reasons import ReasonCode, has_code
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
        repeat=options.repeat,
        timeout=options.timeout,
        concrete=concrete,
        fresh=fresh,
        assume=options.assume,
    )


def check_program(spec: ProgramSpec, ranks: int, options: Options) -> ProgramResult:
    """One program at one P, judged on its own (without the cross-P step)."""
    return judge.decide(_check_one(spec, ranks, options))


def _check_one(spec: ProgramSpec, ranks: int, options: Options) -> Outcome:
    with clock.unit(options.timeout):  # one --timeout for the program at this P
        return _check_within(spec, ranks, options)


def _check_within(spec: ProgramSpec, ranks: int, options: Options) -> Outcome:
    if options.reset_windows and options.repeat > 1:
        # Each call starts after the previous one ended, from zeroed windows: the calls
        # are independent, and checking one is checking them all (docs/model.md).
        outcome = _check_one(spec, ranks, dataclasses.replace(options, repeat=1))
        notes = tuple(n for n in outcome.notes if not has_code(n, ReasonCode.SINGLE_USE))
        return dataclasses.replace(outcome, notes=(*notes, judge.RESET_NOTE))
    runs: list[Execution] = []
    outcome = _check_dispatch_order(spec, ranks, options, (), runs)
    if judge.decide(outcome).verdict is not Verdict.PROVED:
        return outcome  # a bug in program order is real; otherwise nothing is proved
    return _check_dispatch_orders(spec, ranks, options, runs, outcome)


def _check_dispatch_order(
    spec: ProgramSpec,
    ranks: int,
    options: Options,
    dispatches: DispatchOrders,
    runs: list[Execution],
) -> Outcome:
    """Every path of the program with each rank's dispatches in `dispatches` (program
    order if not named) and its tasks in every order the runtime allows."""
    outcome = _check_order(spec, ranks, options, (), dispatches, runs)
    verdict = judge.decide(outcome).verdict
    if verdict is Verdict.PROVED:
        return _check_task_orders(spec, ranks, options, dispatches, runs, outcome)
    if outcome.hung or any(f.kind is FindingKind.DEADLOCK for f in outcome.findings):
        return _check_hang_orders(spec, ranks, options, dispatches, runs, outcome)
    return outcome


DISPATCH_ORDERS = 16
"""The most orders of the ranks' dispatches one program at one P is checked in."""


def _check_dispatch_orders(
    spec: ProgramSpec, ranks: int, options: Options, runs: Sequence[Execution], outcome: Outcome
) -> Outcome:
    """A proof in program order, checked in every other order of the ranks' dispatches
    that PyPTO's runtime allows. A rank's dispatches never overlap (docs/model.md), so
    this is exact: a bug in any of them, a deadlock included, is one the device can
    show; a proof in all of them is a proof."""
    started = time.monotonic()
    graphs, orders = _dispatch_orders(_dispatch_graphs(runs))
    if isinstance(orders, str):
        return _unknown(outcome, orders)
    if len(orders) == 1:
        return outcome
    golden = dataclasses.replace(options, expect=options.expect or outcome.model)
    undecided: Outcome | None = None
    for order in orders[1:]:  # the first is every rank in program order
        said = _describe_order(graphs, order)
        checked = _check_dispatch_order(spec, ranks, golden, order, [])
        verdict = judge.decide(checked).verdict
        if verdict is Verdict.BUG:
            note = f"{said}, as PyPTO's runtime may: the bug shows in that order"
            return dataclasses.replace(
                checked, notes=(*checked.notes, note), seconds=outcome.seconds + _since(started)
            )
        if verdict is not Verdict.PROVED and undecided is None:
            undecided = _unknown(outcome, f"{said}: {judge.decide(checked).message}")
    if undecided is None:
        unchecked = _order_dependent(graphs, runs)
        undecided = _unknown(outcome, unchecked) if unchecked is not None else None
    plural = "s" if len(graphs) > 1 else ""
    note = (
        f"checked in all {len(orders)} orders of the dispatches of rank{plural}"
        f" {', '.join(str(graph.rank) for graph in graphs)} that PyPTO's runtime allows and"
        " that can matter"
    )
    return dataclasses.replace(
        undecided or dataclasses.replace(outcome, notes=(*outcome.notes, note)),
        seconds=outcome.seconds + _since(started),
    )


def _describe_order(graphs: Sequence[DispatchGraph], order: DispatchOrders) -> str:
    """What `order` changes: for each rank it reorders, a dispatch run early."""
    return "; ".join(
        graph.describe(numbers)
        for graph, (_, numbers) in zip(graphs, order, strict=True)
        if numbers != tuple(range(1, graph.count + 1))
    )


def _dispatch_orders(
    graphs: Sequence[DispatchGraph],
) -> tuple[list[DispatchGraph], list[DispatchOrders] | str]:
    """The ranks whose dispatches can run in more than one order that matters, and every
    combination of their orders (program order first) — or why there are too many."""
    loose: list[DispatchGraph] = []
    choices: list[list[tuple[int, tuple[int, ...]]]] = []
    for graph in graphs:
        orders = graph.orders(DISPATCH_ORDERS)
        if orders is None:
            return [graph], _too_many_orders([graph])
        if len(orders) > 1:
            loose.append(graph)
            choices.append([(graph.rank, order) for order in orders])
    combined = list(itertools.product(*choices))
    if len(combined) > DISPATCH_ORDERS:
        return loose, _too_many_orders(loose, len(combined))
    return loose, combined


def _dispatch_graphs(runs: Sequence[Execution]) -> list[DispatchGraph]:
    """Each rank's dispatches: ordered, or of an order that cannot matter, where every
    path's run says so."""
    found = [dispatch_graphs(run.tasks, _in_program_order(run)) for run in runs]
    graphs: list[DispatchGraph] = []
    for rank_graphs in zip(*found, strict=True):
        widest = max(rank_graphs, key=lambda graph: graph.count)
        edges = frozenset.intersection(*(g.edges | _past(g, widest) for g in rank_graphs))
        independent = (
            frozenset.intersection(*(g.independent | _past(g, widest) for g in rank_graphs)) - edges
        )
        graphs.append(dataclasses.replace(widest, edges=edges, independent=independent))
    return graphs


def _past(graph: DispatchGraph, widest: DispatchGraph) -> frozenset[tuple[int, int]]:
    """The pairs of `widest` that name a dispatch `graph`'s run did not reach."""
    return frozenset((a, b) for b in range(graph.count + 1, widest.count + 1) for a in range(1, b))


def _order_dependent(graphs: Sequence[DispatchGraph], runs: Sequence[Execution]) -> str | None:
    """Why proofs in every order say nothing of what the program leaves: two unordered
    dispatches touch the same bytes, one writing, so the bytes some order leaves may
    differ from another's where no golden model looks (it compares one output)."""
    for run in runs:
        for graph in graphs:
            events = _in_program_order(run)[graph.rank]
            pair = unordered_conflict(graph, run.tasks[graph.rank], events)
            if pair is not None:
                a, b = pair
                return (
                    f"rank {graph.rank}: PyPTO's runtime does not order {graph.name(a)} and"
                    f" {graph.name(b)}, which access the same bytes, one writing: what each"
                    " order leaves may differ, and racecheck has no golden for every byte"
                )
    return None


def _too_many_orders(graphs: Sequence[DispatchGraph], count: int | None = None) -> str:
    listed = " and ".join(
        f"rank {graph.rank} ({', '.join(graph.name(n) for n in range(1, graph.count + 1))})"
        for graph in graphs
    )
    many = f"{count}" if count is not None else f"more than {DISPATCH_ORDERS}"
    return (
        f"the dispatches of {listed} run in {many} orders that PyPTO's runtime allows and"
        f" that can matter; racecheck checks at most {DISPATCH_ORDERS}"
    )


def _unknown(outcome: Outcome, reason: str) -> Outcome:
    return dataclasses.replace(outcome, findings=(), hung=False, unknown=reason)


def _check_order(
    spec: ProgramSpec,
    ranks: int,
    options: Options,
    orders: TaskOrders,
    dispatches: DispatchOrders,
    runs: list[Execution],
) -> Outcome:
    """Every path of the program with its dispatches in `dispatches` and its tasks in
    `orders`; `runs` receives the co-simulation of each path."""
    known: set[tuple[object, ...]] = set()

    def check_path(path: Path, deadline: float) -> PathOutcome:
        checked = _check_path(
            spec, ranks, options, path, deadline, (orders, dispatches), runs, known
        )
        if not path.summarised:  # a summary's findings may be its extra iterations'
            known.update(finding.identity for finding in checked.outcome.findings)
        return checked

    return explore(check_path, timeout=options.timeout, summarise=options.expect is None)


def _overlapping(
    runs: Sequence[Execution],
    options: Options,
    *,
    may_release: bool = False,
) -> tuple[Execution, list[Overlap]] | None:
    """The first run with tasks the runtime may overlap whose order matters (with
    `may_release`, only those where the later may release a wait of the earlier:
    `Overlap.may_release`), and those overlaps."""
    for run in runs:
        if run.plan is not None:
            continue  # its tasks are threads: every engine decides every order of them
        trace = run.trace
        found = [
            overlap
            for overlap in task_overlaps(
                run.tasks, trace.events, options.runtime_order, trace.memories
            )
            if overlap.may_release or not may_release
        ]
        if found:
            return run, found
    return None


def _covers_every_order(runs: Sequence[Execution], options: Options) -> bool:
    """Whether checking `runs` decides every order of their tasks: each ran them in an
    order the runtime allows, in which no two it leaves unordered can matter."""
    return _overlapping(runs, options) is None and _in_allowed_orders(runs, options)


def _in_allowed_orders(runs: Sequence[Execution], options: Options) -> bool:
    rules = options.runtime_order
    return all(
        run.plan is not None
        or allowed_order(run.tasks, run.trace.events, rules, run.trace.memories)
        for run in runs
    )


def _in_program_order(run: Execution) -> tuple[tuple[Event, ...], ...]:
    """The events of the run in program order that `run.tasks` index."""
    return run.rank_events if run.rank_events is not None else run.trace.events


def _check_task_orders(
    spec: ProgramSpec,
    ranks: int,
    options: Options,
    dispatches: DispatchOrders,
    runs: Sequence[Execution],
    outcome: Outcome,
) -> Outcome:
    """A program order proved is the answer only if no two tasks of a rank that the
    runtime leaves unordered could matter on any path (`cosim.tasks`); else the other
    orders of those tasks are checked, and an overlap they do not decide is unknown.
    Every execution of such an order that does not hang is one the runtime can run."""
    loose = _overlapping(runs, options)
    if loose is None:
        return outcome
    run, found = loose
    other = _other_orders(spec, ranks, options, dispatches, run, outcome, found)
    return other or _unknown(
        outcome,
        found[0].describe()
        + "; racecheck checks the orders of such tasks it can run, not their overlap",
    )


def _check_hang_orders(
    spec: ProgramSpec,
    ranks: int,
    options: Options,
    dispatches: DispatchOrders,
    runs: Sequence[Execution],
    outcome: Outcome,
) -> Outcome:
    """A rank that hangs with its tasks in program order may not hang on the runtime:
    a later task that nothing orders after the blocked one runs alongside it, and its
    notify can release the wait (docs/model.md). Such a hang shows nothing. The other
    confirmed findings of the run stand (running tasks in program order is an
    execution the runtime allows); else another order may decide; else unknown."""
    releasing = _overlapping(runs, options, may_release=True)
    if releasing is None:
        return outcome
    run, found = releasing
    rest = tuple(f for f in outcome.findings if f.kind is not FindingKind.DEADLOCK)
    without = dataclasses.replace(outcome, findings=rest, hung=False)
    if judge.decide(without).verdict is Verdict.BUG:
        return dataclasses.replace(without, notes=(*without.notes, found[0].describe_release()))
    other = _other_orders(spec, ranks, options, dispatches, run, outcome, found)
    return other or _unknown(
        outcome,
        found[0].describe_release()
        + "; racecheck runs a rank's tasks one after another, not alongside each other",
    )


def _other_orders(
    spec: ProgramSpec,
    ranks: int,
    options: Options,
    dispatches: DispatchOrders,
    run: Execution,
    outcome: Outcome,
    found: Sequence[Overlap],
) -> Outcome | None:
    """The answer of another order of overlapping tasks, if one decides: a bug shown
    without hanging, or a proof in an order where no two tasks the runtime leaves
    unordered can matter (on every path), which covers every order (`cosim.tasks`)."""
    trace, rules = run.trace, options.runtime_order
    golden = dataclasses.replace(options, expect=options.expect or outcome.model)
    for orders, overlap in reorderings(run.tasks, trace.events, rules, trace.memories, found):
        order_runs: list[Execution] = []
        reordered = _check_order(spec, ranks, golden, orders, dispatches, order_runs)
        verdict = judge.decide(reordered).verdict
        hangs = any(finding.kind is FindingKind.DEADLOCK for finding in reordered.findings)
        if verdict is Verdict.BUG and (not hangs or _stuck(order_runs, options)):
            note = overlap.describe() + "; the bug shows when it runs first"
            return dataclasses.replace(reordered, notes=(*reordered.notes, note))
        if verdict is Verdict.PROVED and order_runs and _covers_every_order(order_runs, options):
            note = overlap.describe() + (
                "; checked with it first, an order in which no two such tasks can matter"
            )
            return dataclasses.replace(reordered, notes=(*reordered.notes, note))
    return None


def _stuck(runs: Sequence[Execution], options: Options) -> bool:
    """Whether a hang in `runs` is one the device shows: each ran its tasks in an order
    the runtime allows, and no task that blocks in it can be released by one it
    overtook or one after it that runs alongside it (`Overlap.may_release`)."""
    return (
        bool(runs)
        and _overlapping(runs, options, may_release=True) is None
        and _in_allowed_orders(runs, options)
    )


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
    orders: tuple[TaskOrders, DispatchOrders],
    runs: list[Execution],
    known: set[tuple[object, ...]],
) -> PathOutcome:
    started = time.monotonic()
    tasks, dispatches = orders
    try:
        clock.check(deadline, f"building {spec.name} for P={ranks}")
        built = _instantiate(spec, ranks, clock.left(deadline))
        assumed = _assumed(built, options)
        instance = path.applied(
            dataclasses.replace(
                built, task_orders=tasks, dispatch_orders=dispatches, assumed=assumed
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
    runs.append(execution)
    try:
        engine, prepared = prepare(options.engine, trace, deadline=deadline)
        oracle = PathOracle(
            DeadlineOracle(prepared, deadline, trace),
            path,
            lambda policy: _realised(instance, policy, options),
        )
        hazards = find_hazards(trace, oracle, deadline=deadline)
        golden = functools.cache(lambda: options.expect or _model_of(instance, execution, options))
        findings = _confirmed(instance, trace, oracle, hazards, golden, options, known)
        if execution.plan is None:
            findings = name_tasks(
                findings, execution.tasks, trace.events, options.runtime_order, trace.memories
            )
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
