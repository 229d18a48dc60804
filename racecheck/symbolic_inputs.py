"""Whether a summary run stands for every input (`racecheck.dsl.summary`).

Concolic exploration (`racecheck.paths`) checks one path per way the inputs steer the
program, and stops at its budget. Where it does, one *summary run* may still settle
every input: each loop over an input-dependent bound runs every iteration any input
reaches, and every input's own run is that run with some data accesses left out. It
stands for every input only if nothing else depends on the inputs: the run decided
nothing on them, no other value steered by them or by an order of writes nothing
fixes, the loops' bounds steered nothing but their loops, their bodies synchronised
nothing and left no value behind, and nothing read what the iterations wrote. This
module checks those conditions on the run's trace and says what the proof assumed.
"""

from __future__ import annotations

import dataclasses

from racecheck.cosim import Execution
from racecheck.dsl.summary_state import SummarisedLoop, branches, widened_loads, widenings
from racecheck.engines.base import OrderOracle
from racecheck.engines.skeleton import signal_cells
from racecheck.events import CellIndex, EventKind, EventRef, WriteIndex
from racecheck.steering import Cause, open_reads, steering_loads


def problems(
    execution: Execution,
    oracle: OrderOracle,
    loops: tuple[SummarisedLoop, ...],
    revealed: frozenset[EventRef],
) -> list[str]:
    """Why the summary run does not stand for every input (empty: it does)."""
    found = []
    if execution.flow.decisions:  # a peer, a branch not taken for every input
        line = execution.trace.event(next(iter(execution.flow.decisions[0].sources))).location
        found.append(
            f"the value read at line {line.line} decides a branch, an address or a peer"
            " (a summary run follows input data only into loop bounds, slot-counted"
            " branches and the offsets counted by their counters)"
        )
    taken = branches()
    if not loops and not taken:
        return [*found, "no loop over an input-dependent bound was summarised"]
    found += [
        f"the loop at line {loop.location.line}: {why}" for loop in loops for why in loop.broken
    ]
    found += [
        f"the branch at line {branch.location.line}: {why}"
        for branch in taken
        for why in branch.broken
    ]
    found += [
        f"the value computed from a slot counter at line {widening.location.line} is used"
        " otherwise than as an offset of a load or store"
        for widening in widenings()
        if not widening.consumed
    ]
    sources = {source for loop in loops for source in loop.sources}
    for source in sorted(sources & revealed, key=lambda ref: (ref.rank, ref.index)):
        found.append(
            f"the bound read at line {execution.trace.event(source).location.line} also steers"
        )
    found += _opened(execution, oracle, loops)
    found += _read_back(execution, oracle, loops)
    found += _widened_steering(execution, oracle, loops)
    return found


def _opened(
    execution: Execution, oracle: OrderOracle, loops: tuple[SummarisedLoop, ...]
) -> list[str]:
    """Steering values other than the loops' bounds and the branches' conditions, and
    those an order of writes decides: they count as steering at their loops and
    branches here."""
    steered = dict(execution.flow.steered)
    for loop in loops:
        for source in loop.sources:
            steered.setdefault(source, loop.location)
    for branch in branches():  # taken for every input, but its condition's form is
        for source in branch.sources:  # one order's if an order of writes decides it
            steered.setdefault(source, branch.location)
    flow = dataclasses.replace(execution.flow, steered=steered)
    at_loops = {loop.location for loop in loops} | {branch.location for branch in branches()}
    return [
        opened.message
        for opened in open_reads(dataclasses.replace(execution, flow=flow), oracle)
        if opened.cause is Cause.ORDER or opened.used_at not in at_loops
    ]


