"""Kernels that PyPTO splits into cube (AIC) and vector (AIV) lanes.

A kernel mixing cube ops (`pl.matmul`, `pl.move` to Left/Right) with communication runs
as two asynchronous lanes, and its notify, wait and remote_load run on both: a notify
outside `pl.split_aiv` executes twice (docs/model.md). When such a kernel is a task of
a per-device function, the rank context runs it twice, as two tasks nothing orders:
the kernel as written (the vector lane), and the kernel under `AicLane` (the cube
lane), which keeps only its notify, wait and remote_load. Anywhere else (a dispatched
kernel, a `pl.at` region) the mix is reported as unsupported at the line of the later
of the two, never checked as if it ran once. A kernel body is the innermost frame of
the user's file that makes the call, within one task (`Body`): matmul in one block or
region of a per-device function and communication in another is no mix.

`for aiv_id in pl.split_aiv(n, mode=pl.SplitMode.NONE)` pins its body to the vector
lane (the cube lane skips it, and its communication makes no mix), and runs it once per
AIV sub-lane with that lane's `aiv_id`, the sub-lanes concurrent (docs/model.md). In
the task that enters it (a kernel call, an outlined `pl.at` region or `pl.spmd` block,
a dispatched kernel) the task as written is sub-lane 0, and each other sub-lane is a
lane of the task run again under `SubLane`: a thread of its own that records its part
of each region and ends with the task's last. The code outside the regions runs on
sub-lane 0 only, which PyPTO does not promise: where that matters the run proves
nothing (`racecheck.cosim.tasks.unsplit_inexact`). A task racecheck cannot run again
(one it runs in place) refuses the region. In a halving mode (`UP_DOWN`,
`LEFT_RIGHT`) `pl.aiv_shard` gives each sub-lane its half of the tile (`shard`); a body
without it is refused.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

import numpy as np

from racecheck.dsl.context import RankContextProxy, current, is_rank_context
from racecheck.dsl.local_ops import tile_block
from racecheck.dsl.location import (
    innermost_user_frame,
    location_of,
    loop_calls,
    unsupported,
    user_location,
)
from racecheck.dsl.scalars import DeviceIndex, as_index
from racecheck.dsl.tensors import Tile
from racecheck.dsl.types import SplitMode
from racecheck.events import EventRef, SourceLocation

if TYPE_CHECKING:
    from racecheck.dsl.symbolic import Decision, Forms
    from racecheck.dsl.tensors import TensorView

_seen = threading.local()


Body = tuple[int, int | None]
"""A kernel body: the id of the frame that runs it and the task it runs as (the rank
context's `running_task`): the blocks of a `pl.spmd` written in a per-device function
share its frame, but each is a task of its own, with lanes of its own."""


def _frames(kind: str) -> dict[Body, tuple[FrameType, SourceLocation]]:
    table = getattr(_seen, kind, None)
    if table is None:
        table = {}
        setattr(_seen, kind, table)
    return table


def _note(kind: str, other: str, construct: str) -> None:
    if isinstance(current(), _Lane) or (kind == "comm" and in_vector_region()):
        return
    frame = innermost_user_frame()
    if frame is None:
        return
    context = current()
    running = getattr(context, "running_task", None)
    body = (id(frame), None if running is None else running())
    # the frame itself is kept, so its id cannot be reused while it is recorded; its
    # location is the one at its first note (later ones keep it, so are not looked up)
    recorded = _frames(kind)
    if body not in recorded:
        recorded[body] = (frame, location_of(frame))
    earlier = _frames(other).get(body)
    if earlier is None:
        return
    mark = getattr(context, "mark_mixed", None)
    if mark is not None and mark():
        return
    cube = construct if kind == "cube" else f"the cube op at line {earlier[1].line}"
    comm = construct if kind == "comm" else f"the communication at line {earlier[1].line}"
    raise unsupported(
        f"this kernel mixes {cube} with {comm}: PyPTO splits it into AIC and AIV lanes "
        "that both run its notify, wait and remote_load (docs/model.md), which racecheck "
        "does not model"
    )


def note_cube(construct: str) -> None:
    _note("cube", "comm", construct)


def note_comm(construct: str) -> None:
    _note("comm", "cube", construct)


_REMOTE_LOAD = "pld.tile.remote_load"


def in_vector_region() -> bool:
    """Inside a `pl.split_aiv` region, which runs on the vector lane only."""
    return bool(getattr(_seen, "vector_region", False))


_HALVED_AXIS = {SplitMode.UP_DOWN: 0, SplitMode.LEFT_RIGHT: 1}
"""The tile dimension a halving mode splits between the sub-lanes (PyPTO docs/en/dev/
passes/20-lower_auto_vector_split.md)."""


def split_aiv(n: object = 2, mode: object = SplitMode.NONE) -> Iterator[int]:
    """`pl.split_aiv(n, mode=...)`: the `aiv_id` of each AIV sub-lane this context runs
    the body for (`RankContext.sub_lanes`), or once on the cube lane with nothing of it
    recorded."""
    where = user_location()
    axis = None if mode is SplitMode.NONE else _halved_axis(mode, where)
    context = current()
    lanes = getattr(context, "sub_lanes", None)
    if not is_rank_context(context) or lanes is None:
        raise unsupported("pl.split_aiv is modelled in a kernel that a rank runs, not here", where)
    count = as_index(n)
    return _sublanes(context, lanes(count), (axis, count))


def _halved_axis(mode: object, where: SourceLocation) -> int:
    """A halving region's axis: modelled in the form whose body `pl.aiv_shard`s the
    cube lane's tiles, each sub-lane then computing on its half; the full-width form
    (the compiler halving every vector op) and `pl.aic_gather` (joining the halves)
    are refused."""
    frame = innermost_user_frame()
    called = loop_calls(frame, frozenset({"aiv_shard", "aic_gather"})) if frame else None
    if mode not in _HALVED_AXIS or called != {"aiv_shard"}:
        raise unsupported(
            f"pl.split_aiv(mode={mode}) with a full-width body or pl.aic_gather halves "
            "every tile between the sub-lanes, which racecheck does not model; a body "
            "that takes its half with pl.aiv_shard, or mode=pl.SplitMode.NONE, is",
            where,
        )
    return _HALVED_AXIS[mode]  # type: ignore[index]


def crossing(tile: object) -> object:
    """`pl.aic_gather(x)`, and `pl.aiv_shard(x)` in a `mode=NONE` region: a tile
    crossing between the cube lane and the region whole (docs/model.md)."""
    return tile


def shard(tile: object) -> object:
    """`pl.aiv_shard(x)`: the cube lane's tile crossing into the region, in a halving
    mode this sub-lane's half of it along the mode's axis (docs/model.md)."""
    axis, count, aiv_id = getattr(_seen, "halving", None) or (None, 1, 0)
    if axis is None:
        return tile
    if not isinstance(tile, Tile) or len(tile.shape) != 2 or tile.shape[axis] % count:
        raise unsupported(
            f"pl.aiv_shard of {tile!r} in a halving pl.split_aiv: racecheck halves a 2-D "
            f"tile whose dim {axis} the {count} sub-lanes divide evenly"
        )
    extent = list(tile.shape)
    extent[axis] //= count
    offsets = [0, 0]
    offsets[axis] = aiv_id * extent[axis]
    return tile_block(tile, offsets, extent)


def _sublanes(context: Any, lanes: Sequence[int], split: tuple[int | None, int]) -> Iterator[int]:
    """The region's body once per sub-lane in `lanes`. `split`: the axis a halving mode
    splits (None: none) and the sub-lane count."""
    try:
        for aiv_id in lanes:
            _seen.vector_region, _seen.halving = True, (*split, aiv_id)
            yield DeviceIndex(aiv_id)  # an INDEX device scalar: its `%` and `//` truncate
            _seen.vector_region, _seen.halving = False, None
    finally:
        _seen.vector_region, _seen.halving = False, None
    if isinstance(context, SubLane) and context.finished():
        raise LaneDone  # the code after its kernel's last region is sub-lane 0's


class _Lane(RankContextProxy):
    """A lane of a kernel that a rank runs again beside the kernel as written: which
    of its operations are events of the rank (`_records`); its other loads read memory
    unrecorded, and its other stores, notifies and waits do nothing."""

    def _records(self, label: str, *, sync: bool) -> bool:
        raise NotImplementedError

    def load(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        extent: Sequence[int],
        label: str,
    ) -> tuple[np.ndarray, EventRef]:
        if self._records(label, sync=False):
            return super().load(view, owner, offsets, extent, label)
        values = self.inner.peek(view, owner, offsets, extent)  # type: ignore[attr-defined]
        return values, EventRef(rank=self.rank, index=-1)

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
        if self._records(label, sync=False):
            super().store(
                view,
                owner,
                offsets,
                values,
                label,
                accumulate=accumulate,
                sources=sources,
                forms=forms,
            )

    def notify(self, *args: Any, **kwargs: Any) -> None:
        if self._records("", sync=True):
            self.inner.notify(*args, **kwargs)

    def wait(self, *args: Any, **kwargs: Any) -> None:
        if self._records("", sync=True):
            self.inner.wait(*args, **kwargs)

    def note_control(self, sources: frozenset[EventRef], decision: Decision | None) -> None:
        recorded = frozenset(ref for ref in sources if ref.index >= 0)
        if recorded:
            self.inner.note_control(recorded, decision)


class LaneDone(BaseException):
    """Ends a sub-lane's run at the end of its kernel's last region; never seen by user
    code."""


class SubLane(_Lane):
    """AIV sub-lane `aiv_id` (1 or more) of a kernel with `pl.split_aiv` regions, which
    the kernel as written (sub-lane 0) entered `regions` times: a thread of its own that
    runs its part of each and ends with the last; the code outside them sub-lane 0
    runs, whether or not the device repeats it here (docs/model.md)."""

    def __init__(self, inner: Any, aiv_id: int, regions: int) -> None:
        super().__init__(inner)
        self.aiv_id = aiv_id
        self.regions_left = regions

    def sub_lanes(self, count: int) -> Sequence[int]:
        self.regions_left -= 1
        return (self.aiv_id,) if self.aiv_id < count else ()

    def finished(self) -> bool:
        return self.regions_left <= 0

    def _records(self, label: str, *, sync: bool) -> bool:
        return in_vector_region()


class AicLane(_Lane):
    """The cube lane of a mixed kernel: its notify, wait and remote_load outside
    `pl.split_aiv` regions are events of the rank; the rest is the vector lane's work
    (docs/model.md)."""

    def sub_lanes(self, count: int) -> Sequence[int]:
        return (0,)  # run once, to go on after it, with nothing of it recorded

    def _records(self, label: str, *, sync: bool) -> bool:
        return not in_vector_region() and (sync or label == _REMOTE_LOAD)
