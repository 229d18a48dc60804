"""The user's name for a signal cell, for reasons given below the report layer (an
engine's refusal); findings are worded in `racecheck.report.phrases`."""

from __future__ import annotations

from racecheck.events import MemoryKind, SignalCell, Trace


def describe_cell(cell: SignalCell, trace: Trace) -> str:
    memory = trace.memory(cell.memory)
    if memory.kind is MemoryKind.TASKS:  # a start edge's cell: not the program's memory
        return f"the end of {describe_task(trace, cell.index[0])}"
    index = ", ".join(str(i) for i in cell.index)
    return f"{memory.name}[{cell.owner}][{index}]"


def describe_task(trace: Trace, task: int) -> str:
    """`task read_step on rank 1`."""
    for thread in trace.threads:
        if thread.task == task:
            return f"task {thread.task_name} on rank {thread.rank}"
    return f"task {task}"
