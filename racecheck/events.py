"""The event record: what one rank did, in program order, as racecheck's stages see it.

Every later stage (happens-before, engines, analysis, reference execution, reports)
reads these frozen records and nothing else from the co-simulation. A trace is fixed
once recorded: engines never re-run user code, they reason over these events.

Vocabulary: a *rank* runs a sequence of *events*; an event may *access* a *region*
(byte ranges of one memory instance) and may be a *notify* or a *wait* on a *signal
cell*. A *schedule* is an interleaving of event references.
"""

from __future__ import annotations

import sys
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import Enum

from racecheck.cells import INT32_MAX as INT32_MAX  # re-exported: cells' rules live in cells
from racecheck.cells import INT32_MIN as INT32_MIN
from racecheck.cells import wait_passes
from racecheck.cells import wrap_int32 as wrap_int32
from racecheck.report.reasons import ReasonCode, reason

HOST_OWNER = -1
"""Owner rank of host tensors: one shared instance, not one per rank."""


class MemoryKind(Enum):
    WINDOW = "window"
    HOST = "host"
    TASKS = "tasks"  # racecheck's own: one completion cell per task, never user memory
    UNITS = "units"  # racecheck's own: free units of a rank's cores and its dispatch lock
    ROUNDS = "rounds"  # racecheck's own: the host's join between calls (--rounds joined)


class AccessMode(Enum):
    READ = "read"
    WRITE = "write"
    ATOMIC = "atomic"  # atomic read-modify-write (AtomicAdd accumulate, notify, wait's read)


class NotifyOp(Enum):
    ATOMIC_ADD = "AtomicAdd"
    SET = "Set"


class WaitCmp(Enum):
    GE = "Ge"
    EQ = "Eq"
    GE_UNSIGNED = "Ge(uint32)"  # defer_wait: both sides compared as uint32 (docs/model.md)

    def holds(self, value: int, expected: int) -> bool:
        return wait_passes(value, expected, self is WaitCmp.EQ, self is WaitCmp.GE_UNSIGNED)


class EventKind(Enum):
    LOAD = "load"  # plain read: pl.load/read, remote_load, the read half of put/get
    STORE = "store"  # plain write: pl.store/write, remote_store, the write half of put/get
    ATOMIC_ADD = "atomic-add"  # remote_store / put with atomic=Add
    NOTIFY = "notify"
    WAIT = "wait"


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceLocation:
    file: str
    line: int
    text: str  # the source line, stripped
    function: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Memory:
    """One allocation: a window buffer (one instance per rank) or a host tensor."""

    id: int
    kind: MemoryKind
    name: str  # the user's variable name where known, e.g. "data_buf" or "y"
    nbytes: int
    manual_dep: bool = False  # `pl.create_tensor(..., manual_dep=True)`: no task edges on it


@dataclass(frozen=True, slots=True, kw_only=True)
class Region:
    """Bytes of one memory instance: sorted, disjoint, non-adjacent [start, end) ranges."""

    memory: int  # Memory.id
    owner: int  # rank owning the instance; HOST_OWNER for host tensors
    ranges: tuple[tuple[int, int], ...]

    def overlaps(self, other: Region) -> bool:
        if self.memory != other.memory or self.owner != other.owner:
            return False
        return bool(intersect_ranges(self.ranges, other.ranges))

    @property
    def nbytes(self) -> int:
        return sum(end - start for start, end in self.ranges)


