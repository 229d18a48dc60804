"""An oracle that answers only until a deadline: every question the analysis asks past
it raises EngineUnknown, so a quadratic pair search cannot outlive `--timeout`."""

from __future__ import annotations

import time

from racecheck.engines.base import OrderOracle
from racecheck.errors import EngineUnknown
from racecheck.events import EventRef, Schedule, Stuck


class DeadlineOracle:
    def __init__(self, oracle: OrderOracle, deadline: float) -> None:
        self.oracle = oracle
        self.deadline = deadline

    def _check(self) -> None:
        if time.monotonic() > self.deadline:
            raise EngineUnknown("the analysis did not finish within --timeout")

    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        self._check()
        return self.oracle.can_precede(first, second)

    def witness(self, first: EventRef, second: EventRef) -> Schedule:
        self._check()
        return self.oracle.witness(first, second)

    def can_run(self, event: EventRef) -> bool:
        self._check()
        return self.oracle.can_run(event)

    def stuck(self) -> Stuck | None:
        self._check()
        return self.oracle.stuck()
