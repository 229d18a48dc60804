"""The one wall clock, and `--timeout`: racecheck's only bound counted in seconds.

Every budget inside racecheck is counted in work (z3 resource units, states, steps,
paths; docs/model.md, "Budgets"), so a file and its options get the same answer on
any machine. `--timeout` bounds one program at one P (`unit`): every long loop reads
`now()` against the unit's deadline (`check`) and, past it, stops with `Overtime`, an
`unknown` naming the stage it cut and the user's line it was on. Tests move the clock
(`time.monotonic`, or `_source`) instead of sleeping.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from racecheck.errors import EngineUnknown
from racecheck.events import SourceLocation
from racecheck.report.reasons import ReasonCode, reason

_source: Callable[[], float] | None = None  # a test's clock; None: `time.monotonic`


def now() -> float:
    """The wall clock, in seconds (`time.monotonic`, unless a test moved it)."""
    return time.monotonic() if _source is None else _source()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Limit:
    deadline: float  # a `now()` value
    seconds: float  # the --timeout it was set from


_UNIT: ContextVar[_Limit | None] = ContextVar("racecheck_unit_limit", default=None)


@contextmanager
def unit(seconds: float) -> Iterator[float]:
    """`--timeout`: one deadline, `seconds` from now, for everything checked inside (one
    program at one P); inside another unit, the outer deadline stands."""
    outer = _UNIT.get()
    if outer is not None:
        yield outer.deadline
        return
    limit = _Limit(deadline=now() + seconds, seconds=seconds)
    token = _UNIT.set(limit)
    try:
        yield limit.deadline
    finally:
        _UNIT.reset(token)


def deadline(seconds: float | None = None) -> float:
    """The deadline in force: the unit's, else `seconds` from now (never, if None)."""
    limit = _UNIT.get()
    if limit is not None:
        return limit.deadline
    return math.inf if seconds is None else now() + seconds


def left(deadline: float) -> float:
    """Seconds until `deadline` (negative once it passed)."""
    return deadline - now()


_OVERTIME = {  # (no --timeout in force, no line): its wording
    (True, True): ReasonCode.OVERTIME,
    (True, False): ReasonCode.OVERTIME_AT,
    (False, True): ReasonCode.OVERTIME_SECONDS,
    (False, False): ReasonCode.OVERTIME_SECONDS_AT,
}


class Overtime(EngineUnknown):
    """`--timeout` passed: `stage` is what racecheck was doing, in the user's terms, and
    `where` the user's line it was on; `events`, how many the co-simulation had traced
    when it was cut (0 if it was not)."""

    def __init__(self, stage: str, where: SourceLocation | None = None, *, events: int = 0) -> None:
        limit = _UNIT.get()
        facts: dict[str, str] = {"stage": stage}
        if limit is not None:
            facts["seconds"] = f"{limit.seconds:g}"
        if where is not None:
            facts["where"], facts["text"] = str(where), where.text
        super().__init__(reason(_OVERTIME[(limit is None, where is None)], **facts))
        self.stage = stage
        self.where = where
        self.events = events


def passed(deadline: float) -> bool:
    return now() > deadline


def check(deadline: float, stage: str, where: SourceLocation | None = None) -> None:
    """Raise `Overtime` once `deadline` has passed (a loop whose stage or line costs a
    lookup to name tests `passed` and raises `Overtime` itself)."""
    if passed(deadline):
        raise Overtime(stage, where)
