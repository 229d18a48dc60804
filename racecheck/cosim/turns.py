"""What a rank thread needs of the run it takes turns in: the scheduler as the rank
sees it (`BatonScheduler` provides it), so the rank does not import the scheduler
that creates it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

from racecheck.events import Event, EventRef

if TYPE_CHECKING:
    from racecheck.dsl.memory import MemoryState


State = TypeVar("State", contravariant=True)


class Turns(Protocol[State]):
    ranks: int
    dims: Mapping[str, int]
    memory: MemoryState
    schedule: list[EventRef]
    control_reads: set[EventRef]

    def checkpoint(self, state: State, event: Event) -> None:
        """Wait for the baton before `event` runs."""
        ...

    def executed(self, state: State, event: Event) -> None:
        """`event` ran: pass the baton on."""
        ...
