"""What a summary run recorded (`racecheck.dsl.summary`): its loops, its branches taken
for every input with their slot counters, the addresses widened over a counter's
values, and the loads whose values steered anywhere. A leaf, so device scalars can note
what they reveal without importing the loop machinery."""

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


@dataclass(slots=True, kw_only=True)
class ForcedBranch:
    """One `if` on input data of one rank, taken in a summary run whatever its condition
    (`racecheck.dsl.summary.branch`): where, the names its body counts with (slot
    counters), and why taking it does not stand for every input (empty: it does)."""

    rank: int
    location: SourceLocation
    counters: tuple[str, ...]
    sources: frozenset[EventRef]  # the loads its condition was computed from
    broken: list[str] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class Widening:
    """A value computed from a slot counter, revealed in a summary run: it takes every
    value in `span` (its form's bounds; None: not bounded) over the inputs. Used as an
    offset of an access, the access covers all of them (`consumed`); used anywhere else
    the summary does not stand for every input."""

    location: SourceLocation
    span: tuple[int, int] | None
    consumed: bool = False


class Offsets(list[int]):
    """Offsets of an access in a summary run, some of which (`spans`, by axis) take
    every value of a widening's span: the access covers the box of all of them."""

    spans: dict[int, Widening]

    def __init__(self, values: list[int], spans: dict[int, Widening]) -> None:
        super().__init__(values)
        self.spans = spans


def covering(offsets: object, extent: list[int]) -> tuple[list[int], list[int]] | None:
    """The box (offsets, extent) an access at `offsets` covers over its widened axes
    (None: none is widened); each widening used is consumed."""
    spans = getattr(offsets, "spans", None)
    if not spans:
        return None
    low, size = list(offsets), list(extent)  # type: ignore[call-overload]
    for axis, widening in spans.items():
        assert widening.span is not None
        low[axis] = widening.span[0]
        size[axis] = extent[axis] + widening.span[1] - widening.span[0]
        widening.consumed = True
    return low, size


class _State:
    def __init__(self) -> None:
        self.active = False
        self.loops: list[SummarisedLoop] = []
        self.branches: list[ForcedBranch] = []
        self.widenings: list[Widening] = []
        self.widened_loads: set[EventRef] = set()
        self.revealed: set[EventRef] = set()
        self.lock = threading.Lock()
        self.local = threading.local()  # per thread: `pending` widenings, `open` scopes


_state = _State()


class summary_run:  # noqa: N801 - used as a context manager, like `open`
    """While active, loops over input-dependent bounds are summarised (this module's
    docstring); on exit, `loops()` and `revealed()` describe what the run did."""

    def __init__(self, active: bool) -> None:
        self.active = active

    def __enter__(self) -> summary_run:
        _state.active = self.active
        _state.loops = []
        _state.branches = []
        _state.widenings = []
        _state.widened_loads = set()
        _state.revealed = set()
        return self

    def __exit__(self, *exc: object) -> None:
        _state.active = False


def loops() -> tuple[SummarisedLoop, ...]:
    return tuple(_state.loops)


def branches() -> tuple[ForcedBranch, ...]:
    return tuple(_state.branches)


def widenings() -> tuple[Widening, ...]:
    return tuple(_state.widenings)


def widen(location: SourceLocation, span: tuple[int, int] | None) -> None:
    """A counter's value revealed at `location` (see `Widening`); the offsets being
    computed may claim it (`pending`)."""
    widening = Widening(location=location, span=span)
    with _state.lock:
        _state.widenings.append(widening)
    pending: list[Widening] = getattr(_state.local, "pending", [])
    pending.append(widening)
    _state.local.pending = pending


def note_widened_load(offsets: object, load: EventRef) -> None:
    """`load` read at `offsets`; if they are widened, what it read is some input's value
    only if it steers nothing (`racecheck.symbolic_inputs` checks)."""
    if getattr(offsets, "spans", None):
        with _state.lock:
            _state.widened_loads.add(load)


def widened_loads() -> frozenset[EventRef]:
    return frozenset(_state.widened_loads)


def pending() -> list[Widening]:
    """The widenings revealed on this thread since the last call (and forgets them)."""
    found: list[Widening] = getattr(_state.local, "pending", [])
    _state.local.pending = []
    return found


def active() -> bool:
    return _state.active


def revealed() -> frozenset[EventRef]:
    """The loads whose values steered anywhere in the summary run (revealed)."""
    return frozenset(_state.revealed)


def note_revealed(sources: frozenset[EventRef]) -> None:
    if _state.active:
        with _state.lock:
            _state.revealed |= sources
