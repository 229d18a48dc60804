"""A deliberately naive reference for the engine contract, trusted by the conformance suite.

It follows the execution semantics of `racecheck.engines.base` literally: a state is
every rank's position plus the value of every signal cell (a cell some NOTIFY or WAIT
of the trace targets); every event is one step; a depth-first search visits every
reachable state with no reduction at all. Only for tiny traces.

It models cells as the 4 bytes they are, with its own code (not racecheck's
`cell_effect`): a plain store replaces each byte of the cell it covers with the byte
it wrote; an atomic int32 store adds its element at the cell's offset; notifies add or
set; every sum wraps at 32 bits. An unsigned wait compares as uint32.

Start edges it takes from `trace.threads`, not from the events that encode them: the
k-th start event of a thread (label `TASK_START`) can run once every thread of the
k-th task of its `after` has run all its events; a task-end event changes nothing.
Their cells are not in the state; `cell_value` counts a task's finished threads.

The host's join between `--rounds joined` calls (labels `HOST_JOIN`, `HOST_JOIN_WAIT`)
is an ordinary notify and wait on racecheck's own memory: its cells are in the state
and its wait blocks like any other.

Units likewise (`Thread.resource`, `trace.capacities`, `Thread.dispatch`), from who
holds what rather than from their cells: a thread holds its unit from its take event
(label `UNIT_TAKE`) until its give event has run, and the take can run while fewer
than the capacity's threads of its rank and resource hold one. A dispatch holds its
rank's lock from its take (`DISPATCH_TAKE`) until each of its threads has run its give;
the take can run while no other dispatch of the rank holds it, and the other threads'
`DISPATCH_ENTER` once the first thread has opened the dispatch (`DISPATCH_OPEN`, its
next step).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from racecheck.events import (
    DISPATCH,
    DISPATCH_ENTER,
    DISPATCH_GIVE,
    DISPATCH_OPEN,
    DISPATCH_TAKE,
    HOST_JOIN,
    HOST_JOIN_WAIT,
    TASK_START,
    UNIT_GIVE,
    UNIT_TAKE,
    Event,
    EventKind,
    EventRef,
    MemoryKind,
    NotifyOp,
    Schedule,
    Trace,
    WaitCmp,
    WriteOp,
    unit_names,
)

CellKey = tuple[int, int, int]  # (memory, owner, byte offset)


@dataclass(frozen=True, slots=True, kw_only=True)
class State:
    positions: tuple[int, ...]  # events executed per rank
    cells: tuple[tuple[CellKey, int], ...]  # every signal cell with its value, sorted by key

    def value(self, cell: CellKey) -> int:
        return dict(self.cells)[cell]


class InvalidSchedule(Exception):
    """A schedule that is not an execution of the trace."""


_JOIN = frozenset((HOST_JOIN, HOST_JOIN_WAIT))


def _modelled(event: Event) -> bool:
    """Whether the event is a notify or wait on a cell of the state: the program's own,
    and the host's join."""
    return not event.synthetic or event.label in _JOIN


def signal_cells(trace: Trace) -> tuple[CellKey, ...]:
    keys: set[CellKey] = set()
    for event in _all_events(trace):
        if not _modelled(event):
            continue
        sync = event.notify.cell if event.notify else event.wait.cell if event.wait else None
        if sync is not None:
            keys.add((sync.memory, sync.owner, sync.offset))
    return tuple(sorted(keys))


def initial_state(trace: Trace) -> State:
    return State(positions=(0,) * trace.ranks, cells=tuple((key, 0) for key in signal_cells(trace)))


def next_event(trace: Trace, state: State, rank: int) -> Event | None:
    position = state.positions[rank]
    events = trace.events[rank]
    return events[position] if position < len(events) else None


def is_enabled(trace: Trace, state: State, rank: int) -> bool:
    event = next_event(trace, state, rank)
    if event is None:
        return False
    if event.label == TASK_START:
        task = trace.threads[rank].after[event.index]
        return all(_finished(trace, state, other) for other in _threads_of(trace, task))
    if event.label in _UNIT_RULES:
        return _UNIT_RULES[event.label](trace, state, rank)
    if event.kind is not EventKind.WAIT or not _modelled(event):
        return True
    assert event.wait is not None
    cell = event.wait.cell
    value = state.value((cell.memory, cell.owner, cell.offset))
    expected = event.wait.expected
    if event.wait.cmp is WaitCmp.GE_UNSIGNED:
        return value % 2**32 >= expected % 2**32
    return value >= expected if event.wait.cmp is WaitCmp.GE else value == expected


