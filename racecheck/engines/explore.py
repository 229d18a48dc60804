"""The `explore` engine: exhaustive explicit-state exploration of a trace's executions.

What it decides: the three questions of `racecheck.engines.base` (can_precede, witness,
stuck) exactly, by a breadth-first search over every reachable *macro state* of the
trace, under the execution semantics stated there.

Model boundary: only *sync steps* read or change the state that decides enabledness:
WAITs, and events with an effect on a *live cell* (a cell some WAIT reads; effects as
`racecheck.engines.skeleton` compiles them: Set or Add, wrapping at 32 bits; a trace
with an opaque effect is refused). Every other event is always enabled and changes
nothing any wait reads. A macro state is (for each rank, how many of
its sync steps have executed; the value of every live cell). A concrete state (rank
positions, cell values) is reachable iff its macro state is: data events commute with
everything, so a rank's data events between two sync steps may have run or not in any
combination of ranks. Hence, with k_r sync steps executed, rank r's position ranges
over [one past its k_r-th sync step, its (k_r+1)-th sync step], and
can_precede((s, j), (r, i)) holds iff some reachable macro state has
k_r <= #sync steps of r before i and k_s >= #sync steps of s up to j. The search
stores, per rank r and sync count k, the maximum over reachable macro states with
k_r <= k of every other rank's sync count, so each query is O(1). A witness is the
breadth-first path to the shallowest matching macro state, each sync step preceded by
its rank's data events, then `first`'s rank run up to `first`. Stuck: the shallowest
macro state no sync step leaves while some rank has sync steps left (those ranks sit at
disabled WAITs; the others run to their end).
Reductions, all exact: collapsing data events into macro steps (above); cells no wait
reads are dropped from the state; a cell that only ever receives Adds of values >= 0
and cannot wrap saturates at one more than the largest value any wait compares it with
(every larger value satisfies and falsifies the same waits, and stays larger).
Symmetry reduction is deliberately not used: rank relabelling is not a symmetry of a
trace in general (peers, offsets and roots break it).

Unknown policy: past `max_states` macro states or past the deadline the engine raises
EngineUnknown; it never answers from a partial exploration.

Limitations: the number of macro states grows exponentially in the rank count (the
mesh all-reduce: 1,043 states at P = 4, 18,244 at P = 5, 379,657 at P = 6, several
million at P = 7, past the default limit); no partial-order reduction of the sync steps
themselves, because the ordering table needs every reachable macro state (every sync
step changes some rank's count, which the table records), not only the ones a deadlock
or a single property needs.
"""

from __future__ import annotations

import time
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

import numpy as np

from racecheck.engines.skeleton import ADD, SET, SyncSkeleton, wait_holds
from racecheck.errors import EngineUnknown
from racecheck.events import EventRef, Schedule, SignalCell, Stuck, wrap_int32

DEADLINE_CHECK_INTERVAL = 2048  # expanded states between two looks at the clock


@dataclass(frozen=True, slots=True, kw_only=True)
class CellEffect:
    cell: int  # index of the live cell in the state
    add: bool  # Add if true, else Set
    value: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Guard:
    cell: int
    kind: int  # a wait kind of the skeleton
    expected: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncStep:
    """One event that reads or changes live cells, with its position in its rank."""

    index: int
    guard: Guard | None  # WAITs only
    effects: tuple[CellEffect, ...]  # writers of live cells only


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncProgram:
    """A trace compiled to its sync steps, per rank, over numbered live cells."""

    steps: tuple[tuple[SyncStep, ...], ...]
    cells: tuple[SignalCell, ...]
    caps: tuple[int | None, ...]  # saturation value per live cell, None if not monotone


def compile_sync_program(skeleton: SyncSkeleton) -> SyncProgram:
    waited = sorted(
        {
            cell
            for kinds, cells in zip(skeleton.kind, skeleton.cell, strict=True)
            for kind, cell in zip(kinds, cells, strict=True)
            if kind < ADD
        }
    )
    number = {cell: position for position, cell in enumerate(waited)}
    steps = tuple(_rank_program(skeleton, rank, number) for rank in range(skeleton.ranks))
    wrapping = skeleton.wrapping_cells()
    caps = tuple(
        None if cell in wrapping else _saturation_cap(number[cell], steps) for cell in waited
    )
    return SyncProgram(steps=steps, cells=tuple(skeleton.cells[cell] for cell in waited), caps=caps)


