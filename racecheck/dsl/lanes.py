"""Kernels that PyPTO splits into cube (AIC) and vector (AIV) lanes are refused.

A kernel mixing cube ops (`pl.matmul`, `pl.move` to Left/Right) with vector work runs
as two asynchronous lanes, and its notify, wait and remote_load run on both: a notify
outside `pl.split_aiv` executes twice (docs/model.md). racecheck runs a kernel as one
sequence, so a kernel body that does both cube ops and communication is reported as
unsupported at the line of the later of the two, never checked as if it ran once.
A kernel body is the innermost frame of the user's file that makes the call.
"""

from __future__ import annotations

import threading
from types import FrameType

from racecheck.dsl.location import innermost_user_frame, location_of, user_location
from racecheck.errors import UnsupportedConstruct
from racecheck.events import SourceLocation

_seen = threading.local()


def _frames(kind: str) -> dict[int, tuple[FrameType, SourceLocation]]:
    table = getattr(_seen, kind, None)
    if table is None:
        table = {}
        setattr(_seen, kind, table)
    return table


def _note(kind: str, other: str, construct: str) -> None:
    frame = innermost_user_frame()
    if frame is None:
        return
    # the frame itself is kept, so its id cannot be reused while it is recorded
    _frames(kind).setdefault(id(frame), (frame, location_of(frame)))
    earlier = _frames(other).get(id(frame))
    if earlier is None:
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
