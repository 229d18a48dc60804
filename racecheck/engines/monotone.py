"""The `monotone` engine: exact ordering by holding one event back, no search.

Decides: the three questions of `racecheck.engines.base` for monotone traces.

Model boundary: a trace is monotone when every WAIT is Ge (signed, or unsigned on a cell
that never goes negative: `_may_go_negative`), no waited cell can leave the int32 range
(so nothing wraps), and each waited cell is written either only by Adds — negative
values only from the cell's owner — or only by Sets of one value v >= 0 (any number of
writers, by notify or plain store: the cell goes 0 → v and stays there). A cell no wait
reads can take any writes: no order of them enables or disables anything. Then (1) cell
updates commute, and (2) executing an event of another rank never disables a rank's
pending wait: that wait reads the rank's own cell, which other ranks only increase. So
every maximal run from a state reaches the same final state (confluence), and "can
`first` run while `second` is held back?" is answered by one maximal run with `second`'s
rank stopped just before it: `first` can precede `second` iff that run executes `first`.
A rank's hold position only matters through the writes it has issued, so one incremental
sweep per rank yields every frontier: O(P · S) steps for S sync steps in all.

Unknown policy: none — the answer is a deterministic fixpoint; a trace outside the
boundary is refused by `unsupported` and goes to an exact engine instead.

Limitations: fixed per-rank event sequences (the co-simulation's trace); memory is
quadratic in P per sync event (one frontier row per notify-delimited hold position).
"""

from __future__ import annotations

import time

import numpy as np

from racecheck.describe import describe_cell
from racecheck.engines.skeleton import (
    ADD,
    SET,
    WAIT_EQ,
    WAIT_GE_UNSIGNED,
    SyncSkeleton,
)
from racecheck.errors import EngineUnknown
from racecheck.events import EventRef, Schedule, Stuck


class MonotoneEngine:
    name = "monotone"

    def unsupported(self, skeleton: SyncSkeleton) -> str | None:
        return skeleton.refusal() or _non_monotone_reason(skeleton)

    def order(self, skeleton: SyncSkeleton, *, deadline: float) -> MonotoneOracle:
        return MonotoneOracle(skeleton, deadline)


def _non_monotone_reason(skeleton: SyncSkeleton) -> str | None:
    """Why the trace is outside the monotone boundary (module docstring), or None."""
    writes: list[set[tuple[int, int]]] = [set() for _ in skeleton.cells]
    waited = {
        cell
        for rank in range(skeleton.ranks)
        for kind, cell, _, _ in _rank_steps(skeleton, rank)
        if kind not in (ADD, SET)
    }
    for rank in range(skeleton.ranks):
        for kind, cell, amount, index in _rank_steps(skeleton, rank):
            where = skeleton.trace.events[rank][index].location
            if kind == WAIT_EQ:
                return f"an Eq wait at {where}"
            if cell not in waited:
                continue
            if kind in (ADD, SET):
                writes[cell].add((kind, amount if kind == SET else 0))
            if kind == SET and amount < 0:
                return f"a negative Set at {where}"
            if kind == ADD and amount < 0 and skeleton.cells[cell].owner != rank:
                return f"a negative Add on another rank's cell at {where}"
            if len(writes[cell]) > 1 and any(op == SET for op, _ in writes[cell]):
                return f"a Set on a cell also written otherwise at {where}"
    for number in sorted(skeleton.wrapping_cells() & waited):
        name = describe_cell(skeleton.cells[number], skeleton.trace)
        return f"signal cell {name} can wrap at 32 bits"
    negative = _may_go_negative(skeleton)
    for rank in range(skeleton.ranks):
        for kind, cell, _, index in _rank_steps(skeleton, rank):
            if kind == WAIT_GE_UNSIGNED and cell in negative:
                where = skeleton.trace.events[rank][index].location
                return f"an unsigned wait on a cell that can go negative at {where}"
    return None


