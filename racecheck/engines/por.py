"""Exploration of a sync program's executions with partial-order reduction.

What it computes, for `racecheck.engines.explore`: for every sync step a = (s, k) and
every rank r, the fewest steps of r in the causal past of a over all executions that
contain a (`least_past`), each with an execution that attains it; and every reachable
deadlock (a state no step leaves while some rank has steps left), each with an
execution that reaches it.

Why that is enough (Mazurkiewicz traces). Two steps are *independent* when they belong
to different ranks and, on every cell both touch, both only read or both only Add
(`racecheck.engines.syncprogram.conflict`): then in every state they commute and
neither enables nor disables the other. Swapping adjacent independent steps turns an
execution into an equivalent one (same trace, same final state). Within an execution,
the causal past of a step is the least set holding it that is closed under program
order and under "an earlier dependent step"; it is the same in every execution of one
trace, and it is itself an execution. Every execution extends to a maximal one (run
until nothing is enabled), and the past of a step does not grow when it is extended.
Hence some execution contains a while r has run at most m steps iff, in some *maximal*
trace containing a, the past of a holds at most m steps of r; and every deadlock is the
final state of a maximal trace. So an exploration that covers every maximal trace by
at least one execution, recording each step's past as a vector clock, computes both
answers exactly — although it visits only a few of the reachable states.

The reduction: a stateless depth-first search with persistent sets and sleep sets
(Godefroid, "Partial-Order Methods for the Verification of Concurrent Systems", 1996;
the state space is acyclic: every step moves a rank forward). At a state s it runs only
the enabled, awake ranks of a *persistent set* T: a set of ranks such that, on every
path from s on which no rank of T moves, every step is independent of the next step of
every rank of T. Then every maximal trace from s has a linearisation that starts with
the next step of a rank of T (the first step of T on it commutes to the front; a path
with none would leave T's enabled steps enabled, so it is not maximal). A rank run from
s sleeps in its later siblings' subtrees until a step dependent with its next step
runs: a trace that could start with it was covered from s already. By induction on the
trace's length, every maximal trace is covered by one explored execution at least, and
each explored execution is a real one.

T is closed from one seed rank: a rank q joins T when, with the ranks of T held still,
q can reach a step dependent with the next step (enabled or not) of a rank of T. q can
run at most up to its *horizon*: up to its first WAIT that is false at s and whose cell
no rank outside T has a write still to run (the ranks of T do not move, so that cell
keeps its value; a WAIT whose cell an outside rank may write counts as passable). A
disabled WAIT of T conflicts with every write to its cell, so no outside rank can
enable it, and those ranks indeed stay put. Each enabled rank not already in a tried
set is tried as the seed, and the set with the fewest awake ranks to run wins.

With `reduce=False` every enabled rank is explored at every state and nothing sleeps:
the plain enumeration of every interleaving, the reference the reduction is tested
against.

Unknown policy: past `max_states` executed steps the search raises EngineUnknown;
nothing is answered from a partial exploration. It pauses every few steps (a
generator, yielding the sync step it just ran), so that its caller can watch the clock
and run another search in turns.
"""

from __future__ import annotations

from array import array
from collections.abc import Generator, Iterable
from dataclasses import dataclass

from racecheck.engines.syncprogram import (
    ADDS,
    READS,
    SETS,
    SyncPosition,
    SyncProgram,
    SyncStep,
    conflict,
)
from racecheck.errors import EngineUnknown
from racecheck.report.reasons import ReasonCode, reason

