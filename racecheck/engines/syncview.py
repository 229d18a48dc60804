"""The synchronisation skeleton of a trace, indexed for fast simulation.

Signal cells are numbered; each rank's NOTIFY/WAIT events become parallel lists
(kind, cell number, amount) so an engine's inner loop touches only ints. It also turns
a run over sync events back into a full schedule (data events interleaved), either
whole or cut down to the causal past of one event.
"""

from __future__ import annotations

from bisect import bisect_left

from racecheck.events import Event, EventKind, EventRef, NotifyOp, Schedule, SignalCell, Trace

CellKey = tuple[int, int, int]  # (memory, owner, byte offset)

NOTIFY_KIND = 0  # AtomicAdd
WAIT_KIND = 1
SET_KIND = 2


def cell_key_of(cell: SignalCell) -> CellKey:
    return (cell.memory, cell.owner, cell.offset)


def signal_cells(trace: Trace) -> dict[CellKey, SignalCell]:
    """Every cell some NOTIFY or WAIT targets, in first-seen order."""
    cells: dict[CellKey, SignalCell] = {}
    for rank_events in trace.events:
        for event in rank_events:
            sync = event.notify or event.wait
            if sync is not None:
                cells.setdefault(cell_key_of(sync.cell), sync.cell)
    return cells


class SyncView:
    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.ranks = trace.ranks
        by_key = signal_cells(trace)
        self.cells: list[SignalCell] = list(by_key.values())
        self.cell_index: dict[CellKey, int] = {key: i for i, key in enumerate(by_key)}
        self.signal_memories = {cell.memory for cell in self.cells}
        self.index: list[list[int]] = []  # event index of each sync event
        self.kind: list[list[int]] = []
        self.cell: list[list[int]] = []
        self.amount: list[list[int]] = []  # notify value or wait threshold
        for rank_events in trace.events:
            self._index_rank(rank_events)

    def _index_rank(self, rank_events: tuple[Event, ...]) -> None:
        index, kind, cell, amount = [], [], [], []
        for event in rank_events:
            if event.notify is not None:
                index.append(event.index)
                kind.append(SET_KIND if event.notify.op is NotifyOp.SET else NOTIFY_KIND)
                cell.append(self.cell_index[cell_key_of(event.notify.cell)])
                amount.append(event.notify.value)
            elif event.wait is not None:
                index.append(event.index)
                kind.append(WAIT_KIND)
                cell.append(self.cell_index[cell_key_of(event.wait.cell)])
                amount.append(event.wait.expected)
        self.index.append(index)
        self.kind.append(kind)
        self.cell.append(cell)
        self.amount.append(amount)

    def assigned_cells(self, event: Event) -> list[int]:
        """Signal cells a plain STORE assigns (numbers into `cells`)."""
        if event.kind is not EventKind.STORE or event.access is None:
            return []
        key_base = (event.access.memory, event.access.owner)
        found = []
        for offset, _ in event.cell_values:
            number = self.cell_index.get((*key_base, offset))
            if number is not None:
                found.append(number)
        return found

    def reach(self, rank: int, sync_position: int) -> int:
        """How many events of `rank` can have run when it sits at `sync_position`."""
        positions = self.index[rank]
        if sync_position < len(positions):
            return positions[sync_position]
        return len(self.trace.events[rank])

    def syncs_before(self, rank: int, event_index: int) -> int:
        return bisect_left(self.index[rank], event_index)

    def cells_of(self, refs: tuple[EventRef, ...]) -> list[SignalCell]:
        found: dict[CellKey, SignalCell] = {}
        for ref in refs:
            sync = self.trace.event(ref).wait or self.trace.event(ref).notify
            if sync is not None:
                found.setdefault(cell_key_of(sync.cell), sync.cell)
        return list(found.values())

    def full_schedule(self, steps: list[tuple[int, int]], reach: list[int]) -> Schedule:
        """All sync steps in run order, data events interleaved, then each rank up to `reach`."""
        emitted = [0] * self.ranks
        out: list[EventRef] = []
        for rank, position in steps:
            self._emit(out, emitted, rank, self.index[rank][position] + 1)
        for rank in range(self.ranks):
            self._emit(out, emitted, rank, reach[rank])
        return tuple(out)

    def causal_schedule(self, steps: list[tuple[int, int]], target: EventRef) -> Schedule:
        """The part of a run that `target` needs: its rank's prefix and, for every wait
        in it, the notifies to that cell that ran before the wait — closed transitively."""
        order = {step: n for n, step in enumerate(steps)}
        required = [0] * self.ranks
        target_syncs = self.syncs_before(target.rank, target.index)
        if target_syncs < len(self.index[target.rank]) and (
            self.index[target.rank][target_syncs] == target.index
        ):
            target_syncs += 1
        pending = [(target.rank, target_syncs)]
        while pending:
            rank, needed = pending.pop()
            for position in range(required[rank], needed):
                if self.kind[rank][position] == WAIT_KIND:
                    pending.extend(self._feeders(steps, order, rank, position))
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
        steps: list[tuple[int, int]],
        order: dict[tuple[int, int], int],
        rank: int,
        position: int,
    ) -> list[tuple[int, int]]:
        """(rank, sync positions needed) for every notify on the wait's cell that ran before it."""
        cell = self.cell[rank][position]
        limit = order[(rank, position)]
        return [
            (other, other_position + 1)
            for other, other_position in steps[:limit]
            if self.kind[other][other_position] != WAIT_KIND
            and self.cell[other][other_position] == cell
        ]

    def _emit(self, out: list[EventRef], emitted: list[int], rank: int, upto: int) -> None:
        for index in range(emitted[rank], upto):
            out.append(EventRef(rank=rank, index=index))
        emitted[rank] = max(emitted[rank], upto)