def _rank_program(
    skeleton: SyncSkeleton, rank: int, number: dict[int, int]
) -> tuple[SyncStep, ...]:
    """The rank's skeleton steps on live cells, one SyncStep per event."""
    steps: list[SyncStep] = []
    kinds, cells, amounts = skeleton.kind[rank], skeleton.cell[rank], skeleton.amount[rank]
    for position, index in enumerate(skeleton.index[rank]):
        live = number.get(cells[position])
        if live is None:
            continue
        if kinds[position] < ADD:
            guard = Guard(cell=live, kind=kinds[position], expected=amounts[position])
            steps.append(SyncStep(index=index, guard=guard, effects=()))
            continue
        effect = CellEffect(cell=live, add=kinds[position] == ADD, value=amounts[position])
        if steps and steps[-1].index == index:
            steps[-1] = SyncStep(index=index, guard=None, effects=(*steps[-1].effects, effect))
        else:
            steps.append(SyncStep(index=index, guard=None, effects=(effect,)))
    return tuple(steps)


def _saturation_cap(cell: int, steps: tuple[tuple[SyncStep, ...], ...]) -> int | None:
    """One past every threshold, if the cell only grows; else None (no saturation)."""
    thresholds: list[int] = []
    for rank_steps in steps:
        for step in rank_steps:
            if step.guard is not None and step.guard.cell == cell:
                thresholds.append(step.guard.expected)
            if any(e.cell == cell and (not e.add or e.value < 0) for e in step.effects):
                return None
    return max(0, *thresholds) + 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ExploredSpace:
    """Every reachable macro state in breadth-first order, with how each was reached."""

    states: list[tuple[int, ...]]  # sync counts per rank, then live cell values
    counts: array  # the sync counts of every state, flattened, in state order
    parents: list[int]  # index of the predecessor state, -1 for the initial state
    movers: list[int]  # the rank whose sync step led here, -1 for the initial state
    first_stuck: int | None  # the shallowest state no sync step leaves with a rank unfinished


def explore(program: SyncProgram, *, max_states: int, deadline: float) -> ExploredSpace:
    ranks = len(program.steps)
    initial = (0,) * ranks + (0,) * len(program.cells)
    index = {initial: 0}
    states, parents, movers = [initial], [-1], [-1]
    counts = array("q", initial[:ranks])
    first_stuck: int | None = None
    current = 0
    while current < len(states):  # `states` grows while it is read: a breadth-first queue
        if current % DEADLINE_CHECK_INTERVAL == 0 and time.monotonic() > deadline:
            raise EngineUnknown(f"explore: deadline passed after {len(states)} states")
        state = states[current]
        moved = False
        for rank in range(ranks):
            successor = _successor(program, state, rank, ranks)
            if successor is None:
                continue
            moved = True
            if successor in index:
                continue
            if len(states) >= max_states:
                raise EngineUnknown(f"explore: more than {max_states} states")
            index[successor] = len(states)
            states.append(successor)
            counts.extend(successor[:ranks])
            parents.append(current)
            movers.append(rank)
        if first_stuck is None and not moved and _unfinished(program, state):
            first_stuck = current
        current += 1
    return ExploredSpace(
        states=states, parents=parents, movers=movers, counts=counts, first_stuck=first_stuck
    )


def _successor(
    program: SyncProgram, state: tuple[int, ...], rank: int, ranks: int
) -> tuple[int, ...] | None:
    executed = state[rank]
    rank_steps = program.steps[rank]
    if executed == len(rank_steps):
        return None
    step = rank_steps[executed]
    guard = step.guard
    if guard is not None and not wait_holds(guard.kind, state[ranks + guard.cell], guard.expected):
        return None
    successor = list(state)
    successor[rank] = executed + 1
    for effect in step.effects:
        slot = ranks + effect.cell
        value = wrap_int32(successor[slot] + effect.value) if effect.add else effect.value
        cap = program.caps[effect.cell]
        successor[slot] = value if cap is None else min(value, cap)
    return tuple(successor)


def _unfinished(program: SyncProgram, state: tuple[int, ...]) -> bool:
    return any(state[rank] < len(steps) for rank, steps in enumerate(program.steps))


