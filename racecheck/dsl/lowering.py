"""The kernels the builtin collectives lower to, run on one rank (docs/model.md).

One function per builtin, parametrised by `Lowering`: `INCORE` is the LowerCompositeOps
sequence of a call inside a kernel (§4), `HOST` the hand-written kernel that a call in
the host function dispatches to every device of the domain (§3). Both are built from
one signal barrier: for generation g each rank AtomicAdds 1 into the cell it owns on
every peer and waits until each peer's cell in its own instance reaches g; an
epilogue adds -total to those own cells, so the signal ends all-zero.

The barrier, the InCore broadcast, allgather and all_to_all are written against
`CollectiveOps` (racecheck/dsl/collective_ops.py): the co-simulation runs them on
`RankOps`, the all-P tracer on symbolic ranks (racecheck/allp/shadow.py), so the
tracer follows these sequences, not a copy of them. The other builtins take the
co-simulation's `RankOps` only; the tracer refuses them.

Every event carries the builtin's name as its label and the user's line of the call.
Data moves with real values. Model boundaries: the blocks of the host all-reduce and
all_to_all_v run one after another (they share no cell and no element written);
transfers read exactly the elements they use (the 32-byte rounding of a transfer reads
bytes whose values are dropped); a host ring that PyPTO's kernel would refuse returns
at once, as the kernel does.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

import numpy as np

from racecheck.dsl.collective_ops import CollectiveOps, Index, RankOps, Shaped
from racecheck.dsl.context import RankContext
from racecheck.dsl.local_ops import local_owner
from racecheck.dsl.location import user_location
from racecheck.dsl.tensors import TensorView
from racecheck.dsl.types import ReduceOp
from racecheck.errors import UnsupportedConstruct
from racecheck.events import NotifyOp, WaitCmp
from racecheck.report.reasons import ReasonCode, reason


class Lowering(Enum):
    INCORE = "InCore"  # a call inside a kernel (LowerCompositeOps)
    HOST = "host"  # a call in the host function: the builtin's own kernel per device


HOST_TILE = 256  # elements per tile of the host kernels (docs/model.md)
CHUNK_BYTES = 16 * 1024  # bytes per chunk of the InCore all-reduces (docs/model.md)
FP16_ALIGN = 16  # elements: FP16 ring segments start on this boundary (docs/model.md)
HOST_RING_LINE = 16  # elements the host ring flushes at once (docs/model.md)

Reducer = Callable[[np.ndarray, np.ndarray], np.ndarray]
REDUCERS: dict[ReduceOp, Reducer] = {
    ReduceOp.Sum: np.add,
    ReduceOp.Max: np.maximum,
    ReduceOp.Min: np.minimum,
    ReduceOp.Prod: np.multiply,
}

Region = tuple[list[int], list[int]]  # offsets, extent
CellOf = Callable[[Index], list[Index | int]]  # the cell a rank announces itself in
Dim = TypeVar("Dim")  # an extent: int, or an expression in the all-P tracer
View = TypeVar("View", bound=Shaped[Any])  # a TensorView, or a symbolic view


# ---------------------------------------------------------------------------- signals


def lane_cell(signal: Shaped[object], row: Index, lane: int = 0) -> list[Index | int]:
    """Cell `[row, lane]` of a `[W, stride]` signal, or `[row]` of a flat one."""
    if signal.ndim == 1:
        return [row + lane]  # type: ignore[operator]  # an int or a symbolic integer
    return [row, lane, *[0] * (signal.ndim - 2)]


def returns_at_once(context: RankContext, why: str) -> None:
    """PyPTO's host kernel refuses these operands silently: it returns at once, touching
    nothing, and the call is a no-op the user should hear about."""
    where = user_location()
    context.note(reason(ReasonCode.LOWERING_RETURNS_AT_ONCE, line=where.line, why=why))


def generation(
    ops: CollectiveOps[Index, Dim, View],
    signal: View,
    expected: int,
    cell_of: CellOf[Index],
    label: str,
    cmp: WaitCmp = WaitCmp.GE,
) -> None:
    """Announce to every peer, then wait for every peer's announcement to reach `expected`."""
    for peer in ops.peers():
        ops.notify(signal, peer, cell_of(ops.rank), 1, NotifyOp.ATOMIC_ADD, label)
    for source in ops.peers():
        ops.wait(signal, cell_of(source), expected, cmp, label)


