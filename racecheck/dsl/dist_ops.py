"""`pld.*` operations: windows, rank context, signals and one-sided remote access.

Windows are allocated on the host (`alloc_window_buffer`, size in bytes or a shape
and dtype) and viewed with `window` (byte offset 0: views of one buffer alias).
`notify`/`wait` act on INT32 signal cells of a window; `remote_load`,
`remote_store`, `put` and `get` access a peer's instance and synchronise nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from racecheck.dsl import lanes
from racecheck.dsl.context import RankContext, current, host_context, rank_context
from racecheck.dsl.dtypes import DType
from racecheck.dsl.groups import WorldSize, in_group, world_peer
from racecheck.dsl.local_ops import (
    indices,
    load_region,
    local_owner,
    require_view,
    tile_forms,
    tile_values,
)
from racecheck.dsl.scalars import DeviceInt, Tainted, as_index, sources_of
from racecheck.dsl.tensors import TensorView, Tile, WindowBuffer
from racecheck.dsl.types import AtomicType, NotifyOp, WaitCmp
from racecheck.errors import UnsupportedConstruct
from racecheck.events import MemoryKind, wrap_int32
from racecheck.events import NotifyOp as EventNotifyOp
from racecheck.events import WaitCmp as EventWaitCmp
from racecheck.report.reasons import ReasonCode, reason

Region = Sequence[object]  # offsets or a shape, as the user wrote it
NOTIFY_OPS = {NotifyOp.AtomicAdd: EventNotifyOp.ATOMIC_ADD, NotifyOp.Set: EventNotifyOp.SET}
WAIT_CMPS = {WaitCmp.Ge: EventWaitCmp.GE, WaitCmp.Eq: EventWaitCmp.EQ}


class CommCtx:
    """`pld.get_comm_ctx(window)`: the communication context of the window's group; also
    the annotation `pld.CommCtxType`."""

    __slots__ = ("window",)

    def __init__(self, window: TensorView | None = None) -> None:
        self.window = window


def world_size() -> DeviceInt:
    context = current()
    if context is None:
        raise UnsupportedConstruct(reason(ReasonCode.DSL_WORLD_SIZE_OUTSIDE))
    return WorldSize(context.ranks)  # INT64 in PyPTO, docs/model.md §1


def get_comm_ctx(tensor: object = None) -> CommCtx:
    window = tensor if isinstance(tensor, TensorView) and tensor.is_window else None
    return CommCtx(window)


def _context_of(ctx: object, construct: str) -> RankContext:
    """The rank's context, numbered within the group of `ctx`'s window if it has one."""
    context = rank_context(construct)
    if isinstance(ctx, CommCtx) and ctx.window is not None:
        return in_group(context, ctx.window)
    return context


def rank(ctx: object = None) -> DeviceInt:
    return DeviceInt(_context_of(ctx, "pld.rank").rank)


def nranks(ctx: object = None) -> DeviceInt:
    return DeviceInt(_context_of(ctx, "pld.nranks").ranks)


def alloc_window_buffer(
    size: object, dtype: DType | None = None, *, name: str = ""
) -> WindowBuffer:
    context = host_context("pld.alloc_window_buffer")
    if isinstance(size, (list, tuple)):
        if dtype is None:
            raise TypeError(reason(ReasonCode.DSL_ALLOC_NO_DTYPE))
        nbytes = math.prod(indices(size)) * dtype.nbytes
    else:
        nbytes = as_index(size)
    return context.alloc_window(nbytes)


def window(buf: object, shape: Sequence[object], *, dtype: DType) -> TensorView:
    if not isinstance(buf, WindowBuffer):
        raise TypeError(reason(ReasonCode.DSL_WINDOW_NOT_BUFFER, buffer=repr(buf)))
    return TensorView(
        memory=buf.memory,
        kind=MemoryKind.WINDOW,
        name=buf.name,
        base=0,
        shape=tuple(indices(shape)),
        dtype=dtype,
        memory_nbytes=buf.nbytes,
        devices=buf.devices,
    )


def _window(value: object, construct: str, role: str) -> TensorView:
    view = require_view(value, construct, role)
    if not view.is_window:
        raise TypeError(
            reason(ReasonCode.DSL_NOT_WINDOW, construct=construct, role=role, view=repr(view))
        )
    return view


def _enum(value: object, table: dict, construct: str, keyword: str) -> object:
    if value not in table:
        choices = str([str(k) for k in table])
        raise TypeError(
            reason(
                ReasonCode.DSL_NOT_CHOICE,
                construct=construct,
                keyword=keyword,
                choices=choices,
                value=repr(value),
            )
        )
    return table[value]


def notify(
    target: object,
    peer: object,
    offsets: Sequence[object],
    value: object,
    *,
    op: NotifyOp,
    label: str = "pld.system.notify",
) -> None:
    view = _window(target, label, "the signal")
    event_op: EventNotifyOp = _enum(op, NOTIFY_OPS, label, "op")  # type: ignore[assignment]
    lanes.note_comm(label)
    context = rank_context(label)
    target_rank = world_peer(context, view, as_index(peer))
    amount: int | Tainted
    if isinstance(value, Tainted) and isinstance(value.value, int):
        amount = value  # data the rank context follows (`cosim.execution.Pin`)
    else:
        amount = as_index(value)
    context.notify(view, target_rank, indices(offsets), amount, event_op, label)


def _wait_call(
    label: str,
    signal: object,
    offsets: Sequence[object] | None,
    expected: object,
    cmp: WaitCmp,
    target: object,
    *,
    unsigned: bool = False,
) -> None:
    view = _window(signal if signal is not None else target, label, "the signal")
    lanes.note_comm(label)
    if offsets is None or expected is None:
        raise TypeError(reason(ReasonCode.DSL_WAIT_ARGUMENTS, label=label))
    event_cmp = EventWaitCmp.GE_UNSIGNED if unsigned else _enum(cmp, WAIT_CMPS, label, "cmp")
    rank_context(label).wait(
        view,
        indices(offsets),
        wrap_int32(as_index(expected)),  # the threshold is cast to the cell's i32 (docs/model.md)
        event_cmp,  # type: ignore[arg-type]
        label,
    )


def wait(
    signal: object = None,
    offsets: Sequence[object] | None = None,
    expected: object = None,
    *,
    cmp: WaitCmp,
    target: object = None,
) -> None:
    _wait_call("pld.system.wait", signal, offsets, expected, cmp, target)


def defer_wait(
    signal: object = None,
    offsets: Sequence[object] | None = None,
    expected: object = None,
    *,
    cmp: WaitCmp = WaitCmp.Ge,
    target: object = None,
) -> None:
    if cmp is not WaitCmp.Ge:
        raise UnsupportedConstruct(reason(ReasonCode.DSL_DEFER_WAIT_GE))
    # defer_wait compares as uint32 (docs/model.md)
    _wait_call("pld.system.defer_wait", signal, offsets, expected, cmp, target, unsigned=True)


def remote_load(
    target: object,
    peer: object,
    offsets: Sequence[object],
    shape: Sequence[object],
    valid_shape: Sequence[object] | None = None,
) -> Tile:
    label = "pld.tile.remote_load"
    view = _window(target, label, "the target")
    lanes.note_comm(label)
    owner = world_peer(rank_context(label), view, as_index(peer))
    return load_region(view, owner, offsets, shape, valid_shape, label)


def _accumulates(atomic: object, label: str) -> bool:
    if atomic not in (AtomicType.None_, AtomicType.Add):
        raise TypeError(reason(ReasonCode.DSL_ATOMIC, label=label, atomic=repr(atomic)))
    return atomic is AtomicType.Add


def remote_store(
    src_tile: object,
    target: object,
    peer: object,
    offsets: Sequence[object],
    *,
    atomic: AtomicType = AtomicType.None_,
) -> None:
    label = "pld.tile.remote_store"
    view = _window(target, label, "the target")
    lanes.note_comm(label)
    context = rank_context(label)
    context.store(
        view,
        world_peer(context, view, as_index(peer)),
        indices(offsets),
        tile_values(src_tile, view.dtype),
        label,
        accumulate=_accumulates(atomic, label),
        sources=sources_of(src_tile),
        forms=tile_forms(src_tile),
    )


def regions_given(label: str, *regions: object) -> bool:
    """PyPTO's rule for a put/get's `dst_offsets`, `src_offsets` and `shape`: all three
    or none (none: the whole source slice into the whole destination slice, whose sizes
    must be equal). The co-simulation and the every-P shadow both apply it."""
    given = [part is not None for part in regions]
    if any(given) and not all(given):
        raise TypeError(reason(ReasonCode.DSL_SLICE_TOGETHER, label=label))
    return all(given)


def _transfer_regions(
    label: str,
    dst: TensorView,
    src: TensorView,
    dst_offsets: Sequence[object] | None,
    src_offsets: Sequence[object] | None,
    shape: Sequence[object] | None,
) -> tuple[list[int], list[int], list[int], list[int]]:
    """(src offsets, src extent, dst offsets, dst extent) of a put/get."""
    if regions_given(label, dst_offsets, src_offsets, shape):
        extent = indices(shape)  # type: ignore[arg-type]
        return indices(src_offsets), extent, indices(dst_offsets), extent  # type: ignore[arg-type]
    if math.prod(src.shape) != math.prod(dst.shape):
        raise UnsupportedConstruct(
            reason(ReasonCode.DSL_WHOLE_SLICE_SIZES, label=label, src=repr(src), dst=repr(dst))
        )
    return [0] * src.ndim, list(src.shape), [0] * dst.ndim, list(dst.shape)


def _transfer(
    label: str,
    dst: object,
    src: object,
    source_owner_of: str,
    peer: object,
    regions: tuple[Region | None, Region | None, Region | None],
    accumulate: bool,
) -> None:
    context = rank_context(label)
    lanes.note_comm(label)
    dst_view = require_view(dst, label, "dst")
    src_view = require_view(src, label, "src")
    target = as_index(peer)
    src_offsets, src_extent, dst_offsets, dst_extent = _transfer_regions(
        label, dst_view, src_view, *regions
    )
    if source_owner_of == "peer":
        _window(src_view, label, "src")
        src_owner = world_peer(context, src_view, target)
        dst_owner = local_owner(dst_view, context.rank)
    else:
        _window(dst_view, label, "dst")
        src_owner = local_owner(src_view, context.rank)
        dst_owner = world_peer(context, dst_view, target)
    values, read = context.load(src_view, src_owner, src_offsets, src_extent, label)
    context.store(
        dst_view,
        dst_owner,
        dst_offsets,
        np.asarray(values).reshape(dst_extent).astype(dst_view.dtype.compute),
        label,
        accumulate=accumulate,
        sources=frozenset({read}),
    )


def put(
    dst: object,
    peer: object,
    src: object,
    dst_offsets: Sequence[object] | None = None,
    src_offsets: Sequence[object] | None = None,
    shape: Sequence[object] | None = None,
    *,
    atomic: AtomicType = AtomicType.None_,
    chunk_rows: int = 0,
    chunk_cols: int = 0,
    pipeline: bool = False,
) -> None:
    label = "pld.tensor.put"
    _transfer(
        label,
        dst,
        src,
        "local",
        peer,
        (dst_offsets, src_offsets, shape),
        _accumulates(atomic, label),
    )


def get(
    dst: object,
    peer: object,
    src: object,
    dst_offsets: Sequence[object] | None = None,
    src_offsets: Sequence[object] | None = None,
    shape: Sequence[object] | None = None,
    *,
    chunk_rows: int = 0,
    chunk_cols: int = 0,
    pipeline: bool = False,
) -> None:
    _transfer("pld.tensor.get", dst, src, "peer", peer, (dst_offsets, src_offsets, shape), False)


def _is_region(value: object) -> bool:
    return isinstance(value, (list, tuple))


def tile_put(
    dst: object,
    peer: object,
    src: object,
    stage: object,
    stage2: object = None,
    dst_offsets: Sequence[object] | None = None,
    src_offsets: Sequence[object] | None = None,
    shape: Sequence[object] | None = None,
    *,
    atomic: AtomicType = AtomicType.None_,
) -> None:
    """`pld.tile.put`: `pld.tensor.put` through on-chip staging tiles (scratch). As in
    PyPTO, a region given where `stage2` goes is the first region argument."""
    if _is_region(stage2):
        dst_offsets, src_offsets, shape = stage2, dst_offsets, src_offsets  # type: ignore[assignment]
    put(dst, peer, src, dst_offsets, src_offsets, shape, atomic=atomic)


def tile_get(
    dst: object,
    peer: object,
    src: object,
    stage: object,
    stage2: object = None,
    dst_offsets: Sequence[object] | None = None,
    src_offsets: Sequence[object] | None = None,
    shape: Sequence[object] | None = None,
) -> None:
    """`pld.tile.get`: `pld.tensor.get` through on-chip staging tiles (scratch)."""
    if _is_region(stage2):
        dst_offsets, src_offsets, shape = stage2, dst_offsets, src_offsets  # type: ignore[assignment]
    get(dst, peer, src, dst_offsets, src_offsets, shape)
