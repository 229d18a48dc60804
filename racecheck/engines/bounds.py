"""Cheap exact answers in front of an exact engine: a sound "no" and concrete "yes"es.

`BoundedOracle` answers each question of `racecheck.engines.base` itself when it can
prove the answer, and asks the exact oracle behind it (built on first use) otherwise:

* "no" for `can_precede` and `can_run` from an *upper bound* of the trace, a cell
  value B >= 0 that is >= the real value at every moment of every execution: every
  write becomes an Add to B. A negative Add adds 0 (it only lowers the real value)
  unless it is a consuming Add (below), an Add v >= 0 adds v.
  A Set v adds max(v, 0) (v <= B + max(v, 0) as B >= 0), except a *consume*: a Set
  v >= 0 by the only rank that waits on the cell, whose previous step on the cell is
  a wait for >= t; it adds v - t. Between that wait (real value >= t, so B >= t) and
  the Set, only other ranks write the cell and only raise B, so B + v - t >= v, and
  B stays >= 0. A *consuming Add* -v (same rank and previous step, a wait for
  >= t with t >= v) adds -v: B - real is unchanged, and B >= t >= v before it by
  the same argument. A Set v on a cell that only its rank p Sets adds at most
  max(v - L, 0), where L is a *floor* of the real value just before it. Since p's
  previous Set there (value v0; the start, value 0, if none) only Adds landed: p's
  own since (all of them, in program order), other ranks' positive Adds (they only
  raise the value) and their negative Adds, *takes*. One rank's takes in between are
  consecutive in its program order, and each can follow the previous Set and precede
  this one by a bound already built (its executions include every real one). Each
  but the first, when its rank's previous step on the cell is a wait for >= t,
  follows that wait, which passed in between on a value of at most the *ceiling* C
  less the run's earlier takes (C: v0, plus p's positive Adds since, plus the other
  ranks' positive Adds that can land in between). So a rank takes at most the
  largest sum of such a run (`_most_taken`), and L is v0 plus p's own Adds since
  less that per rank; B >= real >= L gives B + max(v - L, 0) >= v. Floors are
  recomputed on the tighter bound until none rises. With only signed Ge waits and no
  cell that can wrap, every real execution is an execution of the bound, which the
  monotone engine decides exactly (Adds commute; the only decreases are a rank's
  consumes of a cell only it waits on, which disable no other rank's wait); what
  the bound cannot do, no execution does.
* "yes" for `can_precede` and `can_run`, and `stuck`, from concrete runs of the trace
  itself, each until no rank can move (`_nth_run`: one *patient* run that lets waits
  and Sets go before Adds, then ranks run as far as they can in rank order and in
  seeded random orders, then one in *lockstep* (waits first, then the rank furthest
  behind); the rank of `second` held just before it): a run that executes `first` is
  a witness (and shows that every event it executes can run), one that ends with a
  rank blocked is a stuck state; both are executions by construction.

Nothing is approximated in an answer: what neither settles goes to the exact oracle.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

from racecheck.cells import after_write
from racecheck.clock import check
from racecheck.engines.base import Engine, OrderOracle
from racecheck.engines.monotone import MonotoneOracle
from racecheck.engines.skeleton import ADD, SET, WAIT_GE, SyncSkeleton, wait_holds
from racecheck.events import EventRef, Schedule, Stuck
from racecheck.report.reasons import ReasonCode, reason

BOUNDING = reason(ReasonCode.STAGE_BOUNDING)

RUNS_PER_HOLD = 6  # concrete runs tried per held position (`_nth_run`)
STUCK_RUNS = 16  # seeded random runs tried for a stuck state before the exact oracle


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One concrete execution over skeleton steps, run until no rank can move."""

    steps: list[tuple[int, int]]  # (rank, step position) in execution order
    positions: list[int]  # steps executed per rank
    values: list[int]  # every signal cell at the end


def concrete_run(skeleton: SyncSkeleton, limits: list[int], order: Callable[[], list[int]]) -> Run:
    """Run ranks in `order()` (asked again each sweep), each as far as it can go, until
    a sweep moves none; rank r takes at most `limits[r]` steps."""
    positions = [0] * skeleton.ranks
    values = [0] * len(skeleton.cells)
    steps: list[tuple[int, int]] = []
    moved = True
    while moved:
        moved = False
        for rank in order():
            while _step(skeleton, rank, positions, values, limits[rank], steps):
                moved = True
    return Run(steps=steps, positions=positions, values=values)


