"""Breadth-first search over every reachable *macro state* of a sync program.

What it computes, for `racecheck.engines.explore`: every reachable macro state (for
each rank, how many of its sync steps have run; the value of every live cell), so that
"can rank s have run f sync steps while rank r has run at most m" is a table lookup,
and the shallowest deadlocked state. A concrete state (rank positions, cell values) is
reachable iff its macro state is: data events commute with everything
(`racecheck.engines.syncprogram`).

The search stores, per rank r and sync count k, the maximum over reachable macro states
with k_r <= k of every other rank's sync count, so each query is O(1); a witness is the
breadth-first path to the shallowest matching state. Reductions, all exact: cells no
wait reads are not in the state; a cell with a saturation cap stays at its cap.

Its cost is the number of reachable macro states, which grows exponentially in the rank
count when many ranks run independently (the mesh all-reduce: 1,043 states at P = 4,
18,244 at P = 5, 379,657 at P = 6), and is small when the ranks are tightly coupled,
however many traces their interleavings form (the partial-order-reduced search,
`racecheck.engines.por`, is the other way round).

Unknown policy: past `max_states` macro states it raises EngineUnknown; nothing is
answered from a partial exploration. It pauses every few states (a generator, yielding
the sync step it is at), so that its caller can watch the clock and run another
search in turns.
"""

from __future__ import annotations

from array import array
from collections.abc import Generator
from dataclasses import dataclass

import numpy as np

from racecheck.engines.skeleton import wait_holds
from racecheck.engines.syncprogram import SyncPosition, SyncProgram
from racecheck.errors import EngineUnknown
from racecheck.report.reasons import ReasonCode, reason

SLICE = 256  # expanded states between two pauses of the search


@dataclass(frozen=True, slots=True, kw_only=True)
class ExploredStates:
    """Every reachable macro state in breadth-first order, with how each was reached."""

    states: list[tuple[int, ...]]  # sync counts per rank, then live cell values
    counts: np.ndarray  # [state, rank]: the sync counts of every state
    parents: list[int]  # index of the predecessor state, -1 for the initial state
    movers: list[int]  # the rank whose sync step led here, -1 for the initial state
    first_stuck: int | None  # the shallowest state no sync step leaves with a rank unfinished
    reach: list[np.ndarray]  # per rank r, [k, s]: most sync steps of s while r has run <= k

    def reaches(self, first: int, fewest: int, second: int, most: int) -> bool:
        return bool(self.reach[second][most, first] >= fewest)

    def movers_to(self, first: int, fewest: int, second: int, most: int) -> list[int] | None:
        matches = (self.counts[:, second] <= most) & (self.counts[:, first] >= fewest)
        return self._path(int(np.argmax(matches))) if matches.any() else None

    def deadlock(self) -> tuple[tuple[int, ...], list[int]] | None:
        if self.first_stuck is None:
            return None
        ranks = self.counts.shape[1]
        return self.states[self.first_stuck][:ranks], self._path(self.first_stuck)

    def _path(self, state_index: int) -> list[int]:
        movers: list[int] = []
        while state_index > 0:
            movers.append(self.movers[state_index])
            state_index = self.parents[state_index]
        return movers[::-1]


def explore_states(
    program: SyncProgram, *, max_states: int
) -> Generator[SyncPosition, None, ExploredStates]:
    """The search as a generator: it pauses every `SLICE` states (yielding the first
    unfinished rank's next sync step in the state it expands next) and returns what it
    found.
    It gives up at once when `fewest_states` already exceeds `max_states`."""
    if fewest_states(program) > max_states:
        raise EngineUnknown(reason(ReasonCode.EXPLORE_MACRO_STATES, states=max_states))
    ranks = len(program.steps)
    initial = (0,) * ranks + (0,) * len(program.cells)
    index = {initial: 0}
    states, parents, movers = [initial], [-1], [-1]
    flat = array("q", initial[:ranks])
    first_stuck: int | None = None
    current = 0
    while current < len(states):  # `states` grows while it is read: a breadth-first queue
        state = states[current]
        if current % SLICE == 0:
            yield _next_step(program, state)
        moved = False
        for rank in range(ranks):
            successor = _successor(program, state, rank, ranks)
            if successor is None:
                continue
            moved = True
            if successor in index:
                continue
            if len(states) >= max_states:
                raise EngineUnknown(reason(ReasonCode.EXPLORE_MACRO_STATES, states=max_states))
            index[successor] = len(states)
            states.append(successor)
            flat.extend(successor[:ranks])
            parents.append(current)
            movers.append(rank)
        if first_stuck is None and not moved and _unfinished(program, state):
            first_stuck = current
        current += 1
    counts = np.frombuffer(flat, dtype=np.int64).reshape(-1, ranks)
    return ExploredStates(
        states=states,
        counts=counts,
        parents=parents,
        movers=movers,
        first_stuck=first_stuck,
        reach=[_reach_table(program, counts, rank) for rank in range(ranks)],
    )


def fewest_states(program: SyncProgram) -> int:
    """A lower bound on the reachable macro states: each rank's steps before its first
    WAIT are always enabled, so every combination of how far each rank has run into
    them is a reachable state of its own (the sync counts differ)."""
    bound = 1
    for steps in program.steps:
        free = next((n for n, step in enumerate(steps) if step.guard is not None), len(steps))
        bound *= free + 1
    return bound


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
        value = effect.after(successor[slot])
        cap = program.caps[effect.cell]
        successor[slot] = value if cap is None else min(value, cap)
    return tuple(successor)


def _next_step(program: SyncProgram, state: tuple[int, ...]) -> SyncPosition:
    for rank, steps in enumerate(program.steps):
        if state[rank] < len(steps):
            return rank, state[rank]
    return None


def _unfinished(program: SyncProgram, state: tuple[int, ...]) -> bool:
    return any(state[rank] < len(steps) for rank, steps in enumerate(program.steps))


def _reach_table(program: SyncProgram, counts: np.ndarray, rank: int) -> np.ndarray:
    """[k, s]: the largest sync count of rank s in any reachable state with k_rank <= k."""
    table = np.full((len(program.steps[rank]) + 1, counts.shape[1]), -1, np.int64)
    order = np.argsort(counts[:, rank], kind="stable")
    grouped = counts[order]
    present, starts = np.unique(grouped[:, rank], return_index=True)
    table[present] = np.maximum.reduceat(grouped, starts, axis=0)
    return np.maximum.accumulate(table, axis=0)
