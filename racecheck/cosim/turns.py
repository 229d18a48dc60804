"""What a rank thread needs of the run it takes turns in: the scheduler as the rank
sees it (`BatonScheduler` provides it), so the rank does not import the scheduler
that creates it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

from racecheck.events import Event, EventRef, Thread, Units

if TYPE_CHECKING:
    from racecheck.cosim.threads import ThreadPlan
    from racecheck.dsl.memory import MemoryState


State = TypeVar("State")


class Turns(Protocol[State]):
    ranks: int
    dims: Mapping[str, int]
    memory: MemoryState
    schedule: list[EventRef]
    control_reads: set[EventRef]
    plan: ThreadPlan | None  # tasks as threads (`racecheck.cosim.threads`), or None
    sequences: dict[int, list[Event]]  # each thread's events, by key
    contexts: dict[int, State]  # each thread's context, by key
    tasks_memory: int  # the tasks' completion cells' memory id, -1 without threads
    units: Units | None  # the dispatch locks and cores its threads take, if any bind
    threads: tuple[Thread, ...]  # the plan's threads, by key (empty without a plan)

    def rekeyed(self, old: int, new: int) -> None:
        """A thread records for key `new` from now on."""
        ...

    def spawn(self, child: State, body: Callable[[], None]) -> None:
        """Start a task's thread running `body`."""
        ...

    def checkpoint(self, state: State, event: Event) -> None:
        """Wait for the baton before `event` runs."""
        ...

    def executed(self, state: State, event: Event) -> None:
        """`event` ran: pass the baton on."""
        ...
