"""The tasks of each rank, and the edges PyPTO's runtime orders them by.

A rank's tasks are its kernel calls, `pl.at` regions, `pl.spmd` blocks, builtin phase
tasks and the code a per-device function runs outside any task (`racecheck.dsl.scopes`).
The runtime orders them only by the edges it tracks (docs/model.md): within one
dispatch, RAW and WAW between the storages a task is tagged with (its arguments, with
their declared directions), never WAR; since PyPTO #1683 a window that a task's
`remote_store`, `put`, `get` or notify writes counts as written
(`RuntimeOrder.CURRENT`; `PRE_1683` models the rules before); explicit `deps=` (a
mixed kernel's id orders after both its lanes); no
inferred edges inside `pl.manual_scope()`; a task submitted after orchestration code
starts after it ran. A kernel task that mixes cube ops with communication is followed
by its cube lane (`racecheck.dsl.lanes`), a task nothing orders with it, and a task
that enters `pl.split_aiv` regions (a kernel call, a `pl.at` region, a `pl.spmd`
block, a dispatched kernel) by its AIV sub-lanes after the first, tasks of the same
kind (`sub_lane_spec`); the blocks of one `pl.spmd` are tasks nothing orders with each
other. `ordered_pairs` gives those
edges, from which `racecheck.cosim.threads` makes each task a thread.
A rank's dispatches never overlap, and run in any order that keeps those of one
communication domain in program order and the tag edges, which a later dispatch gets
on what it reads or declares `pl.InOut` (an `pl.Out` argument looks up no producer):
`_dispatch_edge`. Tasks of two dispatches it leaves unordered are unordered here too;
run as threads, each holds its rank's dispatch lock (`racecheck.cosim.threads`), which
keeps the two dispatches apart in whichever order they run.
Rounds of `--repeat` run one after another. A rank records its tasks in a `TaskLog`
as it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from racecheck.conflicts import modes_conflict
from racecheck.dsl.location import UNKNOWN_LOCATION, SourceLocation
from racecheck.dsl.scopes import TaskSpec, TaskTag
from racecheck.dsl.types import Direction
from racecheck.events import (
    AccessMode,
    CellIndex,
    Event,
    Memory,
    MemoryKind,
)
from racecheck.options import RuntimeOrder
from racecheck.report.reasons import Reason, ReasonCode, reason


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRecord:
    """One task as a rank ran it: events [first, end) of the rank's sequence."""

    index: int  # the rank's tasks in program order
    spec: TaskSpec
    first: int
    end: int
    dispatch: int  # which dispatch (counting every --repeat round) ran it
    site: SourceLocation  # the host line of that dispatch
    dispatch_tags: tuple[TaskTag, ...]  # its arguments, as the dispatched function declares
    domains: frozenset[tuple[int, ...]]  # the device sets of that dispatch's windows
    repeat: int
    glue: bool = False  # events of a per-device function outside any task


def waited_cells(events: Sequence[Sequence[Event]]) -> CellIndex:
    """The signal cells some rank's wait reads."""
    return CellIndex(
        dict.fromkeys(
            event.wait.cell.key for rank in events for event in rank if event.wait is not None
        )
    )


Storages = dict[int, frozenset[tuple[int, int]]]
"""Storages a task writes or is tagged with: memory id -> the byte ranges [low, high)
its arguments' views span there; `WHOLE` where racecheck cannot narrow it. PyPTO's
producer lookup is an overlap test over buffer addresses, a region it cannot prove
disjoint counting as overlapping (PyPTO docs/en/user/performance/03-dependencies.md:
75-77): a kernel call's argument views (contiguous, `TaskTag.span`) narrow it. A
`pl.at` region's arguments are the tensors its body names, which PyPTO's compiler may
narrow to the boxes it accesses (src/ir/transforms/auto_derive_task_dependencies_pass.cpp);
racecheck takes the bytes its loads and stores access, the narrowest: an edge it drops
leaves an order in, never one out. A window its communication writes counts whole."""

