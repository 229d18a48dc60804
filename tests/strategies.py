"""Hypothesis strategies for random protocols: small `Trace`s the brute force can enumerate.

Memories: a data window (16 bytes per rank), a signal window (cells at offsets 0 and 4,
plus offset 8 that only plain stores touch) and a shared host tensor. Ranks: 1..4,
with few enough events per rank that every interleaving can be enumerated.

`traces()` mixes every event the engines must handle: plain loads/stores on own and
peers' data (overlapping and disjoint ranges), host accesses, ATOMIC_ADD, notifies
(AtomicAdd including negative resets of own cells and adds big enough to wrap a cell
at 32 bits, Set), Ge, Eq and unsigned Ge waits, plain stores into the signal window
one to three cells wide (int32 values, or the bytes of an FP32 1.0), and atomic int32
stores into cells. `monotone_traces()` keeps to the monotone fragment: AtomicAdd
notifies and atomic int32 stores with values >= 0 except negative ones on the
writer's own cells, Ge waits, no plain stores to the signal window.
"""

from __future__ import annotations

import struct

from hypothesis import strategies as st

from racecheck.events import (
    HOST_OWNER,
    AccessMode,
    Capacity,
    Event,
    EventKind,
    Memory,
    MemoryKind,
    Notify,
    NotifyOp,
    RankEnd,
    Region,
    SignalCell,
    SourceLocation,
    Thread,
    Trace,
    Wait,
    WaitCmp,
    WriteOp,
    Written,
    lower_start_edges,
)

DATA = Memory(id=0, kind=MemoryKind.WINDOW, name="data", nbytes=16)
SIGNAL = Memory(id=1, kind=MemoryKind.WINDOW, name="signal", nbytes=12)
HOST = Memory(id=2, kind=MemoryKind.HOST, name="y", nbytes=16)
MEMORIES = (DATA, SIGNAL, HOST)

CELL_OFFSETS = (0, 0, 4)  # mostly one cell per rank, so updates pile up on it
DATA_RANGES = (((0, 8),), ((4, 12),), ((8, 16),), ((0, 4), (8, 12)))
MAX_EVENTS_PER_RANK = {1: 5, 2: 6, 3: 5, 4: 4}

GENERAL_KINDS = (
    "load",
    "store",
    "atomic",
    "host",
    "notify",
    "notify",
    "wait",
    "wait",
    "cell-store",
    "cell-add",
)
MONOTONE_KINDS = (
    "load",
    "store",
    "atomic",
    "host",
    "notify",
    "notify",
    "wait",
    "wait",
    "cell-add",
)
BIG = 1_500_000_000  # two of these wrap an int32 cell negative
FP32_ONE = Written(op=WriteOp.ASSIGN, data=struct.pack("=f", 1.0))  # 0x3F800000 as int32
SIGNAL_RANGES = ((0, 4), (4, 8), (8, 12), (0, 8), (0, 12))


def traces(*, max_ranks: int = 4) -> st.SearchStrategy[Trace]:
    return _traces(monotone=False, max_ranks=max_ranks)


def monotone_traces(*, max_ranks: int = 4) -> st.SearchStrategy[Trace]:
    return _traces(monotone=True, max_ranks=max_ranks)


@st.composite
def _traces(draw: st.DrawFn, *, monotone: bool, max_ranks: int) -> Trace:
    ranks = draw(st.integers(1, max_ranks))
    per_rank = []
    for rank in range(ranks):
        count = draw(st.integers(0, MAX_EVENTS_PER_RANK[ranks]))
        per_rank.append(
            tuple(draw(_events(rank, index, ranks, monotone)) for index in range(count))
        )
    return Trace(
        ranks=ranks,
        events=tuple(per_rank),
        memories=MEMORIES,
        ends=(RankEnd.FINISHED,) * ranks,
    )


def threaded_traces(*, monotone: bool = False) -> st.SearchStrategy[Trace]:
    """Ranks of one or two threads each (four in all at most), the two threads of a rank
    one task or two, a task starting after earlier tasks of its rank at random."""
    return _threaded(monotone=monotone)


def unit_traces(*, monotone: bool = False) -> st.SearchStrategy[Trace]:
    """`threaded_traces` whose threads also hold units: a core of their rank (one or two
    per rank) and a rank's dispatch lock (each task in one of two dispatches, or none)."""
    return _threaded(monotone=monotone, units=True)


@st.composite
def _threaded(draw: st.DrawFn, *, monotone: bool, units: bool = False) -> Trace:
    devices = draw(st.integers(1, 2 if units else 3))  # units: threads share a rank more
    threads: list[Thread] = []
    for device in range(devices):
        most = 3 if units and devices == 1 else 2
        count = draw(st.integers(1, most if len(threads) + (devices - device) < 4 else 1))
        shared = count == 2 and draw(st.integers(0, 2)) == 0  # one task of two threads
        earlier = sorted({thread.task for thread in threads if thread.rank == device})
        for number in range(count):
            task = len(threads) if not (shared and number == 1) else threads[-1].task
            if task != len(threads):
                after = threads[-1].after
            else:
                after = tuple(
                    sorted(draw(st.sets(st.sampled_from(earlier)) if earlier else st.just(set())))
                )
            if task != len(threads):
                dispatch = threads[-1].dispatch
            else:
                dispatch = (
                    draw(st.sampled_from((-1, 2 * device, 2 * device + 1, 2 * device + 1)))
                    if units
                    else -1
                )
            threads.append(
                Thread(
                    rank=device,
                    name=f"thread {len(threads)}",
                    task=task,
                    task_name=f"t{task}",
                    after=after,
                    resource="core" if units and draw(st.integers(0, 3)) else "",
                    dispatch=dispatch,
                )
            )
            earlier = sorted({thread.task for thread in threads if thread.rank == device})
    size = {1: 5, 2: 4, 3: 3, 4: 2}[len(threads)]
    bodies = [
        tuple(
            draw(_events(number, index, devices, monotone, device=thread.rank))
            for index in range(draw(st.integers(0, size)))
        )
        for number, thread in enumerate(threads)
    ]
    at = SourceLocation(file="gen.py", line=1, text="task")
    capacities = tuple(
        Capacity(rank=device, resource="core", units=draw(st.sampled_from((1, 1, 2))))
        for device in range(devices)
        if units
    )
    events, memories = lower_start_edges(tuple(threads), bodies, MEMORIES, at, capacities)
    return Trace(
        ranks=len(threads),
        events=events,
        memories=memories,
        ends=(RankEnd.FINISHED,) * len(threads),
        threads=tuple(threads),
        capacities=capacities,
    )


