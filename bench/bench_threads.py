"""Benchmark the engines on traces of many threads per rank, built as traces (in process).

    python bench/bench_threads.py                # every row, 3 repeats, medians
    PYTHONPATH=/path/to/other/checkout python bench/bench_threads.py --no-units

Rows: a pypto-lib-like SPMD dispatch at P ranks: each rank runs `blocks` threads
(`block b of dispatch_push`: store a slot into rank b mod P's window, notify its cell),
a `dispatch_wait` task spinning until every block aimed at it has notified, and a
`dispatch_read` task started after it that reads the slots (64 blocks at P = 16 is
1,056 threads). With `--cores N` rows (not with `--no-units`, which runs on code that
has no units) the waiters hold cores too. Each row decides the trace with one engine
(`prepare`, then `find_hazards`) and reports the median seconds of `--repeats` runs
and the finding kinds, so one script measures two checkouts side by side.

Program rows check bench/programs/spmd_push_64.py end to end (`racecheck.verify`): 64
`pl.spmd` blocks per rank at P=16 that push and notify, a wait and a read, at the
default cores and at 64; they measure whatever the co-simulation makes of the blocks
(one after another and `unknown` while blocks are not threads).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from racecheck.analysis import find_hazards
from racecheck.engines import prepare
from racecheck.errors import EngineUnknown
from racecheck.events import (
    AccessMode,
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
    lower_start_edges,
    union_ranges,
)
from racecheck.options import EngineChoice

SLOT = 64  # bytes a block sends


def spmd_dispatch(ranks: int, blocks: int, cores: int | None = None) -> Trace:
    """The trace of the module docstring; `cores` None: no capacities at all."""
    data = Memory(id=0, kind=MemoryKind.WINDOW, name="recv", nbytes=SLOT * blocks * ranks)
    signal = Memory(id=1, kind=MemoryKind.WINDOW, name="signal", nbytes=4)
    threads: list[Thread] = []
    bodies: list[list[Event]] = []

    def add(thread: Thread, events: Callable[[int], list[Event]]) -> None:
        threads.append(thread)
        bodies.append(events(len(threads) - 1))

    for rank in range(ranks):
        for block in range(blocks):
            peer = block % ranks
            slot = (rank * blocks + block) * SLOT
            name = f"block {block} of dispatch_push"
            task = len(threads)
            add(
                Thread(rank=rank, name=name, task=task, task_name="dispatch_push"),
                lambda n, peer=peer, slot=slot: [
                    _store(n, 0, data, peer, slot, 10),
                    _notify(n, 1, signal, peer, 11),
                ],
            )
        arriving = sum(1 for r in range(ranks) for b in range(blocks) if b % ranks == rank)
        wait_task = len(threads)
        add(
            Thread(rank=rank, name="task dispatch_wait", task=wait_task, task_name="dispatch_wait"),
            lambda n, rank=rank, arriving=arriving: [_wait(n, 0, signal, rank, arriving, 20)],
        )
        add(
            Thread(
                rank=rank,
                name="task dispatch_read",
                task=len(threads),
                task_name="dispatch_read",
                after=(wait_task,),
            ),
            lambda n, rank=rank: [_load(n, 0, data, rank, _slots_to(rank, ranks, blocks), 30)],
        )
    at = SourceLocation(file="bench.py", line=1, text="tasks")
    extra: dict[str, Any] = {}
    if cores is not None:
        from racecheck.events import core_capacities

        extra["capacities"] = core_capacities(ranks, cores)
    events, memories = lower_start_edges(
        tuple(threads), bodies, (data, signal), at, *extra.values()
    )
    return Trace(
        ranks=len(threads),
        events=events,
        memories=memories,
        ends=(RankEnd.FINISHED,) * len(threads),
        threads=tuple(threads),
        **extra,
    )


def _where(line: int) -> SourceLocation:
    return SourceLocation(file="bench.py", line=line, text=f"line {line}")


def _store(n: int, index: int, memory: Memory, owner: int, start: int, line: int) -> Event:
    region = Region(memory=memory.id, owner=owner, ranges=((start, start + SLOT),))
    return Event(
        rank=n,
        index=index,
        kind=EventKind.STORE,
        access=region,
        mode=AccessMode.WRITE,
        location=_where(line),
    )


def _slots_to(peer: int, ranks: int, blocks: int) -> tuple[tuple[int, int], ...]:
    """The bytes of `peer`'s window that blocks write: one slot per block aimed at it."""
    starts = [(r * blocks + b) * SLOT for r in range(ranks) for b in range(blocks)]
    aimed = [
        s
        for s, (r, b) in zip(
            starts, ((r, b) for r in range(ranks) for b in range(blocks)), strict=True
        )
        if b % ranks == peer
    ]
    return union_ranges([(start, start + SLOT) for start in aimed])


