"""The `explore` engine: exhaustive exploration of a trace's executions, reduced by partial order.

What it decides: the three questions of `racecheck.engines.base` (can_precede, witness,
stuck) exactly, under the execution semantics stated there, from a search over the
trace's sync steps (`racecheck.engines.syncprogram`) that covers every maximal
Mazurkiewicz trace by at least one execution and records, per step, its causal past as
a vector clock (`racecheck.engines.por`, where the argument is).

can_precede((s, j), (r, i)) holds iff some execution has run the f-th sync step of s
(f = sync steps of s up to j) while r has run at most m sync steps (m = sync steps of r
before i): data events commute with everything, so each rank's data events between two
sync steps may run in any combination. That is iff the least causal past of step
(s, f - 1) over the explored traces holds at most m steps of r (or f = 0: nothing need
run). A witness is that past, in the order its execution ran it, each sync step preceded
by its rank's data events, then `first`'s rank run up to `first`. Stuck: the deadlock
with the fewest sync steps run (the blocked ranks sit at disabled WAITs; the others run
to their end).

Model boundary: Set and Add effects on cells, wrapping at 32 bits; a trace with an
opaque effect is refused. Symmetry reduction is deliberately not used: rank relabelling
is not a symmetry of a trace in general (peers, offsets and roots break it).

Unknown policy: past `max_states` executed steps or past the deadline the engine raises
EngineUnknown; it never answers from a partial exploration.

Limitations: the search is stateless, so its cost grows with the number of maximal
traces (each run once, sleep sets cut the repeats) rather than with the states: cheap
when waits are each fed by known notifies (one trace for the mesh all-reduce at every
P), expensive when many Sets or Eq waits race for one cell.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from racecheck.engines.por import ExploredTraces, explore
from racecheck.engines.skeleton import ADD, SET, SyncSkeleton
from racecheck.engines.syncprogram import SyncProgram, compile_sync_program
from racecheck.events import EventRef, Schedule, SignalCell, Stuck, wrap_int32


class ExploreOracle:
    """Answers from the explored traces; see the module docstring for the conditions."""

    def __init__(
        self, skeleton: SyncSkeleton, program: SyncProgram, explored: ExploredTraces
    ) -> None:
        self._skeleton = skeleton
        self._trace = skeleton.trace
        self._program = program
        self._explored = explored
        self._sync_indices = [[step.index for step in steps] for steps in program.steps]

    def _bounds(self, first: EventRef, second: EventRef) -> tuple[int, int]:
        """(most sync steps `second`'s rank may have run, fewest `first`'s rank must have)."""
        most = bisect_left(self._sync_indices[second.rank], second.index)
        fewest = bisect_right(self._sync_indices[first.rank], first.index)
        return most, fewest

    def _least_past(self, first: EventRef, second: EventRef) -> list[int] | None:
        """The ranks that move, in run order, in an execution that runs `first`'s last
        sync step with as few of `second`'s rank's sync steps as possible; None if no
        execution runs `first` without `second`."""
        most, fewest = self._bounds(first, second)
        if fewest == 0:
            return []
        past = self._explored.least_past[first.rank][fewest - 1][second.rank]
        if past is None or past.clock[second.rank] > most:
            return None
        ran = [0] * self._trace.ranks
        movers = []
        for rank in self._explored.path(past.node):
            if ran[rank] < past.clock[rank]:
                movers.append(rank)
            ran[rank] += 1
        return movers

    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        return self._least_past(first, second) is not None

    def witness(self, first: EventRef, second: EventRef) -> Schedule:
        movers = self._least_past(first, second)
        if movers is None:
            raise ValueError(f"{first} cannot precede {second}: no witness")
        schedule, positions = self._concrete_path(movers)
        schedule += _run_rank(first.rank, positions, first.index + 1)
        return tuple(schedule[: schedule.index(first) + 1])

    def stuck(self) -> Stuck | None:
        deadlocks = self._explored.deadlocks
        if not deadlocks:
            return None
        executed = min(deadlocks, key=lambda state: (sum(state), state))
        schedule, positions = self._concrete_path(self._explored.path(deadlocks[executed]))
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

    def _concrete_path(self, movers: list[int]) -> tuple[list[EventRef], list[int]]:
        """The execution whose sync steps are run by `movers` in order, each preceded by
        its rank's data events; each rank ends just past its last sync step."""
        positions = [0] * self._trace.ranks
        executed = [0] * self._trace.ranks
        schedule: list[EventRef] = []
        for rank in movers:
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

    def __init__(self, *, max_states: int = 2_000_000, reduce: bool = True) -> None:
        self.max_states = max_states
        self.reduce = reduce  # False: every interleaving, the reference for the reduction

    def unsupported(self, skeleton: SyncSkeleton) -> str | None:
        return skeleton.refusal()

    def order(self, skeleton: SyncSkeleton, *, deadline: float) -> ExploreOracle:
        program = compile_sync_program(skeleton)
        explored = explore(
            program, reduce=self.reduce, max_states=self.max_states, deadline=deadline
        )
        return ExploreOracle(skeleton, program, explored)