def patient_run(skeleton: SyncSkeleton, limits: list[int], eager: int | None = None) -> Run:
    """Run one event at a time: rank `eager` whenever it can move, else a wait or a Set
    whenever one can go before any Add (a consumer takes its credit before producers
    add more), lowest rank first."""
    return _PatientRun(skeleton, limits).run(eager)


def lockstep_run(skeleton: SyncSkeleton, limits: list[int]) -> Run:
    """Run one event at a time: a wait that holds whenever there is one, else the write
    of the rank with the fewest steps done (lowest rank on a tie), so that no rank laps
    the others and Sets a cell again before its consumer took what it was given."""
    return _PatientRun(skeleton, limits).run(None, lockstep=True)


class _PatientRun:
    """`patient_run`'s state: which ranks can move next, updated per written cell, so a
    step costs the ranks whose next wait reads what it wrote, not a scan of all."""

    def __init__(self, skeleton: SyncSkeleton, limits: list[int]) -> None:
        self.skeleton = skeleton
        self.limits = limits
        self.positions = [0] * skeleton.ranks
        self.values = [0] * len(skeleton.cells)
        self.steps: list[tuple[int, int]] = []
        self.passing: set[int] = set()  # next a wait that holds
        self.setting: set[int] = set()  # next a Set
        self.adding: set[int] = set()  # next an Add
        self.readers: dict[int, set[int]] = {}  # cell -> ranks whose next is a wait on it
        self.reading: list[int | None] = [None] * skeleton.ranks  # the cell of that wait
        for rank in range(skeleton.ranks):
            self._classify(rank)

    def run(self, eager: int | None, *, lockstep: bool = False) -> Run:
        while self.passing or self.setting or self.adding:
            rank = self._lockstep_choice() if lockstep else self._patient_choice(eager)
            done = len(self.steps)
            _step(self.skeleton, rank, self.positions, self.values, self.limits[rank], self.steps)
            self._classify(rank)
            for moved, position in self.steps[done:]:
                if self.skeleton.kind[moved][position] >= ADD:
                    for reader in list(self.readers.get(self.skeleton.cell[moved][position], ())):
                        self._classify(reader)
        return Run(steps=self.steps, positions=self.positions, values=self.values)

    def _patient_choice(self, eager: int | None) -> int:
        if eager is not None and (eager in self.passing | self.setting | self.adding):
            return eager
        ready = self.passing | self.setting
        return min(ready) if ready else min(self.adding)

    def _lockstep_choice(self) -> int:
        if self.passing:
            return min(self.passing)
        return min(self.setting | self.adding, key=lambda rank: (self.positions[rank], rank))

    def _classify(self, rank: int) -> None:
        skeleton, position = self.skeleton, self.positions[rank]
        self.passing.discard(rank)
        self.setting.discard(rank)
        self.adding.discard(rank)
        reading = self.reading[rank]
        if reading is not None:
            self.readers[reading].discard(rank)
            self.reading[rank] = None
        if position >= self.limits[rank]:
            return
        kind, cell = skeleton.kind[rank][position], skeleton.cell[rank][position]
        if kind == ADD:
            self.adding.add(rank)
        elif kind == SET:
            self.setting.add(rank)
        else:
            self.readers.setdefault(cell, set()).add(rank)
            self.reading[rank] = cell
            if wait_holds(kind, self.values[cell], skeleton.amount[rank][position]):
                self.passing.add(rank)


def _step(
    skeleton: SyncSkeleton,
    rank: int,
    positions: list[int],
    values: list[int],
    limit: int,
    steps: list[tuple[int, int]],
) -> bool:
    """Execute the next event of `rank` (all its steps: a wait that takes a unit adds
    its take in the same step) if it may; whether it did."""
    position = positions[rank]
    if position >= limit:
        return False
    kinds, cells, amounts = skeleton.kind[rank], skeleton.cell[rank], skeleton.amount[rank]
    if kinds[position] < ADD and not wait_holds(
        kinds[position], values[cells[position]], amounts[position]
    ):
        return False
    event = skeleton.index[rank][position]
    while position < len(kinds) and skeleton.index[rank][position] == event:
        cell = cells[position]
        if kinds[position] >= ADD:
            values[cell] = after_write(values[cell], amounts[position], kinds[position] != SET)
        steps.append((rank, position))
        position += 1
    positions[rank] = position
    return True