def intersect_ranges(
    a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    """Intersection of two sorted disjoint range lists, by a merge sweep."""
    if len(a) == 1 and len(b) == 1:  # the common case, without the sweep
        lo = max(a[0][0], b[0][0])
        hi = min(a[0][1], b[0][1])
        return ((lo, hi),) if lo < hi else ()
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def subtract_ranges(
    a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...]:
    """The parts of sorted disjoint ranges `a` not covered by sorted disjoint ranges `b`."""
    out: list[tuple[int, int]] = []
    j = 0
    for start, end in a:
        cursor = start
        while j < len(b) and b[j][1] <= cursor:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cursor:
                out.append((cursor, b[k][0]))
            cursor = max(cursor, b[k][1])
            k += 1
        if cursor < end:
            out.append((cursor, end))
    return tuple(out)


def union_ranges(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sorted, merged union of arbitrary ranges."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


CellKey = tuple[int, int, int]
"""A signal cell's identity: (memory, owner, byte offset)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SignalCell:
    """One INT32 cell of a signal window instance."""

    memory: int
    owner: int
    offset: int  # byte offset of the cell in the buffer
    index: tuple[int, ...]  # element index in the view the program used, for messages

    @property
    def key(self) -> CellKey:
        return (self.memory, self.owner, self.offset)


@dataclass(frozen=True, slots=True, kw_only=True)
class Notify:
    cell: SignalCell
    op: NotifyOp
    value: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Wait:
    cell: SignalCell
    cmp: WaitCmp
    expected: int
    take: int = 0  # added to the cell as the wait passes, in the same step: a unit taken


class WriteOp(Enum):
    """How a write event changes the bytes of its region."""

    ASSIGN = "assign"  # a plain store: `Written.data` holds the bytes it leaves
    ADD = "add"  # an atomic add of 32-bit integers: `Written.data` holds the addends
    INEXACT = "inexact"  # an atomic add of other element types (floats, narrow integers)


@dataclass(frozen=True, slots=True, kw_only=True)
class Written:
    """What a write into a window did to its region's bytes, recorded for signal cells.

    `data` follows the region's ranges in order (len = region.nbytes); b"" for INEXACT.
    """

    op: WriteOp
    data: bytes = b""

    @staticmethod
    def int32s(op: WriteOp, values: Iterable[int]) -> Written:
        """The record of writing (or adding) these int32 values over a region."""
        words = (wrap_int32(value).to_bytes(4, sys.byteorder, signed=True) for value in values)
        return Written(op=op, data=b"".join(words))


class CellOp(Enum):
    SET = "set"  # the cell becomes `value`
    ADD = "add"  # `value` is added, wrapping at 32 bits
    OPAQUE = "opaque"  # no engine models it exactly (a partial-cell write, a float add)


@dataclass(frozen=True, slots=True, kw_only=True)
class CellEffect:
    op: CellOp
    value: int = 0  # an int32


@dataclass(frozen=True, slots=True, kw_only=True)
class EventRef:
    rank: int
    index: int


class Loops(threading.local):
    """The device loops (`pl.range` and its kin) running on this thread, outermost
    first, each as (its variable, the iteration's value): every event made meanwhile
    records them (`Event.loops`), for the witness to name the iteration of each step."""

    def __init__(self) -> None:
        self.stack: tuple[tuple[str, int], ...] = ()

    def current(self) -> tuple[tuple[str, int], ...]:
        return self.stack


LOOPS = Loops()


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One step of one rank. `index` is its position in the rank's event sequence.

    Invariants: NOTIFY carries `notify` and an ATOMIC access of the cell's 4 bytes;
    WAIT carries `wait` and an ATOMIC access of its cell; LOAD/STORE/ATOMIC_ADD carry
    an access with mode READ/WRITE/ATOMIC and no sync. `written` is set for every
    STORE and ATOMIC_ADD into a window: what it did to the bytes of its region, so
    that its effect on any signal cell there is known (`cell_effect`).
    """

    rank: int
    index: int
    kind: EventKind
    access: Region | None
    mode: AccessMode | None
    location: SourceLocation
    notify: Notify | None = None
    wait: Wait | None = None
    written: Written | None = None
    repeat: int = 0  # which --repeat round issued it
    label: str = ""  # the DSL call, e.g. "pld.tile.remote_load" or "pld.tensor.barrier"
    # the device loops it ran in, outermost first: (loop variable, its value) (`Loops`)
    loops: tuple[tuple[str, int], ...] = field(
        default_factory=LOOPS.current, compare=False, repr=False
    )
    # (rank, index), made once: every stage asks for it, many times per event
    ref: EventRef = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ref", EventRef(rank=self.rank, index=self.index))

    @property
    def is_sync(self) -> bool:
        return self.kind is EventKind.NOTIFY or self.kind is EventKind.WAIT

    @property
    def synthetic(self) -> bool:
        """A start edge's wait or a task's completion notify (`lower_start_edges`), not
        an operation of the program."""
        return self.label in SYNTHETIC


class CellIndex:
    """Signal cells by instance and byte offset: the one answer to "which cells do
    these bytes touch" (a superset of the cells an event writes: `cell_effect` decides).
    Cells come back once each, in the order the index was given them."""

    def __init__(self, keys: Iterable[CellKey]) -> None:
        self.order = {key: number for number, key in enumerate(keys)}
        self.offsets: dict[tuple[int, int], list[int]] = {}
        for memory, owner, offset in sorted(self.order):
            self.offsets.setdefault((memory, owner), []).append(offset)

    def touching(self, region: Region | None) -> list[CellKey]:
        if region is None:
            return []
        offsets = self.offsets.get((region.memory, region.owner))
        if not offsets:
            return []
        found = {
            (region.memory, region.owner, offset)
            for start, end in region.ranges
            for offset in offsets[bisect_right(offsets, start - 4) : bisect_left(offsets, end)]
        }
        return sorted(found, key=self.order.__getitem__)


Ranges = tuple[tuple[int, int], ...]


class WriteIndex:
    """Writes by memory instance, in the order given; and the ones that share bytes with
    a region, with those bytes, kept per region: the reads of one cell or row ask for
    the same region again and again."""

    def __init__(self, writes: Iterable[Event]) -> None:
        self.by_instance: dict[tuple[int, int], list[Event]] = {}
        for event in writes:
            assert event.access is not None
            key = (event.access.memory, event.access.owner)
            self.by_instance.setdefault(key, []).append(event)
        self.known: dict[Region, list[tuple[Event, Ranges]]] = {}

    @classmethod
    def of_run(cls, events: Iterable[Iterable[Event]]) -> WriteIndex:
        """The index of the memory writes of a run's events (per rank), in rank and
        program order: a wait only reads its cell, any other access not in READ mode
        writes."""
        return cls(
            event
            for rank in events
            for event in rank
            if event.access is not None
            and event.kind is not EventKind.WAIT
            and event.mode is not AccessMode.READ
        )

    def overlapping(self, region: Region) -> list[tuple[Event, Ranges]]:
        if region not in self.known:
            self.known[region] = self._overlapping(region)
        return self.known[region]

    def _overlapping(self, region: Region) -> list[tuple[Event, Ranges]]:
        if not region.ranges:
            return []
        low, high = region.ranges[0][0], region.ranges[-1][1]
        return [
            (write, shared)
            for write in self.by_instance.get((region.memory, region.owner), ())
            if write.access is not None
            and write.access.ranges
            # sorted ranges: no shared byte outside both spans (a cheap first test)
            and write.access.ranges[0][0] < high
            and low < write.access.ranges[-1][1]
            and (shared := intersect_ranges(write.access.ranges, region.ranges))
        ]


def cell_effect(event: Event, cell: CellKey) -> CellEffect | None:
    """The effect of `event` on the INT32 signal cell `cell`; None if it writes none of
    the cell's 4 bytes. The one definition of "a write to a cell" (docs/model.md)."""
    memory, owner, offset = cell
    if event.wait is not None:
        taken = event.wait.take and event.wait.cell.key == cell
        return CellEffect(op=CellOp.ADD, value=event.wait.take) if taken else None
    if event.notify is not None:
        target = event.notify.cell
        if (target.memory, target.owner) != (memory, owner) or abs(target.offset - offset) >= 4:
            return None
        if target.offset != offset:
            return CellEffect(op=CellOp.OPAQUE)
        op = CellOp.SET if event.notify.op is NotifyOp.SET else CellOp.ADD
        return CellEffect(op=op, value=wrap_int32(event.notify.value))
    region = event.access
    if event.kind not in (EventKind.STORE, EventKind.ATOMIC_ADD) or region is None:
        return None
    if (region.memory, region.owner) != (memory, owner):
        return None
    if event.written is None:  # a write with no record of its bytes is never ignored
        hit = intersect_ranges(region.ranges, ((offset, offset + 4),))
        return CellEffect(op=CellOp.OPAQUE) if hit else None
    return _written_effect(event.written, region.ranges, offset)


def _written_effect(
    written: Written, ranges: tuple[tuple[int, int], ...], offset: int
) -> CellEffect | None:
    before = 0  # bytes of `data` that belong to earlier ranges
    for start, end in ranges:
        if start >= offset + 4:
            return None
        if end > offset:
            inside = start <= offset and offset + 4 <= end
            aligned = written.op is WriteOp.ASSIGN or (offset - start) % 4 == 0
            if not inside or not aligned or written.op is WriteOp.INEXACT:
                return CellEffect(op=CellOp.OPAQUE)
            at = before + offset - start
            value = int.from_bytes(written.data[at : at + 4], sys.byteorder, signed=True)
            return CellEffect(
                op=CellOp.SET if written.op is WriteOp.ASSIGN else CellOp.ADD, value=value
            )
        before += end - start
    return None


class RankEnd(Enum):
    """How a rank's recorded run ended under the tracing schedule."""

    FINISHED = "finished"
    FORCED = "forced"  # a wait was forced past to finish tracing (the tracing run deadlocked)
    CRASHED = "crashed"  # stopped by an out-of-bounds access it could not perform


@dataclass(frozen=True, slots=True, kw_only=True)
class OutOfBounds:
    rank: int
    location: SourceLocation
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Thread:
    """One event sequence of a trace: a task instance of a rank (a kernel call, a `pl.at`
    region, a `pl.submit`), a block of a `pl.spmd`, a lane or a sub-lane. Its events
    run in program order; it starts once every task in `after` has finished, and a
    task finishes when all of its threads have. Threads of one rank share its memory."""

    rank: int  # the device rank it runs on
    name: str  # for the user: "task read_step", "block 3 of dispatch_push"
    task: int  # the task it belongs to (numbered across the trace)
    task_name: str
    after: tuple[int, ...] = ()  # the tasks that must have finished before it starts
    # the unit it holds from its first event to its last: a core (docs/model.md, "Cores"); "" none
    resource: str = "core"
    # the L3 dispatch it belongs to (-1: none), numbered across the trace: a rank runs
    # one at a time (`lower_start_edges`). The dispatch's first thread that starts after
    # no task of its own dispatch takes the rank's lock, so it carries every start edge
    # the dispatch has on tasks of other dispatches (the order the rules allow)
    dispatch: int = -1

    def describe(self) -> str:
        """`rank 1, task read_step`; a rank that is one thread is just `rank 1`."""
        if not self.name:
            return reason(ReasonCode.RANK_ALONE, rank=self.rank)
        return reason(ReasonCode.THREAD_OF_RANK, rank=self.rank, thread=self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Capacity:
    """How many threads of `rank` may hold a unit of `resource` at once (docs/model.md, "Cores")."""

    rank: int
    resource: str
    units: int


DISPATCH = "dispatch"
"""The resource of a rank's dispatch lock: capacity 1, held by a whole dispatch."""
CORE = "core"
"""The resource every thread holds by default: one of its rank's cores (docs/model.md, "Cores")."""


def core_capacities(devices: int, cores: int) -> tuple[Capacity, ...]:
    """`cores` cores on each of `devices` ranks: a rank's cores (docs/model.md, "Cores")."""
    return tuple(Capacity(rank=rank, resource=CORE, units=cores) for rank in range(devices))


@dataclass(frozen=True, slots=True, kw_only=True)
class Trace:
    """The event sequences of one program at one rank count, one per thread.

    Events and refs name their sequence by `rank`, which is the thread's index; its
    device rank is `threads[i].rank`. `ranks` counts the sequences (the threads). A
    trace whose every rank is one thread (`threads` left empty) has thread i on rank i.
    `control_reads` are the loads whose values decided control flow or addresses;
    if none of them races, every execution has these same event sequences.
    """

    ranks: int
    events: tuple[tuple[Event, ...], ...]
    memories: tuple[Memory, ...]
    ends: tuple[RankEnd, ...]
    out_of_bounds: tuple[OutOfBounds, ...] = ()
    control_reads: tuple[EventRef, ...] = ()
    repeat: int = 1
    threads: tuple[Thread, ...] = ()
    capacities: tuple[Capacity, ...] = ()  # as given to `lower_start_edges`

    def __post_init__(self) -> None:
        if not self.threads:
            one_each = tuple(
                Thread(rank=rank, name="", task=rank, task_name="") for rank in range(self.ranks)
            )
            object.__setattr__(self, "threads", one_each)

    def event(self, ref: EventRef) -> Event:
        return self.events[ref.rank][ref.index]

    def device(self, thread: int) -> int:
        """The device rank thread `thread` runs on."""
        return self.threads[thread].rank

    @property
    def devices(self) -> int:
        return max((thread.rank for thread in self.threads), default=-1) + 1

    @property
    def size(self) -> int:
        return sum(len(seq) for seq in self.events)

    def memory(self, memory_id: int) -> Memory:
        return self.memories[memory_id]


Schedule = tuple[EventRef, ...]
"""An interleaving (or a prefix of one): event references in execution order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Stuck:
    """A reachable state in which some rank waits forever."""

    schedule: Schedule  # how to get there
    blocked: tuple[EventRef, ...]  # the waits that can never pass
    cell_values: tuple[tuple[SignalCell, int], ...] = field(default=())


TASK_START = "racecheck.task-start"
TASK_END = "racecheck.task-end"
UNIT_TAKE = "racecheck.unit-take"  # a thread takes a unit (a core) as it starts
UNIT_GIVE = "racecheck.unit-give"  # and gives it back as it ends
DISPATCH_TAKE = "racecheck.dispatch-take"  # a dispatch's first thread takes the rank's lock
DISPATCH_OPEN = "racecheck.dispatch-open"  # and lets the dispatch's other threads start
DISPATCH_ENTER = "racecheck.dispatch-enter"  # another thread of the dispatch starts
DISPATCH_GIVE = "racecheck.dispatch-give"  # each thread of the dispatch gives its share back
HOST_JOIN = "racecheck.host-join"  # a rank ended a call (`racecheck.cosim.rounds`)
HOST_JOIN_WAIT = "racecheck.host-join-wait"  # and waits for every rank to end it
SYNTHETIC = frozenset(
    (TASK_START, TASK_END, UNIT_TAKE, UNIT_GIVE, DISPATCH_TAKE, DISPATCH_OPEN)
    + (DISPATCH_ENTER, DISPATCH_GIVE, HOST_JOIN, HOST_JOIN_WAIT)
)
QUIET = frozenset((TASK_END, UNIT_GIVE, DISPATCH_GIVE, DISPATCH_OPEN, HOST_JOIN))
"""Synthetic notifies a witness leaves out: always enabled, they explain nothing."""


def tasks_memory(memory_id: int, tasks: int) -> Memory:
    """The memory of the tasks' completion cells (`lower_start_edges`)."""
    return Memory(id=memory_id, kind=MemoryKind.TASKS, name="tasks", nbytes=4 * max(tasks, 1))


def completion_cell(memory_id: int, task: int, rank: int) -> SignalCell:
    """Task `task`'s completion cell: how many of its threads have finished."""
    return SignalCell(memory=memory_id, owner=rank, offset=4 * task, index=(task,))


def start_wait(
    thread: int, index: int, cell: SignalCell, threads_of_task: int, location: SourceLocation
) -> Event:
    """A start edge: wait until every thread of the cell's task has finished."""
    return _synthetic_wait(thread, index, cell, threads_of_task, 0, location, TASK_START)


def end_notify(thread: int, index: int, cell: SignalCell, location: SourceLocation) -> Event:
    """The end of a thread whose task others start after: add 1 to its completion cell."""
    return _synthetic_notify(thread, index, cell, 1, location, TASK_END)


def _synthetic_wait(
    thread: int,
    index: int,
    cell: SignalCell,
    expected: int,
    take: int,
    location: SourceLocation,
    label: str,
) -> Event:
    return Event(
        rank=thread,
        index=index,
        kind=EventKind.WAIT,
        access=_cell_bytes(cell),
        mode=AccessMode.ATOMIC,
        location=location,
        wait=Wait(cell=cell, cmp=WaitCmp.GE, expected=expected, take=take),
        label=label,
    )


def _synthetic_notify(
    thread: int, index: int, cell: SignalCell, value: int, location: SourceLocation, label: str
) -> Event:
    return Event(
        rank=thread,
        index=index,
        kind=EventKind.NOTIFY,
        access=_cell_bytes(cell),
        mode=AccessMode.ATOMIC,
        location=location,
        notify=Notify(cell=cell, op=NotifyOp.ATOMIC_ADD, value=value),
        label=label,
    )


def _cell_bytes(cell: SignalCell) -> Region:
    return Region(memory=cell.memory, owner=cell.owner, ranges=((cell.offset, cell.offset + 4),))


def unit_names(capacities: Iterable[Capacity]) -> tuple[str, ...]:
    """The resources of a trace's units memory, in cell order: the dispatch lock last;
    the cells after them are the dispatches' start cells (`lower_start_edges`)."""
    return (*sorted({c.resource for c in capacities} - {DISPATCH}), DISPATCH)


@dataclass(frozen=True, slots=True, kw_only=True)
class Units:
    """Which threads take units, and the cells they count on (`lower_start_edges`)."""

    memory: Memory
    names: tuple[str, ...]
    capacity: dict[tuple[int, str], int]  # binding (rank, resource) pairs only
    locked: frozenset[int]  # dispatches whose rank runs two or more
    dispatch_size: dict[int, int]
    leader: dict[int, int]  # dispatch -> its first thread
    holding: tuple[bool, ...]  # per thread: whether it has events (else it holds no unit)

    def cell(self, rank: int, resource: str) -> SignalCell:
        number = self.names.index(resource)
        return SignalCell(memory=self.memory.id, owner=rank, offset=4 * number, index=(number,))

    def start_cell(self, rank: int, dispatch: int) -> SignalCell:
        number = len(self.names) + dispatch
        return SignalCell(memory=self.memory.id, owner=rank, offset=4 * number, index=(number,))

    def opening(self, number: int, thread: Thread) -> list[tuple[SignalCell, int, int, str]]:
        """The thread's synthetic waits after its start edges: (cell, expected, take, label)."""
        out: list[tuple[SignalCell, int, int, str]] = []
        if thread.dispatch in self.locked:
            if self.leader[thread.dispatch] == number:
                size = self.dispatch_size[thread.dispatch]
                out.append((self.cell(thread.rank, DISPATCH), 0, -size, DISPATCH_TAKE))
            else:
                out.append((self.start_cell(thread.rank, thread.dispatch), 1, 0, DISPATCH_ENTER))
        units = self.capacity.get((thread.rank, thread.resource))
        if units is not None and self.holding[number]:
            out.append((self.cell(thread.rank, thread.resource), 1 - units, -1, UNIT_TAKE))
        return out

    def closing(self, number: int, thread: Thread) -> list[tuple[SignalCell, str]]:
        """Its synthetic notifies (+1 each) at its end, before its task's completion."""
        out: list[tuple[SignalCell, str]] = []
        if (thread.rank, thread.resource) in self.capacity and self.holding[number]:
            out.append((self.cell(thread.rank, thread.resource), UNIT_GIVE))
        if thread.dispatch in self.locked:
            out.append((self.cell(thread.rank, DISPATCH), DISPATCH_GIVE))
        return out

    def start_events(
        self, number: int, thread: Thread, index: int, at: SourceLocation
    ) -> list[Event]:
        """Thread `number`'s unit events after its start edges, from event `index` on:
        its takes, and a dispatch leader's opening of the dispatch to its other threads."""
        out: list[Event] = []
        for cell, expected, take, label in self.opening(number, thread):
            out.append(_synthetic_wait(number, index + len(out), cell, expected, take, at, label))
            if label == DISPATCH_TAKE and self.dispatch_size[thread.dispatch] > 1:
                opened = self.start_cell(thread.rank, thread.dispatch)
                out.append(
                    _synthetic_notify(number, index + len(out), opened, 1, at, DISPATCH_OPEN)
                )
        return out

    def end_events(
        self, number: int, thread: Thread, index: int, at: SourceLocation
    ) -> list[Event]:
        """Its gives (+1 each) at its end, from event `index` on."""
        return [
            _synthetic_notify(number, index + n, cell, 1, at, label)
            for n, (cell, label) in enumerate(self.closing(number, thread))
        ]


def units_of(
    threads: tuple[Thread, ...],
    bodies: list[tuple[Event, ...]],
    capacities: tuple[Capacity, ...],
    memory_id: int,
) -> Units | None:
    """The units that bind: a resource of which a rank has more threads than units and
    at least as many threads that wait in their bodies as units; the dispatch lock of a
    rank with two dispatches or more. None if none binds. With fewer waiters than units
    a unit is always free in a state no thread leaves (a thread that never waits is
    never stuck holding one), so the units hold nobody back for good; the orders they
    rule out are orders a rank with more units runs, so they stay in (reported, never
    proved away), and the threads run unbounded."""
    holders: dict[tuple[int, str], int] = {}
    waiters: dict[tuple[int, str], int] = {}
    for thread, body in zip(threads, bodies, strict=True):
        if any(event.kind is EventKind.WAIT for event in body):
            key = (thread.rank, thread.resource)
            waiters[key] = waiters.get(key, 0) + 1
    dispatches: dict[int, set[int]] = {}
    size: dict[int, int] = {}
    leader: dict[int, int] = {}
    dispatch_of = {thread.task: thread.dispatch for thread in threads}
    for number, thread in enumerate(threads):
        if thread.resource and bodies[number]:  # a thread of no events holds nothing
            key = (thread.rank, thread.resource)
            holders[key] = holders.get(key, 0) + 1
        if thread.dispatch >= 0:
            dispatches.setdefault(thread.rank, set()).add(thread.dispatch)
            size[thread.dispatch] = size.get(thread.dispatch, 0) + 1
            if all(dispatch_of.get(task) != thread.dispatch for task in thread.after):
                leader.setdefault(thread.dispatch, number)  # its first thread of no edge inside
    capacity = {
        (c.rank, c.resource): c.units
        for c in capacities
        if holders.get((c.rank, c.resource), 0) > c.units
        and waiters.get((c.rank, c.resource), 0) >= c.units
    }
    locked = frozenset(d for found in dispatches.values() if len(found) > 1 for d in found)
    if not capacity and not locked:
        return None
    names = unit_names(capacities)
    nbytes = 4 * (len(names) + max(size, default=0) + 1)
    memory = Memory(id=memory_id, kind=MemoryKind.UNITS, name="units", nbytes=nbytes)
    return Units(
        memory=memory,
        names=names,
        capacity=capacity,
        locked=locked,
        dispatch_size=size,
        leader=leader,
        holding=tuple(bool(body) for body in bodies),
    )


def lower_start_edges(
    threads: tuple[Thread, ...],
    bodies: Iterable[Iterable[Event]],
    memories: tuple[Memory, ...],
    at: SourceLocation,
    capacities: tuple[Capacity, ...] = (),
) -> tuple[tuple[tuple[Event, ...], ...], tuple[Memory, ...]]:
    """The one encoding of start edges and units, as events every engine reads already:
    each thread of a task something starts after ends by adding 1 to the task's
    completion cell, and each thread first waits for every task in its `after` to reach
    its number of threads. Then units (`Thread.resource` within `capacities`, and the
    dispatch lock): a cell per (rank, resource) holds minus the units held; a thread
    takes one by a wait that passes while one is free and adds -1 in the same step, and
    adds 1 back at its end. A dispatch's first thread takes the lock for all its
    threads (-size) and opens the dispatch to them; each gives 1 back at its end. A
    resource no rank has more threads of than units costs nothing. Nothing to encode:
    the bodies unchanged, and no memory added."""
    fixed = [tuple(body) for body in bodies]
    if not threads:
        return tuple(fixed), memories
    awaited = {task for thread in threads for task in thread.after}
    memory = tasks_memory(len(memories), max((thread.task for thread in threads), default=0) + 1)
    units = units_of(threads, fixed, capacities, len(memories) + bool(awaited))
    if not awaited and units is None:
        return tuple(fixed), memories
    counts: dict[int, int] = {}
    for thread in threads:
        counts[thread.task] = counts.get(thread.task, 0) + 1
    rank_of = {thread.task: thread.rank for thread in threads}
    out: list[tuple[Event, ...]] = []
    for number, (thread, body) in enumerate(zip(threads, fixed, strict=True)):
        lowered = [
            start_wait(number, n, completion_cell(memory.id, task, rank_of[task]), counts[task], at)
            for n, task in enumerate(thread.after)
        ]
        if units is not None:
            lowered += units.start_events(number, thread, len(lowered), at)
        first = len(lowered)
        lowered += [replace(event, rank=number, index=first + n) for n, event in enumerate(body)]
        if units is not None:
            lowered += units.end_events(number, thread, len(lowered), at)
        if thread.task in awaited:
            cell = completion_cell(memory.id, thread.task, thread.rank)
            lowered.append(end_notify(number, len(lowered), cell, at))
        out.append(tuple(lowered))
    added = ((memory,) if awaited else ()) + ((units.memory,) if units else ())
    return tuple(out), (*memories, *added)