def _past(trace: Trace, state: State, thread: int, label: str) -> bool:
    """Whether the thread has run its event of this label (False if it has none)."""
    events = trace.events[thread]
    return any(e.label == label for e in events[: state.positions[thread]])


def _holds_unit(trace: Trace, state: State, thread: int) -> bool:
    return _past(trace, state, thread, UNIT_TAKE) and not _past(trace, state, thread, UNIT_GIVE)


def _unit_free(trace: Trace, state: State, rank: int) -> bool:
    me = trace.threads[rank]
    units = next(
        c.units for c in trace.capacities if (c.rank, c.resource) == (me.rank, me.resource)
    )
    holding = sum(
        _holds_unit(trace, state, other)
        for other, thread in enumerate(trace.threads)
        if other != rank and (thread.rank, thread.resource) == (me.rank, me.resource)
    )
    return holding < units


def _dispatch_threads(trace: Trace, dispatch: int) -> list[int]:
    return [n for n, thread in enumerate(trace.threads) if thread.dispatch == dispatch]


def _holds_lock(trace: Trace, state: State, dispatch: int) -> bool:
    members = _dispatch_threads(trace, dispatch)
    taken = any(_past(trace, state, n, DISPATCH_TAKE) for n in members)
    return taken and not all(_past(trace, state, n, DISPATCH_GIVE) for n in members)


def _lock_free(trace: Trace, state: State, rank: int) -> bool:
    me = trace.threads[rank]
    others = {t.dispatch for t in trace.threads if t.rank == me.rank and t.dispatch >= 0}
    return not any(_holds_lock(trace, state, d) for d in others - {me.dispatch})


def _dispatch_open(trace: Trace, state: State, rank: int) -> bool:
    return _dispatch_open_of(trace, state, trace.threads[rank].dispatch)


_UNIT_RULES = {UNIT_TAKE: _unit_free, DISPATCH_TAKE: _lock_free, DISPATCH_ENTER: _dispatch_open}


def _threads_of(trace: Trace, task: int) -> list[int]:
    return [number for number, thread in enumerate(trace.threads) if thread.task == task]


def _finished(trace: Trace, state: State, thread: int) -> bool:
    return state.positions[thread] == len(trace.events[thread])


def cell_value(trace: Trace, state: State, cell: CellKey) -> int:
    """A signal cell's value; a task's completion cell counts its finished threads."""
    if cell[0] < len(trace.memories) and trace.memories[cell[0]].kind is MemoryKind.UNITS:
        return _unit_cell_value(trace, state, cell)
    if cell[0] < len(trace.memories) and trace.memories[cell[0]].kind is MemoryKind.TASKS:
        task = cell[2] // 4
        return sum(_finished(trace, state, thread) for thread in _threads_of(trace, task))
    return state.value(cell)


def _int32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def _bytes_of(value: int) -> bytearray:
    return bytearray(value.to_bytes(4, sys.byteorder, signed=True))


def _stored(event: Event, key: CellKey, value: int) -> int:
    """The cell's value after a STORE or ATOMIC_ADD with recorded bytes, byte by byte."""
    region, written = event.access, event.written
    if region is None or written is None or (region.memory, region.owner) != key[:2]:
        return value
    cell = _bytes_of(value)
    addend = bytearray(4)
    before = 0
    for start, end in region.ranges:
        for byte in range(4):
            address = key[2] + byte
            if start <= address < end:
                source = written.data[before + address - start]
                if written.op is WriteOp.ASSIGN:
                    cell[byte] = source
                else:
                    addend[byte] = source
        before += end - start
    total = int.from_bytes(cell, sys.byteorder, signed=True)
    if written.op is WriteOp.ADD:
        total += int.from_bytes(addend, sys.byteorder, signed=True)
    return _int32(total)