def upper_bound(skeleton: SyncSkeleton, deadline: float = math.inf) -> MonotoneOracle | None:
    """The monotone oracle of the trace's upper bound (module docstring), or None when
    the bound does not cover every execution (a wait other than signed Ge, or a cell
    that can wrap). Past `deadline`, `Overtime`."""
    if skeleton.wrapping_cells():
        return None
    if any(kind < ADD and kind != WAIT_GE for kinds in skeleton.kind for kind in kinds):
        return None
    waiters: list[set[int]] = [set() for _ in skeleton.cells]
    for rank, (rank_kinds, cells) in enumerate(zip(skeleton.kind, skeleton.cell, strict=True)):
        for kind, cell in zip(rank_kinds, cells, strict=True):
            if kind < ADD:
                waiters[cell].add(rank)
    amounts = [_bound_amounts(skeleton, rank, waiters) for rank in range(skeleton.ranks)]
    kinds = [[min(kind, ADD) for kind in steps] for steps in skeleton.kind]
    bound = MonotoneOracle(skeleton.with_effects(kinds, amounts), deadline=deadline)
    while _lower_repeated_sets(skeleton, amounts, bound):
        check(deadline, BOUNDING)
        bound = MonotoneOracle(skeleton.with_effects(kinds, amounts), deadline=deadline)
    return bound


def _lower_repeated_sets(
    skeleton: SyncSkeleton, amounts: list[list[int]], bound: MonotoneOracle
) -> bool:
    """Lower the bound's effect of a Set v to max(v - L, 0) where L is a floor of the
    real value just before it, read off `bound` (module docstring); whether any effect
    was lowered. Effects only fall, each to no less than 0, so the loop in
    `upper_bound` ends."""
    writes = [_CellWrites() for _ in skeleton.cells]
    for rank in range(skeleton.ranks):
        for kind, cell, amount, index, waited in skeleton.steps_after_waits(rank):
            writes[cell].note(EventRef(rank=rank, index=index), kind, amount, waited)
    lowered = False
    for rank in range(skeleton.ranks):
        since: dict[int, _SinceSet] = {}  # cell -> the rank's writes since its last Set
        for position, (kind, cell, amount, index) in enumerate(skeleton.steps(rank)):
            mine = since.get(cell, _SinceSet())
            if kind == ADD:
                mine = since[cell] = replace(
                    mine, own=mine.own + amount, own_up=mine.own_up + max(amount, 0)
                )
            if kind != SET or writes[cell].setters != {rank}:
                continue
            set_ref = EventRef(rank=rank, index=index)
            effect = max(amount - writes[cell].floor(bound, rank, mine, set_ref), 0)
            if effect < amounts[rank][position]:
                amounts[rank][position] = effect
                lowered = True
            since[cell] = _SinceSet(last=set_ref, value=amount)
    return lowered


@dataclass(frozen=True, slots=True, kw_only=True)
class _SinceSet:
    """A setter's own writes to a cell since its last Set there (none yet: the start)."""

    last: EventRef | None = None  # that Set
    value: int = 0  # its value (0 at the start)
    own: int = 0  # the rank's own Adds since
    own_up: int = 0  # their positive part


@dataclass(frozen=True, slots=True, kw_only=True)
class _Take:
    """A negative Add: how much it takes, and the threshold of its rank's previous step
    on the cell when that is a wait (None otherwise)."""

    ref: EventRef
    amount: int
    after_wait: int | None


