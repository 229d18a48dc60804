"""Which execution context is active on this thread, below every DSL type: tensors,
scalars and dims ask it here; `racecheck.dsl.context` states what a context provides."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Protocol

from racecheck.dsl.location import user_location
from racecheck.dsl.symbolic import Decision
from racecheck.events import EventRef


class Active(Protocol):
    """What every context, host or rank, provides (`racecheck.dsl.context` has the rest)."""

    @property
    def dims(self) -> Mapping[str, int]: ...

    def fail_bounds(self, message: str) -> None: ...

    def unfollowed(self, reason: str) -> None: ...


_active = threading.local()


def current() -> Active | None:
    return getattr(_active, "context", None)


@contextmanager
def activated(context: Active) -> Iterator[None]:
    previous = current()
    _active.context = context
    try:
        yield
    finally:
        _active.context = previous


def make_current(context: Active | None) -> None:
    """Make `context` this thread's active one (for a generator, where a `with` block
    would be left on another thread when the generator is collected)."""
    _active.context = context


def is_rank_context(context: object) -> bool:
    return hasattr(context, "note_control")


def dim_bindings() -> Mapping[str, int] | None:
    """The values of the `pl.dynamic` dims in the running program, if one runs."""
    context = current()
    return None if context is None else context.dims


def note_control(sources: frozenset[EventRef], decision: Decision | None = None) -> None:
    """Values read from memory reached control flow or an address; `decision` is what
    a value with a symbolic form decided (None: it has none)."""
    context = current()
    if sources and context is not None and is_rank_context(context):
        context.note_control(sources, decision)  # type: ignore[attr-defined]


def note_unfollowed(reason: str) -> None:
    """The running program computed what the device does not as racecheck does (a device
    scalar out of the INT32 range): the run, host or rank, proves nothing and finds
    nothing (`Execution.unfollowed`). Outside a DSL body (no active context) it runs as
    Python and there is nothing to say."""
    context = current()
    if context is not None:
        context.unfollowed(f"line {user_location().line}: {reason}")