SLICE = 256  # steps between two pauses of the search
KINDS = (READS, ADDS, SETS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Past:
    """The causal past of one step in one explored execution."""

    clock: tuple[int, ...]  # steps of each rank in the past, the step itself included
    node: int  # the search node just after the step; its path holds the execution


@dataclass(frozen=True, slots=True, kw_only=True)
class ExploredTraces:
    """What the search found; paths are read back through `parents` and `movers`."""

    least_past: tuple[tuple[list[Past | None], ...], ...]  # [rank][step][rank r]
    deadlocks: dict[tuple[int, ...], int]  # steps run per rank -> node that reaches it
    parents: array  # search node -> its parent node, -1 at the root
    movers: array  # search node -> the rank whose step led to it, -1 at the root
    nodes: int  # steps executed by the search

    def reaches(self, first: int, fewest: int, second: int, most: int) -> bool:
        """Whether some execution runs `fewest` sync steps of rank `first` while rank
        `second` has run at most `most`."""
        return self._least(first, fewest, second, most) is not None

    def movers_to(self, first: int, fewest: int, second: int, most: int) -> list[int] | None:
        """The ranks that move, in run order, in such an execution (the causal past of
        the step), or None."""
        past = self._least(first, fewest, second, most)
        if past is None:
            return None
        ran = [0] * len(past.clock)
        movers = []
        for rank in self._path(past.node):
            if ran[rank] < past.clock[rank]:
                movers.append(rank)
            ran[rank] += 1
        return movers

    def deadlock(self) -> tuple[tuple[int, ...], list[int]] | None:
        """The deadlocked state with the fewest steps run, and the ranks that move to it."""
        if not self.deadlocks:
            return None
        state = min(self.deadlocks, key=lambda counts: (sum(counts), counts))
        return state, self._path(self.deadlocks[state])

    def _least(self, first: int, fewest: int, second: int, most: int) -> Past | None:
        if fewest == 0:
            return Past(clock=(0,) * len(self.least_past), node=0)
        past = self.least_past[first][fewest - 1][second]
        return past if past is not None and past.clock[second] <= most else None

    def _path(self, node: int) -> list[int]:
        """The ranks that move, in order, from the initial state to `node`."""
        movers: list[int] = []
        while node > 0:
            movers.append(self.movers[node])
            node = self.parents[node]
        return movers[::-1]


@dataclass(slots=True, kw_only=True)
class _Frame:
    """One state on the search's current path."""

    node: int
    choices: list[int]  # ranks still to run from here
    sleep: list[int]  # ranks whose next step need not run from here
    done: list[int]  # ranks already run from here


@dataclass(frozen=True, slots=True, kw_only=True)
class _Undo:
    rank: int
    clock: tuple[int, ...]  # the rank's clock before the step
    cells: tuple[tuple[int, int, int, tuple[int, ...]], ...]  # (cell, kind, value, joined)


class Search:
    """The depth-first search; `run` returns what it found."""

    def __init__(self, program: SyncProgram, *, reduce: bool, max_states: int) -> None:
        self._steps = program.steps
        self._ranks = len(program.steps)
        self._reduce = reduce
        self._max_states = max_states
        zero = (0,) * self._ranks
        self._positions = [0] * self._ranks
        self._values = [0] * len(program.cells)
        self._clocks = [zero] * self._ranks  # each rank's last step's clock
        # per cell and access kind: the join of the clocks of the steps that touched it so
        self._touched = [dict.fromkeys(KINDS, zero) for _ in program.cells]
        self._writers = _last_writes(program)
        self._spans = [_spans(steps) for steps in program.steps]
        self._least: tuple[tuple[list[Past | None], ...], ...] = tuple(
            tuple([None] * self._ranks for _ in steps) for steps in program.steps
        )
        self._deadlocks: dict[tuple[int, ...], int] = {}
        self._parents = array("q", [-1])
        self._movers = array("q", [-1])
        self._undo: list[_Undo] = []

    def run(self) -> Generator[SyncPosition, None, ExploredTraces]:
        """The search, pausing (yielding) every `SLICE` steps."""
        stack = [_Frame(node=0, choices=self._choices([]), sleep=[], done=[])]
        while stack:
            frame = stack[-1]
            if not frame.choices:
                stack.pop()
                if stack:
                    self._backtrack()
                continue
            rank = frame.choices.pop()
            sleep = self._still_asleep(rank, frame.sleep + frame.done)
            frame.done.append(rank)
            node = self._execute(rank, frame.node)
            stack.append(_Frame(node=node, choices=self._choices(sleep), sleep=sleep, done=[]))
            if node % SLICE == 0:
                yield rank, self._positions[rank] - 1
        return ExploredTraces(
            least_past=self._least,
            deadlocks=self._deadlocks,
            parents=self._parents,
            movers=self._movers,
            nodes=len(self._parents) - 1,
        )

    # -- the state: one step forward, one step back

    def _next(self, rank: int) -> SyncStep | None:
        position = self._positions[rank]
        steps = self._steps[rank]
        return steps[position] if position < len(steps) else None

    def _enabled(self, rank: int) -> bool:
        step = self._next(rank)
        return step is not None and (step.guard is None or step.guard.holds(self._values))

    def _execute(self, rank: int, parent: int) -> int:
        node = len(self._parents)
        if node > self._max_states:
            raise EngineUnknown(reason(ReasonCode.EXPLORE_POR_STEPS, states=self._max_states))
        self._parents.append(parent)
        self._movers.append(rank)
        step = self._next(rank)
        assert step is not None
        clock = list(self._clocks[rank])
        for cell, access in step.access:
            for kind, joined in self._touched[cell].items():
                if conflict(access, kind):
                    clock = [max(a, b) for a, b in zip(clock, joined, strict=True)]
        clock[rank] += 1
        past = tuple(clock)
        kinds = _single_kinds(step)
        self._undo.append(
            _Undo(
                rank=rank,
                clock=self._clocks[rank],
                cells=tuple(
                    (cell, kind, self._values[cell], self._touched[cell][kind])
                    for cell, kind in kinds
                ),
            )
        )
        for cell, access in kinds:
            joined = self._touched[cell][access]
            self._touched[cell][access] = tuple(map(max, joined, past))
        step.apply(self._values)
        self._clocks[rank] = past
        self._positions[rank] += 1
        self._record(rank, past, node)
        return node

    def _backtrack(self) -> None:
        undo = self._undo.pop()
        self._positions[undo.rank] -= 1
        self._clocks[undo.rank] = undo.clock
        for cell, kind, value, joined in undo.cells:
            self._values[cell] = value
            self._touched[cell][kind] = joined

    def _record(self, rank: int, past: tuple[int, ...], node: int) -> None:
        least = self._least[rank][past[rank] - 1]
        recorded = Past(clock=past, node=node)
        for other, count in enumerate(past):
            best = least[other]
            if best is None or count < best.clock[other]:
                least[other] = recorded

    # -- which ranks to run from the current state

    def _choices(self, sleep: list[int]) -> list[int]:
        enabled = [rank for rank in range(self._ranks) if self._enabled(rank)]
        if not enabled:
            if any(self._next(rank) is not None for rank in range(self._ranks)):
                self._deadlocks.setdefault(tuple(self._positions), len(self._parents) - 1)
            return []
        if not self._reduce:
            return enabled
        awake = [rank for rank in enabled if rank not in sleep]
        best = awake
        tried: set[int] = set()
        for seed in enabled:
            if len(best) <= 1:
                break
            if seed in tried:  # its closure would rarely be smaller than the one it is in
                continue
            persistent = self._persistent_set(seed)
            tried |= persistent
            chosen = [rank for rank in awake if rank in persistent]
            if len(chosen) < len(best):
                best = chosen
        return best[::-1]  # popped from the end: lowest rank first

    def _still_asleep(self, rank: int, sleeping: list[int]) -> list[int]:
        if not self._reduce:
            return []
        step = self._next(rank)
        assert step is not None
        return [
            other
            for other in sleeping
            if (asleep := self._next(other)) is not None and not _dependent(step, asleep)
        ]

    def _persistent_set(self, seed: int) -> set[int]:
        """The closure of {seed}: see the module docstring. Horizons are taken with
        {seed} held still; they only shrink as the set grows, so they stay sound."""
        members = {seed}
        horizons = {
            rank: self._horizon(rank, members) for rank in range(self._ranks) if rank != seed
        }
        demand: dict[int, int] = {}
        grew = [seed]
        while grew:
            for rank in grew:
                step = self._next(rank)
                assert step is not None, "a finished rank never joins a persistent set"
                for cell, access in step.access:
                    demand[cell] = demand.get(cell, 0) | access
            grew = [
                rank
                for rank, horizon in horizons.items()
                if rank not in members and _conflicts(demand.items(), horizon)
            ]
            members.update(grew)
        return members

    def _horizon(self, rank: int, members: set[int]) -> dict[int, int]:
        """How the steps `rank` can reach while no member of the set moves touch each
        cell; from one WAIT to the next at a time."""
        steps, spans, position = self._steps[rank], self._spans[rank], self._positions[rank]
        reached: dict[int, int] = {}
        while position < len(steps):
            step = steps[position]
            guard = step.guard
            if guard is None:
                span: Iterable[tuple[int, int]] = step.access
                position += 1
            elif guard.holds(self._values) or self._written_outside(guard.cell, members):
                span, position = spans[position]
            else:
                break
            for cell, kinds in span:
                reached[cell] = reached.get(cell, 0) | kinds
        return reached

    def _written_outside(self, cell: int, members: set[int]) -> bool:
        """Whether a rank outside `members` has a write to `cell` still to run."""
        return any(
            last >= self._positions[rank]
            for rank, last in self._writers[cell]
            if rank not in members
        )


def _conflicts(demand: Iterable[tuple[int, int]], reached: dict[int, int]) -> bool:
    for cell, kinds in demand:
        touched = reached.get(cell)
        if touched is not None and conflict(kinds, touched):
            return True
    return False


def _spans(steps: tuple[SyncStep, ...]) -> dict[int, tuple[tuple[tuple[int, int], ...], int]]:
    """Per WAIT position: how the steps from it up to the next WAIT touch each cell, and
    the position of that next WAIT (or the end)."""
    spans: dict[int, tuple[tuple[tuple[int, int], ...], int]] = {}
    union: dict[int, int] = {}
    next_wait = len(steps)
    for position in range(len(steps) - 1, -1, -1):
        for cell, kinds in steps[position].access:
            union[cell] = union.get(cell, 0) | kinds
        if steps[position].guard is not None:
            spans[position] = (tuple(union.items()), next_wait)
            union = {}
            next_wait = position
    return spans


def _dependent(one: SyncStep, other: SyncStep) -> bool:
    """Dependency of two next steps of different ranks (see the module docstring)."""
    return _conflicts(other.access, dict(one.access))


def _single_kinds(step: SyncStep) -> list[tuple[int, int]]:
    """The (cell, kind) pairs of a step, one per access kind it has on each cell."""
    return [(cell, kind) for cell, access in step.access for kind in KINDS if kind & access]


def _last_writes(program: SyncProgram) -> list[list[tuple[int, int]]]:
    """Per cell: (rank, position of the rank's last step that writes it)."""
    last: list[dict[int, int]] = [{} for _ in program.cells]
    for rank, steps in enumerate(program.steps):
        for position, step in enumerate(steps):
            for effect in step.effects:
                last[effect.cell][rank] = position
    return [sorted(by_rank.items()) for by_rank in last]


def explore(
    program: SyncProgram, *, reduce: bool = True, max_states: int
) -> Generator[SyncPosition, None, ExploredTraces]:
    """The search as a generator: it pauses now and then, and returns what it found."""
    return Search(program, reduce=reduce, max_states=max_states).run()