class _CellWrites:
    """One cell's writers, read by `floor`."""

    def __init__(self) -> None:
        self.setters: set[int] = set()
        self.takes: dict[int, list[_Take]] = {}  # rank -> its negative Adds, in order
        self.gives: list[tuple[EventRef, int]] = []  # positive Adds

    def note(self, ref: EventRef, kind: int, amount: int, after_wait: int | None) -> None:
        """Record one step (each rank's in program order); `after_wait` is the threshold
        of the rank's previous step on the cell when that is a wait."""
        if kind == SET:
            self.setters.add(ref.rank)
        elif kind == ADD and amount < 0:
            take = _Take(ref=ref, amount=-amount, after_wait=after_wait)
            self.takes.setdefault(ref.rank, []).append(take)
        elif kind == ADD:
            self.gives.append((ref, amount))

    def floor(self, bound: MonotoneOracle, rank: int, mine: _SinceSet, set_ref: EventRef) -> int:
        """A floor of the real value just before `set_ref`, a Set of `rank`, the cell's
        only setter (module docstring)."""

        def between(ref: EventRef) -> bool:
            after = mine.last is None or bound.can_precede(mine.last, ref)
            return after and bound.can_precede(ref, set_ref)

        ceiling = mine.value + mine.own_up
        ceiling += sum(given for ref, given in self.gives if ref.rank != rank and between(ref))
        taken = sum(
            _most_taken(takes, [between(take.ref) for take in takes], ceiling)
            for taker, takes in self.takes.items()
            if taker != rank
        )
        return mine.value + mine.own - taken


def _most_taken(takes: list[_Take], inside: list[bool], ceiling: int) -> int:
    """The most one rank's `takes` can take between two Sets (module docstring): over
    runs of consecutive takes that each can run in between (`inside`), where every
    take but the first follows a wait that must pass on what `ceiling` leaves after
    the run's earlier takes. A run that fits still fits without its first take, so
    the end of the longest run from each start only moves forward."""
    best = total = end = 0
    for start in range(len(takes)):
        if end <= start:
            end, total = start, 0
        while end < len(takes) and inside[end]:
            waits_for = takes[end].after_wait
            if end > start and waits_for is not None and waits_for > ceiling - total:
                break
            total += takes[end].amount
            end += 1
        best = max(best, total)
        if end > start:
            total -= takes[start].amount
    return best


def _bound_amounts(skeleton: SyncSkeleton, rank: int, waiters: list[set[int]]) -> list[int]:
    """What each step of `rank` adds to the bound (waits keep their thresholds)."""
    amounts: list[int] = []
    for kind, cell, amount, _, threshold in skeleton.steps_after_waits(rank):
        if kind < ADD:
            amounts.append(amount)
            continue
        consumer = threshold if waiters[cell] == {rank} else None
        amounts.append(_bound_effect(kind, amount, consumer))
    return amounts


def _bound_effect(kind: int, amount: int, threshold: int | None) -> int:
    """What a write adds to the bound; `threshold` is that of the writer's previous step
    on the cell, a wait, when the writer is the cell's only waiter (else None)."""
    if threshold is not None and kind == SET and amount >= 0:
        return amount - threshold  # a consume: see the module docstring
    if threshold is not None and kind == ADD and amount + threshold >= 0:
        return amount  # a consuming Add: see the module docstring
    return max(amount, 0)