def _may_go_negative(skeleton: SyncSkeleton) -> set[int]:
    """The cells with a negative Add that is not a *consume*: an Add -v whose rank's
    previous step on the cell is a Ge wait (signed or unsigned) for some t >= v.

    Called once the rest of the boundary holds (Ge waits only, negative Adds only from
    the cell's owner, no Set on a cell with Adds, no wrap-around). Then no execution
    makes a cell outside this set negative, by induction on the execution: up to the
    first negative value the cell is >= 0, so an unsigned wait compares it as signed;
    a consume's wait saw >= t, and until the consume only other ranks wrote the cell,
    with Adds >= 0, so it leaves >= t - v >= 0."""
    negative: set[int] = set()
    for rank in range(skeleton.ranks):
        passed: dict[int, int] = {}  # cell -> threshold of the rank's last step on it, a wait
        for kind, cell, amount, _ in _rank_steps(skeleton, rank):
            if kind < ADD:
                passed[cell] = amount
                continue
            threshold = passed.pop(cell, None)
            if amount < 0 and (threshold is None or threshold < -amount):
                negative.add(cell)
    return negative


def _rank_steps(skeleton: SyncSkeleton, rank: int) -> zip[tuple[int, int, int, int]]:
    return zip(
        skeleton.kind[rank],
        skeleton.cell[rank],
        skeleton.amount[rank],
        skeleton.index[rank],
        strict=True,
    )


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
        view, values, waiting, log, steps = (
            self.view,
            self.values,
            self.waiting,
            self.log,
            self.steps,
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


class MonotoneOracle:
    def __init__(self, view: SyncSkeleton, deadline: float) -> None:
        self.view = view
        self.trace = view.trace
        # per rank and sync position, how many events can have run (SyncSkeleton.reach)
        self._reach = [
            [*positions, len(events)]
            for positions, events in zip(view.index, view.trace.events, strict=True)
        ]
        self._frontiers: list[np.ndarray] = []
        for held in range(view.ranks):
            if time.monotonic() > deadline:
                raise EngineUnknown("monotone engine: time limit reached while computing frontiers")
            self._frontiers.append(self._sweep(held))

    def _sweep(self, held: int) -> np.ndarray:
        """Row k: every rank's reach while `held` may execute only its first k sync events."""
        view = self.view
        reach = self._reach
        total = len(view.kind[held])
        limits = [len(kinds) for kinds in view.kind]
        limits[held] = 0
        run = _Run(view, limits, log=False)
        run.run([rank for rank in range(view.ranks) if rank != held])
        rows = np.empty((total + 1, view.ranks), dtype=np.int64)
        rows[0] = run.event_frontier()
        for k in range(1, total + 1):
            before = run.sync_pos[held]
            run.limits[held] = k
            moved = run.run([held])
            if run.sync_pos[held] == before:
                rows[k:] = rows[k - 1]  # blocked for good: nothing else can change
                break
            rows[k] = rows[k - 1]
            if view.kind[held][k - 1] >= ADD:  # a wait wakes nobody: only writes move others
                for rank in moved:
                    rows[k, rank] = reach[rank][run.sync_pos[rank]]
        return rows

    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        if first.rank == second.rank:
            return first.index < second.index
        hold = self.view.steps_before(second.rank, second.index)
        return first.index < int(self._frontiers[second.rank][hold, first.rank])

    def witness(self, first: EventRef, second: EventRef) -> Schedule:
        view = self.view
        limits = [len(kinds) for kinds in view.kind]
        limits[second.rank] = view.steps_before(second.rank, second.index)
        run = _Run(view, limits)
        run.run(list(range(view.ranks)))
        return view.causal_schedule(run.steps, first)

    def _maximal_run(self) -> _Run:
        run = _Run(self.view, [len(kinds) for kinds in self.view.kind])
        run.run(list(range(self.view.ranks)))
        return run

    def stuck(self) -> Stuck | None:
        view = self.view
        run = self._maximal_run()
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
