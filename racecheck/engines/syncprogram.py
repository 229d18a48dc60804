"""A trace's sync skeleton compiled for explicit exploration: per rank, its *sync steps*.

A sync step is one event that reads or changes a *live cell* (a cell some WAIT reads):
a WAIT, or an event with Set or Add effects on live cells (`racecheck.engines.skeleton`
compiles the effects; all of one event's effects are one atomic step). Every other
event is always enabled and changes nothing a wait reads, so an exploration may leave
it out and put it back anywhere between its rank's sync steps.

Each step also states how it touches each live cell (`READS`, `ADDS`, `SETS`), the one input of the
dependency relation the partial-order reduction (`racecheck.engines.por`) rests on.
A cell that only ever receives Adds of values >= 0 and cannot wrap has a saturation cap
(one more than the largest value any wait compares it with: every larger value
satisfies and falsifies the same waits, and stays larger), which the search over
macro states (`racecheck.engines.macrostates`) uses to merge states.
"""

from __future__ import annotations

from dataclasses import dataclass

from racecheck.cells import after_write
from racecheck.engines.skeleton import ADD, SyncSkeleton, wait_holds
from racecheck.events import SignalCell

# How a step touches one cell, as bits (ints: the search tests them per step): a WAIT
# reads; an event may both Add to and Set one cell.
READS = 1
ADDS = 2
SETS = 4


def conflict(one: int, other: int) -> bool:
    """Whether two steps of different ranks touching one cell this way are dependent:
    they commute and neither enables or disables the other unless one writes and the
    other reads or Sets (int32 Adds commute, wrap-around included)."""
    both = one | other
    return both != READS and both != ADDS


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveWrite:
    cell: int  # index of the live cell
    add: bool  # Add if true, else Set
    value: int

    def after(self, old: int) -> int:
        """The cell's value once the effect has run on `old`."""
        return after_write(old, self.value, self.add)


@dataclass(frozen=True, slots=True, kw_only=True)
class Guard:
    cell: int
    kind: int  # a wait kind of the skeleton
    expected: int

    def holds(self, values: list[int]) -> bool:
        return wait_holds(self.kind, values[self.cell], self.expected)


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncStep:
    """One event that reads or changes live cells, with its position in its rank."""

    index: int
    guard: Guard | None  # WAITs only
    effects: tuple[LiveWrite, ...]  # writers of live cells only
    access: tuple[tuple[int, int], ...]  # (live cell, how this step touches it: bits)

    def apply(self, values: list[int]) -> None:
        for effect in self.effects:
            values[effect.cell] = effect.after(values[effect.cell])


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncProgram:
    """A trace compiled to its sync steps, per rank, over numbered live cells."""

    steps: tuple[tuple[SyncStep, ...], ...]
    cells: tuple[SignalCell, ...]
    caps: tuple[int | None, ...]  # saturation value per live cell, None if not monotone


def compile_sync_program(skeleton: SyncSkeleton) -> SyncProgram:
    waited = sorted(
        {
            cell
            for kinds, cells in zip(skeleton.kind, skeleton.cell, strict=True)
            for kind, cell in zip(kinds, cells, strict=True)
            if kind < ADD
        }
    )
    number = {cell: position for position, cell in enumerate(waited)}
    steps = tuple(_rank_program(skeleton, rank, number) for rank in range(skeleton.ranks))
    wrapping = skeleton.wrapping_cells()
    caps = tuple(
        None if cell in wrapping else _saturation_cap(number[cell], steps) for cell in waited
    )
    return SyncProgram(steps=steps, cells=tuple(skeleton.cells[cell] for cell in waited), caps=caps)


def _rank_program(
    skeleton: SyncSkeleton, rank: int, number: dict[int, int]
) -> tuple[SyncStep, ...]:
    """The rank's skeleton steps on live cells, one SyncStep per event."""
    guards: dict[int, Guard] = {}
    effects: dict[int, list[LiveWrite]] = {}
    kinds, cells, amounts = skeleton.kind[rank], skeleton.cell[rank], skeleton.amount[rank]
    for position, index in enumerate(skeleton.index[rank]):
        live = number.get(cells[position])
        if live is None:
            continue
        if kinds[position] < ADD:
            guards[index] = Guard(cell=live, kind=kinds[position], expected=amounts[position])
        else:
            effect = LiveWrite(cell=live, add=kinds[position] == ADD, value=amounts[position])
            effects.setdefault(index, []).append(effect)
    return tuple(
        _step(index, guards.get(index), tuple(effects.get(index, ())))
        for index in sorted(guards.keys() | effects.keys())
    )


def _saturation_cap(cell: int, steps: tuple[tuple[SyncStep, ...], ...]) -> int | None:
    """One past every threshold, if the cell only grows; else None (no saturation)."""
    thresholds: list[int] = []
    for rank_steps in steps:
        for step in rank_steps:
            if step.guard is not None and step.guard.cell == cell:
                thresholds.append(step.guard.expected)
            if any(e.cell == cell and (not e.add or e.value < 0) for e in step.effects):
                return None
    return max(0, *thresholds) + 1


def _step(index: int, guard: Guard | None, effects: tuple[LiveWrite, ...]) -> SyncStep:
    access: dict[int, int] = {}
    if guard is not None:
        access[guard.cell] = READS
    for effect in effects:
        access[effect.cell] = access.get(effect.cell, 0) | (ADDS if effect.add else SETS)
    return SyncStep(index=index, guard=guard, effects=effects, access=tuple(access.items()))