class BoundedEngine:
    """`engine` with `BoundedOracle` in front; its exact oracle is built on first use."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.name = engine.name

    def unsupported(self, skeleton: SyncSkeleton) -> str | None:
        return self.engine.unsupported(skeleton)

    def order(self, skeleton: SyncSkeleton, *, deadline: float) -> BoundedOracle:
        return BoundedOracle(
            skeleton, lambda: self.engine.order(skeleton, deadline=deadline), deadline
        )


class BoundedOracle:
    def __init__(
        self,
        skeleton: SyncSkeleton,
        exact: Callable[[], OrderOracle],
        deadline: float = math.inf,
    ) -> None:
        self._skeleton = skeleton
        self._make_exact = exact
        self._exact: OrderOracle | None = None
        self._bound = upper_bound(skeleton, deadline)
        self._runs: dict[tuple[int, int], list[Run]] = {}
        self._made: list[Run] = []  # every run of `_runs`, in the order made
        self._eager: set[tuple[tuple[int, int], int]] = set()  # (held, rank) of eager runs

    def exact(self) -> OrderOracle:
        if self._exact is None:
            self._exact = self._make_exact()
        return self._exact

    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        if self._bound is not None and not self._bound.can_precede(first, second):
            return False
        if self._made_run_shows(first, second) or self._showing_run(first, second) is not None:
            return True
        return self.exact().can_precede(first, second)

    def witness(self, first: EventRef, second: EventRef) -> Schedule:
        run = self._showing_run(first, second)
        if run is None:
            return self.exact().witness(first, second)
        return self._skeleton.causal_schedule(run.steps, first)

    def can_run(self, event: EventRef) -> bool:
        if self._bound is not None and not self._bound.can_run(event):
            return False
        skeleton = self._skeleton
        needed = skeleton.steps_before(event.rank, event.index + 1)
        if any(run.positions[event.rank] >= needed for run in self._made):
            return True
        unheld = (event.rank, len(skeleton.kind[event.rank]))
        return self._run_reaching(unheld, event) is not None or self.exact().can_run(event)

    def stuck(self) -> Stuck | None:
        skeleton = self._skeleton
        full = [len(kinds) for kinds in skeleton.kind]
        for seed in range(STUCK_RUNS):
            run = concrete_run(skeleton, full, _shuffled(skeleton.ranks, seed))
            if run.positions != full:
                return self._stuck_state(run)
        return self.exact().stuck()

    def _stuck_state(self, run: Run) -> Stuck:
        skeleton = self._skeleton
        blocked = tuple(
            EventRef(rank=rank, index=skeleton.index[rank][position])
            for rank, position in enumerate(run.positions)
            if position < len(skeleton.kind[rank])
        )
        reach = [skeleton.reach(rank, position) for rank, position in enumerate(run.positions)]
        values = tuple(
            (cell, run.values[skeleton.cell_index[cell.key]]) for cell in skeleton.cells_of(blocked)
        )
        return Stuck(
            schedule=skeleton.full_schedule(run.steps, reach), blocked=blocked, cell_values=values
        )

    def _made_run_shows(self, first: EventRef, second: EventRef) -> bool:
        """Whether a run made so far, whichever rank it held, executes `first` and never
        got as far as `second`. (A witness still comes from `_showing_run`: the runs
        made with `second`'s rank held, so it does not depend on the questions asked.)"""
        skeleton = self._skeleton
        stop = skeleton.steps_before(second.rank, second.index)
        needed = skeleton.steps_before(first.rank, first.index + 1)
        return any(
            run.positions[first.rank] >= needed and run.positions[second.rank] <= stop
            for run in self._made
        )

    def _showing_run(self, first: EventRef, second: EventRef) -> Run | None:
        """A cached or new concrete run that executes `first` with `second` held back."""
        held = (second.rank, self._skeleton.steps_before(second.rank, second.index))
        return self._run_reaching(held, first)

    def _run_reaching(self, held: tuple[int, int], event: EventRef) -> Run | None:
        """A cached or new concrete run that executes `event` with rank `held[0]` held
        after `held[1]` steps (at its end: not held)."""
        skeleton = self._skeleton
        needed = skeleton.steps_before(event.rank, event.index + 1)
        runs = self._runs.setdefault(held, [])
        for run in runs:
            if run.positions[event.rank] >= needed:
                return run
        limits = [len(kinds) for kinds in skeleton.kind]
        limits[held[0]] = held[1]
        while len(runs) < RUNS_PER_HOLD:
            runs.append(_nth_run(skeleton, limits, len(runs)))
            self._made.append(runs[-1])
            if runs[-1].positions[event.rank] >= needed:
                return runs[-1]
        if (held, event.rank) not in self._eager:
            # `event`'s rank ahead of everyone: it passes its waits before the Sets of
            # other ranks (resets) can erase what they added for it
            self._eager.add((held, event.rank))
            runs.append(patient_run(skeleton, limits, eager=event.rank))
            self._made.append(runs[-1])
            if runs[-1].positions[event.rank] >= needed:
                return runs[-1]
        return None


def _nth_run(skeleton: SyncSkeleton, limits: list[int], n: int) -> Run:
    """The n-th run tried: patient, rank by rank in rank order, shuffled, and last in
    lockstep (last, so that it only answers what the others cannot)."""
    if n == 0:
        return patient_run(skeleton, limits)
    if n == RUNS_PER_HOLD - 1:
        return lockstep_run(skeleton, limits)
    if n == 1:
        return concrete_run(skeleton, limits, _fixed(skeleton.ranks))
    return concrete_run(skeleton, limits, _shuffled(skeleton.ranks, n))


def _fixed(ranks: int) -> Callable[[], list[int]]:
    everyone = list(range(ranks))
    return lambda: everyone


def _shuffled(ranks: int, seed: int) -> Callable[[], list[int]]:
    chooser = random.Random(seed)
    everyone = list(range(ranks))

    def order() -> list[int]:
        chooser.shuffle(everyone)
        return everyone

    return order