def step(trace: Trace, state: State, rank: int) -> State:
    """Execute `rank`'s next event, which must be enabled."""
    event = next_event(trace, state, rank)
    assert event is not None and is_enabled(trace, state, rank)
    cells = dict(state.cells)
    if event.kind is EventKind.NOTIFY and _modelled(event):
        assert event.notify is not None
        cell = event.notify.cell
        key = (cell.memory, cell.owner, cell.offset)
        if event.notify.op is NotifyOp.ATOMIC_ADD:
            cells[key] = _int32(cells[key] + event.notify.value)
        else:
            cells[key] = _int32(event.notify.value)
    if event.kind in (EventKind.STORE, EventKind.ATOMIC_ADD):
        for key in cells:
            cells[key] = _stored(event, key, cells[key])
    positions = list(state.positions)
    positions[rank] += 1
    return State(positions=tuple(positions), cells=tuple(sorted(cells.items())))


def replay(trace: Trace, schedule: Schedule) -> State:
    """The state after `schedule`; raises InvalidSchedule if it is not an execution."""
    state = initial_state(trace)
    for ref in schedule:
        if next_event(trace, state, ref.rank) is None or state.positions[ref.rank] != ref.index:
            raise InvalidSchedule(f"{ref} is not rank {ref.rank}'s next event")
        if not is_enabled(trace, state, ref.rank):
            raise InvalidSchedule(f"{ref} is a wait that is not enabled")
        state = step(trace, state, ref.rank)
    return state


def is_stuck(trace: Trace, state: State) -> bool:
    """No rank can move while some rank has not finished."""
    unfinished = [r for r in range(trace.ranks) if next_event(trace, state, r) is not None]
    return bool(unfinished) and not any(is_enabled(trace, state, r) for r in unfinished)


def reachable_states(trace: Trace, *, limit: int = 200_000) -> set[State]:
    start = initial_state(trace)
    seen = {start}
    todo = [start]
    while todo:
        state = todo.pop()
        for rank in range(trace.ranks):
            if is_enabled(trace, state, rank):
                successor = step(trace, state, rank)
                if successor not in seen:
                    seen.add(successor)
                    todo.append(successor)
        if len(seen) > limit:
            raise ValueError(f"trace too large for the brute force ({limit} states)")
    return seen


class BruteForce:
    """The engine questions, answered from the full set of reachable states."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.states = reachable_states(trace)

    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        return any(
            state.positions[first.rank] > first.index
            and state.positions[second.rank] <= second.index
            for state in self.states
        )

    def can_run(self, event: EventRef) -> bool:
        return any(state.positions[event.rank] > event.index for state in self.states)

    def has_stuck_state(self) -> bool:
        return any(is_stuck(self.trace, state) for state in self.states)

    def stuck_waits(self) -> set[tuple[EventRef, ...]]:
        """The blocked waits of every stuck state."""
        return {
            tuple(
                event.ref
                for rank in range(self.trace.ranks)
                if (event := next_event(self.trace, state, rank)) is not None
            )
            for state in self.states
            if is_stuck(self.trace, state)
        }


def cross_rank_pairs(trace: Trace) -> list[tuple[EventRef, EventRef]]:
    events = list(_all_events(trace))
    return [(a.ref, b.ref) for a in events for b in events if a.rank != b.rank]


def _all_events(trace: Trace) -> list[Event]:
    return [event for rank_events in trace.events for event in rank_events]


def _unit_cell_value(trace: Trace, state: State, cell: CellKey) -> int:
    """A unit cell's value as the engines keep it: minus the units held; a dispatch's
    start cell, 1 once its lock is taken."""
    _, rank, offset = cell
    names = unit_names(trace.capacities)
    number = offset // 4
    threads = [n for n, thread in enumerate(trace.threads) if thread.rank == rank]
    if number >= len(names):
        return int(_dispatch_open_of(trace, state, number - len(names)))
    if names[number] == DISPATCH:
        return -sum(
            not _past(trace, state, n, DISPATCH_GIVE)
            for n in threads
            if _holds_lock(trace, state, trace.threads[n].dispatch)
        )
    return -sum(
        _holds_unit(trace, state, n) for n in threads if trace.threads[n].resource == names[number]
    )


def _dispatch_open_of(trace: Trace, state: State, dispatch: int) -> bool:
    """Whether the dispatch's first thread has opened it, the step after its take."""
    return any(_past(trace, state, n, DISPATCH_OPEN) for n in _dispatch_threads(trace, dispatch))