def _read_back(
    execution: Execution, oracle: OrderOracle, loops: tuple[SummarisedLoop, ...]
) -> list[str]:
    """Stores of summarised iterations into signal cells (waits see them), and loads of
    bytes such a store wrote whose values steer: with fewer iterations they read other
    values (a load that moved only data decides nothing a summary run checks: it
    claims no model or golden)."""
    trace = execution.trace
    stored = {
        EventRef(rank=loop.rank, index=index)
        for loop in loops
        for index in loop.events
        if trace.events[loop.rank][index].kind is EventKind.STORE
    }
    if not stored:
        return []
    near = CellIndex(signal_cells(trace))
    for ref in sorted(stored, key=lambda ref: (ref.rank, ref.index)):
        access = trace.event(ref).access
        if access is not None and near.touching(access):
            return [f"line {trace.event(ref).location.line} stores into a signal cell"]
    writes = WriteIndex(trace.event(ref) for ref in stored)
    bounds = frozenset(source for loop in loops for source in loop.sources)
    steering = steering_loads(execution, oracle, bounds)
    for rank_events in trace.events:
        for event in rank_events:
            loads = event.kind is EventKind.LOAD and event.access is not None
            if loads and event.ref in steering and writes.overlapping(event.access):  # type: ignore[arg-type]
                return [f"line {event.location.line} reads what a summarised loop stored"]
    return []


def _widened_steering(
    execution: Execution, oracle: OrderOracle, loops: tuple[SummarisedLoop, ...]
) -> list[str]:
    """Loads at an offset a slot counter widened whose values steer: another input's
    run reads another element there."""
    widened = widened_loads()
    if not widened:
        return []
    bounds = frozenset(source for loop in loops for source in loop.sources)
    steering = steering_loads(execution, oracle, bounds) & widened
    return [
        f"line {execution.trace.event(ref).location.line} reads at an offset counted by a"
        " slot counter, and what it reads steers"
        for ref in sorted(steering, key=lambda ref: (ref.rank, ref.index))[:1]
    ]


STEERING_SHOWN = 8
"""A finding names at most this many of the input elements its run decided on."""


def steering_inputs(execution: Execution) -> tuple[tuple[str, int, float], ...]:
    """The input elements the run's decisions were made on, with the values the run
    had (its `--seed` draw): what a finding on this run shows with."""
    from racecheck.dsl.symbolic import Var, variables

    seen: dict[tuple[str, int], None] = {}
    for decided in execution.flow.decisions:
        for var in variables(decided.decision.condition):
            if isinstance(var, Var) and not var.is_float:
                seen.setdefault((var.tensor, var.index), None)
    initial = {tensor.name: tensor.initial for tensor in execution.tensors}
    shown = [
        (name, index, float(initial[name].reshape(-1)[index]))
        for name, index in list(seen)[:STEERING_SHOWN]
        if name in initial
    ]
    return tuple(shown)


def assumption(loops: tuple[SummarisedLoop, ...]) -> str:
    """What the proof checked, in the user's terms."""
    seen: dict[int, SummarisedLoop] = {}
    for loop in loops:
        seen.setdefault(loop.location.line, loop)
    parts = [
        f"line {line} runs at most {loop.iterations} times for any input (its bound"
        f" `{render(loop.bound)}`)"
        for line, loop in sorted(seen.items())
    ]
    taken: dict[int, tuple[str, ...]] = {}
    for branch in branches():
        taken.setdefault(branch.location.line, branch.counters)
    parts += [
        f"the branch at line {line} is taken or not for each input, counted exactly by"
        f" {', '.join(f'`{name}`' for name in counters)}, and every offset computed from"
        " that count covers each value it takes"
        for line, counters in sorted(taken.items())
    ]
    return "for every input: " + "; ".join(parts) + "; checked with all of those iterations"


def render(expr: object) -> str:
    from racecheck.dsl.symbolic import Apply, Const, Var

    if isinstance(expr, Var):
        return f"{expr.tensor}.flat[{expr.index}]"
    if isinstance(expr, Const):
        return str(expr.value)
    if isinstance(expr, Apply):
        args = [render(arg) for arg in expr.args]
        if expr.op.value in ("min", "max"):
            return f"{expr.op.value}({', '.join(args)})"
        if expr.op.value == "neg":
            return f"-{args[0]}"
        if expr.op.value == "when":
            return f"[{args[0]}]"
        return f"({args[0]} {expr.op.value} {args[1]})"
    return "?"
