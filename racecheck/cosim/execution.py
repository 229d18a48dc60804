"""What one co-simulated run produced: its trace, schedule, host tensors and data flow."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from racecheck.cosim.tasks import TaskRecord
from racecheck.cosim.threads import ThreadPlan
from racecheck.dsl.symbolic import Decision
from racecheck.dsl.types import Direction
from racecheck.events import (
    CellIndex,
    Event,
    EventRef,
    Memory,
    Schedule,
    SourceLocation,
    Trace,
    WriteIndex,
)


class TensorRole(Enum):
    INPUT = "input"
    OUTPUT = "output"
    INOUT = "inout"


ROLES = {
    Direction.IN: TensorRole.INPUT,
    Direction.OUT: TensorRole.OUTPUT,
    Direction.INOUT: TensorRole.INOUT,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class HostTensorRecord:
    name: str
    role: TensorRole
    memory: int  # Memory.id of the host tensor
    dtype: str
    initial: np.ndarray
    final: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class Decided:
    """One decision of a run: what it decided, from which loads, when (position in the
    schedule, rank)."""

    decision: Decision
    sources: frozenset[EventRef]
    at: tuple[int, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Pin:
    """A notify value computed from loads: data, unless the engines use it (a wait
    on its cell, or another write of the cell's bytes), when it steers and is pinned
    to its value (`decision`, None without a symbolic form) from `at` on."""

    notify: Event
    sources: frozenset[EventRef]
    decision: Decision | None
    at: tuple[int, int]


class CellUses:
    """What the engines read of a run's signal cells: the cells waits target
    (`racecheck.engines.skeleton` uses their values) and the writes of each instance
    (`racecheck.analysis` compares two Sets of one cell)."""

    def __init__(self, events: Sequence[Sequence[Event]], waited: CellIndex) -> None:
        self.waited = waited.order
        self.writes = WriteIndex.of_run(events)

    def pinned(self, pin: Pin) -> bool:
        """Do the engines use the value `pin`'s notify writes?"""
        assert pin.notify.notify is not None and pin.notify.access is not None
        if pin.notify.notify.cell.key in self.waited:
            return True
        writes = self.writes.overlapping(pin.notify.access)
        return any(write.ref != pin.notify.ref for write, _ in writes)


@dataclass(frozen=True, slots=True, kw_only=True)
class DataFlow:
    """Where the values of a run came from, beyond the events themselves.

    `stored_from`: for each write, the loads its data was computed from (None: not
    tracked, any earlier load of its rank). `steered`: each load whose value decided
    control flow, an address, a peer, a threshold or a notify value, with the first
    line where it did. `inexact_adds`: atomic accumulations of floating-point data
    (their order changes the result). `decisions`: what steering values with a symbolic
    form decided, in execution order; `opaque`: loads behind steering values without one.
    """

    stored_from: dict[EventRef, frozenset[EventRef] | None] = field(default_factory=dict)
    steered: dict[EventRef, SourceLocation] = field(default_factory=dict)
    inexact_adds: frozenset[EventRef] = frozenset()
    decisions: tuple[Decided, ...] = ()
    opaque: frozenset[EventRef] = frozenset()


class FlowRecorder:
    """One rank's data flow while it runs."""

    def __init__(self) -> None:
        self.stored_from: dict[EventRef, frozenset[EventRef] | None] = {}
        self.steered: dict[EventRef, SourceLocation] = {}
        self.inexact_adds: set[EventRef] = set()
        self.decisions: list[Decided] = []
        self.opaque: set[EventRef] = set()
        self.pins: list[Pin] = []

    def stored(self, write: EventRef, sources: frozenset[EventRef] | None, inexact: bool) -> None:
        if sources is None or sources:
            self.stored_from[write] = sources
        if inexact:
            self.inexact_adds.add(write)

    def steered_by(self, sources: frozenset[EventRef], where: SourceLocation) -> None:
        for source in sources:
            self.steered.setdefault(source, where)

    def decided(
        self, sources: frozenset[EventRef], decision: Decision | None, at: tuple[int, int]
    ) -> None:
        if decision is None:
            self.opaque |= sources
        else:
            self.decisions.append(Decided(decision=decision, sources=sources, at=at))

    def settle(self, uses: CellUses) -> frozenset[EventRef]:
        """Decide the pins once the run is over; the loads that steered through them."""
        steering: set[EventRef] = set()
        for pin in self.pins:
            if uses.pinned(pin):
                steering |= pin.sources
                self.steered_by(pin.sources, pin.notify.location)
                self.decided(pin.sources, pin.decision, pin.at)
        self.pins = []
        return frozenset(steering)


def merged_flow(recorders: Iterable[FlowRecorder]) -> DataFlow:
    stored_from: dict[EventRef, frozenset[EventRef] | None] = {}
    steered: dict[EventRef, SourceLocation] = {}
    inexact: set[EventRef] = set()
    decisions: list[Decided] = []
    opaque: set[EventRef] = set()
    for recorder in recorders:
        stored_from.update(recorder.stored_from)
        for ref, where in recorder.steered.items():
            steered.setdefault(ref, where)
        inexact |= recorder.inexact_adds
        decisions += recorder.decisions
        opaque |= recorder.opaque
    return DataFlow(
        stored_from=stored_from,
        steered=steered,
        inexact_adds=frozenset(inexact),
        decisions=tuple(sorted(decisions, key=lambda decided: decided.at)),
        opaque=frozenset(opaque),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Execution:
    trace: Trace
    schedule: Schedule  # the order events executed in this run
    tensors: tuple[HostTensorRecord, ...]
    forced: tuple[EventRef, ...] = ()
    stalled: tuple[EventRef, ...] = ()
    flow: DataFlow = field(default_factory=DataFlow)
    tasks: tuple[tuple[TaskRecord, ...], ...] = ()  # each rank's tasks, as they ran
    # tasks as threads (`racecheck.cosim.threads`): the plan, and the events of the run
    # in program order it was made from (which `tasks` index) and that run's memories
    # (the threaded run adds racecheck's `tasks` memory, so its ids may differ)
    plan: ThreadPlan | None = None
    rank_events: tuple[tuple[Event, ...], ...] | None = None
    rank_memories: tuple[Memory, ...] | None = None
    notes: tuple[str, ...] = ()  # what the host said about constructs it did not run
    inexact: tuple[str, ...] = ()  # why this run's order may hide executions (no proof)
    # where the run computed what the device does not (`note_unfollowed`): no proof and
    # no finding, since the device's run may differ from that line on
    unfollowed: tuple[str, ...] = ()

    @property
    def in_program_order(self) -> tuple[tuple[tuple[Event, ...], ...], tuple[Memory, ...]]:
        """The events `tasks` index (each rank's, in program order) and their memories."""
        if self.rank_events is None or self.rank_memories is None:
            return self.trace.events, self.trace.memories
        return self.rank_events, self.rank_memories
