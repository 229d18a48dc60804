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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from racecheck.cosim.tasks import TaskRecord, ordered_pairs
from racecheck.events import Event, Memory
from racecheck.options import RuntimeOrder


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadPlan:
    """For each (rank, task index): the task indices of the rank it starts after (the
    direct edges), and its name; `slots` task indices per rank at most."""

    ranks: int
    after: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict)
    names: dict[tuple[int, int], str] = field(default_factory=dict)
    slots: int = 0

    def key(self, rank: int, index: int) -> int:
        return rank + self.ranks * (index + 1)

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


def plan_threads(
    tasks: Sequence[Sequence[TaskRecord]],
    events: Sequence[Sequence[Event]],
    rules: RuntimeOrder,
    memories: Sequence[Memory],
) -> ThreadPlan | None:
    """The plan of a run with tasks as threads, from a run in program order; None when
    no rank has two tasks the runtime leaves unordered (program order is then the only
    order, and the run in it decides)."""
    plan = ThreadPlan(ranks=len(tasks))
    loose = False
    slots = 0
    for rank, records in enumerate(tasks):
        before = ordered_pairs(records, events[rank], rules, memories)
        count = len(records)
        for j, later in enumerate(records):
            direct = [
                records[i].index
                for i in range(count)
                if before[i][j]
                and not any(before[i][k] and before[k][j] for k in range(count) if k not in (i, j))
            ]
            plan.after[(rank, later.index)] = tuple(sorted(direct))
            plan.names[(rank, later.index)] = _named(later, records)
            slots = max(slots, later.index + 1)
            loose = loose or any(not before[i][j] and not before[j][i] for i in range(j) if i != j)
    if not loose:
        return None
    return ThreadPlan(ranks=plan.ranks, after=plan.after, names=plan.names, slots=slots)


def _named(task: TaskRecord, records: Sequence[TaskRecord]) -> str:
    """The thread's name, with its line when another task of the rank has its name."""
    name = f"{task.spec.name}'s code outside its tasks" if task.glue else task.spec.thread_name
    if sum(other.spec.thread_name == name for other in records) > 1:
        return f"{name} (line {task.spec.location.line})"
    return name
