"""The `explore` engine: exhaustive exploration of a trace's executions.

What it decides: the questions of `racecheck.engines.base` (can_precede, witness,
can_run, stuck) exactly, under the execution semantics stated there, from a search over
the trace's sync steps (`racecheck.engines.syncprogram`): data events commute with
everything, so each rank's data events between two sync steps may have run in any
combination, and can_precede((s, j), (r, i)) holds iff some execution has run f sync
steps of s (f = those up to j) while r has run at most m (m = those before i), and
can_run((s, j)) iff some execution has run f sync steps of s. A
witness is such an execution, each sync step preceded by its rank's data events, then
`first`'s rank run up to `first`. Stuck: a deadlock with the fewest sync steps run (the
blocked ranks sit at disabled WAITs; the others run to their end).

Two exact searches answer those from different facts; they run in turns, by work done
(`first_to_finish`), and the first that finishes within its budget answers:

1. every reachable macro state, breadth-first (`racecheck.engines.macrostates`),
   within `macro_states` states: small when the ranks are tightly
   coupled, however many traces their interleavings form;
2. the partial-order-reduced search (`racecheck.engines.por`: persistent sets and
   sleep sets, one execution per maximal Mazurkiewicz trace at least, each step's
   causal past as a vector clock), within `reduced_steps` steps:
   small when few traces exist, however many states their interleavings reach (one
   trace, run once, for the mesh all-reduce at every P).

Model boundary: Set and Add effects on cells, wrapping at 32 bits; a trace with an
opaque effect is refused. Symmetry reduction is deliberately not used: rank relabelling
is not a symmetry of a trace in general (peers, offsets and roots break it).

Unknown policy: when both searches pass their budgets the engine raises EngineUnknown
naming why, and past `--timeout` `Overtime` naming the sync step the search was at; it
never answers from a partial exploration.

Limitations: a protocol with both many states and many traces (many ranks racing Sets
or Eq waits on shared cells) is unknown.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Generator
from typing import Protocol

from racecheck.cells import after_write
from racecheck.clock import Overtime, passed
from racecheck.engines.macrostates import explore_states
from racecheck.engines.por import explore
from racecheck.engines.skeleton import ADD, SET, SyncSkeleton
from racecheck.engines.syncprogram import SyncPosition, SyncProgram, compile_sync_program
from racecheck.errors import EngineUnknown
from racecheck.events import EventRef, Schedule, SignalCell, SourceLocation, Stuck
from racecheck.report.reasons import ReasonCode, reason

Search = Generator[SyncPosition, None, "Exploration"]

REDUCED_STEP_COST = 10  # a step of the reduced search costs about as much as 10 macro states
MAX_STATES = 2_000_000  # macro states of `--engine explore`; its reduced search gets a tenth


class Exploration(Protocol):
    """What a search over a sync program found; ranks and sync-step counts throughout."""

    def reaches(self, first: int, fewest: int, second: int, most: int) -> bool:
        """Whether some execution has run `fewest` sync steps of `first` while `second`
        has run at most `most`."""
        ...

    def movers_to(self, first: int, fewest: int, second: int, most: int) -> list[int] | None:
        """The ranks whose sync steps run, in order, in such an execution, or None."""
        ...

    def deadlock(self) -> tuple[tuple[int, ...], list[int]] | None:
        """A deadlocked state with the fewest sync steps run (steps run per rank) and
        the ranks whose sync steps reach it, in order; None if there is none."""
        ...


class ExploreOracle:
    """Answers from an exploration; see the module docstring for the conditions."""

    def __init__(self, skeleton: SyncSkeleton, program: SyncProgram, explored: Exploration) -> None:
        self._skeleton = skeleton
        self._trace = skeleton.trace
        self._program = program
        self._explored = explored
        self._sync_indices = [[step.index for step in steps] for steps in program.steps]

    def _query(self, first: EventRef, second: EventRef) -> tuple[int, int, int, int]:
        """(first's rank, fewest sync steps it must have run, second's rank, most sync
        steps it may have run)."""
        most = bisect_left(self._sync_indices[second.rank], second.index)
        fewest = bisect_right(self._sync_indices[first.rank], first.index)
        return first.rank, fewest, second.rank, most

    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        return self._explored.reaches(*self._query(first, second))

    def witness(self, first: EventRef, second: EventRef) -> Schedule:
        movers = self._explored.movers_to(*self._query(first, second))
        if movers is None:
            raise ValueError(
                reason(ReasonCode.EXPLORE_NO_WITNESS, first=str(first), second=str(second))
            )
        schedule, positions = self._concrete_path(movers)
        schedule += _run_rank(first.rank, positions, first.index + 1)
        return tuple(schedule[: schedule.index(first) + 1])

    def can_run(self, event: EventRef) -> bool:
        rank = event.rank
        fewest = bisect_right(self._sync_indices[rank], event.index)
        return self._explored.reaches(rank, fewest, rank, len(self._sync_indices[rank]))

    def stuck(self) -> Stuck | None:
        found = self._explored.deadlock()
        if found is None:
            return None
        executed, movers = found
        schedule, positions = self._concrete_path(movers)
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
                kind = skeleton.kind[rank][position]
                if kind in (ADD, SET):
                    values[cell] = after_write(values[cell], amount, kind == ADD)
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

    def __init__(
        self,
        *,
        max_states: int = MAX_STATES,
        macro_states: int | None = None,
        reduced_steps: int | None = None,
    ) -> None:
        """Budgets: `macro_states` (default `max_states`) for the first search,
        `reduced_steps` (default `max_states / REDUCED_STEP_COST`) for the second."""
        self.max_states = max_states
        self.macro_states = max_states if macro_states is None else macro_states
        self.reduced_steps = (
            max(1, max_states // REDUCED_STEP_COST) if reduced_steps is None else reduced_steps
        )

    def unsupported(self, skeleton: SyncSkeleton) -> str | None:
        return skeleton.refusal()

    def order(self, skeleton: SyncSkeleton, *, deadline: float) -> ExploreOracle:
        program = compile_sync_program(skeleton)
        searches: list[tuple[int, Search]] = [
            (1, explore_states(program, max_states=self.macro_states)),
            (REDUCED_STEP_COST, explore(program, max_states=self.reduced_steps)),
        ]

        def locate(rank: int, step: int) -> SourceLocation:
            return skeleton.trace.events[rank][program.steps[rank][step].index].location

        return ExploreOracle(skeleton, program, first_to_finish(searches, deadline, locate))


def first_to_finish(
    searches: list[tuple[int, Search]],
    deadline: float,
    locate: Callable[[int, int], SourceLocation] | None = None,
) -> Exploration:
    """Run the searches in turns until one finishes, the one that has done the least work
    so far next (each pause of a search costs its weight: its slice of work in macro
    states). Deterministic, so the answering search and its witnesses do not depend on
    the machine's load; the time is at most about twice the faster search's. Past
    `deadline`, `Overtime` naming the step (`locate`: its line) the last search was at."""
    spent = [0] * len(searches)
    running = list(range(len(searches)))
    stopped: list[str] = []
    at: SyncPosition = None
    while running:
        if passed(deadline):
            where = locate(*at) if at is not None and locate is not None else None
            raise Overtime(reason(ReasonCode.STAGE_EXPLORE), where)
        turn = min(running, key=spent.__getitem__)
        weight, search = searches[turn]
        try:
            at = next(search) or at
        except StopIteration as finished:
            return finished.value
        except EngineUnknown as unknown:
            stopped.append(unknown.reason)
            running.remove(turn)
        spent[turn] += weight
    raise EngineUnknown("; ".join(stopped))
