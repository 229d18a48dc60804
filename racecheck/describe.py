"""The user's name for a signal cell, for reasons given below the report layer (an
engine's refusal); findings are worded in `racecheck.report.phrases`."""

from __future__ import annotations

from racecheck.events import (
    DISPATCH,
    DISPATCH_GIVE,
    UNIT_GIVE,
    MemoryKind,
    Schedule,
    SignalCell,
    Trace,
    unit_names,
)
from racecheck.report.reasons import ReasonCode, reason


def describe_cell(cell: SignalCell, trace: Trace) -> str:
    memory = trace.memory(cell.memory)
    if memory.kind is MemoryKind.TASKS:  # a start edge's cell: not the program's memory
        return reason(ReasonCode.CELL_TASK_END, task=describe_task(trace, cell.index[0]))
    if memory.kind is MemoryKind.UNITS:  # a unit's cell (`lower_start_edges`)
        return describe_unit(cell, trace)
    if memory.kind is MemoryKind.ROUNDS:  # --rounds joined (`racecheck.cosim.rounds`)
        return reason(ReasonCode.CELL_HOST_JOIN, call=cell.index[0] + 1)
    index = ", ".join(str(i) for i in cell.index)
    return f"{memory.name}[{cell.owner}][{index}]"


def describe_task(trace: Trace, task: int) -> str:
    """`task read_step on rank 1`, `block 3 of dispatch_push on rank 0`."""
    for thread in trace.threads:
        if thread.task == task:
            name = thread.name or reason(ReasonCode.THREAD_TASK, task=thread.task_name)
            return reason(ReasonCode.THREAD_ON_RANK, thread=name, rank=thread.rank)
    return reason(ReasonCode.THREAD_TASK, task=task)


def task_as_thread(trace: Trace, task: int) -> str:
    """`rank 1, task read_step` as its one thread is named, `rank 0, task dispatch_push`
    for a task of several threads (its blocks or lanes): the task a start edge waits for."""
    threads = [thread for thread in trace.threads if thread.task == task]
    if len(threads) == 1:
        return threads[0].describe()
    task_name = reason(ReasonCode.THREAD_TASK, task=threads[0].task_name)
    return reason(ReasonCode.THREAD_OF_RANK, rank=threads[0].rank, thread=task_name)


def describe_unit(cell: SignalCell, trace: Trace) -> str:
    """`a free core of rank 0 (it has 2)`, `the dispatch lock of rank 1`, `the start of
    dispatch 3 on rank 1`."""
    names = unit_names(trace.capacities)
    number = cell.index[0]
    if number >= len(names):
        dispatch = number - len(names)
        return reason(ReasonCode.UNIT_DISPATCH_START, dispatch=dispatch, rank=cell.owner)
    if names[number] == DISPATCH:
        return reason(ReasonCode.UNIT_DISPATCH_LOCK, rank=cell.owner)
    units = next(
        (c.units for c in trace.capacities if (c.rank, c.resource) == (cell.owner, names[number])),
        0,
    )
    return reason(ReasonCode.UNIT_FREE, unit=names[number], rank=cell.owner, units=units)


def describe_holders(trace: Trace, schedule: Schedule, cell: SignalCell) -> str:
    """`, held by rank 0, task wait_step`: the threads (a dispatch: its first thread)
    holding units of a unit cell after `schedule`, a name several share once with their
    count (`rank 0, task wait_step (16 threads)`), past three the rest counted (`and 13
    more threads`); "" when none does."""
    owing: dict[int, int] = {}  # taking thread -> units still out
    for ref in schedule:
        event = trace.event(ref)
        if event.wait is not None and event.wait.take and event.wait.cell.key == cell.key:
            owing[ref.rank] = -event.wait.take
        elif event.notify is not None and event.notify.cell.key == cell.key:
            if event.label == UNIT_GIVE:
                owing[ref.rank] -= 1
            elif event.label == DISPATCH_GIVE:
                dispatch = trace.threads[ref.rank].dispatch
                taker = next(t for t in owing if trace.threads[t].dispatch == dispatch)
                owing[taker] -= 1
    names = [trace.threads[thread].describe() for thread, out in owing.items() if out > 0]
    counted: list[str] = [
        name
        if names.count(name) == 1
        else reason(ReasonCode.HOLDERS_SHARING, thread=name, count=names.count(name))
        for name in dict.fromkeys(names)
    ]
    if len(counted) > _LISTED_HOLDERS:
        rest = sum(names.count(name) for name in list(dict.fromkeys(names))[_LISTED_HOLDERS:])
        more = (
            reason(ReasonCode.HOLDERS_MORE, count=rest)
            if rest > 1
            else reason(ReasonCode.HOLDERS_ONE_MORE)
        )
        counted = [*counted[:_LISTED_HOLDERS], more]
    return reason(ReasonCode.HELD_BY, holders=" and ".join(counted)) if counted else ""


_LISTED_HOLDERS = 3  # a unit's holders named, then counted (64 blocks would fill a screen)
