"""The user's name for a signal cell, for reasons given below the report layer (an
engine's refusal); findings are worded in `racecheck.report.phrases`."""

from __future__ import annotations

from racecheck.events import SignalCell, Trace


def describe_cell(cell: SignalCell, trace: Trace) -> str:
    memory = trace.memory(cell.memory)
    index = ", ".join(str(i) for i in cell.index)
    return f"{memory.name}[{cell.owner}][{index}]"
