"""The trace view: each rank's co-simulated events, one per line, for debugging.

Shows what racecheck recorded, not what it concluded: rank, index, kind, the DSL call,
the region or signal cell touched, the notify or wait operands, and the source line.
"""

from __future__ import annotations

from racecheck.events import Event, RankEnd, Region, SignalCell, Trace
from racecheck.findings import Place
from racecheck.report.phrases import describe_place


def render_trace(trace: Trace, *, program: str) -> str:
    rows = [[_event_fields(event, trace) for event in events] for events in trace.events]
    widths = [max(map(len, column)) for column in zip(*(f for r in rows for f in r), strict=True)]
    lines = [f"{program}  P={trace.ranks}  {trace.size} events  repeat={trace.repeat}"]
    for rank, fields_of_rank in enumerate(rows):
        lines.append(f"rank {rank}:{_end_note(trace.ends[rank])}")
        lines += [_aligned(fields, widths) for fields in fields_of_rank]
    lines += [
        f"out of bounds: rank {oob.rank} at {oob.location}: {oob.message}"
        for oob in trace.out_of_bounds
    ]
    return "\n".join(lines) + "\n"


def _aligned(fields: list[str], widths: list[int]) -> str:
    """Every column padded to its width except the last (the source text)."""
    padded = [field.ljust(width) for field, width in zip(fields[:-1], widths, strict=False)]
    return "  " + "  ".join([*padded, fields[-1]])


def _end_note(end: RankEnd) -> str:
    if end is RankEnd.FORCED:
        return "  (a wait was forced past: the tracing run deadlocked)"
    if end is RankEnd.CRASHED:
        return "  (stopped by an out-of-bounds access)"
    return ""


def _event_fields(event: Event, trace: Trace) -> list[str]:
    repeat = f" (round {event.repeat})" if trace.repeat > 1 else ""
    return [
        f"#{event.index}",
        event.kind.value,
        event.label or "-",
        describe_event_target(event, trace),
        f"{event.location}{repeat}",
        event.location.text,
    ]


def describe_event_target(event: Event, trace: Trace) -> str:
    """What the event touches: `rank 1's signal[0,0] AtomicAdd 1`, `rank 2's data bytes 0..64`."""
    if event.notify is not None:
        notify = event.notify
        return f"{_cell(notify.cell, trace)} {notify.op.value} {notify.value}"
    if event.wait is not None:
        wait = event.wait
        return f"{_cell(wait.cell, trace)} {wait.cmp.value} {wait.expected}"
    if event.access is not None:
        return _region(event.access, trace)
    return "-"


def _cell(cell: SignalCell, trace: Trace) -> str:
    name = trace.memory(cell.memory).name
    return describe_place(Place(memory=name, owner=cell.owner, ranges=(), cell=cell.index))


def _region(region: Region, trace: Trace) -> str:
    name = trace.memory(region.memory).name
    return describe_place(Place(memory=name, owner=region.owner, ranges=region.ranges))
