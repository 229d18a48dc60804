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

import bisect
import heapq
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
from racecheck.events import (
    AccessMode,
    EventRef,
    MemoryKind,
    NotifyOp,
    SourceLocation,
    WaitCmp,
    union_ranges,
)
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


_Key = tuple[int, int, AccessMode]  # (memory, owner, mode)


class _Earlier:
    """The bytes of one memory instance that earlier iterations touched in one mode:
    sorted disjoint pieces, each with the first iteration that touched it."""

    __slots__ = ("starts", "ends", "iterations")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.iterations: list[int] = []

    def overlap(self, ranges: tuple[tuple[int, int], ...]) -> tuple[int, int, int] | None:
        """(the first iteration, first byte, end) of the earliest-touched piece that
        overlaps `ranges`, or None."""
        found: tuple[int, int, int] | None = None
        for start, end in ranges:
            piece = bisect.bisect_right(self.ends, start)
            while piece < len(self.starts) and self.starts[piece] < end:
                iteration = self.iterations[piece]
                if found is None or iteration < found[0]:
                    low, high = max(start, self.starts[piece]), min(end, self.ends[piece])
                    found = (iteration, low, high)
                piece += 1
        return found

    def add(self, ranges: list[tuple[int, int]], iteration: int) -> None:
        """`ranges` touched by `iteration` (later than every piece's): the bytes no piece
        holds yet become pieces of `iteration`; adjacent pieces of one iteration merge."""
        pieces = list(zip(self.starts, self.ends, self.iterations, strict=True))
        merged: list[list[int]] = []
        for start, end, first in heapq.merge(
            pieces, _gaps(pieces, union_ranges(ranges), iteration)
        ):
            if merged and merged[-1][2] == first and merged[-1][1] == start:
                merged[-1][1] = end
            else:
                merged.append([start, end, first])
        self.starts = [piece[0] for piece in merged]
        self.ends = [piece[1] for piece in merged]
        self.iterations = [piece[2] for piece in merged]


def _gaps(
    pieces: list[tuple[int, int, int]], ranges: tuple[tuple[int, int], ...], iteration: int
) -> list[tuple[int, int, int]]:
    """The parts of the sorted disjoint `ranges` outside every (sorted disjoint) piece."""
    gaps: list[tuple[int, int, int]] = []
    piece = 0
    for start, end in ranges:
        cursor = start
        while piece < len(pieces) and pieces[piece][1] <= cursor:
            piece += 1
        scan = piece
        while cursor < end:
            if scan < len(pieces) and pieces[scan][0] < end:
                if pieces[scan][0] > cursor:
                    gaps.append((cursor, pieces[scan][0], iteration))
                cursor = max(cursor, pieces[scan][1])
                scan += 1
            else:
                gaps.append((cursor, end, iteration))
                cursor = end
    return gaps


class IterationRecorder(RankContextProxy):
    """A rank context that records what each iteration of one `pl.parallel` touches.

    An access is checked against what earlier iterations touched in the modes it
    conflicts with, kept per memory instance and mode as merged pieces (`_Earlier`), so
    a loop of many accesses costs what it touches, not the square of its accesses; the
    current iteration's accesses join those pieces when the next iteration starts."""

    def __init__(self, inner: RankContext, loop: SourceLocation) -> None:
        super().__init__(inner)
        self.loop = loop
        self.iteration = 0
        self.earlier: dict[_Key, _Earlier] = {}
        self.current: dict[_Key, list[tuple[int, int]]] = {}
        self.first: _Access | None = None  # the first access of all, and of the syncs
        self.first_sync: _Access | None = None

    def start(self, iteration: int) -> None:
        """Iteration `iteration` begins: what the one before touched becomes earlier."""
        for key, ranges in self.current.items():
            self.earlier.setdefault(key, _Earlier()).add(ranges, self.iteration)
        self.current = {}
        self.iteration = iteration

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
        self._check(access)
        self.first = self.first or access
        if sync:
            self.first_sync = self.first_sync or access
        self.current.setdefault((access.memory, owner, mode), []).extend(access.ranges)

    def _check(self, access: _Access) -> None:
        earlier = self.first if access.sync else self.first_sync
        if earlier is not None and earlier.iteration != access.iteration:
            self._refuse(
                earlier.iteration,
                access,
                reason(ReasonCode.PARALLEL_SIGNAL),
            )
        for mode in AccessMode:
            touched = self.earlier.get((access.memory, access.owner, mode))
            if touched is None or not modes_conflict(mode, access.mode):
                continue
            overlap = touched.overlap(access.ranges)
            if overlap is not None:
                iteration, low, high = overlap
                self._refuse(
                    iteration,
                    access,
                    reason(ReasonCode.PARALLEL_OVERLAP, memory=access.name, start=low, end=high),
                )

    def _refuse(self, earlier: int, access: _Access, why: str) -> None:
        raise UnsupportedConstruct(
            reason(
                ReasonCode.PARALLEL_ITERATIONS,
                first=earlier,
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
            recorder.start(number)
            make_current(recorder)
            yield item
    finally:
        if current() is recorder:
            make_current(outer)
