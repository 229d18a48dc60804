"""Performance hints a model's kernels carry that change no value racecheck checks:
`pl.prefetch.*` (a GM->L2 cache pull: PyPTO documents that it changes no tensor value,
so it reads and writes nothing here) and the `optimizations=[...]` entries of `pl.at`
and `pl.spmd` (`pl.auto_chunk`, `pl.cross_core_slot(slot_num=)`, `pl.split(NONE)`:
scheduling and pipe depth). `pl.split` with a real split mode runs the region on two
vector sub-lanes, which is `pl.split_aiv`'s territory (docs/model.md §4) and refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from racecheck.dsl.location import unsupported
from racecheck.dsl.tensors import TensorView
from racecheck.dsl.types import SplitMode
from racecheck.report.reasons import ReasonCode, reason


@dataclass(frozen=True, slots=True)
class Optimization:
    """An `optimizations=[...]` entry: accepted, and nothing to run."""

    name: str


AUTO_CHUNK = Optimization("pl.auto_chunk")


def cross_core_slot(*, slot_num: int) -> Optimization:
    return Optimization(f"pl.cross_core_slot(slot_num={slot_num})")


def split(mode: object, *, slot_num: int | None = None) -> Optimization:
    if mode is not SplitMode.NONE:
        raise unsupported(reason(ReasonCode.DSL_SPLIT, mode=str(mode)))
    return Optimization("pl.split(NONE)")


@dataclass(frozen=True, slots=True)
class PrefetchHandle:
    """A prefetch context, session or event: it orders nothing racecheck checks."""

    kind: str


def make_context() -> PrefetchHandle:
    return PrefetchHandle("context")


def async_prefetch(src: object, ctx: object) -> PrefetchHandle:
    """`pl.prefetch.async_prefetch(t, ctx)`: t's bytes pulled into L2; no value changes,
    so no read or write is recorded."""
    if not isinstance(src, TensorView) or not isinstance(ctx, PrefetchHandle):
        raise TypeError(f"pl.prefetch.async_prefetch(tensor, context), got {src!r}, {ctx!r}")
    return PrefetchHandle("event")


def session(ctx: object) -> PrefetchHandle:
    return PrefetchHandle("session")


def wait(event: object, session_handle: object) -> int:
    return 0