WHOLE = (0, 1 << 62)


def _written_storages(
    task: TaskRecord, events: Sequence[Event], rules: RuntimeOrder, memories: Sequence[Memory]
) -> Storages:
    tags = () if task.glue else task.spec.tags  # (a glue task's are its dispatch's)
    declared = _spans(tag for tag in tags if tag.direction is not Direction.IN)
    for event in events[task.first : task.end]:
        if event.access is None or event.mode is AccessMode.READ or event.wait is not None:
            continue
        comm = event.label.startswith("pld.")
        if comm and memories[event.access.memory].kind is MemoryKind.WINDOW:
            if rules is RuntimeOrder.CURRENT:  # the window parameter counts as written
                _widen(declared, event.access.memory, _tag_spans(task, event.access.memory))
        elif _by_access(task):  # a region's own stores, by the bytes they write
            _widen(declared, event.access.memory, frozenset(event.access.ranges))
    return _tracked(declared, task, memories)


def _tagged_storages(
    task: TaskRecord, events: Sequence[Event], memories: Sequence[Memory]
) -> Storages:
    if not _by_access(task):
        return _tracked(_spans(task.spec.tags), task, memories)
    tagged: Storages = {}
    for event in events[task.first : task.end]:
        if event.access:
            _widen(tagged, event.access.memory, frozenset(event.access.ranges))
    return _tracked(tagged, task, memories)


def _by_access(task: TaskRecord) -> bool:
    """A `pl.at` region, `pl.spmd` or orchestration code outside any task: tagged with
    the bytes its events access (its body names no argument views)."""
    return task.spec.region or task.glue


def _spans(tags: Iterable[TaskTag]) -> Storages:
    spans: Storages = {}
    for tag in tags:
        _widen(spans, tag.memory, frozenset({tag.span}))
    return spans


def _tag_spans(task: TaskRecord, memory: int) -> frozenset[tuple[int, int]]:
    """The bytes of `memory` the task's arguments span; all of it if none is tagged."""
    return frozenset(tag.span for tag in task.spec.tags if tag.memory == memory) or frozenset(
        {WHOLE}
    )


def _widen(storages: Storages, memory: int, spans: frozenset[tuple[int, int]]) -> None:
    storages[memory] = storages.get(memory, frozenset()) | spans


def _tracked(storages: Storages, task: TaskRecord, memories: Sequence[Memory]) -> Storages:
    untracked = _untracked(task, memories)
    return {memory: spans for memory, spans in storages.items() if memory not in untracked}


def _overlap(first: Storages, second: Storages) -> bool:
    return any(
        low < other_high and other_low < high
        for memory in first.keys() & second.keys()
        for low, high in first[memory]
        for other_low, other_high in second[memory]
    )


def _joined(first: Storages, second: Storages) -> Storages:
    joined = dict(first)
    for memory, spans in second.items():
        _widen(joined, memory, spans)
    return joined


_LOOKED_UP = frozenset({Direction.IN, Direction.INOUT})
"""The directions for which a dispatch looks up the storage's producer; an `Out`
argument only registers the dispatch as its producer (docs/model.md)."""


def _untracked(task: TaskRecord, memories: Sequence[Memory]) -> frozenset[int]:
    """The storages that give `task` no edges: its own `no_dep_args` and `pl.no_dep`
    arguments, and every tensor created with `manual_dep=True`."""
    return frozenset(task.spec.untracked) | {memory.id for memory in memories if memory.manual_dep}


