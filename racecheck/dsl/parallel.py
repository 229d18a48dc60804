"""`pl.parallel`: a loop whose iterations PyPTO may run concurrently (docs/model.md).

racecheck runs the iterations one after another, which is exact only when no two of
them conflict. While the loop runs, every access of the rank goes through an
`IterationRecorder`, which remembers the bytes each iteration touched; an access that
conflicts with one of an earlier iteration (overlapping bytes of one memory instance,
at least one a plain write, or a plain access against an atomic one, as docs/model.md
defines a race) stops tracing with an unsupported construct at the loop's line, so
such a kernel is never reported proved. A notify or wait conflicts with every access of
another iteration: run in order, it would order that iteration's accesses, which
concurrent iterations do not. So does a store into an INT32 window, which may be a
signal cell some rank waits on (which cells those are is known only once every rank
has run). Kernel-local buffers created before the loop (`Tile.storage`) are checked the
same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from racecheck.conflicts import modes_conflict
from racecheck.dsl.context import (
    RankContext,
    RankContextProxy,
    current,
    is_rank_context,
    make_current,
)
from racecheck.dsl.dtypes import INT32
from racecheck.dsl.location import user_location
from racecheck.dsl.scalars import Tainted
from racecheck.dsl.symbolic import Forms
from racecheck.dsl.tensors import TensorView, Tile, region_problem, region_runs
from racecheck.errors import UnsupportedConstruct
from racecheck.events import AccessMode, EventRef, MemoryKind, NotifyOp, SourceLocation, WaitCmp
from racecheck.report.reasons import ReasonCode, reason


@dataclass(frozen=True, slots=True, kw_only=True)
class _Access:
    iteration: int
    memory: int
    owner: int
    ranges: tuple[tuple[int, int], ...]
    mode: AccessMode
    name: str
    sync: bool  # a notify, a wait or a store into an INT32 window (a signal cell it may be)


def _overlap(
    first: tuple[tuple[int, int], ...], second: tuple[tuple[int, int], ...]
) -> tuple[int, int] | None:
    for start, end in first:
        for other_start, other_end in second:
            if start < other_end and other_start < end:
                return max(start, other_start), min(end, other_end)
    return None


class IterationRecorder(RankContextProxy):
    """A rank context that records what each iteration of one `pl.parallel` touches."""

    def __init__(self, inner: RankContext, loop: SourceLocation) -> None:
        super().__init__(inner)
        self.loop = loop
        self.iteration = 0
        self.accesses: list[_Access] = []

    def load(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        extent: Sequence[int],
        label: str,
    ) -> tuple[np.ndarray, EventRef]:
        self.record(view, owner, offsets, extent, AccessMode.READ)
        return super().load(view, owner, offsets, extent, label)

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
        mode = AccessMode.ATOMIC if accumulate else AccessMode.WRITE
        extent = list(np.shape(values))[-len(offsets) :] if len(offsets) else []
        signal = view.is_window and view.dtype is INT32
        self.record(view, owner, offsets, _padded(extent, len(offsets)), mode, sync=signal)
        super().store(
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
        self.record(view, peer, offsets, [1] * len(offsets), AccessMode.ATOMIC, sync=True)
        super().notify(view, peer, offsets, value, op, label)

    def wait(
        self, view: TensorView, offsets: Sequence[int], expected: int, cmp: WaitCmp, label: str
    ) -> None:
        self.record(view, self.rank, offsets, [1] * len(offsets), AccessMode.ATOMIC, sync=True)
        super().wait(view, offsets, expected, cmp, label)

    def record(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        extent: Sequence[int],
        mode: AccessMode,
        *,
        sync: bool = False,
    ) -> None:
        if region_problem(view, offsets, extent) is not None:
            return  # the access itself reports it
        access = _Access(
            iteration=self.iteration,
            memory=view.memory,
            owner=owner,
            ranges=region_runs(view, offsets, extent),
            mode=mode,
            name=view.name,
            sync=sync,
        )
        for earlier in self.accesses:
            self._check(earlier, access)
        self.accesses.append(access)

    def _check(self, earlier: _Access, access: _Access) -> None:
        if earlier.iteration == access.iteration:
            return
        if earlier.sync or access.sync:
            self._refuse(
                earlier,
                access,
                reason(ReasonCode.PARALLEL_SIGNAL),
            )
        if (earlier.memory, earlier.owner) != (access.memory, access.owner) or not modes_conflict(
            earlier.mode, access.mode
        ):
            return
        overlap = _overlap(earlier.ranges, access.ranges)
        if overlap is not None:
            self._refuse(
                earlier,
                access,
                reason(
                    ReasonCode.PARALLEL_OVERLAP,
                    memory=access.name,
                    start=overlap[0],
                    end=overlap[1],
                ),
            )

    def _refuse(self, earlier: _Access, access: _Access, why: str) -> None:
        raise UnsupportedConstruct(
            reason(
                ReasonCode.PARALLEL_ITERATIONS,
                first=earlier.iteration,
                second=access.iteration,
                why=why,
                line=user_location().line,
            ),
            file=self.loop.file,
            line=self.loop.line,
        )


def record_local(tile: Tile, offsets: Sequence[int], extent: Sequence[int], *, write: bool) -> None:
    """An access to a kernel-local buffer, checked like memory inside `pl.parallel`."""
    recorder = current()
    if tile.storage is None or not isinstance(recorder, IterationRecorder):
        return
    buffer = TensorView(
        memory=-tile.storage,  # kernel-local buffers never share an id with memory
        kind=MemoryKind.HOST,
        name="a kernel-local tensor",
        base=0,
        shape=tile.shape,
        dtype=tile.dtype,
        memory_nbytes=tile.data.size * tile.dtype.nbytes,
    )
    mode = AccessMode.WRITE if write else AccessMode.READ
    recorder.record(buffer, recorder.rank, offsets, extent, mode)


def _padded(extent: list[int], ndim: int) -> list[int]:
    return [1] * (ndim - len(extent)) + extent


def tracked(items: Iterator[Any]) -> Iterator[Any]:
    """The iterations of a `pl.parallel` loop, with conflicts between them refused."""
    context = current()
    if context is None or not is_rank_context(context):
        return items  # a host loop: its dispatches are ordered by the runtime model
    recorder = IterationRecorder(context, user_location())  # type: ignore[arg-type]
    return _recorded(items, recorder)


def _recorded(items: Iterator[Any], recorder: IterationRecorder) -> Iterator[Any]:
    """The recorder is the rank's context while the loop body runs; a body that raises
    leaves it in place, as the rank's run ends there."""
    outer = recorder.inner
    try:
        for number, item in enumerate(items):
            recorder.iteration = number
            make_current(recorder)
            yield item
    finally:
        if current() is recorder:
            make_current(outer)
