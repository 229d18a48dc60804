"""The trace view on a hand-built two-rank trace."""

from __future__ import annotations

import re

from racecheck.events import (
    HOST_OWNER,
    AccessMode,
    Event,
    EventKind,
    Memory,
    MemoryKind,
    Notify,
    NotifyOp,
    OutOfBounds,
    RankEnd,
    Region,
    SignalCell,
    SourceLocation,
    Trace,
    Wait,
    WaitCmp,
)
from racecheck.report.trace import render_trace

FILE = "ring.py"
MEMORIES = (
    Memory(id=0, kind=MemoryKind.WINDOW, name="data", nbytes=256),
    Memory(id=1, kind=MemoryKind.WINDOW, name="signal", nbytes=8),
    Memory(id=2, kind=MemoryKind.HOST, name="x", nbytes=512),
)


def at(line: int, text: str) -> SourceLocation:
    return SourceLocation(file=FILE, line=line, text=text)


def rank_events(rank: int) -> tuple[Event, ...]:
    peer = 1 - rank
    cell_at_peer = SignalCell(memory=1, owner=peer, offset=4 * rank, index=(rank, 0))
    own_cell = SignalCell(memory=1, owner=rank, offset=4 * peer, index=(peer, 0))
    return (
        Event(
            rank=rank,
            index=0,
            kind=EventKind.LOAD,
            access=Region(memory=2, owner=HOST_OWNER, ranges=((256 * rank, 256 * rank + 256),)),
            mode=AccessMode.READ,
            location=at(10, "local = pl.load(x, [0, 0], [1, 64])"),
            label="pl.load",
        ),
        Event(
            rank=rank,
            index=1,
            kind=EventKind.NOTIFY,
            access=Region(memory=1, owner=peer, ranges=((4 * rank, 4 * rank + 4),)),
            mode=AccessMode.ATOMIC,
            location=at(12, "pld.system.notify(signal, peer=peer, offsets=[me, 0], value=1)"),
            notify=Notify(cell=cell_at_peer, op=NotifyOp.ATOMIC_ADD, value=1),
            label="pld.system.notify",
        ),
        Event(
            rank=rank,
            index=2,
            kind=EventKind.WAIT,
            access=Region(memory=1, owner=rank, ranges=((4 * peer, 4 * peer + 4),)),
            mode=AccessMode.ATOMIC,
            location=at(13, "pld.system.wait(signal, offsets=[src, 0], expected=1)"),
            wait=Wait(cell=own_cell, cmp=WaitCmp.GE, expected=1),
            label="pld.system.wait",
        ),
    )


def test_trace_view_shows_every_event_with_target_and_source() -> None:
    trace = Trace(
        ranks=2,
        events=(rank_events(0), rank_events(1)),
        memories=MEMORIES,
        ends=(RankEnd.FINISHED, RankEnd.FORCED),
        out_of_bounds=(OutOfBounds(rank=1, location=at(20, "bad"), message="peer 2 >= P"),),
    )
    lines = render_trace(trace, program="Ring").splitlines()
    columns = [re.split(r"\s{2,}", line.strip()) for line in lines]
    assert lines[0] == "Ring  P=2  6 events  repeat=1"
    assert lines[1] == "rank 0:"
    assert columns[2] == [
        "#0",
        "load",
        "pl.load",
        "x bytes 0..256",
        f"{FILE}:10",
        "local = pl.load(x, [0, 0], [1, 64])",
    ]
    assert columns[3][1:5] == [
        "notify",
        "pld.system.notify",
        "rank 1's signal[0, 0] AtomicAdd 1",
        f"{FILE}:12",
    ]
    assert columns[4][3] == "rank 0's signal[1, 0] Ge 1"
    assert len({line.index(f"{FILE}:") for line in lines[2:5]}) == 1  # aligned columns
    assert lines[5] == "rank 1:  (a wait was forced past: the tracing run deadlocked)"
    assert lines[-1] == f"out of bounds: rank 1 at {FILE}:20: peer 2 >= P"
