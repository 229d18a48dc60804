"""The `monotone` engine: exact ordering by holding one event back, no search.

Decides: the questions of `racecheck.engines.base` for monotone traces.

Model boundary: a trace is monotone when every WAIT is Ge (signed, or unsigned on a cell
that never goes negative: `_may_go_negative`), no waited cell can leave the int32 range
(so nothing wraps), and each waited cell is written either only by Adds — negative
values only from the one thread that waits on it — or only by Sets of one value
v >= 0 (any number of writers, by notify or plain store: the cell goes 0 → v and
stays there). A cell no wait
reads can take any writes: no order of them enables or disables anything. Then (1) cell
updates commute, and (2) executing an event of another rank never disables a rank's
pending wait: no other thread lowers a cell a thread waits on. So
every maximal run from a state reaches the same final state (confluence), and "can
`first` run while `second` is held back?" is answered by one maximal run with `second`'s
rank stopped just before it: `first` can precede `second` iff that run executes `first`.

All those runs at once: need(e)[h] is the fewest sync steps rank h may take for step e
to run in the maximal run with h held there. Held runs only lose steps of the unheld
one, so need is finite in every column for the steps that run executes and NEVER for
the rest; `first` can precede `second` iff need(first's last step)[second's rank] is
at most the steps `second`'s rank takes before it. need solves

    need(e) = max(need(e's previous step), e's own column: its position + 1, and for a
    wait: per h, the least k at which the cell, holding what e's rank wrote into it
    before e and every other rank's write with need[h] <= k, reaches the threshold)

and of its solutions it is the greatest (an event runs only if something made it run;
other ranks' writes to a waited cell are never negative, so more writes never disable).
Between two waits of a rank only its own column changes: one row per wait. Starting
from NEVER, recomputing the waits in the unheld run's order, and again whenever a write
to the cell or the rank's previous wait went down, descends to that solution. A cell
with one writer needs each wait computed once: O(S + W · P) for W waits, not a maximal
run per rank. Where that would cost more than those runs (a counter many writers
share through many rounds, say), they compute the same rows instead: one incremental
run per held rank h, raising its limit k one step at a time; each wait's need[h] is
the k it ran at. O(P · S) steps for S steps in all.

Unknown policy: none — the answer is a deterministic fixpoint; a trace outside the
boundary is refused by `unsupported` and goes to an exact engine instead.

Limitations: fixed per-rank event sequences (the co-simulation's trace); memory is one
int32 per wait and rank (W · P); the choice between the two ways is by estimated cost.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from racecheck.clock import Overtime, passed
from racecheck.describe import describe_cell
from racecheck.engines.skeleton import (
    ADD,
    SET,
    WAIT_EQ,
    WAIT_GE_UNSIGNED,
    SyncSkeleton,
)
from racecheck.events import EventRef, Schedule, Stuck
from racecheck.report.reasons import ReasonCode, reason

NEVER = np.iinfo(np.int32).max  # a need no hold position meets: the step never runs
# what the need vectors' work costs, in steps of a run (measured, roughly): recomputing
# a wait, each write it reads, comparing a write's need with a wait's
RECOMPUTE_STEPS, FEEDER_STEPS, COMPARE_STEPS = 75, 15, 15


_ORDERING = reason(ReasonCode.STAGE_MONOTONE)


class MonotoneEngine:
    name = "monotone"

    def unsupported(self, skeleton: SyncSkeleton) -> str | None:
        return skeleton.refusal() or skeleton.units_refusal() or _non_monotone_reason(skeleton)

    def order(self, skeleton: SyncSkeleton, *, deadline: float) -> MonotoneOracle:
        return MonotoneOracle(skeleton, deadline)


def _non_monotone_reason(skeleton: SyncSkeleton) -> str | None:
    """Why the trace is outside the monotone boundary (module docstring), or None."""
    writes: list[set[tuple[int, int]]] = [set() for _ in skeleton.cells]
    waiters: dict[int, set[int]] = {}  # waited cell -> the threads waiting on it
    for rank in range(skeleton.ranks):
        for kind, cell, _, _ in skeleton.steps(rank):
            if kind not in (ADD, SET):
                waiters.setdefault(cell, set()).add(rank)
    waited = set(waiters)
    for rank in range(skeleton.ranks):
        for kind, cell, amount, index in skeleton.steps(rank):
            where = skeleton.trace.events[rank][index].location
            if kind == WAIT_EQ:
                return reason(ReasonCode.MONOTONE_EQ_WAIT, where=str(where))
            if cell not in waited:
                continue
            if kind in (ADD, SET):
                writes[cell].add((kind, amount if kind == SET else 0))
            if kind == SET and amount < 0:
                return reason(ReasonCode.MONOTONE_NEGATIVE_SET, where=str(where))
            if kind == ADD and amount < 0 and waiters[cell] != {rank}:
                return reason(ReasonCode.MONOTONE_NEGATIVE_ADD, where=str(where))
            if len(writes[cell]) > 1 and any(op == SET for op, _ in writes[cell]):
                return reason(ReasonCode.MONOTONE_MIXED_SET, where=str(where))
    for number in sorted(skeleton.wrapping_cells() & waited):
        name = describe_cell(skeleton.cells[number], skeleton.trace)
        return reason(ReasonCode.MONOTONE_WRAP, cell=name)
    negative = _may_go_negative(skeleton)
    for rank in range(skeleton.ranks):
        for kind, cell, _, index in skeleton.steps(rank):
            if kind == WAIT_GE_UNSIGNED and cell in negative:
                where = skeleton.trace.events[rank][index].location
                return reason(ReasonCode.MONOTONE_UNSIGNED_NEGATIVE, where=str(where))
    return None


def _may_go_negative(skeleton: SyncSkeleton) -> set[int]:
    """The cells with a negative Add that is not a *consume*: an Add -v whose rank's
    previous step on the cell is a Ge wait (signed or unsigned) for some t >= v.

    Called once the rest of the boundary holds (Ge waits only, negative Adds only from
    the one thread waiting on the cell, no Set on a cell with Adds, no wrap-around).
    Then no execution makes a cell outside this set negative, by induction on the
    execution: up to the first negative value the cell is >= 0, so an unsigned wait
    compares it as signed; a consume's wait saw >= t, and until the consume only other
    threads wrote the cell, with Adds >= 0, so it leaves >= t - v >= 0."""
    negative: set[int] = set()
    for rank in range(skeleton.ranks):
        for kind, cell, amount, _, threshold in skeleton.steps_after_waits(rank):
            if kind >= ADD and amount < 0 and (threshold is None or threshold < -amount):
                negative.add(cell)
    return negative


class _Run:
    """One maximal-run simulation over sync events, with per-rank limits."""

    def __init__(self, view: SyncSkeleton, limits: list[int], *, log: bool = True) -> None:
        self.view = view
        self.limits = limits
        self.sync_pos = [0] * view.ranks  # next sync position per rank
        self.values = [0] * len(view.cells)
        self.waiting: dict[int, list[int]] = {}  # cell -> ranks blocked on it
        self.log = log
        self.steps: list[tuple[int, int]] = []  # (rank, sync position) in execution order

    def run(self, ranks: list[int]) -> set[int]:
        """Advance the given ranks, and every rank they wake, as far as they can go;
        the ranks that were given or woken."""
        view, values, waiting, steps, log = (
            self.view,
            self.values,
            self.waiting,
            self.steps,
            self.log,
        )
        work = list(ranks)
        touched = set(ranks)
        while work:
            rank = work.pop()
            kinds, cells, amounts = view.kind[rank], view.cell[rank], view.amount[rank]
            position, limit = self.sync_pos[rank], self.limits[rank]
            while position < limit:
                cell = cells[position]
                kind = kinds[position]
                if kind < ADD:  # a Ge wait; on a cell that is never negative if unsigned
                    if values[cell] < amounts[position]:
                        waiting.setdefault(cell, []).append(rank)
                        break
                else:
                    if kind == SET:
                        values[cell] = amounts[position]
                    else:
                        values[cell] += amounts[position]
                    if cell in waiting:
                        woken = waiting.pop(cell)
                        work.extend(woken)
                        touched.update(woken)
                if log:
                    steps.append((rank, position))
                position += 1
            self.sync_pos[rank] = position
        return touched

    def event_frontier(self) -> list[int]:
        """Per rank, how many of its events can have executed in this state."""
        view = self.view
        return [view.reach(rank, position) for rank, position in enumerate(self.sync_pos)]


def _maximal_run(view: SyncSkeleton) -> _Run:
    run = _Run(view, [len(kinds) for kinds in view.kind])
    run.run(list(range(view.ranks)))
    return run


@dataclass(frozen=True, slots=True, kw_only=True)
class _Write:
    """A step of the maximal run that writes a cell."""

    rank: int
    position: int
    cell: int
    amount: int


class _Needs:
    """need(e)[h] for every step e (module docstring), one row per wait: row i + 1 of a
    rank is its i-th wait's need, row 0 is zeros, the last row NEVER (the steps the
    maximal run does not run), and a write has the row of its rank's last wait before
    it with its own column raised to its position + 1. Rows start at NEVER and only go
    down, to the greatest solution."""

    def __init__(self, view: SyncSkeleton, full: _Run, deadline: float, budget: float) -> None:
        self.view = view
        self.executed = full.sync_pos  # the maximal run runs each rank this far
        self.row_of: list[list[int]] = []  # per executed step: its rank's row
        self.waits: list[list[int]] = []  # per rank: positions of its executed waits
        self.own: list[list[int]] = []  # per wait: its cell's value from its own rank's writes
        self.written: list[list[list[_Write]]] = []  # per rank and row: its writes
        self.writes: list[list[_Write]] = [[] for _ in view.cells]
        self.waiters: list[list[tuple[int, int]]] = [[] for _ in view.cells]
        self.is_set = [False] * len(view.cells)
        self.spent = 0  # steps of a run the need vectors cost so far
        for rank in range(view.ranks):
            self._scan(rank)
        self.release = [
            [self._release(rank, number) for number in range(len(waits))]
            for rank, waits in enumerate(self.waits)
        ]
        self.rows = [np.full((len(waits) + 2, view.ranks), NEVER, np.int32) for waits in self.waits]
        for rows in self.rows:
            rows[0] = 0
        first = sum(self._cost(feeders) for waits in self.release for feeders, _ in waits)
        if first > budget or not self._solve(full.steps, deadline, budget):
            self._sweeps(deadline)
        gates = [self._gates(rank) for rank in range(view.ranks)]
        self.gate = [gate for gate, _ in gates]
        self.before = [before for _, before in gates]

    def _scan(self, rank: int) -> None:
        view = self.view
        values: dict[int, int] = {}
        row_of: list[int] = []
        waits: list[int] = []
        own: list[int] = []
        written: list[list[_Write]] = [[]]
        for position, (kind, cell, amount, _) in enumerate(view.steps(rank)):
            if position == self.executed[rank]:
                break
            if kind < ADD:
                self.waiters[cell].append((rank, len(waits)))
                waits.append(position)
                own.append(values.get(cell, 0))
                written.append([])
            else:
                values[cell] = amount if kind == SET else values.get(cell, 0) + amount
                write = _Write(rank=rank, position=position, cell=cell, amount=amount)
                self.writes[cell].append(write)
                self.is_set[cell] = self.is_set[cell] or kind == SET
                written[-1].append(write)
            row_of.append(len(waits))
        self.row_of.append(row_of)
        self.waits.append(waits)
        self.own.append(own)
        self.written.append(written)

    def _release(self, rank: int, number: int) -> tuple[tuple[_Write, ...], int]:
        """The other ranks' writes that can release `rank`'s wait `number`, and how much
        they must add to its cell (nothing left: the rank's own writes passed it). On a
        Set cell each of them alone is enough. The maximal run passed the wait, so they
        add up to enough."""
        position = self.waits[rank][number]
        cell, threshold = self.view.cell[rank][position], self.view.amount[rank][position]
        feeders = [write for write in self.writes[cell] if write.rank != rank]
        if self.is_set[cell]:
            feeders = [write for write in feeders if write.amount >= threshold]
        return tuple(feeders), threshold - self.own[rank][number]

    def _solve(self, steps: list[tuple[int, int]], deadline: float, budget: float) -> bool:
        """Recompute waits, first in the maximal run's order, until no row changes; False
        once that cost more than `budget` (in steps of a run)."""
        order = [[0] * len(waits) for waits in self.waits]  # place in the maximal run
        for place, (rank, position) in enumerate(steps):
            if self.view.kind[rank][position] < ADD:
                order[rank][self.row_of[rank][position] - 1] = place
        work = [
            (order[rank][number], rank, number)
            for rank, waits in enumerate(self.waits)
            for number in range(len(waits))
        ]
        heapq.heapify(work)
        queued = {(rank, number) for _, rank, number in work}
        popped = 0
        while work:
            _, rank, number = heapq.heappop(work)
            queued.discard((rank, number))
            popped += 1
            if popped % 256 == 0 and passed(deadline):
                where = self.view.trace.events[rank][
                    self.view.index[rank][self.waits[rank][number]]
                ]
                raise Overtime(_ORDERING, where.location)
            self.spent += self._cost(self.release[rank][number][0])
            if self.spent > budget:
                return False
            if not self._recompute(rank, number):
                continue
            for other in self._dependents(rank, number, queued):
                queued.add(other)
                heapq.heappush(work, (order[other[0]][other[1]], *other))
        return True

    @staticmethod
    def _cost(feeders: tuple[_Write, ...]) -> int:
        """What recomputing a wait costs, in steps of a run."""
        return RECOMPUTE_STEPS + FEEDER_STEPS * len(feeders)

    def _dependents(
        self, rank: int, number: int, queued: set[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        """The waits not yet queued whose need can go down now that the row of `rank`'s
        wait `number` did: its next wait, and each other rank's wait on a cell written
        in that row that the write's need is below somewhere (else its threshold is met
        no sooner)."""
        found = []
        if number + 1 < len(self.waits[rank]) and (rank, number + 1) not in queued:
            found.append((rank, number + 1))
        for write in self.written[rank][number + 1]:
            need = self._write_need(write)
            for waiter in self.waiters[write.cell]:
                if waiter[0] == rank or waiter in queued or waiter in found:
                    continue
                self.spent += COMPARE_STEPS
                if self._lowers(need, *waiter):
                    found.append(waiter)
        return found

    def _sweeps(self, deadline: float) -> None:
        for held in range(self.view.ranks):
            if passed(deadline):  # the stage worded only when it is cut
                raise Overtime(reason(ReasonCode.STAGE_MONOTONE_HOLDING, rank=held))
            self._sweep(held)

    def _sweep(self, held: int) -> None:
        """Column `held` of every row, from maximal runs with `held` stopped after k steps
        for k = 0, 1, ...: one incremental run; a wait's need is the k it ran at."""
        view = self.view
        limits = [len(kinds) for kinds in view.kind]
        limits[held] = 0
        run = _Run(view, limits, log=False)
        ran = [0] * view.ranks  # waits each rank has run
        moved = run.run([rank for rank in range(view.ranks) if rank != held])
        for k in range(len(view.kind[held]) + 1):
            if k:
                before = run.sync_pos[held]
                run.limits[held] = k
                moved = run.run([held])
                if run.sync_pos[held] == before:
                    break  # blocked for good: nothing else can change
            for rank in moved:
                position = run.sync_pos[rank]
                waits = self.row_of[rank][position - 1] if position else 0
                if waits == ran[rank] + 1:  # the usual: one more wait
                    self.rows[rank][waits, held] = k
                elif waits > ran[rank]:
                    self.rows[rank][ran[rank] + 1 : waits + 1, held] = k
                ran[rank] = waits

    def _lowers(self, need: np.ndarray, rank: int, number: int) -> bool:
        """Whether a write's `need` is below the need of `rank`'s wait `number` in some
        column; in the rank's own column only where that is above the wait's position + 1
        (it never goes below)."""
        row = self.rows[rank][number + 1]
        below = need < row
        below[rank] &= row[rank] > self.waits[rank][number] + 1
        return bool(below.any())

    def _recompute(self, rank: int, number: int) -> bool:
        """Whether the need of `rank`'s wait `number` went down."""
        rows = self.rows[rank]
        need = self._enabling(rank, number)
        np.maximum(need, rows[number], out=need)
        position = self.waits[rank][number]
        need[rank] = max(need[rank], position + 1)
        if (need == rows[number + 1]).all():
            return False
        rows[number + 1] = need
        return True

    def _enabling(self, rank: int, number: int) -> np.ndarray:
        """Per rank h, the fewest steps of h after which the writes of other ranks that
        can have run fill the wait's cell up to its threshold (a new array)."""
        feeders, missing = self.release[rank][number]
        if missing <= 0:
            return np.zeros(self.view.ranks, np.int32)
        if len(feeders) == 1:
            return self._write_need(feeders[0])
        needs = self._write_needs(feeders)
        amounts = np.array([write.amount for write in feeders], np.int64)
        if amounts.min() == amounts.max() > 0:  # the q-th soonest of equal writes
            quota = -(-missing // int(amounts[0]))
            if quota == 1:
                return needs.min(axis=0)
            if quota == len(feeders):
                return needs.max(axis=0)
            return np.partition(needs, quota - 1, axis=0)[quota - 1]
        order = np.argsort(needs, axis=0, kind="stable")
        enough = np.argmax(np.cumsum(amounts[order], axis=0) >= missing, axis=0)
        columns = np.arange(self.view.ranks)
        return needs[order[enough, columns], columns]

    def _write_needs(self, writes: tuple[_Write, ...]) -> np.ndarray:
        return np.stack([self._write_need(write) for write in writes])

    def _write_need(self, write: _Write) -> np.ndarray:
        need = self.rows[write.rank][self.row_of[write.rank][write.position]].copy()
        need[write.rank] = max(need[write.rank], write.position + 1)
        return need

    def _gates(self, rank: int) -> tuple[list[int], list[int]]:
        """Per event of `rank`: the row of its last step at or before it (row 0 if none,
        the last row if the maximal run never runs that step), and how many steps come
        before it."""
        count = len(self.view.trace.events[rank])
        positions = np.asarray(self.view.index[rank], np.int64)
        events = np.arange(count)
        before = np.searchsorted(positions, events, side="left")
        if not len(positions):
            return [0] * count, before.tolist()
        never = len(self.waits[rank]) + 1
        skipped = len(positions) - self.executed[rank]
        row_of = np.asarray(self.row_of[rank] + [never] * skipped, np.int64)
        last = np.searchsorted(positions, events, side="right") - 1
        gate = np.where(last < 0, 0, row_of[np.maximum(last, 0)])
        return gate.tolist(), before.tolist()

    def runs_before(self, first: EventRef, second: EventRef) -> bool:
        """Whether `first` can run while `second` (of another rank) has not."""
        row = self.gate[first.rank][first.index]
        return bool(
            self.rows[first.rank][row, second.rank] <= self.before[second.rank][second.index]
        )


class MonotoneOracle:
    """`budget`: how many steps of runs the need vectors may cost before one sweep per
    held rank computes them instead (default: what those sweeps cost)."""

    def __init__(self, view: SyncSkeleton, deadline: float, *, budget: float | None = None) -> None:
        self.view = view
        self.trace = view.trace
        self._full = _maximal_run(view)
        sweeps = view.ranks * sum(len(kinds) for kinds in view.kind)
        self._needs = _Needs(view, self._full, deadline, sweeps if budget is None else budget)

    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        if first.rank == second.rank:
            return first.index < second.index
        return self._needs.runs_before(first, second)

    def witness(self, first: EventRef, second: EventRef) -> Schedule:
        view = self.view
        limits = [len(kinds) for kinds in view.kind]
        limits[second.rank] = view.steps_before(second.rank, second.index)
        run = _Run(view, limits)
        run.run(list(range(view.ranks)))
        return view.causal_schedule(run.steps, first)

    def can_run(self, event: EventRef) -> bool:
        """Every execution extends to the maximal run (confluence): it runs every event
        that can run."""
        needed = self.view.steps_before(event.rank, event.index + 1)
        return needed <= self._full.sync_pos[event.rank]

    def stuck(self) -> Stuck | None:
        view, run = self.view, self._full
        blocked = tuple(
            EventRef(rank=rank, index=view.index[rank][position])
            for rank, position in enumerate(run.sync_pos)
            if position < len(view.kind[rank])
        )
        if not blocked:
            return None
        schedule = view.full_schedule(run.steps, run.event_frontier())
        values = tuple(
            (cell, run.values[view.cell_index[cell.key]]) for cell in view.cells_of(blocked)
        )
        return Stuck(schedule=schedule, blocked=blocked, cell_values=values)
