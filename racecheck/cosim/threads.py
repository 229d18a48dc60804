"""Tasks as threads: the plan of a run in which every task of a rank is a thread.

A run in program order (`racecheck.cosim.simulate`) records each rank's tasks
(`TaskRecord`) and the events they made; from those, PyPTO's ordering rules
(`racecheck.cosim.tasks.ordered_pairs`: tags, window writes since #1683, `deps=`,
manual scopes, dispatches that never overlap) give each task the tasks it starts
after. When some rank has two tasks the runtime leaves unordered, the program runs
again with every task a thread of its own (`ThreadPlan`), and that run's trace is
the one checked: its threads' start edges are the runtime's edges, and every engine
decides over every order they allow (docs/model.md §1).

A thread's key is `rank + P * (task index + 1)`: the same task gets the same key in
every run (the replay of a witness included), whatever order the ranks and tasks ran
in; key `rank` is the rank's own thread (its orchestration: no events once its tasks
are threads). Keys no task of the rank uses are empty threads.

Every kernel-call task the runtime leaves unordered is a thread (tests/test_threads.py
checks PyPTO #1670 this way).

With `--rounds joined`, the host's join after call k is a thread of each rank too (task
index `ThreadPlan.join_index(k)`, holding no core): it starts after every task of the
rank's call k and the join before it, runs the join's notifies and wait
(`racecheck.cosim.rounds`), and every task of call k + 1 starts after it. The rank's
orchestration goes on to call k + 1 at once, as the host does: its tasks are issued
and wait for the join, not for the orchestration.

Two dispatches of a rank that `racecheck.cosim.tasks._dispatch_edge` leaves unordered
have no start edges between their tasks: each of their threads carries its dispatch
(`Thread.dispatch`), and the run takes and gives the rank's dispatch lock and its cores
(`--cores`) exactly as `racecheck.events.lower_start_edges` encodes them for the
engines (`Units`), so the co-simulated run, the engines and a witness's replay all
run a rank's dispatches one at a time, in whichever order they choose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from racecheck.cosim.tasks import TaskRecord, ordered_pairs
from racecheck.events import (
    CORE,
    HOST_JOIN,
    HOST_JOIN_WAIT,
    Capacity,
    Event,
    Memory,
    Thread,
    Units,
    core_capacities,
    units_of,
)
from racecheck.options import RuntimeOrder


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadPlan:
    """For each (rank, task index): the task indices of the rank it starts after (the
    direct edges), its name, and its dispatch's number across the trace when that
    dispatch holds the rank's dispatch lock; `slots` task indices per rank at most.
    `bodies`: each thread's events in the run in program order (which of them wait
    decides which cores bind), `capacities` the ranks' cores."""

    ranks: int
    after: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict)
    names: dict[tuple[int, int], str] = field(default_factory=dict)
    dispatches: dict[tuple[int, int], int] = field(default_factory=dict)
    # dispatched kernels: a dispatch whose events are one task outside any other
    kernels: frozenset[tuple[int, int]] = frozenset()
    # tasks with AIV sub-lanes (kernel calls, regions, blocks, dispatched kernels): how
    # many, sub-lane 0 (the task itself) included, and the `pl.split_aiv` regions it enters
    sub_lanes: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    slots: int = 0
    bodies: tuple[tuple[Event, ...], ...] = ()
    capacities: tuple[Capacity, ...] = ()
    joins: int = 0  # the host's joins (`--rounds joined`): the last `joins` task indices

    def key(self, rank: int, index: int) -> int:
        return rank + self.ranks * (index + 1)

    def join_index(self, call: int) -> int:
        """The task index of the host's join after call `call` (from 0) on every rank."""
        return self.slots - self.joins + call

    @property
    def threads(self) -> int:
        return self.ranks * (self.slots + 1)

    @property
    def awaited(self) -> frozenset[tuple[int, int]]:
        return frozenset((rank, task) for (rank, _), tasks in self.after.items() for task in tasks)

    def starts(self, rank: int, index: int) -> tuple[int, ...] | None:
        """The tasks it starts after; None when the plan has no such task (the run
        diverged from the one it was made from)."""
        return self.after.get((rank, index))

    def records(self) -> tuple[Thread, ...]:
        """Thread `key` of the plan: a task of rank `key % P`, or the rank's own."""
        threads = []
        for key in range(self.threads):
            rank, slot = key % self.ranks, key // self.ranks
            task = (rank, slot - 1)
            name = self.names.get(task, "") if slot else ""
            threads.append(
                Thread(
                    rank=rank,
                    name=name,
                    task=key,
                    task_name=name.removeprefix("task "),
                    after=tuple(self.key(rank, index) for index in self.after.get(task, ())),
                    resource="" if slot > self.slots - self.joins else CORE,
                    dispatch=self.dispatches.get(task, -1) if slot else -1,
                )
            )
        return tuple(threads)

    def units(self, memory_id: int) -> Units | None:
        """The units the run takes and gives (the engines' `lower_start_edges` encoding),
        their cells in memory `memory_id`; None when none binds."""
        return units_of(self.records(), list(self.bodies), self.capacities, memory_id)