def _edge(
    earlier: TaskRecord,
    later: TaskRecord,
    written: Storages,
    tagged: Storages,
) -> bool:
    if earlier.repeat != later.repeat:
        return True
    if _kernel_of(earlier) == _kernel_of(later):
        return False  # the lanes of one kernel run alongside each other
    if later.spec.group is not None and later.spec.group == earlier.spec.group:
        return False  # so do the blocks of one `pl.spmd`
    if earlier.dispatch != later.dispatch:
        return _dispatch_edge(earlier, later)  # else atomic, in either order (the lock)
    if earlier.glue or _named(earlier, later.spec.deps):
        return True  # a task is submitted after the orchestration code before it ran
    if earlier.spec.manual or later.spec.manual:
        return False
    return _overlap(written, tagged)


def _named(task: TaskRecord, deps: tuple[int, ...]) -> bool:
    """Whether `deps=` names `task`: its own id, or for a lane its kernel's, a task that
    finishes when all its lanes have."""
    return _kernel_of(task) in deps


def _kernel_of(task: TaskRecord) -> int:
    """The task a lane (`racecheck.dsl.lanes`) belongs to; any other task's own index."""
    return task.index if task.spec.lane_of is None else task.spec.lane_of


def ordered_pairs(
    tasks: Sequence[TaskRecord],
    events: Sequence[Event],
    rules: RuntimeOrder,
    memories: Sequence[Memory],
) -> list[list[bool]]:
    """`before[i][j]`: the runtime runs `tasks[j]` after `tasks[i]` (transitively).
    `tasks` are a rank's tasks in the order they ran, program order or another order
    the runtime allows; its edges go from a task to tasks submitted after it."""
    submitted = sorted(range(len(tasks)), key=lambda n: tasks[n].index)
    ranked = [tasks[n] for n in submitted]
    written = [_written_storages(task, events, rules, memories) for task in ranked]
    tagged = [
        _joined(_tagged_storages(task, events, memories), written[n])
        for n, task in enumerate(ranked)
    ]
    _grouped(ranked, written)
    _grouped(ranked, tagged)
    count = len(tasks)
    after = [[False] * count for _ in range(count)]
    for j in range(count):
        for i in range(j):
            if after[i][j] or _edge(ranked[i], ranked[j], written[i], tagged[j]):
                after[i][j] = True
                for k in range(i):
                    if after[k][i]:
                        after[k][j] = True
    before = [[False] * count for _ in range(count)]
    for i, a in enumerate(submitted):
        for j, b in enumerate(submitted):
            before[a][b] = after[i][j]
    return before


def _grouped(tasks: Sequence[TaskRecord], storages: list[Storages]) -> None:
    """The blocks of one `pl.spmd` task, and the lanes of one kernel, are one task to
    the runtime: each gets the storages of them all."""
    union: dict[tuple[bool, int], Storages] = {}
    for task, own in zip(tasks, storages, strict=True):
        key = _group_of(task)
        union[key] = _joined(union.get(key, {}), own)
    for n, task in enumerate(tasks):
        storages[n] = union[_group_of(task)]


def _group_of(task: TaskRecord) -> tuple[bool, int]:
    group = task.spec.group
    return (True, group) if group is not None else (False, _kernel_of(task))


def unsplit_inexact(outside: Iterable[Event], events: Sequence[Sequence[Event]]) -> Reason | None:
    """Why a run with AIV sub-lanes as threads may compute what the device does not:
    of the events a kernel's sub-lane 0 ran outside its `pl.split_aiv` regions
    (`outside`), the first whose count or placement matters, which PyPTO leaves
    undefined whether the other sub-lanes repeat: a notify or wait, any write (a
    store, put or remote_store: repeated, it races with itself, or adds twice), or a
    load (remote_load included) that a write among `events` (the run's) conflicts
    with. None when each is a load of bytes nothing writes, which repeated reads the
    same values."""
    candidates = sorted(outside, key=lambda event: (event.rank, event.index))
    touched = {_instance(event) for event in candidates if event.mode is AccessMode.READ}
    sharing: dict[tuple[int, int] | None, list[Event]] = {}
    for thread in events:
        for event in thread:
            if _instance(event) in touched:
                sharing.setdefault(_instance(event), []).append(event)
    for event in candidates:
        writes = event.mode is not AccessMode.READ
        if writes or event.is_sync or _shared(event, sharing):
            return reason(ReasonCode.SPLIT_AIV_OUTSIDE, line=event.location.line, label=event.label)
    return None


