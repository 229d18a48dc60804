"""Values that steer a program, and whether another execution could give them another value.

A trace fixes each rank's event sequence. It stands for every execution only if every
value that steered it (a branch, a loop bound, an address, a peer, a wait threshold, a
notify value, or data stored into a signal cell) is the same in all of them. A load
whose value steered is *open* when

* it depends on the program's inputs (a host input tensor), directly or through memory:
  other inputs could take another path; or
* it depends on the order of writes nothing orders: two writes of its bytes by different
  ranks that can both precede it, can happen in either order, and whose order changes
  the value (a Set against anything but a Set of the same value, a floating-point
  accumulation; integer adds commute).

A load that can run before or after a write of its bytes is a race finding already.
Dependence travels through memory: a write's data carries the loads it was computed
from (`DataFlow.stored_from`), and a load of those bytes depends on them in turn. An
input dependence is followed (concolic) where every steering use of it had a symbolic
form, also through memory: which write such a load read is the order cause's question.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from racecheck.cosim import Execution, TensorRole
from racecheck.cosim.execution import DataFlow
from racecheck.engines.base import OrderOracle
from racecheck.engines.skeleton import signal_cells
from racecheck.events import (
    CellIndex,
    Event,
    EventKind,
    EventRef,
    NotifyOp,
    SourceLocation,
    Trace,
    WriteIndex,
    intersect_ranges,
)
from racecheck.report.reasons import ReasonCode, reason


class Cause(Enum):
    INPUT = "input"
    ORDER = "order"


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenRead:
    """A load whose value steered the program and may differ in another execution."""

    cause: Cause
    read: EventRef  # the load whose own value is open (input, or unordered writers)
    read_at: SourceLocation
    used_at: SourceLocation  # where the (derived) value steered the program
    symbolic: bool = False  # INPUT: its value steered only in symbolic form
    writers: tuple[EventRef, ...] = ()  # ORDER: the unordered writes of its bytes
    last_wins: bool = False  # ORDER: the value is set by whichever of `writers` lands last

    @property
    def message(self) -> str:
        read = "" if self.read_at == self.used_at else f" read at {self.read_at}"
        code = ReasonCode.OPEN_INPUT if self.cause is Cause.INPUT else ReasonCode.OPEN_ORDER
        return reason(code, used=str(self.used_at), read=read)


def open_reads(execution: Execution, oracle: OrderOracle) -> list[OpenRead]:
    """Every open cause behind a steering value, one per (cause, read line), in trace order."""
    trace = execution.trace
    flow = execution.flow
    feeders = _Feeders(trace, oracle)
    inputs = {t.memory for t in execution.tensors if t.role is not TensorRole.OUTPUT}
    used: dict[EventRef, SourceLocation] = {}
    indirect: set[EventRef] = set()  # loads whose values steered through memory
    for steering, used_at, direct in _steering(trace, flow):
        # a load revealed only in symbolic form carries what it read from memory in
        # that form (`MemoryState.forms_at`): the loads upstream of it steered in it too
        in_form = direct and steering not in flow.opaque
        for load in _upstream(trace, flow, feeders, steering):
            used.setdefault(load, used_at)
            if not direct or (load != steering and not in_form):
                indirect.add(load)
    found: dict[tuple[Cause, SourceLocation, bool], OpenRead] = {}
    for load in sorted(used, key=lambda ref: (ref.rank, ref.index)):
        symbolic = load not in indirect and load not in flow.opaque
        for opened in _opened(trace, flow, oracle, inputs, feeders[load], load, used[load]):
            if opened.cause is Cause.INPUT:
                opened = dataclasses.replace(opened, symbolic=symbolic)
            found.setdefault((opened.cause, opened.read_at, opened.symbolic), opened)
    return list(found.values())


def steering_loads(
    execution: Execution, oracle: OrderOracle, also: frozenset[EventRef] = frozenset()
) -> set[EventRef]:
    """Every load whose value steered (`_steering`) or is in `also`, directly or
    through memory."""
    trace, flow = execution.trace, execution.flow
    feeders = _Feeders(trace, oracle)
    found: set[EventRef] = set()
    starts = [steering for steering, _, _ in _steering(trace, flow)] + sorted(
        also, key=lambda ref: (ref.rank, ref.index)
    )
    for steering in starts:
        if steering not in found:
            found.update(_upstream(trace, flow, feeders, steering))
    return found


def _steering(trace: Trace, flow: DataFlow) -> Iterator[tuple[EventRef, SourceLocation, bool]]:
    """Loads whose values steered, and whether directly: revealed ones (directly), and
    the sources of data that lands on signal cells (it moves waits)."""
    for load, used_at in flow.steered.items():
        yield load, used_at, True
    near = CellIndex(signal_cells(trace))
    for rank_events in trace.events:
        for event in rank_events:
            if event.ref not in flow.stored_from or event.is_sync or event.access is None:
                continue
            if near.touching(event.access):
                for source in _sources(trace, flow, event):
                    yield source, event.location, False


def _sources(trace: Trace, flow: DataFlow, write: Event) -> frozenset[EventRef]:
    if write.ref not in flow.stored_from:
        return frozenset()
    sources = flow.stored_from[write.ref]
    if sources is not None:
        return sources
    earlier = trace.events[write.rank][: write.index]
    return frozenset(e.ref for e in earlier if e.kind is EventKind.LOAD)


class _Feeders:
    """For a load, the writes of its bytes that can precede it (computed on demand:
    few loads steer)."""

    def __init__(self, trace: Trace, oracle: OrderOracle) -> None:
        self.oracle = oracle
        self.writes = WriteIndex.of_run(trace.events)
        self.trace = trace
        self.known: dict[EventRef, list[Event]] = {}

    def __getitem__(self, load: EventRef) -> list[Event]:
        if load not in self.known:
            read = self.trace.event(load)
            assert read.access is not None
            self.known[load] = [
                write
                for write, _ in self.writes.overlapping(read.access)
                if _may_precede(self.oracle, write, read)
            ]
        return self.known[load]


def _may_precede(oracle: OrderOracle, first: Event, second: Event) -> bool:
    if first.rank == second.rank:
        return first.index < second.index
    return oracle.can_precede(first.ref, second.ref)


def _upstream(trace: Trace, flow: DataFlow, feeders: _Feeders, start: EventRef) -> list[EventRef]:
    """`start` and every load whose value reached it through memory."""
    seen = {start}
    todo = [start]
    while todo:
        load = todo.pop()
        for writer in feeders[load]:
            for source in _sources(trace, flow, writer):
                if source not in seen:
                    seen.add(source)
                    todo.append(source)
    return sorted(seen, key=lambda ref: (ref.rank, ref.index))


def _opened(
    trace: Trace,
    flow: DataFlow,
    oracle: OrderOracle,
    inputs: set[int],
    writers: list[Event],
    load: EventRef,
    used_at: SourceLocation,
) -> Iterator[OpenRead]:
    event = trace.event(load)
    assert event.access is not None
    if event.access.memory in inputs:
        yield OpenRead(cause=Cause.INPUT, read=load, read_at=event.location, used_at=used_at)
    group = _unordered(flow, oracle, event, writers)
    if group:
        yield OpenRead(
            cause=Cause.ORDER,
            read=load,
            read_at=event.location,
            used_at=used_at,
            writers=tuple(writer.ref for writer in group),
            last_wins=len(group) == 2 or all(_sets(writer) for writer in group),
        )


def _unordered(
    flow: DataFlow, oracle: OrderOracle, read: Event, writers: list[Event]
) -> tuple[Event, ...]:
    """The writes of `read`'s bytes that some other such write can follow or precede,
    with a different result."""
    assert read.access is not None
    group: dict[EventRef, Event] = {}
    for n, first in enumerate(writers):
        assert first.access is not None
        mine = intersect_ranges(first.access.ranges, read.access.ranges)
        for second in writers[n + 1 :]:
            assert second.access is not None
            if first.rank == second.rank or _commute(flow, first, second):
                continue
            if not intersect_ranges(mine, second.access.ranges):
                continue
            if oracle.can_precede(first.ref, second.ref) and oracle.can_precede(
                second.ref, first.ref
            ):
                group.setdefault(first.ref, first)
                group.setdefault(second.ref, second)
    return tuple(group.values())


def _commute(flow: DataFlow, first: Event, second: Event) -> bool:
    """Do both orders of these two writes leave the same bytes?"""
    if first.notify is not None and second.notify is not None:
        ops = {first.notify.op, second.notify.op}
        if ops == {NotifyOp.SET}:
            return first.notify.value == second.notify.value
    return _integer_add(flow, first) and _integer_add(flow, second)


def _sets(event: Event) -> bool:
    if event.notify is not None:
        return event.notify.op is NotifyOp.SET
    return event.kind is EventKind.STORE


def _integer_add(flow: DataFlow, event: Event) -> bool:
    if event.notify is not None:
        return event.notify.op is NotifyOp.ATOMIC_ADD
    return event.kind is EventKind.ATOMIC_ADD and event.ref not in flow.inexact_adds