class ExploreOracle:
    """Answers from an explored space; see the module docstring for the conditions."""

    def __init__(self, skeleton: SyncSkeleton, program: SyncProgram, space: ExploredSpace) -> None:
        trace = skeleton.trace
        self._skeleton = skeleton
        self._trace = trace
        self._program = program
        self._space = space
        self._counts = np.frombuffer(space.counts, dtype=np.int64).reshape(-1, trace.ranks)
        self._sync_indices = [[step.index for step in steps] for steps in program.steps]
        self._reach = [self._reach_table(rank) for rank in range(trace.ranks)]

    def _reach_table(self, rank: int) -> np.ndarray:
        """[k, s]: the largest sync count of rank s in any reachable state with k_rank <= k."""
        table = np.full((len(self._program.steps[rank]) + 1, self._trace.ranks), -1, np.int64)
        order = np.argsort(self._counts[:, rank], kind="stable")
        grouped = self._counts[order]
        present, starts = np.unique(grouped[:, rank], return_index=True)
        table[present] = np.maximum.reduceat(grouped, starts, axis=0)
        return np.maximum.accumulate(table, axis=0)

    def _bounds(self, first: EventRef, second: EventRef) -> tuple[int, int]:
        """(most sync steps `second`'s rank may have run, fewest `first`'s rank must have)."""
        most = bisect_left(self._sync_indices[second.rank], second.index)
        fewest = bisect_right(self._sync_indices[first.rank], first.index)
        return most, fewest

    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        most, fewest = self._bounds(first, second)
        return bool(self._reach[second.rank][most, first.rank] >= fewest)

    def witness(self, first: EventRef, second: EventRef) -> Schedule:
        most, fewest = self._bounds(first, second)
        matches = (self._counts[:, second.rank] <= most) & (self._counts[:, first.rank] >= fewest)
        if not matches.any():
            raise ValueError(f"{first} cannot precede {second}: no witness")
        schedule, positions = self._concrete_path(int(np.argmax(matches)))
        schedule += _run_rank(first.rank, positions, first.index + 1)
        return tuple(schedule[: schedule.index(first) + 1])

    def stuck(self) -> Stuck | None:
        state_index = self._space.first_stuck
        if state_index is None:
            return None
        executed = self._space.states[state_index]
        schedule, positions = self._concrete_path(state_index)
        blocked: list[EventRef] = []
        for rank, rank_events in enumerate(self._trace.events):
            rank_steps = self._program.steps[rank]
            if executed[rank] < len(rank_steps):
                blocked.append(EventRef(rank=rank, index=rank_steps[executed[rank]].index))
                schedule += _run_rank(rank, positions, blocked[-1].index)
            else:
                schedule += _run_rank(rank, positions, len(rank_events))
        return Stuck(
            schedule=tuple(schedule),
            blocked=tuple(blocked),
            cell_values=self._cell_values(schedule, [self._wait_cell(ref) for ref in blocked]),
        )

    def _wait_cell(self, ref: EventRef) -> SignalCell:
        wait = self._trace.event(ref).wait
        assert wait is not None, "a rank can only block at a WAIT"
        return wait.cell

    def _concrete_path(self, state_index: int) -> tuple[list[EventRef], list[int]]:
        """An execution reaching the macro state, each rank just past its last sync step."""
        movers: list[int] = []
        while state_index > 0:
            movers.append(self._space.movers[state_index])
            state_index = self._space.parents[state_index]
        positions = [0] * self._trace.ranks
        executed = [0] * self._trace.ranks
        schedule: list[EventRef] = []
        for rank in reversed(movers):
            sync_index = self._program.steps[rank][executed[rank]].index
            executed[rank] += 1
            schedule += _run_rank(rank, positions, sync_index + 1)
        return schedule, positions

    def _cell_values(
        self, schedule: list[EventRef], cells: list[SignalCell]
    ) -> tuple[tuple[SignalCell, int], ...]:
        """Exact values (no saturation) of `cells` after `schedule`."""
        skeleton = self._skeleton
        values = [0] * len(skeleton.cells)
        done = [0] * self._trace.ranks  # skeleton steps applied per rank
        for ref in schedule:
            rank, position = ref.rank, done[ref.rank]
            while (
                position < len(skeleton.index[rank]) and skeleton.index[rank][position] == ref.index
            ):
                cell, amount = skeleton.cell[rank][position], skeleton.amount[rank][position]
                if skeleton.kind[rank][position] == ADD:
                    values[cell] = wrap_int32(values[cell] + amount)
                elif skeleton.kind[rank][position] == SET:
                    values[cell] = amount
                position += 1
            done[rank] = position
        return tuple((cell, values[skeleton.cell_index[cell.key]]) for cell in cells)


def _run_rank(rank: int, positions: list[int], stop: int) -> list[EventRef]:
    """Advance `rank` to position `stop` (no-op if already there), returning the steps."""
    steps = [EventRef(rank=rank, index=index) for index in range(positions[rank], stop)]
    positions[rank] = max(positions[rank], stop)
    return steps


class ExploreEngine:
    name = "explore"

    def __init__(self, *, max_states: int = 2_000_000) -> None:
        self.max_states = max_states

    def unsupported(self, skeleton: SyncSkeleton) -> str | None:
        return skeleton.refusal()

    def order(self, skeleton: SyncSkeleton, *, deadline: float) -> ExploreOracle:
        program = compile_sync_program(skeleton)
        space = explore(program, max_states=self.max_states, deadline=deadline)
        return ExploreOracle(skeleton, program, space)
