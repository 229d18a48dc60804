"""The `explore` engine: exhaustive explicit-state exploration of a trace's executions.

What it decides: the three questions of `racecheck.engines.base` (can_precede, witness,
stuck) exactly, by a breadth-first search over every reachable *macro state* of the
trace, under the execution semantics stated there.

Model boundary: only *sync steps* read or change the state that decides enabledness:
WAITs, and NOTIFYs and cell-assigning STOREs on *live cells* (cells some WAIT reads).
Every other event (data accesses, notifies or stores on cells no wait reads) is always
enabled and changes nothing any wait reads. A macro state is (for each rank, how many of
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
reads are dropped from the state; a cell that only ever receives AtomicAdds of values
>= 0 saturates at one more than the largest value any wait compares it with (every
larger value satisfies and falsifies the same waits, and stays larger).
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

from racecheck.engines.syncview import CellKey, cell_key_of
from racecheck.errors import EngineUnknown
from racecheck.events import (
    Event,
    EventKind,
    EventRef,
    NotifyOp,
    Schedule,
    SignalCell,
    Stuck,
    Trace,
    Wait,
    WaitCmp,
)

DEADLINE_CHECK_INTERVAL = 2048  # expanded states between two looks at the clock


@dataclass(frozen=True, slots=True, kw_only=True)
class CellEffect:
    cell: int  # index of the live cell in the state
    add: bool  # AtomicAdd if true, else assign (Set notify or plain store)
    value: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Guard:
    cell: int
    greater_or_equal: bool  # Ge if true, else Eq
    expected: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncStep:
    """One event that reads or changes live cells, with its position in its rank."""

    index: int
    guard: Guard | None  # WAITs only
    effects: tuple[CellEffect, ...]  # NOTIFYs and cell-assigning STOREs only


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncProgram:
    """A trace compiled to its sync steps, per rank, over numbered live cells."""

    steps: tuple[tuple[SyncStep, ...], ...]
    cells: tuple[CellKey, ...]
    caps: tuple[int | None, ...]  # saturation value per live cell, None if it may decrease


def compile_sync_program(trace: Trace) -> SyncProgram:
    waits = [event.wait for event in _events(trace) if event.wait is not None]
    cells = tuple(sorted({cell_key_of(wait.cell) for wait in waits}))
    number = {cell: position for position, cell in enumerate(cells)}
    steps = tuple(
        tuple(
            step
            for step in (_sync_step(event, number) for event in rank_events)
            if step is not None
        )
        for rank_events in trace.events
    )
    effects = [effect for rank_steps in steps for step in rank_steps for effect in step.effects]
    caps = tuple(_saturation_cap(cell, effects, waits, number) for cell in cells)
    return SyncProgram(steps=steps, cells=cells, caps=caps)


def _sync_step(event: Event, number: dict[CellKey, int]) -> SyncStep | None:
    if event.wait is not None:
        guard = Guard(
            cell=number[cell_key_of(event.wait.cell)],
            greater_or_equal=event.wait.cmp is WaitCmp.GE,
            expected=event.wait.expected,
        )
        return SyncStep(index=event.index, guard=guard, effects=())
    effects = _cell_effects(event, number)
    return SyncStep(index=event.index, guard=None, effects=effects) if effects else None


def _cell_effects(event: Event, number: dict[CellKey, int]) -> tuple[CellEffect, ...]:
    if event.kind is EventKind.NOTIFY and event.notify is not None:
        cell = number.get(cell_key_of(event.notify.cell))
        if cell is None:
            return ()
        add = event.notify.op is NotifyOp.ATOMIC_ADD
        return (CellEffect(cell=cell, add=add, value=event.notify.value),)
    if event.kind is EventKind.STORE and event.access is not None:
        memory, owner = event.access.memory, event.access.owner
        return tuple(
            CellEffect(cell=number[(memory, owner, offset)], add=False, value=value)
            for offset, value in event.cell_values
            if (memory, owner, offset) in number
        )
    return ()


def _saturation_cap(
    cell: CellKey, effects: list[CellEffect], waits: list[Wait], number: dict[CellKey, int]
) -> int | None:
    """One past every threshold, if the cell only grows; else None (no saturation)."""
    own = [effect for effect in effects if effect.cell == number[cell]]
    if any(not effect.add or effect.value < 0 for effect in own):
        return None
    thresholds = [wait.expected for wait in waits if cell_key_of(wait.cell) == cell]
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
    if guard is not None:
        value = state[ranks + guard.cell]
        if not (value >= guard.expected if guard.greater_or_equal else value == guard.expected):
            return None
    successor = list(state)
    successor[rank] = executed + 1
    for effect in step.effects:
        slot = ranks + effect.cell
        value = successor[slot] + effect.value if effect.add else effect.value
        cap = program.caps[effect.cell]
        successor[slot] = value if cap is None else min(value, cap)
    return tuple(successor)


def _unfinished(program: SyncProgram, state: tuple[int, ...]) -> bool:
    return any(state[rank] < len(steps) for rank, steps in enumerate(program.steps))


class ExploreOracle:
    """Answers from an explored space; see the module docstring for the conditions."""

    def __init__(self, trace: Trace, program: SyncProgram, space: ExploredSpace) -> None:
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
        """Exact values (no saturation) of live `cells` after `schedule`."""
        number = {cell: position for position, cell in enumerate(self._program.cells)}
        values = [0] * len(self._program.cells)
        for ref in schedule:
            for effect in _cell_effects(self._trace.event(ref), number):
                base = values[effect.cell] if effect.add else 0
                values[effect.cell] = base + effect.value
        return tuple((cell, values[number[cell_key_of(cell)]]) for cell in cells)


def _run_rank(rank: int, positions: list[int], stop: int) -> list[EventRef]:
    """Advance `rank` to position `stop` (no-op if already there), returning the steps."""
    steps = [EventRef(rank=rank, index=index) for index in range(positions[rank], stop)]
    positions[rank] = max(positions[rank], stop)
    return steps


class ExploreEngine:
    name = "explore"

    def __init__(self, *, max_states: int = 2_000_000) -> None:
        self.max_states = max_states

    def unsupported(self, trace: Trace) -> str | None:
        return None

    def order(self, trace: Trace, *, deadline: float) -> ExploreOracle:
        program = compile_sync_program(trace)
        space = explore(program, max_states=self.max_states, deadline=deadline)
        return ExploreOracle(trace, program, space)


def _events(trace: Trace) -> list[Event]:
    return [event for rank_events in trace.events for event in rank_events]