def _load(
    n: int, index: int, memory: Memory, owner: int, ranges: tuple[tuple[int, int], ...], line: int
) -> Event:
    region = Region(memory=memory.id, owner=owner, ranges=ranges)
    return Event(
        rank=n,
        index=index,
        kind=EventKind.LOAD,
        access=region,
        mode=AccessMode.READ,
        location=_where(line),
    )


def _cell(memory: Memory, owner: int) -> SignalCell:
    return SignalCell(memory=memory.id, owner=owner, offset=0, index=(0,))


def _notify(n: int, index: int, memory: Memory, owner: int, line: int) -> Event:
    notify = Notify(cell=_cell(memory, owner), op=NotifyOp.ATOMIC_ADD, value=1)
    return _sync(n, index, memory, owner, line, EventKind.NOTIFY, notify=notify)


def _wait(n: int, index: int, memory: Memory, owner: int, expected: int, line: int) -> Event:
    wait = Wait(cell=_cell(memory, owner), cmp=WaitCmp.GE, expected=expected)
    return _sync(n, index, memory, owner, line, EventKind.WAIT, wait=wait)


def _sync(
    n: int, index: int, memory: Memory, owner: int, line: int, kind: EventKind, **sync: Any
) -> Event:
    return Event(
        rank=n,
        index=index,
        kind=kind,
        access=Region(memory=memory.id, owner=owner, ranges=((0, 4),)),
        mode=AccessMode.ATOMIC,
        location=_where(line),
        **sync,
    )


def decide(trace: Trace, engine: str) -> tuple[str, str]:
    """(the engine that answered, the finding kinds or why unknown)."""
    deadline = time.monotonic() + 600
    try:
        name, oracle = prepare(EngineChoice(engine), trace, deadline=deadline)
    except EngineUnknown as unknown:
        return engine, f"unknown: {unknown.reason[:60]}"
    kinds = sorted({hazard.kind.value for hazard in find_hazards(trace, oracle)})
    return name, ",".join(kinds) or "clean"


ROWS = (  # (ranks, blocks, cores, engine)
    (4, 8, None, "explore"),
    (4, 8, None, "auto"),
    (16, 64, None, "auto"),
    (2, 4, 1, "auto"),  # one core, one waiter per rank: the core-starvation deadlock
    (2, 4, 2, "auto"),  # cores counted nowhere (fewer waiters than cores)
    (16, 64, 16, "auto"),
)
"""(16, 16, None, "explore") passes both explore budgets (unknown, about 460 s here)."""

PROGRAM = Path(__file__).resolve().parent / "programs" / "spmd_push_64.py"
PROGRAM_ROWS = (None, 64)  # --cores: the default, and one per block
"""The program rows: bench/programs/spmd_push_64.py at P=16 (module docstring)."""


def check_program(cores: int | None) -> tuple[str, int]:
    """(the verdict and the message or finding kinds, the trace's events)."""
    import racecheck

    given = {} if cores is None else {"cores": cores}
    (result,) = racecheck.verify(str(PROGRAM), ranks=[16], config=False, **given).results
    kinds = sorted({finding.kind.value for finding in result.findings})
    said = result.message[:60] if result.message else ",".join(kinds)
    return f"{result.verdict.value} {said}".strip(), result.events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-units", action="store_true", help="skip the --cores rows")
    args = parser.parse_args()
    print("| P | blocks per rank | threads | cores | engine | answered by | result | median s |")
    print("|---|---|---|---|---|---|---|---|")
    for ranks, blocks, cores, engine in ROWS:
        if cores is not None and args.no_units:
            continue
        trace = spmd_dispatch(ranks, blocks, cores)
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            name, result = decide(trace, engine)
            times.append(time.perf_counter() - start)
        print(
            f"| {ranks} | {blocks} | {trace.ranks} | {cores or '-'} | {engine} | {name} "
            f"| {result} | {statistics.median(times):.2f} |",
            flush=True,
        )
    for cores in PROGRAM_ROWS:
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            result, events = check_program(cores)
            times.append(time.perf_counter() - start)
        print(
            f"| 16 | 64 (pl.spmd program, {events} events) | - | {cores or 'default'} | auto "
            f"| verify | {result} | {statistics.median(times):.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
