"""The synchronisation skeleton of a trace: the one compiled form every engine and the
analysis read.

Signal cells (cells some NOTIFY or WAIT targets) are numbered. Every event whose bytes
reach a signal cell has an effect on it (`racecheck.events.cell_effect`: Set, Add or
opaque), whatever the event is: a notify, a plain store of any dtype, an atomic store.
Per rank, the *steps* are parallel int lists (event index, kind, cell number, amount),
one step per wait and one per cell effect; an event that changes several cells gives
consecutive steps with the same event index, which engines apply as one atomic step
(a wait that takes a unit is a wait step then an Add step on its cell, one event).
Opaque effects are not steps: they are listed, and every engine refuses the trace.

It also turns a run over steps back into a full schedule (data events interleaved),
either whole or cut down to the causal past of one event.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from copy import copy
from dataclasses import dataclass

from racecheck.cells import wait_passes
from racecheck.describe import describe_cell
from racecheck.events import (
    INT32_MAX,
    INT32_MIN,
    CellIndex,
    CellKey,
    CellOp,
    Event,
    EventRef,
    Region,
    Schedule,
    SignalCell,
    Trace,
    WaitCmp,
    cell_effect,
)
from racecheck.report.reasons import ReasonCode, reason

WAIT_GE = 0
WAIT_EQ = 1
WAIT_GE_UNSIGNED = 2  # amount is the threshold as uint32
ADD = 3
SET = 4

_WAIT_KIND = {WaitCmp.GE: WAIT_GE, WaitCmp.EQ: WAIT_EQ, WaitCmp.GE_UNSIGNED: WAIT_GE_UNSIGNED}


def wait_holds(kind: int, value: int, amount: int) -> bool:
    """Whether a wait step of `kind` and `amount` passes on an int32 cell `value`."""
    return wait_passes(value, amount, kind == WAIT_EQ, kind == WAIT_GE_UNSIGNED)


def signal_cells(trace: Trace) -> dict[CellKey, SignalCell]:
    """Every cell some NOTIFY or WAIT targets, in first-seen order."""
    cells: dict[CellKey, SignalCell] = {}
    for rank_events in trace.events:
        for event in rank_events:
            sync = event.notify or event.wait
            if sync is not None:
                cells.setdefault(sync.cell.key, sync.cell)
    return cells


@dataclass(frozen=True, slots=True, kw_only=True)
class OpaqueWrite:
    """A write into a signal cell that no engine models exactly."""

    event: Event
    cell: SignalCell


class SyncSkeleton:
    """A trace's synchronisation: numbered cells and per-rank steps as ints."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.ranks = trace.ranks
        by_key = signal_cells(trace)
        self.cells: list[SignalCell] = list(by_key.values())
        self.cell_index: dict[CellKey, int] = {key: i for i, key in enumerate(by_key)}
        self._near = CellIndex(by_key)
        self.opaque: list[OpaqueWrite] = []
        self.takes: list[Event] = []  # waits that take a unit (`lower_start_edges`)
        self.index: list[list[int]] = []  # event index of each step
        self.kind: list[list[int]] = []
        self.cell: list[list[int]] = []
        self.amount: list[list[int]] = []  # Set/Add value or wait threshold
        for rank_events in trace.events:
            self._compile_rank(rank_events)

    def _compile_rank(self, rank_events: tuple[Event, ...]) -> None:
        index: list[int] = []
        kind: list[int] = []
        cell: list[int] = []
        amount: list[int] = []
        for event in rank_events:
            if event.wait is not None:
                wait_kind = _WAIT_KIND[event.wait.cmp]
                expected = event.wait.expected
                index.append(event.index)
                kind.append(wait_kind)
                cell.append(self.cell_index[event.wait.cell.key])
                amount.append(expected % 2**32 if wait_kind == WAIT_GE_UNSIGNED else expected)
                if event.wait.take:  # a unit taken: the same step adds to the cell it read
                    self.takes.append(event)
                    index.append(event.index)
                    kind.append(ADD)
                    cell.append(cell[-1])
                    amount.append(event.wait.take)
                continue
            for number in self.cells_in(event.access) if event.mode is not None else ():
                effect = cell_effect(event, self.cells[number].key)
                if effect is None:
                    continue
                if effect.op is CellOp.OPAQUE:
                    self.opaque.append(OpaqueWrite(event=event, cell=self.cells[number]))
                    continue
                index.append(event.index)
                kind.append(SET if effect.op is CellOp.SET else ADD)
                cell.append(number)
                amount.append(effect.value)
        self.index.append(index)
        self.kind.append(kind)
        self.cell.append(cell)
        self.amount.append(amount)

    def steps(self, rank: int) -> zip[tuple[int, int, int, int]]:
        """Each sync step of `rank`: (kind, cell, amount, event index)."""
        return zip(
            self.kind[rank], self.cell[rank], self.amount[rank], self.index[rank], strict=True
        )

    def steps_after_waits(self, rank: int) -> Iterator[tuple[int, int, int, int, int | None]]:
        """`steps`, each with the threshold of the rank's previous step on the same cell
        when that step is a wait (None otherwise)."""
        passed: dict[int, int] = {}
        for kind, cell, amount, index in self.steps(rank):
            yield kind, cell, amount, index, passed.pop(cell, None)
            if kind < ADD:
                passed[cell] = amount

    def with_effects(self, kind: list[list[int]], amount: list[list[int]]) -> SyncSkeleton:
        """The same steps (events, cells) with other kinds and amounts."""
        other = copy(self)
        other.kind, other.amount = kind, amount
        return other

    def cells_in(self, region: Region | None) -> list[int]:
        """Numbers of the signal cells whose bytes `region` overlaps."""
        return [self.cell_index[key] for key in self._near.touching(region)]

    def refusal(self) -> str | None:
        """Why no engine can decide this trace exactly, or None."""
        if not self.opaque:
            return None
        first = self.opaque[0]
        return reason(
            ReasonCode.CELL_INEXACT,
            cell=describe_cell(first.cell, self.trace),
            label=first.event.label or first.event.kind.value,
            where=str(first.event.location),
        )

    def units_refusal(self) -> str | None:
        """Why an engine that does not model units (a wait that passes and takes in one
        step) cannot decide this trace, or None: only explore and smt decide them."""
        if not self.takes:
            return None
        wait = self.takes[0].wait
        assert wait is not None
        return reason(ReasonCode.CELL_UNITS, cell=describe_cell(wait.cell, self.trace))

    def wrapping_cells(self) -> set[int]:
        """The cells that some order of their writes takes out of the int32 range."""
        low = [0] * len(self.cells)  # most negative total, ignoring wrap-around
        high = [0] * len(self.cells)
        set_low = [0] * len(self.cells)
        set_high = [0] * len(self.cells)
        for kinds, cells, amounts in zip(self.kind, self.cell, self.amount, strict=True):
            for kind, cell, amount in zip(kinds, cells, amounts, strict=True):
                if kind == ADD:
                    if amount < 0:
                        low[cell] += amount
                    else:
                        high[cell] += amount
                elif kind == SET:
                    set_low[cell] = min(set_low[cell], amount)
                    set_high[cell] = max(set_high[cell], amount)
        return {
            number
            for number in range(len(self.cells))
            if low[number] + set_low[number] < INT32_MIN
            or high[number] + set_high[number] > INT32_MAX
        }

    def reach(self, rank: int, step: int) -> int:
        """How many events of `rank` can have run when it sits at step `step`."""
        positions = self.index[rank]
        if step < len(positions):
            return positions[step]
        return len(self.trace.events[rank])

    def steps_before(self, rank: int, event_index: int) -> int:
        return bisect_left(self.index[rank], event_index)

    def cells_of(self, refs: tuple[EventRef, ...]) -> list[SignalCell]:
        found: dict[CellKey, SignalCell] = {}
        for ref in refs:
            sync = self.trace.event(ref).wait or self.trace.event(ref).notify
            if sync is not None:
                found.setdefault(sync.cell.key, sync.cell)
        return list(found.values())

    def full_schedule(self, steps: list[tuple[int, int]], reach: list[int]) -> Schedule:
        """All steps in run order, data events interleaved, then each rank up to `reach`."""
        emitted = [0] * self.ranks
        out: list[EventRef] = []
        for rank, position in steps:
            self._emit(out, emitted, rank, self.index[rank][position] + 1)
        for rank in range(self.ranks):
            self._emit(out, emitted, rank, reach[rank])
        return tuple(out)

    def causal_schedule(self, steps: list[tuple[int, int]], target: EventRef) -> Schedule:
        """The part of a run that `target` needs: its rank's prefix and, for every wait
        in it, the writes to that cell that ran before the wait — closed transitively."""
        order = {step: n for n, step in enumerate(steps)}
        writes: dict[int, list[tuple[int, int, int]]] = {}  # cell -> (n, rank, position)
        for n, (rank, position) in enumerate(steps):
            if self.kind[rank][position] >= ADD:
                writes.setdefault(self.cell[rank][position], []).append((n, rank, position))
        required = [0] * self.ranks
        pending = [(target.rank, bisect_right(self.index[target.rank], target.index))]
        while pending:
            rank, needed = pending.pop()
            for position in range(required[rank], needed):
                if self.kind[rank][position] < ADD:
                    pending.extend(self._feeders(writes, order, rank, position))
            required[rank] = max(required[rank], needed)
        emitted = [0] * self.ranks
        out: list[EventRef] = []
        for rank, position in steps:
            if position < required[rank]:
                self._emit(out, emitted, rank, self.index[rank][position] + 1)
        self._emit(out, emitted, target.rank, target.index + 1)
        return tuple(out)

    def _feeders(
        self,
        writes: dict[int, list[tuple[int, int, int]]],
        order: dict[tuple[int, int], int],
        rank: int,
        position: int,
    ) -> list[tuple[int, int]]:
        """(rank, steps needed) for every write to the wait's cell that ran before it
        (`writes`: each cell's writing steps in run order, with their place in the
        run); a write needs every step of its event."""
        cell_writes = writes.get(self.cell[rank][position], [])
        ran = bisect_left(cell_writes, (order[(rank, position)],))
        return [
            (other, bisect_right(self.index[other], self.index[other][other_position]))
            for _, other, other_position in cell_writes[:ran]
        ]

    def _emit(self, out: list[EventRef], emitted: list[int], rank: int, upto: int) -> None:
        for index in range(emitted[rank], upto):
            out.append(EventRef(rank=rank, index=index))
        emitted[rank] = max(emitted[rank], upto)
