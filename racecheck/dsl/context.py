"""The execution context a DSL call runs in: the host body, or one rank's kernels.

Each thread has at most one active context. DSL operations look it up and hand it
the work; the co-simulation (`racecheck.cosim`) provides the implementations. A DSL
call made with no active context (e.g. at import time) is unsupported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from racecheck.dsl import active
from racecheck.dsl.active import (
    activated,
    dim_bindings,
    is_rank_context,
    make_current,
    note_control,
    note_unfollowed,
)
from racecheck.dsl.location import user_location
from racecheck.dsl.symbolic import Decision, Forms
from racecheck.errors import UnsupportedConstruct
from racecheck.events import Event, EventRef, NotifyOp, WaitCmp
from racecheck.report.reasons import ReasonCode, reason

if TYPE_CHECKING:
    from racecheck.dsl.scalars import Tainted
    from racecheck.dsl.tensors import TensorView, WindowBuffer


class HostContext(Protocol):
    ranks: int
    dims: Mapping[str, int]  # values of the pl.dynamic dims in this run

    def alloc_window(self, nbytes: int, name: str = "") -> WindowBuffer: ...

    def dispatch(
        self,
        rank: int,
        function: Callable[..., object],
        args: tuple[object, ...],
        kwargs: dict[str, object],
        *,
        group_of: TensorView | None = None,
    ) -> None: ...

    def row_view(self, view: TensorView, row: int) -> TensorView: ...

    def note(self, text: str) -> None: ...  # said once in the program's result

    def unfollowed(self, reason: str) -> None:
        """The run left racecheck's model at the user's line (`note_unfollowed`)."""
        ...

    def fail_bounds(self, message: str) -> None:
        """Record an out-of-bounds host slice at the user's line and stop the host."""
        ...


class RankContext(Protocol):
    @property
    def rank(self) -> int: ...

    @property
    def ranks(self) -> int: ...

    @property
    def dims(self) -> Mapping[str, int]: ...

    @property
    def events(self) -> Sequence[Event]:
        """What the rank recorded so far, in its order."""
        ...

    def load(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        extent: Sequence[int],
        label: str,
    ) -> tuple[np.ndarray, EventRef]: ...

    def store(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        values: np.ndarray,
        label: str,
        *,
        accumulate: bool = False,
        sources: frozenset[EventRef] | None = None,
        forms: Forms | None = None,
    ) -> None:
        """Write `values`, computed from the loads `sources` (None: from any load this
        rank made before), with their symbolic `forms` (None where there is none)."""
        ...

    def notify(
        self,
        view: TensorView,
        peer: int,
        offsets: Sequence[int],
        value: int | Tainted,
        op: NotifyOp,
        label: str,
    ) -> None: ...

    def wait(
        self, view: TensorView, offsets: Sequence[int], expected: int, cmp: WaitCmp, label: str
    ) -> None: ...

    def note_control(self, sources: frozenset[EventRef], decision: Decision | None) -> None: ...

    def input_symbols(
        self, view: TensorView, offsets: Sequence[int], extent: Sequence[int]
    ) -> Forms | None:
        """The elements' symbolic forms (None where there is none): their `Var`s if
        `view` is an input nothing has written yet, else what `MemoryState.forms_at`
        kept; None if no element has one."""
        ...

    def fail_bounds(self, message: str) -> None:
        """Record an out-of-bounds access at the user's line and stop this rank."""
        ...

    def note(self, text: str) -> None: ...  # said once in the program's result

    def unfollowed(self, reason: str) -> None:
        """The run left racecheck's model at the user's line (`note_unfollowed`)."""
        ...


class RankContextProxy:
    """A rank context that hands every call to `inner`: the wrappers that change a few
    calls (a group's peer numbering, a `pl.parallel` iteration's recording, a cube
    lane) subclass it and override only those."""

    def __init__(self, inner: RankContext) -> None:
        self.inner = inner

    @property
    def rank(self) -> int:
        return self.inner.rank

    @property
    def ranks(self) -> int:
        return self.inner.ranks

    @property
    def dims(self) -> Mapping[str, int]:
        return self.inner.dims

    @property
    def events(self) -> Sequence[Event]:
        return self.inner.events

    def load(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        extent: Sequence[int],
        label: str,
    ) -> tuple[np.ndarray, EventRef]:
        return self.inner.load(view, owner, offsets, extent, label)

    def store(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        values: np.ndarray,
        label: str,
        *,
        accumulate: bool = False,
        sources: frozenset[EventRef] | None = None,
        forms: Forms | None = None,
    ) -> None:
        self.inner.store(
            view, owner, offsets, values, label, accumulate=accumulate, sources=sources, forms=forms
        )

    def notify(
        self,
        view: TensorView,
        peer: int,
        offsets: Sequence[int],
        value: int | Tainted,
        op: NotifyOp,
        label: str,
    ) -> None:
        self.inner.notify(view, peer, offsets, value, op, label)

    def wait(
        self, view: TensorView, offsets: Sequence[int], expected: int, cmp: WaitCmp, label: str
    ) -> None:
        self.inner.wait(view, offsets, expected, cmp, label)

    def note_control(self, sources: frozenset[EventRef], decision: Decision | None) -> None:
        self.inner.note_control(sources, decision)

    def input_symbols(
        self, view: TensorView, offsets: Sequence[int], extent: Sequence[int]
    ) -> Forms | None:
        return self.inner.input_symbols(view, offsets, extent)

    def fail_bounds(self, message: str) -> None:
        self.inner.fail_bounds(message)

    def note(self, text: str) -> None:
        self.inner.note(text)

    def unfollowed(self, reason: str) -> None:
        self.inner.unfollowed(reason)

    def __getattr__(self, name: str) -> Any:
        """The co-simulation's own parts of the rank context are the inner one's."""
        return getattr(self.inner, name)


def current() -> HostContext | RankContext | None:
    """This thread's active context, as the co-simulation implements it."""
    return cast("HostContext | RankContext | None", active.current())


def rank_context(construct: str) -> RankContext:
    context = current()
    if context is None or not is_rank_context(context):
        where = user_location()
        raise UnsupportedConstruct(
            reason(ReasonCode.DSL_RANK_ONLY, construct=construct),
            file=where.file,
            line=where.line,
        )
    return context  # type: ignore[return-value]


def host_context(construct: str) -> HostContext:
    context = current()
    if context is None or is_rank_context(context):
        where = user_location()
        raise UnsupportedConstruct(
            reason(ReasonCode.DSL_HOST_ONLY, construct=construct),
            file=where.file,
            line=where.line,
        )
    return context  # type: ignore[return-value]


__all__ = [
    "HostContext",
    "RankContext",
    "RankContextProxy",
    "activated",
    "current",
    "dim_bindings",
    "host_context",
    "is_rank_context",
    "make_current",
    "note_control",
    "note_unfollowed",
    "rank_context",
]