@st.composite
def _events(
    draw: st.DrawFn, rank: int, index: int, ranks: int, monotone: bool, device: int | None = None
) -> Event:
    """An event of sequence `rank`, which runs on `device` (the same number by default)
    of `ranks` devices."""
    kind = draw(st.sampled_from(MONOTONE_KINDS if monotone else GENERAL_KINDS))
    location = SourceLocation(file="gen.py", line=100 * rank + index + 1, text=kind)
    base = {"rank": rank, "index": index, "location": location, "label": kind}
    rank = rank if device is None else device
    peer = draw(st.integers(0, ranks - 1))
    if kind in ("load", "store", "atomic"):
        region = Region(memory=DATA.id, owner=peer, ranges=draw(st.sampled_from(DATA_RANGES)))
        event_kind, mode = {
            "load": (EventKind.LOAD, AccessMode.READ),
            "store": (EventKind.STORE, AccessMode.WRITE),
            "atomic": (EventKind.ATOMIC_ADD, AccessMode.ATOMIC),
        }[kind]
        written = _data_written(kind, region)
        return Event(kind=event_kind, access=region, mode=mode, written=written, **base)
    if kind == "host":
        region = Region(memory=HOST.id, owner=HOST_OWNER, ranges=draw(st.sampled_from(DATA_RANGES)))
        write = draw(st.booleans())
        return Event(
            kind=EventKind.STORE if write else EventKind.LOAD,
            access=region,
            mode=AccessMode.WRITE if write else AccessMode.READ,
            **base,
        )
    if kind == "notify":
        cell = _cell(peer, draw(st.sampled_from(CELL_OFFSETS)))
        notify = draw(_notifies(cell, own=peer == rank, monotone=monotone))
        return Event(
            kind=EventKind.NOTIFY,
            access=_cell_region(cell),
            mode=AccessMode.ATOMIC,
            notify=notify,
            **base,
        )
    if kind == "wait":
        cell = _cell(rank, draw(st.sampled_from(CELL_OFFSETS)))
        cmp = WaitCmp.GE if monotone else draw(st.sampled_from(WaitCmp))
        thresholds = (0, 1, 1, 2, -1) if cmp is WaitCmp.GE_UNSIGNED else (0, 1, 1, 1, 2)
        expected = draw(st.sampled_from(thresholds))
        return Event(
            kind=EventKind.WAIT,
            access=_cell_region(cell),
            mode=AccessMode.ATOMIC,
            wait=Wait(cell=cell, cmp=cmp, expected=expected),
            **base,
        )
    start, end = draw(st.sampled_from(SIGNAL_RANGES))
    region = Region(memory=SIGNAL.id, owner=peer, ranges=((start, end),))
    if kind == "cell-add":
        amounts = (0, 1, 1, 2, -1) if peer == rank else (0, 1, 1, 2)
        if not monotone:
            amounts += (BIG,)
        values = [draw(st.sampled_from(amounts)) for _ in range(start, end, 4)]
        return Event(
            kind=EventKind.ATOMIC_ADD,
            access=region,
            mode=AccessMode.ATOMIC,
            written=Written.int32s(WriteOp.ADD, values),
            **base,
        )
    if end - start == 4 and draw(st.integers(0, 3)) == 0:
        written = FP32_ONE
    else:
        written = Written.int32s(
            WriteOp.ASSIGN, [draw(st.integers(0, 2)) for _ in range(start, end, 4)]
        )
    return Event(
        kind=EventKind.STORE, access=region, mode=AccessMode.WRITE, written=written, **base
    )


def _data_written(kind: str, region: Region) -> Written | None:
    """Data writes carry their bytes as the co-simulation records them (no cell is there)."""
    words = region.nbytes // 4
    if kind == "store":
        return Written.int32s(WriteOp.ASSIGN, [1] * words)
    if kind == "atomic":
        return Written(op=WriteOp.INEXACT)
    return None


@st.composite
def _notifies(draw: st.DrawFn, cell: SignalCell, *, own: bool, monotone: bool) -> Notify:
    op = NotifyOp.ATOMIC_ADD if monotone else draw(st.sampled_from(NotifyOp))
    if op is NotifyOp.SET:
        values: tuple[int, ...] = (0, 1, 2)
    elif own:
        values = (0, 1, 1, 2, -1, -2)
    else:
        values = (0, 1, 1, 2)
    if op is NotifyOp.ATOMIC_ADD and not monotone:
        values += (BIG,)
    return Notify(cell=cell, op=op, value=draw(st.sampled_from(values)))


def _cell(owner: int, offset: int) -> SignalCell:
    return SignalCell(memory=SIGNAL.id, owner=owner, offset=offset, index=(offset // 4, 0))


def _cell_region(cell: SignalCell) -> Region:
    return Region(memory=cell.memory, owner=cell.owner, ranges=((cell.offset, cell.offset + 4),))
