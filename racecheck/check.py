"""The orders a program at one P is checked in: every path of it in program order,
then, where PyPTO's runtime may order a rank's tasks or dispatches otherwise, in those
orders too (`_check_within`). Each order's paths are checked by `racecheck.paths.explore`
with the stages of one path (`racecheck.stages.check_path`); the pipeline around it is
`racecheck.pipeline`'s.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Sequence

from racecheck import judge
from racecheck.cosim import Execution
from racecheck.cosim.tasks import (
    DispatchGraph,
    DispatchOrders,
    Overlap,
    TaskOrders,
    allowed_order,
    dispatch_graphs,
    reorderings,
    task_overlaps,
    unordered_conflict,
)
from racecheck.events import Event
from racecheck.findings import FindingKind, Verdict
from racecheck.judge import Outcome
from racecheck.load import ProgramSpec
from racecheck.options import Options
from racecheck.paths import Path, PathOutcome, explore
from racecheck.report.reasons import ReasonCode, has_code
from racecheck.stages import check_path
from racecheck.stages import since as _since


def _check_within(spec: ProgramSpec, ranks: int, options: Options) -> Outcome:
    if options.reset_windows and options.repeat > 1:
        # Each call starts after the previous one ended, from zeroed windows: the calls
        # are independent, and checking one is checking them all (docs/model.md).
        outcome = _check_within(spec, ranks, dataclasses.replace(options, repeat=1))
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

    def one_path(path: Path, deadline: float) -> PathOutcome:
        checked = check_path(
            spec, ranks, options, path, deadline, (orders, dispatches), runs, known
        )
        if not path.summarised:  # a summary's findings may be its extra iterations'
            known.update(finding.identity for finding in checked.outcome.findings)
        return checked

    return explore(one_path, timeout=options.timeout, summarise=options.expect is None)


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
