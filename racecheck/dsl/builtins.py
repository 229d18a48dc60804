"""`pld.tensor.*` builtin collectives, modelled by their documented lowering
(docs/model.md, "Builtin collectives").

Every builtin is a self-clearing signal barrier around its data movement: for
generation g = 1..G each rank AtomicAdds 1 to every peer's cell [me, 0] and waits
until its own cells [src, 0] (src != me) reach g; an epilogue adds -G to those own
cells so the signal ends all-zero. Every event carries the builtin's name as its
label and the user's line as its location. Data moves with real values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from racecheck.dsl.context import RankContext, rank_context
from racecheck.dsl.dist_ops import _window
from racecheck.dsl.local_ops import local_owner, require_view
from racecheck.dsl.tensors import TensorView
from racecheck.dsl.types import ReduceOp
from racecheck.errors import UnsupportedConstruct
from racecheck.events import NotifyOp, WaitCmp

REDUCERS: dict[ReduceOp, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ReduceOp.Sum: np.add,
    ReduceOp.Max: np.maximum,
    ReduceOp.Min: np.minimum,
    ReduceOp.Prod: np.multiply,
}


def _cell(signal: TensorView, row: int) -> list[int]:
    return [row] + [0] * (signal.ndim - 1)


def _peers(context: RankContext) -> list[int]:
    return [other for other in range(context.ranks) if other != context.rank]


def _generation(context: RankContext, signal: TensorView, generation: int, label: str) -> None:
    for peer in _peers(context):
        context.notify(signal, peer, _cell(signal, context.rank), 1, NotifyOp.ATOMIC_ADD, label)
    for source in _peers(context):
        context.wait(signal, _cell(signal, source), generation, WaitCmp.GE, label)


def _epilogue(context: RankContext, signal: TensorView, generations: int, label: str) -> None:
    for source in _peers(context):
        context.notify(
            signal, context.rank, _cell(signal, source), -generations, NotifyOp.ATOMIC_ADD, label
        )


def _whole(view: TensorView) -> tuple[list[int], list[int]]:
    return [0] * view.ndim, list(view.shape)


def _row(view: TensorView, row: int) -> tuple[list[int], list[int]]:
    return [row] + [0] * (view.ndim - 1), [1, *view.shape[1:]]


def _reducer(op: object, label: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    if op not in REDUCERS:
        raise TypeError(f"{label}: op= must be a pld.ReduceOp, got {op!r}")
    return REDUCERS[op]  # type: ignore[index]


def _reduce_region(
    context: RankContext,
    data: TensorView,
    region: tuple[list[int], list[int]],
    op: object,
    label: str,
) -> np.ndarray:
    combine = _reducer(op, label)
    offsets, extent = region
    total, _ = context.load(data, context.rank, offsets, extent, label)
    for peer in _peers(context):
        values, _ = context.load(data, peer, offsets, extent, label)
        total = combine(total, values)
    return np.asarray(total).astype(data.dtype.compute)


def barrier(signal: object) -> object:
    label = "pld.tensor.barrier"
    view = _window(signal, label, "the signal")
    context = rank_context(label)
    _generation(context, view, 1, label)
    _epilogue(context, view, 1, label)
    return signal


def allreduce(
    data: object,
    signal: object,
    *,
    op: ReduceOp = ReduceOp.Sum,
    mode: str = "mesh",
    core_num: int = 1,
) -> object:
    label = "pld.tensor.allreduce"
    data_view = _window(data, label, "data")
    signal_view = _window(signal, label, "the signal")
    context = rank_context(label)
    if mode not in ("mesh", "ring"):
        raise UnsupportedConstruct(f"{label}: mode={mode!r} is not 'mesh' or 'ring'")
    if mode == "ring":
        _check_ring_signal(context, signal_view, label)
    _generation(context, signal_view, 1, label)
    reduced = _reduce_region(context, data_view, _whole(data_view), op, label)
    _generation(context, signal_view, 2, label)
    context.store(data_view, context.rank, _whole(data_view)[0], reduced, label)
    _epilogue(context, signal_view, 2, label)
    return data


def _check_ring_signal(context: RankContext, signal: TensorView, label: str) -> None:
    """The ring lowering addresses a [2(N-1), N] signal; a smaller one is out of bounds."""
    rows = 2 * (context.ranks - 1)
    needed = (rows, context.ranks)
    if signal.ndim != 2 or signal.shape[0] < needed[0] or signal.shape[1] < needed[1]:
        context.fail_bounds(
            f"{label}(mode='ring') needs a signal of {list(needed)}, got {signal!r}"
        )


def broadcast(data: object, signal: object, *, root: object = 0) -> object:
    from racecheck.dsl.scalars import as_index

    label = "pld.tensor.broadcast"
    data_view = _window(data, label, "data")
    signal_view = _window(signal, label, "the signal")
    context = rank_context(label)
    source = as_index(root)
    _generation(context, signal_view, 1, label)
    if context.rank != source:
        offsets, extent = _whole(data_view)
        values, _ = context.load(data_view, source, offsets, extent, label)
        context.store(data_view, context.rank, offsets, values, label)
    _epilogue(context, signal_view, 1, label)
    return data


def _scatter_rows(
    context: RankContext,
    source: TensorView,
    target: TensorView,
    row_of_source: Callable[[int], tuple[list[int], list[int]] | None],
    label: str,
) -> None:
    """For every rank d: put local `source` (or its row d) into row `me` of target[d]."""
    row_offsets, row_extent = _row(target, context.rank)
    for destination in range(context.ranks):
        region = row_of_source(destination) or _whole(source)
        values, _ = context.load(
            source, local_owner(source, context.rank), region[0], region[1], label
        )
        if values.size != int(np.prod(row_extent)):
            raise UnsupportedConstruct(
                f"{label}: a row of {source!r} does not fit row {context.rank} of {target!r}"
            )
        context.store(target, destination, row_offsets, values.reshape(row_extent), label)


def allgather(local: object, target: object, signal: object, out: object = None) -> object:
    label = "pld.tensor.allgather"
    local_view = require_view(local, label, "local")
    target_view = _window(target, label, "target")
    signal_view = _window(signal, label, "the signal")
    context = rank_context(label)
    if out is not None:
        return _allgather_into(
            context, local_view, target_view, signal_view, require_view(out, label, "out"), label
        )
    _scatter_rows(context, local_view, target_view, lambda _: None, label)
    _generation(context, signal_view, 1, label)
    _epilogue(context, signal_view, 1, label)
    return _first_window(local_view, target_view)


def _allgather_into(
    context: RankContext,
    local: TensorView,
    target: TensorView,
    signal: TensorView,
    out: TensorView,
    label: str,
) -> TensorView:
    """The four-argument intrinsic `allgather(local, target, signal, out)`: stage `local`
    into row `me` of the own target, barrier, then read row p of every target[p] into
    block p of the plain tensor `out` (row-major); returns `out`."""
    row_offsets, row_extent = _row(target, context.rank)
    values, _ = context.load(local, local_owner(local, context.rank), *_whole(local), label)
    if values.size != int(np.prod(row_extent)):
        raise UnsupportedConstruct(
            f"{label}: {local!r} does not fit row {context.rank} of {target!r}"
        )
    context.store(target, context.rank, row_offsets, values.reshape(row_extent), label)
    _generation(context, signal, 1, label)
    flat = np.zeros(int(np.prod(out.shape)), dtype=out.dtype.compute)
    if flat.size != int(np.prod(target.shape)):
        raise UnsupportedConstruct(f"{label}: {out!r} does not hold all of {target!r}")
    block = int(np.prod(row_extent))
    for source in range(context.ranks):
        offsets, extent = _row(target, source)
        gathered, _ = context.load(target, source, offsets, extent, label)
        flat[source * block : (source + 1) * block] = gathered.reshape(-1)
    context.store(
        out, local_owner(out, context.rank), [0] * out.ndim, flat.reshape(out.shape), label
    )
    _epilogue(context, signal, 1, label)
    return out


def reduce_scatter(target: object, signal: object, *, op: ReduceOp = ReduceOp.Sum) -> object:
    label = "pld.tensor.reduce_scatter"
    if op is not ReduceOp.Sum:
        raise UnsupportedConstruct(f"{label} supports op=pld.ReduceOp.Sum only")
    target_view = _window(target, label, "target")
    signal_view = _window(signal, label, "the signal")
    context = rank_context(label)
    own_row = _row(target_view, context.rank)
    _generation(context, signal_view, 1, label)
    reduced = _reduce_region(context, target_view, own_row, op, label)
    _generation(context, signal_view, 2, label)
    context.store(target_view, context.rank, own_row[0], reduced, label)
    _epilogue(context, signal_view, 2, label)
    return target


def all_to_all(source: object, target: object, signal: object) -> object:
    label = "pld.tensor.all_to_all"
    source_view = require_view(source, label, "input")
    target_view = _window(target, label, "target")
    signal_view = _window(signal, label, "the signal")
    context = rank_context(label)
    _scatter_rows(
        context, source_view, target_view, lambda destination: _row(source_view, destination), label
    )
    _generation(context, signal_view, 1, label)
    _epilogue(context, signal_view, 1, label)
    return _first_window(source_view, target_view)


def _first_window(*views: TensorView) -> TensorView:
    """What a builtin returns (docs/model.md): its first window argument."""
    return next(view for view in views if view.is_window)