def epilogue(
    ops: CollectiveOps[Index, Dim, View],
    signal: View,
    total: int,
    cell_of: CellOf[Index],
    label: str,
) -> None:
    for source in ops.peers():
        ops.notify(signal, ops.rank, cell_of(source), -total, NotifyOp.ATOMIC_ADD, label)


def mesh_cells(signal: Shaped[object]) -> Callable[[Index], list[Index | int]]:
    return lambda rank: lane_cell(signal, rank)


# ---------------------------------------------------------------------------- regions


def whole(view: Shaped[Dim]) -> tuple[list[int], list[Dim]]:
    return [0] * view.ndim, list(view.shape)


def row(view: Shaped[Dim], index: Index) -> tuple[list[Index | int], list[Dim | int]]:
    if view.ndim == 1:
        return [index], [1]
    return [index, *[0] * (view.ndim - 1)], [1, *view.shape[1:]]


def rows(view: Shaped[Dim], first: Index, count: int) -> tuple[list[Index | int], list[Dim | int]]:
    return [first, *[0] * (view.ndim - 1)], [count, *view.shape[1:]]


def chunk_width(data: TensorView) -> int:
    """Elements per chunk of the InCore lowering: 16 KiB. A smaller tensor is one chunk
    (PyPTO pads it to 32 bytes; the padding is read and dropped)."""
    return CHUNK_BYTES // data.dtype.nbytes


def spans(start: int, stop: int, width: int) -> list[Region]:
    """`[start, stop)` of a flat view cut into runs of at most `width` elements."""
    return [([first], [min(width, stop - first)]) for first in range(start, stop, width)]


def flat(view: TensorView) -> TensorView:
    """The same bytes as one row-major run of elements (the host kernels' addressing)."""
    return TensorView(
        memory=view.memory,
        kind=view.kind,
        name=view.name,
        base=view.base,
        shape=(math.prod(view.shape),),
        dtype=view.dtype,
        memory_nbytes=view.memory_nbytes,
        devices=view.devices,
    )


def _reducer(op: object, label: str) -> Reducer:
    if op not in REDUCERS:
        raise TypeError(reason(ReasonCode.LOWERING_OP, label=label, op=repr(op)))
    return REDUCERS[op]  # type: ignore[index]


def reduce_over_ranks(
    context: RankOps, data: TensorView, region: Region, op: object, label: str
) -> np.ndarray:
    """Own values of `region` combined with every peer's, in rank order of the peers."""
    combine = _reducer(op, label)
    offsets, extent = region
    total, _ = context.load(data, context.rank, offsets, extent, label)
    for peer in context.peers():
        values, _ = context.load(data, peer, offsets, extent, label)
        total = combine(total, values)
    return np.asarray(total).astype(data.dtype.compute)


# ---------------------------------------------------------------------------- builtins


def barrier(
    ops: CollectiveOps[Index, Dim, View], lowering: Lowering, signal: View, label: str
) -> None:
    cells = mesh_cells(signal)
    generation(ops, signal, 1, cells, label)
    epilogue(ops, signal, 1, cells, label)


def allreduce_mesh(
    context: RankOps,
    lowering: Lowering,
    data: TensorView,
    signal: TensorView,
    op: object,
    core_num: int,
    label: str,
) -> None:
    if lowering is Lowering.INCORE:
        _incore_allreduce_mesh(context, data, signal, op, label)
        return
    stride = 1 if signal.ndim == 1 else signal.shape[1]
    blocks = min(core_num, stride)
    for block in range(blocks):
        _host_allreduce_block(context, data, signal, op, block, blocks, label)


