"""What a summary run recorded (`racecheck.dsl.summary`): its loops and the loads whose
values steered anywhere. A leaf, so device scalars can note what they reveal without
importing the loop machinery."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from racecheck.dsl.symbolic import Expr
from racecheck.events import EventRef, SourceLocation


@dataclass(slots=True, kw_only=True)
class SummarisedLoop:
    """One summarised `pl.range` loop of one rank: where, its bound's form and the
    most iterations any input gives it, the loads its bound came from, the events
    its iterations recorded (indices into the rank's events), and why the summary
    does not hold (empty: it does, as far as the loop itself can tell)."""

    rank: int
    location: SourceLocation
    bound: Expr
    iterations: int
    sources: frozenset[EventRef]
    events: list[int] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)


class _State:
    def __init__(self) -> None:
        self.active = False
        self.loops: list[SummarisedLoop] = []
        self.revealed: set[EventRef] = set()
        self.lock = threading.Lock()


_state = _State()


class summary_run:  # noqa: N801 - used as a context manager, like `open`
    """While active, loops over input-dependent bounds are summarised (this module's
    docstring); on exit, `loops()` and `revealed()` describe what the run did."""

    def __init__(self, active: bool) -> None:
        self.active = active

    def __enter__(self) -> summary_run:
        _state.active = self.active
        _state.loops = []
        _state.revealed = set()
        return self

    def __exit__(self, *exc: object) -> None:
        _state.active = False


def loops() -> tuple[SummarisedLoop, ...]:
    return tuple(_state.loops)


def revealed() -> frozenset[EventRef]:
    """The loads whose values steered anywhere in the summary run (revealed)."""
    return frozenset(_state.revealed)


def note_revealed(sources: frozenset[EventRef]) -> None:
    if _state.active:
        with _state.lock:
            _state.revealed |= sources
