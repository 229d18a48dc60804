"""Kernels that PyPTO splits into cube (AIC) and vector (AIV) lanes.

A kernel mixing cube ops (`pl.matmul`, `pl.move` to Left/Right) with communication runs
as two asynchronous lanes, and its notify, wait and remote_load run on both: a notify
outside `pl.split_aiv` executes twice (docs/model.md). When such a kernel is a task of
a per-device function, the rank context runs it twice, as two tasks nothing orders:
the kernel as written (the vector lane), and the kernel under `AicLane` (the cube
lane), which keeps only its notify, wait and remote_load. Anywhere else (a dispatched
kernel, a `pl.at` region) the mix is reported as unsupported at the line of the later
of the two, never checked as if it ran once. A kernel body is the innermost frame of
the user's file that makes the call.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

import numpy as np

from racecheck.dsl.context import RankContextProxy, current
from racecheck.dsl.location import innermost_user_frame, location_of, user_location
from racecheck.errors import UnsupportedConstruct
from racecheck.events import EventRef, SourceLocation

if TYPE_CHECKING:
    from racecheck.dsl.symbolic import Decision
    from racecheck.dsl.tensors import TensorView

_seen = threading.local()


def _frames(kind: str) -> dict[int, tuple[FrameType, SourceLocation]]:
    table = getattr(_seen, kind, None)
    if table is None:
        table = {}
        setattr(_seen, kind, table)
    return table


def _note(kind: str, other: str, construct: str) -> None:
    if isinstance(current(), AicLane):
        return
    frame = innermost_user_frame()
    if frame is None:
        return
    # the frame itself is kept, so its id cannot be reused while it is recorded
    _frames(kind).setdefault(id(frame), (frame, location_of(frame)))
    earlier = _frames(other).get(id(frame))
    if earlier is None:
        return
    context = current()
    mark = getattr(context, "mark_mixed", None)
    if mark is not None and mark():
        return
    where = user_location()
    cube = construct if kind == "cube" else f"the cube op at line {earlier[1].line}"
    comm = construct if kind == "comm" else f"the communication at line {earlier[1].line}"
    raise UnsupportedConstruct(
        f"this kernel mixes {cube} with {comm}: PyPTO splits it into AIC and AIV lanes "
        "that both run its notify, wait and remote_load (docs/model.md), which racecheck "
        "does not model",
        file=where.file,
        line=where.line,
    )


def note_cube(construct: str) -> None:
    _note("cube", "comm", construct)


def note_comm(construct: str) -> None:
    _note("comm", "cube", construct)


_REMOTE_LOAD = "pld.tile.remote_load"


class AicLane(RankContextProxy):
    """The cube lane of a mixed kernel: its notify, wait and remote_load are events of
    the rank; its other loads read memory unrecorded and its stores do nothing, the
    vector lane's work (docs/model.md)."""

    def load(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        extent: Sequence[int],
        label: str,
    ) -> tuple[np.ndarray, EventRef]:
        if label == _REMOTE_LOAD:
            return super().load(view, owner, offsets, extent, label)
        values = self.inner.peek(view, owner, offsets, extent)  # type: ignore[attr-defined]
        return values, EventRef(rank=self.rank, index=-1)

    def store(self, *args: Any, **kwargs: Any) -> None:
        return None

    def note_control(self, sources: frozenset[EventRef], decision: Decision | None) -> None:
        recorded = frozenset(ref for ref in sources if ref.index >= 0)
        if recorded:
            self.inner.note_control(recorded, decision)