def plan_threads(
    tasks: Sequence[Sequence[TaskRecord]],
    events: Sequence[Sequence[Event]],
    rules: RuntimeOrder,
    memories: Sequence[Memory],
    cores: int,
    joins: int = 0,
) -> ThreadPlan | None:
    """The plan of a run with tasks as threads, from a run in program order, on ranks of
    `cores` cores each, with the host's `joins` joins between calls; None when no rank
    has two tasks the runtime leaves unordered (program order is then the only order,
    and the run in it decides)."""
    ranks = len(tasks)
    after: dict[tuple[int, int], tuple[int, ...]] = {}
    names: dict[tuple[int, int], str] = {}
    dispatches: dict[tuple[int, int], int] = {}
    loose = False
    slots = max((record.index + 1 for records in tasks for record in records), default=0)
    # the joins' indices come after the last task's and its cube lane's (reserved even
    # when it has none: `RankContext.call_task`)
    first_join = slots + 1
    for rank, records in enumerate(tasks):
        before = ordered_pairs(records, events[rank], rules, memories)
        count = len(records)
        loose = loose or any(
            not before[i][j] and not before[j][i] for j in range(count) for i in range(j)
        )
        for record in _locked(records, before):
            dispatches[(rank, record.index)] = rank + ranks * (record.dispatch - 1)
        order = _with_joins(before, [record.repeat for record in records], joins)
        indices = [record.index for record in records] + [first_join + k for k in range(joins)]
        for index, direct in zip(indices, _direct(order, indices), strict=True):
            after[(rank, index)] = direct
        for record in records:
            names[(rank, record.index)] = _named(record, records)
        for k in range(joins):
            names[(rank, first_join + k)] = f"host join after call {k + 1}"
    if not loose:
        return None
    kernels = frozenset(
        (rank, record.index)
        for rank, records in enumerate(tasks)
        for record in records
        if record.glue and _whole_dispatch(record, records)
    )
    sub_lanes = {
        (rank, record.spec.lane_of): (record.spec.sub_lane[0] + 1, record.spec.sub_lane[1])
        for rank, records in enumerate(tasks)
        for record in records
        if record.spec.lane_of is not None and record.spec.sub_lane is not None
    }
    plan = ThreadPlan(
        ranks=ranks,
        after=after,
        names=names,
        dispatches=dispatches,
        kernels=kernels,
        sub_lanes=sub_lanes,
        slots=first_join + joins if joins else slots,
        joins=joins,
    )
    bodies: list[tuple[Event, ...]] = [()] * plan.threads
    for rank, records in enumerate(tasks):
        for record in records:
            bodies[plan.key(rank, record.index)] = tuple(events[rank][record.first : record.end])
        for event in events[rank]:
            if event.label in (HOST_JOIN, HOST_JOIN_WAIT):
                key = plan.key(rank, plan.join_index(event.repeat))
                bodies[key] = (*bodies[key], event)
    return replace(plan, bodies=tuple(bodies), capacities=core_capacities(ranks, cores))


def _with_joins(before: list[list[bool]], calls: Sequence[int], joins: int) -> list[list[bool]]:
    """`before` over a rank's tasks (of calls `calls`) and then the host's joins: the
    join after call k follows every task of calls up to k and the joins before it, and
    precedes every task of a later call."""
    count = len(calls)
    order = [row + [calls[i] <= k for k in range(joins)] for i, row in enumerate(before)]
    for k in range(joins):
        order.append([calls[j] > k for j in range(count)] + [k < m for m in range(joins)])
    return order


def _direct(order: list[list[bool]], indices: Sequence[int]) -> list[tuple[int, ...]]:
    """For each node, the indices of the nodes it starts right after: those before it
    with no other node between (`order` is transitive). As bit sets: node i is right
    before j when it is before j and none of its successors is."""
    count = len(order)
    before = [sum(1 << i for i in range(count) if order[i][j]) for j in range(count)]
    later = [sum(1 << k for k in range(count) if order[i][k]) for i in range(count)]
    return [
        tuple(
            sorted(
                indices[i] for i in range(count) if before[j] >> i & 1 and not later[i] & before[j]
            )
        )
        for j in range(count)
    ]


def _named(task: TaskRecord, records: Sequence[TaskRecord]) -> str:
    """The thread's name; one that another task of the rank has too says which it is:
    its dispatch when that differs (`swap_step (dispatch 2, line 66)`: its host line),
    its line when that differs (`wait (line 40)`), both when both do (`wait (line 40,
    dispatch 2 at line 66)`)."""
    name = (
        f"{task.spec.name}'s code outside its tasks"
        if task.glue and not _whole_dispatch(task, records)
        else task.spec.thread_name
    )
    namesakes = [other for other in records if other.spec.thread_name == name]
    if len(namesakes) <= 1:
        return name
    line = task.spec.location.line
    if all(other.dispatch == task.dispatch for other in namesakes):
        return f"{name} (line {line})"
    if sum(other.dispatch == task.dispatch for other in namesakes) == 1:
        return f"{name} (dispatch {task.dispatch}, line {task.site.line})"
    return f"{name} (line {line}, dispatch {task.dispatch} at line {task.site.line})"


def _whole_dispatch(record: TaskRecord, records: Sequence[TaskRecord]) -> bool:
    """Whether the record is all its dispatch ran but its AIV sub-lanes: a dispatched
    kernel."""
    return all(
        other is record or other.dispatch != record.dispatch or other.spec.lane_of == record.index
        for other in records
    )


def _locked(records: Sequence[TaskRecord], before: list[list[bool]]) -> list[TaskRecord]:
    """The tasks of the dispatches that hold the rank's dispatch lock: those the runtime
    leaves unordered with another dispatch of the rank (the others run alone anyway)."""
    loose: set[int] = set()
    for j, later in enumerate(records):
        for i, earlier in enumerate(records[:j]):
            if earlier.dispatch != later.dispatch and not (before[i][j] or before[j][i]):
                loose.update((earlier.dispatch, later.dispatch))
    return [record for record in records if record.dispatch in loose]
