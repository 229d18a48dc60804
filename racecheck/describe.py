"""The user's name for a signal cell, for reasons given below the report layer (an
engine's refusal); findings are worded in `racecheck.report.phrases`."""

from __future__ import annotations

from racecheck.events import DISPATCH, MemoryKind, SignalCell, Trace, unit_names


def describe_cell(cell: SignalCell, trace: Trace) -> str:
    memory = trace.memory(cell.memory)
    if memory.kind is MemoryKind.TASKS:  # a start edge's cell: not the program's memory
        return f"the end of {describe_task(trace, cell.index[0])}"
    if memory.kind is MemoryKind.UNITS:  # a unit's cell (`lower_start_edges`)
        return describe_unit(cell, trace)
    index = ", ".join(str(i) for i in cell.index)
    return f"{memory.name}[{cell.owner}][{index}]"


def describe_task(trace: Trace, task: int) -> str:
    """`task read_step on rank 1`."""
    for thread in trace.threads:
        if thread.task == task:
            return f"task {thread.task_name} on rank {thread.rank}"
    return f"task {task}"


def describe_unit(cell: SignalCell, trace: Trace) -> str:
    """`a free core of rank 0 (2 cores)`, `the dispatch lock of rank 1`, `the start of
    dispatch 3 on rank 1`."""
    names = unit_names(trace.capacities)
    number = cell.index[0]
    if number >= len(names):
        return f"the start of dispatch {number - len(names)} on rank {cell.owner}"
    if names[number] == DISPATCH:
        return f"the dispatch lock of rank {cell.owner}"
    units = next(
        (c.units for c in trace.capacities if (c.rank, c.resource) == (cell.owner, names[number])),
        0,
    )
    return f"a free {names[number]} of rank {cell.owner} ({units} in all)"
