"""An oracle that answers only until `--timeout`: every question the analysis asks past
the deadline raises `Overtime` naming the events it was about, so a quadratic pair
search cannot outlive `--timeout`."""

from __future__ import annotations

from racecheck.clock import Overtime, passed
from racecheck.engines.base import OrderOracle
from racecheck.events import EventRef, Schedule, Stuck, Trace

ANALYSIS = "the analysis asked which events can run before which"


class DeadlineOracle:
    def __init__(self, oracle: OrderOracle, deadline: float, trace: Trace | None = None) -> None:
        self.oracle = oracle
        self.deadline = deadline
        self.trace = trace

    def _check(self, first: EventRef | None = None, second: EventRef | None = None) -> None:
        if not passed(self.deadline):
            return
        if first is None or self.trace is None:
            raise Overtime(ANALYSIS)
        location = self.trace.event(first).location
        about = "" if second is None else f" before rank {second.rank}'s event at line"
        about += "" if second is None else f" {self.trace.event(second).location.line}"
        raise Overtime(f"{ANALYSIS} (whether rank {first.rank}'s event can run{about})", location)

    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        self._check(first, second)
        return self.oracle.can_precede(first, second)

    def witness(self, first: EventRef, second: EventRef) -> Schedule:
        self._check(first, second)
        return self.oracle.witness(first, second)

    def can_run(self, event: EventRef) -> bool:
        self._check(event)
        return self.oracle.can_run(event)

    def stuck(self) -> Stuck | None:
        self._check()
        return self.oracle.stuck()