def _instance(event: Event) -> tuple[int, int] | None:
    return None if event.access is None else (event.access.memory, event.access.owner)


def _shared(event: Event, sharing: dict[tuple[int, int] | None, list[Event]]) -> bool:
    """A load that another event's write conflicts with."""
    region = event.access
    return region is not None and any(
        other.ref != event.ref
        and modes_conflict(event.mode, other.mode)
        and other.access is not None
        and region.overlaps(other.access)
        for other in sharing.get(_instance(event), ())
    )


def _dispatch_edge(earlier: TaskRecord, later: TaskRecord) -> bool:
    """Whether the runtime runs the dispatch of `later` after that of `earlier`, an
    earlier one: a later --repeat round, a communication domain both take (its token),
    or a tag edge of the dispatched functions' declared arguments (a reader or `InOut`
    after an earlier writer)."""
    written = {tag.memory for tag in earlier.dispatch_tags if tag.direction is not Direction.IN}
    return (
        earlier.repeat != later.repeat
        or bool(earlier.domains & later.domains)
        or any(tag.memory in written for tag in later.dispatch_tags if tag.direction in _LOOKED_UP)
    )


class TaskLog:
    """The tasks one rank ran, in the order it ran them, and the dispatch running now."""

    def __init__(self) -> None:
        self.records: list[TaskRecord] = []
        self.next_index = 0
        self.dispatch = 0
        self.site = UNKNOWN_LOCATION
        self.dispatch_name = ""
        self.dispatch_tags: tuple[TaskTag, ...] = ()
        self.domains: frozenset[tuple[int, ...]] = frozenset()
        self.repeat = 0
        self.regions: list[tuple[int, TaskSpec, int]] = []
        self.glue_from = 0

    def open(self, events: list[Event]) -> int:
        """A new task's index, after closing the events run outside any task."""
        self.close_glue(events)
        return self._new_index()

    def close_glue(self, events: list[Event], *, always: bool = False) -> None:
        """The events run since the last task, outside any, as one glue task; `always`:
        even when there are none (a dispatched kernel whose AIV sub-lanes are tasks)."""
        if len(events) > self.glue_from or always:
            where = events[self.glue_from].location if len(events) > self.glue_from else self.site
            spec = TaskSpec(name=self.dispatch_name, location=where, tags=self.dispatch_tags)
            self.record(self._new_index(), spec, self.glue_from, events, glue=True)

    def reserve(self) -> None:
        self.next_index += 1

    def _new_index(self) -> int:
        self.next_index += 1
        return self.next_index - 1

    def record(
        self, index: int, spec: TaskSpec, first: int, events: list[Event], *, glue: bool = False
    ) -> None:
        self.records.append(
            TaskRecord(
                index=index,
                spec=spec,
                first=first,
                end=len(events),
                dispatch=self.dispatch,
                site=self.site,
                dispatch_tags=self.dispatch_tags,
                domains=self.domains,
                repeat=self.repeat,
                glue=glue,
            )
        )
        self.glue_from = len(events)


def cube_lane_spec(spec: TaskSpec, index: int) -> TaskSpec:
    return replace(spec, name=f"{spec.name} (cube lane)", lane_of=index)


def sub_lane_spec(spec: TaskSpec, index: int, aiv_id: int, regions: int) -> TaskSpec:
    """AIV sub-lane `aiv_id` of task `index` (a kernel call, a `pl.at` region, a
    `pl.spmd` block, a dispatched kernel), which entered `regions` regions; sub-lane 0
    is the task itself."""
    name = f"{spec.name} (AIV sub-lane {aiv_id})"
    return replace(spec, name=name, lane_of=index, sub_lane=(aiv_id, regions))
