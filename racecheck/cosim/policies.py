"""Scheduling policies: who runs next at each scheduling point of a co-simulation."""

from __future__ import annotations

import random
from collections.abc import Mapping, Set
from typing import Protocol

from racecheck.events import (
    Event,
    EventRef,
    Schedule,
)


class SchedulePolicy(Protocol):
    """Picks the rank that executes its pending event next.

    `runnable` (ranks whose pending event is enabled, never empty) and `pending`
    (each parked rank's next event) are live views: read them during the call only.
    `current` is the rank that executed last (it may have finished or blocked).
    """

    def choose(
        self, runnable: Set[int], current: int | None, pending: Mapping[int, Event]
    ) -> int: ...


class DefaultPolicy:
    """Keep running the current rank until it blocks or finishes, then the lowest one."""

    def choose(self, runnable: Set[int], current: int | None, pending: Mapping[int, Event]) -> int:
        return current if current is not None and current in runnable else min(runnable)


class RoundRobinPolicy:
    """Switch rank after every event: the most interleaved run, where every rank has
    staged its data before anyone reads far ahead. Used to guess a racy program's
    intended result."""

    def choose(self, runnable: Set[int], current: int | None, pending: Mapping[int, Event]) -> int:
        later = [rank for rank in runnable if current is None or rank > current]
        return min(later) if later else min(runnable)


class RandomPolicy:
    """A uniformly random runnable rank at every step, from a generator of its own: one
    more schedule among all, reproducible from `seed`."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def choose(self, runnable: Set[int], current: int | None, pending: Mapping[int, Event]) -> int:
        return self.random.choice(sorted(runnable))


class ScheduleDivergence(RuntimeError):
    """A replayed schedule does not match what the program does (an internal error)."""


class ReplayPolicy:
    """Execute exactly `schedule`, in order, then continue with `then`."""

    def __init__(self, schedule: Schedule, then: SchedulePolicy | None = None) -> None:
        self.schedule = schedule
        self.then = then or DefaultPolicy()
        self.position = 0

    def choose(self, runnable: Set[int], current: int | None, pending: Mapping[int, Event]) -> int:
        if self.position >= len(self.schedule):
            return self.then.choose(runnable, current, pending)
        ref = self.schedule[self.position]
        next_event = pending.get(ref.rank)
        if next_event is None or next_event.index != ref.index or ref.rank not in runnable:
            found = "finished" if next_event is None else f"at event {next_event.index}"
            raise ScheduleDivergence(
                f"replay step {self.position}: expected rank {ref.rank} event {ref.index} to be "
                f"enabled, but rank {ref.rank} is {found}"
                + ("" if ref.rank in runnable else " and blocked")
            )
        self.position += 1
        return ref.rank


class HoldPolicy:
    """Never execute `held` while any other rank can run; otherwise follow `then`."""

    def __init__(self, held: EventRef, then: SchedulePolicy | None = None) -> None:
        self.held = held
        self.then = then or DefaultPolicy()

    def choose(self, runnable: Set[int], current: int | None, pending: Mapping[int, Event]) -> int:
        rank = self.held.rank
        holding = rank in runnable and pending[rank].index == self.held.index
        if holding and len(runnable) > 1:
            return self.then.choose(runnable - {rank}, current, pending)
        return self.then.choose(runnable, current, pending)