def _incore_allreduce_mesh(
    context: RankOps, data: TensorView, signal: TensorView, op: object, label: str
) -> None:
    """Chunks of `chunk_width` elements on the cells [me, 0] (docs/model.md)."""
    elements = flat(data)
    chunks = spans(0, elements.shape[0], chunk_width(data))
    _allreduce_pieces(context, elements, signal, op, chunks, mesh_cells(signal), label)


def _host_allreduce_block(
    context: RankOps,
    data: TensorView,
    signal: TensorView,
    op: object,
    block: int,
    blocks: int,
    label: str,
) -> None:
    """Block b: the tiles b, b+C, ... of `HOST_TILE` elements on lane b (docs/model.md)."""

    def cells(rank: int) -> list[int]:
        return lane_cell(signal, rank, block)

    elements = flat(data)
    numel = elements.shape[0]
    tiles = [
        ([start], [min(HOST_TILE, numel - start)])
        for start in range(block * HOST_TILE, numel, blocks * HOST_TILE)
    ]
    _allreduce_pieces(context, elements, signal, op, tiles, cells, label)


def _allreduce_pieces(
    context: RankOps,
    elements: TensorView,
    signal: TensorView,
    op: object,
    pieces: list[Region],
    cells: CellOf[int],
    label: str,
) -> None:
    """B(1); per piece k: reduce it over the ranks, B(2+k), store the own piece;
    epilogue -(1+pieces): the mesh allreduce of the InCore and the host lowering."""
    generation(context, signal, 1, cells, label)
    for number, piece in enumerate(pieces):
        reduced = reduce_over_ranks(context, elements, piece, op, label)
        generation(context, signal, 2 + number, cells, label)
        context.store(elements, context.rank, piece[0], reduced, label)
    epilogue(context, signal, 1 + len(pieces), cells, label)


