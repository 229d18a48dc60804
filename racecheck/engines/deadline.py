"""An oracle that answers only until `--timeout`: every question the analysis asks past
the deadline raises `Overtime` naming the events it was about, so a quadratic pair
search cannot outlive `--timeout`."""

from __future__ import annotations

from racecheck.clock import Overtime, passed
from racecheck.engines.base import OrderOracle
from racecheck.events import EventRef, Schedule, Stuck, Trace
from racecheck.report.reasons import ReasonCode, reason

ANALYSIS = reason(ReasonCode.STAGE_ANALYSIS_ORDERS)


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
        if second is None:
            raise Overtime(reason(ReasonCode.STAGE_ANALYSIS_EVENT, rank=first.rank), location)
        line = self.trace.event(second).location.line
        asked = reason(
            ReasonCode.STAGE_ANALYSIS_PAIR, rank=first.rank, other=second.rank, line=line
        )
        raise Overtime(asked, location)

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
