"""Short, stable descriptions of events, regions and cells, in the user's names."""

from __future__ import annotations

from racecheck.events import (
    HOST_OWNER,
    Event,
    EventKind,
    Region,
    SignalCell,
    Trace,
    WaitCmp,
)

_RELATIONS = {WaitCmp.GE: ">=", WaitCmp.EQ: "==", WaitCmp.GE_UNSIGNED: ">= (as uint32)"}


def describe_region(region: Region, trace: Trace) -> str:
    memory = trace.memory(region.memory)
    where = memory.name if region.owner == HOST_OWNER else f"{memory.name}[{region.owner}]"
    spans = ", ".join(f"{start}..{end}" for start, end in region.ranges[:3])
    more = f" (+{len(region.ranges) - 3} more)" if len(region.ranges) > 3 else ""
    return f"{where} bytes {spans}{more}"


def describe_cell(cell: SignalCell, trace: Trace) -> str:
    memory = trace.memory(cell.memory)
    index = ", ".join(str(i) for i in cell.index)
    return f"{memory.name}[{cell.owner}][{index}]"


def describe_event(event: Event, trace: Trace) -> str:
    if event.notify is not None:
        notify = event.notify
        sign = "+=" if notify.op.value == "AtomicAdd" else "="
        return f"notify {describe_cell(notify.cell, trace)} {sign} {notify.value}"
    if event.wait is not None:
        wait = event.wait
        relation = _RELATIONS[wait.cmp]
        return f"wait {describe_cell(wait.cell, trace)} {relation} {wait.expected}"
    verb = _VERBS[event.kind]
    label = event.label.rsplit(".", 1)[-1] if event.label else verb
    region = describe_region(event.access, trace) if event.access is not None else ""
    action = label if label == verb else f"{label} ({verb})"
    return f"{action} {region}".rstrip()


_VERBS = {
    EventKind.LOAD: "read",
    EventKind.STORE: "write",
    EventKind.ATOMIC_ADD: "atomic add",
    EventKind.NOTIFY: "notify",
    EventKind.WAIT: "wait",
}