def allreduce_ring(
    context: RankOps,
    lowering: Lowering,
    data: TensorView,
    signal: TensorView,
    op: object,
    label: str,
) -> None:
    ranks = context.ranks
    if lowering is Lowering.INCORE:
        needed = (2 * (ranks - 1), ranks)
        if signal.ndim != 2 or signal.shape[0] < needed[0] or signal.shape[1] < needed[1]:
            context.fail_bounds(
                reason(
                    ReasonCode.LOWERING_RING_SIGNAL,
                    label=label,
                    needed=str(list(needed)),
                    signal=repr(signal),
                )
            )
        _incore_ring(context, data, signal, op, label)
        return
    elements = flat(data)
    rounds = 2 * (ranks - 1) + 1
    runs = (
        ranks > 1
        and op is ReduceOp.Sum
        and data.dtype.name == "FP32"
        and elements.shape[0] % ranks == 0
        and signal.ndim == 2
        and signal.shape[0] >= rounds
        and signal.shape[1] >= ranks
    )
    if runs:
        _note_unflushed_chunk(context, elements.shape[0] // ranks, label)
        _host_ring(context, elements, signal, label)
    elif ranks > 1:
        returns_at_once(
            context,
            reason(
                ReasonCode.LOWERING_RING_OPERANDS,
                label=label,
                ranks=ranks,
                shape=str([rounds, ranks]),
                op=format(op),
                data=repr(data),
                signal=repr(signal),
            ),
        )


def _note_unflushed_chunk(context: RankOps, chunk: int, label: str) -> None:
    """PyPTO's host ring flushes whole 16-element lines of a chunk: a chunk that is not a
    multiple of 16 elements may leave its last line unflushed (docs/model.md)."""
    if chunk % HOST_RING_LINE:
        where = user_location()
        context.note(
            reason(
                ReasonCode.LOWERING_UNFLUSHED,
                line=where.line,
                label=label,
                chunk=chunk,
                multiple=HOST_RING_LINE,
            )
        )


def ring_bounds(data: TensorView, ranks: int) -> list[int]:
    """Segment i of the InCore ring is `[bounds[i], bounds[i+1])`: floor(i*n/N), FP16
    bounds rounded up to 16 elements (docs/model.md)."""
    numel = math.prod(data.shape)
    bounds = [index * numel // ranks for index in range(ranks + 1)]
    if data.dtype.name == "FP16":
        bounds = [min(numel, -(-bound // FP16_ALIGN) * FP16_ALIGN) for bound in bounds]
    return bounds


def _incore_ring(
    context: RankOps, data: TensorView, signal: TensorView, op: object, label: str
) -> None:
    """Reduce-scatter step s (row s-1) combines the left rank's segment (me-s-1) mod N
    into the own one, allgather step s (row N-2+s) copies its segment (me-s) mod N.
    Every step runs the same number of subchunks on every rank, each between row
    barriers 2k+1 and 2k+2; the epilogue takes -2*chunks from every row (docs/model.md)."""
    ranks, me = context.ranks, context.rank
    combine = _reducer(op, label)
    elements = flat(data)
    bounds = ring_bounds(data, ranks)
    width = chunk_width(data)
    chunks = max(-(-(stop - start) // width) for start, stop in itertools.pairwise(bounds))
    steps: list[tuple[int, int, Reducer | None]] = [
        (step - 1, (me - step - 1) % ranks, combine) for step in range(1, ranks)
    ]
    steps += [(ranks - 2 + step, (me - step) % ranks, None) for step in range(1, ranks)]
    for signal_row, segment, reduce in steps:
        start, stop = bounds[segment], bounds[segment + 1]
        cells = _row_cells(signal, signal_row)
        for number in range(chunks):
            first = start + number * width
            part = ([first], [min(width, stop - first)]) if first < stop else None
            generation(context, signal, 2 * number + 1, cells, label)
            values = _ring_receive(context, elements, part, reduce, label)
            generation(context, signal, 2 * number + 2, cells, label)
            if part is not None:
                context.store(elements, me, part[0], values, label)
    for signal_row in range(2 * (ranks - 1)):
        epilogue(context, signal, 2 * chunks, _row_cells(signal, signal_row), label)


def _row_cells(signal: TensorView, signal_row: int) -> CellOf[int]:
    return lambda rank: lane_cell(signal, signal_row, rank)


def _ring_receive(
    context: RankOps,
    elements: TensorView,
    part: Region | None,
    reduce: Reducer | None,
    label: str,
) -> np.ndarray:
    """The left rank's `part`, combined with the own one by `reduce` (a copy if None);
    an inactive subchunk (None) reads the own first element and keeps nothing."""
    me = context.rank
    if part is None:
        context.load(elements, me, [0], [1], label)
        return np.empty(0)
    received, _ = context.load(elements, (me - 1) % context.ranks, *part, label)
    if reduce is None:
        return np.asarray(received)
    own, _ = context.load(elements, me, *part, label)
    return np.asarray(reduce(own, received)).astype(elements.dtype.compute)


def _host_ring(context: RankOps, elements: TensorView, signal: TensorView, label: str) -> None:
    """Per round j a barrier on row j; reduce-scatter step s adds the left rank's chunk
    (me-s-1) mod N into the own one, allgather step s copies the left rank's chunk
    (me-s) mod N; a return barrier on row 2(N-1); -1 on every row (docs/model.md)."""
    ranks, me = context.ranks, context.rank
    chunk = elements.shape[0] // ranks
    left = (me - 1) % ranks

    def region(index: int) -> Region:
        return [index * chunk], [chunk]

    for step in range(1, ranks):
        generation(context, signal, 1, _row_cells(signal, step - 1), label)
        offsets, extent = region((me - step - 1) % ranks)
        own, _ = context.load(elements, me, offsets, extent, label)
        received, _ = context.load(elements, left, offsets, extent, label)
        context.store(elements, me, offsets, np.add(own, received), label)
    for step in range(1, ranks):
        generation(context, signal, 1, _row_cells(signal, ranks - 2 + step), label)
        offsets, extent = region((me - step) % ranks)
        received, _ = context.load(elements, left, offsets, extent, label)
        context.store(elements, me, offsets, received, label)
    generation(context, signal, 1, _row_cells(signal, 2 * (ranks - 1)), label)
    for round_row in range(2 * ranks - 1):
        epilogue(context, signal, 1, _row_cells(signal, round_row), label)


def broadcast(
    context: RankOps,
    lowering: Lowering,
    data: TensorView,
    signal: TensorView,
    root: int,
    label: str,
) -> None:
    if lowering is Lowering.INCORE:
        incore_broadcast(context, data, signal, root, label)
        return
    context.require_rank(root, f"{label}: root")
    cells = mesh_cells(signal)
    elements = flat(data)
    numel = elements.shape[0]
    tiles = [([start], [min(HOST_TILE, numel - start)]) for start in range(0, numel, HOST_TILE)]
    for number, tile in enumerate(tiles):
        if context.rank == root:
            context.get(elements, root, tile, label)  # the root re-stores its own tile
        generation(context, signal, 1 + number, cells, label)
        if context.rank != root:
            context.get(elements, root, tile, label)
    epilogue(context, signal, len(tiles), cells, label)


def incore_broadcast(
    ops: CollectiveOps[Index, Dim, View], data: View, signal: View, root: Index, label: str
) -> None:
    """B1; every rank but the root copies the root's data into its own; -1."""
    ops.require_rank(root, f"{label}: root")
    cells = mesh_cells(signal)
    generation(ops, signal, 1, cells, label)
    if ops.rank != root:
        ops.get(data, root, whole(data), label)
    epilogue(ops, signal, 1, cells, label)


def _first_row(view: Shaped[Dim]) -> tuple[list[int], list[Dim | int]]:
    return row(view, 0) if view.ndim > 1 else whole(view)


def allgather(
    ops: CollectiveOps[Index, Dim, View],
    lowering: Lowering,
    local: View,
    target: View,
    signal: View,
    label: str,
    cmp: WaitCmp = WaitCmp.GE,
) -> None:
    """Put `local[0, :]` into row `me` of every rank's target, self included; B1; -1.
    `defer=True` waits in B1 with `cmp` (unsigned, as `defer_wait` compares)."""
    for destination in ops.each_rank():
        ops.put(local, _first_row(local), target, destination, row(target, ops.rank), label)
    cells = mesh_cells(signal)
    generation(ops, signal, 1, cells, label, cmp)
    epilogue(ops, signal, 1, cells, label)


def allgather_into(
    context: RankOps,
    lowering: Lowering,
    local: TensorView,
    target: TensorView,
    signal: TensorView,
    out: TensorView,
    label: str,
) -> None:
    """The four-argument intrinsic `allgather(local, target, signal, out)`: stage `local`
    into row `me` of the own target; B1; read row p of every target[p] into block p of
    the plain tensor `out` (row-major); -1."""
    context.put(local, whole(local), target, context.rank, row(target, context.rank), label)
    cells = mesh_cells(signal)
    generation(context, signal, 1, cells, label)
    if math.prod(out.shape) != math.prod(target.shape):
        raise UnsupportedConstruct(
            reason(ReasonCode.LOWERING_OUT_SHORT, label=label, out=repr(out), target=repr(target))
        )
    gathered = [
        context.load(target, source, *row(target, source), label)[0].reshape(-1)
        for source in range(context.ranks)
    ]
    values = np.concatenate(gathered).astype(out.dtype.compute).reshape(out.shape)
    context.store(out, local_owner(out, context.rank), whole(out)[0], values, label)
    epilogue(context, signal, 1, cells, label)


def reduce_scatter(
    context: RankOps, lowering: Lowering, target: TensorView, signal: TensorView, label: str
) -> None:
    """B1; reduce row `me` over the ranks; B2; -2. The InCore sequence stores after B2,
    the host kernel before it, and returns at once when target has fewer than N rows."""
    if lowering is Lowering.HOST and target.shape[0] < context.ranks:
        rows = reason(
            ReasonCode.LOWERING_ROWS, label=label, ranks=context.ranks, target=repr(target)
        )
        returns_at_once(context, rows)
        return
    cells = mesh_cells(signal)
    own_row = row(target, context.rank)
    generation(context, signal, 1, cells, label)
    reduced = reduce_over_ranks(context, target, own_row, ReduceOp.Sum, label)
    if lowering is Lowering.HOST:
        context.store(target, context.rank, own_row[0], reduced, label)
    generation(context, signal, 2, cells, label)
    if lowering is Lowering.INCORE:
        context.store(target, context.rank, own_row[0], reduced, label)
    epilogue(context, signal, 2, cells, label)


def all_to_all(
    ops: CollectiveOps[Index, Dim, View],
    lowering: Lowering,
    source: View,
    target: View,
    signal: View,
    label: str,
) -> None:
    """Put `input[d, :]` into row `me` of rank d's target, for every d; B1; -1."""
    for destination in ops.each_rank():
        ops.put(source, row(source, destination), target, destination, row(target, ops.rank), label)
    cells = mesh_cells(signal)
    generation(ops, signal, 1, cells, label)
    epilogue(ops, signal, 1, cells, label)


def all_to_all_into(
    context: RankOps,
    lowering: Lowering,
    source: TensorView,
    target: TensorView,
    signal: TensorView,
    out: TensorView,
    label: str,
) -> None:
    """The four-argument intrinsic `all_to_all(input, target, signal, out)`: stage
    `input` into the own target; B1; read row `me` of every target[s] into row s of the
    plain tensor `out`; B2, which keeps the next staging off rows still being read; -2."""
    context.put(source, whole(source), target, context.rank, whole(target), label)
    cells = mesh_cells(signal)
    generation(context, signal, 1, cells, label)
    for source_rank in range(context.ranks):
        offsets, extent = row(target, context.rank)
        values, _ = context.load(target, source_rank, offsets, extent, label)
        at, shape = row(out, source_rank)
        context.store(out, local_owner(out, context.rank), at, values.reshape(shape), label)
    generation(context, signal, 2, cells, label)
    epilogue(context, signal, 2, cells, label)


def all_to_all_v(
    ops: CollectiveOps[Index, Dim, View],
    lowering: Lowering,
    source: View,
    target: View,
    signal: View,
    *counts: View,
    label: str,
) -> None:
    """Per destination d, self included: rows = min(send_counts[d], M); Set-notify rows
    into d's recv_counts[me] before the data; put the full M-row block d of input into
    block `me` of d's target. Then B1 and -1 (docs/model.md). Without `counts` (the
    first InCore form, `all_to_all_v(input, target, signal)`), the blocks alone."""
    divisor = signal.shape[0] if lowering is Lowering.INCORE else ops.ranks
    block = ops.quotient(target.shape[0], divisor)
    for destination in ops.each_rank():
        if counts:
            send_counts, recv_counts = counts
            ops.publish_count(
                send_counts,
                row(send_counts, destination),
                block,
                recv_counts,
                destination,
                row(recv_counts, ops.rank)[0],
                label,
            )
        ops.put(
            source,
            rows(source, ops.scaled(destination, block), block),
            target,
            destination,
            rows(target, ops.scaled(ops.rank, block), block),
            label,
        )
    cells = mesh_cells(signal)
    generation(ops, signal, 1, cells, label)
    epilogue(ops, signal, 1, cells, label)


def _lane_shares(
    ranks: int, blocks: int, lane: int, width: int, target: TensorView
) -> list[tuple[int, tuple[int, int]]]:
    """The (destination, [start, stop) of its `width`-element block) that `lane` moves:
    below the rank count lane b serves destinations b, b + blocks, ...; at or above it,
    `blocks / ranks` lanes split each destination's block at 32-byte boundaries."""
    if blocks < ranks:
        return [(destination, (0, width)) for destination in range(lane, ranks, blocks)]
    split = blocks // ranks
    align = max(1, 32 // target.dtype.nbytes)
    share = -(-width // split // align) * align if width else 0
    start = min(width, lane % split * share)
    stop = min(width, start + share)
    return [(lane // split, (start, stop))] if stop > start else []
