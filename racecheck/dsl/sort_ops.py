"""The sort and top-k family a model's router and greedy sampler compute with:
`pl.sort32`, `pl.mrgsort` (both formats), the mask form of `pl.gather`, its inverse
`pl.tensor.scatter` (index and mask forms), `pl.cmp` and `pl.concat`. Like the rest of
tile math none of them accesses memory: a tensor operand is loaded whole first, and the
result carries the loads both its values and its indices came from, so a routing
decision taken from a top-k is traced to the scores.

Layout (PyPTO's TSORT32 / TMRGSORT): a sorted FP32 row holds (value, index) pairs
interleaved, the index's UINT32 bits stored in the odd FP32 slot; runs are sorted by
value, descending. `block_len` counts FP32 slots (64 = one sorted 32-pair block).
Equal values keep their order of position (a stable sort): the hardware's order among
ties is its own, and a routing that depends on it depends on input values that tie,
which the input-dependent exploration treats like any other input.
"""

from __future__ import annotations

import heapq
from enum import Enum
from typing import Any

import numpy as np

from racecheck.dsl.dtypes import FP32, DType
from racecheck.dsl.local_ops import _as_operand
from racecheck.dsl.location import unsupported
from racecheck.dsl.scalars import as_data, sources_of
from racecheck.dsl.tensors import Tile
from racecheck.report.reasons import ReasonCode, reason

SORT_BLOCK = 32  # TSORT32 sorts blocks of this many values


class MaskPattern(Enum):
    """`pl.tile.MaskPattern`: which columns the mask form of `pl.gather` keeps, read
    right to left (P0101 keeps columns 0, 2, 4, ...), as (stride, first column)."""

    P0101 = (2, 0)
    P1010 = (2, 1)
    P0001 = (4, 0)
    P0010 = (4, 1)
    P0100 = (4, 2)
    P1000 = (4, 3)
    P1111 = (1, 0)


def _tile(value: object, construct: str) -> Tile:
    operand = _as_operand(value)
    if not isinstance(operand, Tile):
        raise TypeError(reason(ReasonCode.SORT_NOT_TILE, construct=construct, value=repr(value)))
    return operand


def _pairs_tile(value: object, construct: str) -> Tile:
    tile = _tile(value, construct)
    if tile.dtype is not FP32:
        raise unsupported(
            reason(ReasonCode.SORT_PAIRS_DTYPE, construct=construct, dtype=repr(tile.dtype))
        )
    if tile.valid != tile.shape:
        raise unsupported(
            reason(ReasonCode.SORT_PARTLY_VALID, construct=construct, tile=repr(tile))
        )
    return tile


def _result(data: np.ndarray, *operands: Tile) -> Tile:
    sources = frozenset().union(*(operand.sources for operand in operands))
    return Tile(data=data, dtype=FP32, valid=tuple(data.shape), sources=sources)


def _sorted_pairs(pairs: np.ndarray) -> np.ndarray:
    """One row's (value, index-bits) pairs, [n, 2] float32, by value descending; equal
    values keep their order."""
    order = np.argsort(-pairs[:, 0].astype(np.float64), kind="stable")
    return pairs[order]


def sort32(src: object, idx: object) -> Tile:
    """`pl.sort32(src, idx)`: each block of 32 values of each row sorted descending,
    each value paired with the index at its position: [rows, 2 * cols] FP32."""
    values, index = _tile(src, "pl.sort32"), _tile(idx, "pl.sort32")
    if values.dtype is not FP32:
        raise unsupported(reason(ReasonCode.SORT32_DTYPE, dtype=repr(values.dtype)))
    if values.shape != index.shape or values.shape[-1] % SORT_BLOCK:
        raise ValueError(
            reason(
                ReasonCode.SORT32_SHAPES,
                values=str(list(values.shape)),
                indices=str(list(index.shape)),
                block=SORT_BLOCK,
            )
        )
    bits = np.ascontiguousarray(index.data.astype(np.int64).astype(np.uint32))
    pairs = np.stack([values.data.astype(np.float32), bits.view(np.float32)], axis=-1)
    rows = pairs.reshape(-1, values.shape[-1] // SORT_BLOCK, SORT_BLOCK, 2)
    for row in rows:
        for block in range(row.shape[0]):
            row[block] = _sorted_pairs(row[block])
    data = rows.reshape(*values.shape[:-1], 2 * values.shape[-1])
    return _result(data, values, index)


def _merged(runs: list[np.ndarray]) -> np.ndarray:
    """Sorted runs of pairs merged as TMRGSORT does: repeatedly the greatest head, the
    earlier run's on a tie."""
    keyed = [
        [(-float(pair[0]), position, number) for number, pair in enumerate(run)]
        for position, run in enumerate(runs)
    ]
    merged = [runs[position][number] for _, position, number in heapq.merge(*keyed)]
    return np.array(merged, dtype=np.float32).reshape(-1, 2)


def _format1(source: Tile, block_len: object) -> Tile:
    """Each window of four runs of `block_len` slots merged into one run."""
    length = int(as_data(block_len))
    width = source.shape[-1]
    if length <= 0 or length % 2 or width % length:
        raise ValueError(reason(ReasonCode.MRGSORT_BLOCK_LEN, length=length, width=width))
    data = source.data.copy()
    flat = data.reshape(-1, width)
    for row in flat:
        for start in range(0, width, 4 * length):
            window = row[start : start + 4 * length].reshape(-1, 2)
            per_run = length // 2
            runs = [window[at : at + per_run] for at in range(0, len(window), per_run)]
            row[start : start + 4 * length] = _merged(runs).reshape(-1)
    return _result(data, source)


def mrgsort(*sources: object, block_len: object = None, exhausted: bool = False) -> Tile:
    """`pl.mrgsort(src, block_len=n)` merges each four adjacent sorted runs of n slots;
    `pl.mrgsort(a, b[, c[, d]])` merges two to four sorted rows into one row."""
    if block_len is not None:
        if len(sources) != 1:
            raise ValueError(reason(ReasonCode.MRGSORT_ONE_SOURCE))
        return _format1(_pairs_tile(sources[0], "pl.mrgsort"), block_len)
    if not 2 <= len(sources) <= 4:
        raise ValueError(reason(ReasonCode.MRGSORT_ROWS, count=len(sources)))
    if exhausted:
        raise unsupported(reason(ReasonCode.MRGSORT_EXHAUSTED))
    tiles = [_pairs_tile(source, "pl.mrgsort") for source in sources]
    if len({tile.shape[:-1] for tile in tiles}) != 1 or tiles[0].data.ndim != 2:
        raise ValueError(reason(ReasonCode.MRGSORT_SHAPES))
    rows = [
        _merged([tile.data[row].reshape(-1, 2) for tile in tiles]).reshape(-1)
        for row in range(tiles[0].shape[0])
    ]
    return _result(np.stack(rows), *tiles)


def gather_mask(value: object, mask_pattern: object, output_dtype: object = None) -> Tile:
    """The mask form of `pl.gather`: the marked columns of each row, compacted; with
    `output_dtype` of the same size the bits reinterpreted (a sort's UINT32 indices
    read out of its FP32 pairs)."""
    if not isinstance(mask_pattern, MaskPattern):
        raise unsupported(reason(ReasonCode.GATHER_MASK, mask_pattern=repr(mask_pattern)))
    source = _tile(value, "pl.gather")
    stride, first = mask_pattern.value
    if source.shape[-1] % stride or source.valid != source.shape:
        raise ValueError(
            reason(
                ReasonCode.GATHER_MASK_ROWS,
                mask=mask_pattern.name,
                source=repr(source),
                stride=stride,
            )
        )
    picked = np.ascontiguousarray(source.data[..., first::stride])
    kind = source.dtype if output_dtype is None else output_dtype
    if not isinstance(kind, DType) or kind.nbytes != source.dtype.nbytes:
        raise ValueError(
            reason(ReasonCode.GATHER_OUTPUT_DTYPE, kind=repr(kind), dtype=repr(source.dtype))
        )
    data = kind.decode(source.dtype.encode(picked).view(kind.storage))
    return Tile(data=data, dtype=kind, valid=tuple(data.shape), sources=source.sources)


def scatter(
    value: object,
    dim: object = None,
    index: object = None,
    src: object = None,
    *,
    mask_pattern: object = None,
    dst: object = None,
) -> Tile:
    """`pl.tensor.scatter`, the inverse of gather: the index form `scatter(x, -1, idx,
    src)` is x with `out[b, idx[b, k]] = src[b, k]`; the mask form `scatter(x,
    mask_pattern=P, dst=d)` is d with x's columns in the ones P marks. Like gather, no
    memory is accessed: the result is a new tile."""
    if mask_pattern is not None or dst is not None:
        if dim is not None or index is not None or src is not None:
            raise ValueError(reason(ReasonCode.SCATTER_BOTH_FORMS))
        return _scatter_mask(value, mask_pattern, dst)
    base, values = _tile(value, "pl.tensor.scatter"), _tile(src, "pl.tensor.scatter")
    where = _tile(index, "pl.tensor.scatter")
    if as_data(dim) != -1 or base.data.ndim != 2 or where.shape != values.shape:
        raise unsupported(reason(ReasonCode.SCATTER_INDEX_FORM))
    columns = where.data.astype(np.int64)
    if columns.size and (columns.min() < 0 or columns.max() >= base.shape[-1]):
        raise IndexError(reason(ReasonCode.SCATTER_INDEX_OUTSIDE, columns=base.shape[-1]))
    data = base.data.copy()
    np.put_along_axis(data, columns, values.data.astype(data.dtype), axis=-1)
    sources = base.sources | values.sources | where.sources
    return Tile(data=data, dtype=base.dtype, valid=base.valid, sources=sources)


def _scatter_mask(value: object, mask_pattern: object, dst: object) -> Tile:
    if not isinstance(mask_pattern, MaskPattern):
        raise unsupported(reason(ReasonCode.SCATTER_MASK, mask_pattern=repr(mask_pattern)))
    source, target = _tile(value, "pl.tensor.scatter"), _tile(dst, "pl.tensor.scatter")
    stride, first = mask_pattern.value
    if target.shape[:-1] != source.shape[:-1] or target.shape[-1] != source.shape[-1] * stride:
        raise ValueError(
            reason(
                ReasonCode.SCATTER_MASK_COLUMNS,
                mask=mask_pattern.name,
                source=repr(source),
                target=repr(target),
                stride=stride,
            )
        )
    data = target.data.copy()
    data[..., first::stride] = source.data.astype(data.dtype)
    sources = source.sources | target.sources
    return Tile(data=data, dtype=target.dtype, valid=target.valid, sources=sources)


CMP_TYPES = (np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal)


def cmp(lhs: object, rhs: object, cmp_type: object = 0) -> Tile:
    """`pl.cmp(x, y, cmp_type)`: 1 where the comparison holds (0=eq, 1=ne, 2=lt, 3=le,
    4=gt, 5=ge), 0 elsewhere, in x's shape and dtype."""
    left = _tile(lhs, "pl.cmp")
    right = _as_operand(rhs)
    kind = int(as_data(cmp_type))
    if not 0 <= kind < len(CMP_TYPES):
        raise ValueError(reason(ReasonCode.CMP_TYPE, kind=kind, last=len(CMP_TYPES) - 1))
    other = right.data if isinstance(right, Tile) else as_data(right)
    data = CMP_TYPES[kind](left.data, other).astype(left.dtype.compute)
    sources = left.sources | sources_of(right)
    return Tile(data=data, dtype=left.dtype, valid=left.valid, sources=sources)


def concat(first: object, second: object) -> Tile:
    """`pl.concat(a, b)`: b's columns after a's, one row count and dtype."""
    left, right = _tile(first, "pl.concat"), _tile(second, "pl.concat")
    if left.shape[:-1] != right.shape[:-1] or left.dtype is not right.dtype:
        raise ValueError(reason(ReasonCode.CONCAT_SHAPES, left=repr(left), right=repr(right)))
    if left.valid[-1] != left.shape[-1]:
        raise unsupported(reason(ReasonCode.CONCAT_PARTLY_VALID, left=repr(left)))
    data = np.concatenate([left.data, right.data], axis=-1)
    valid = (*left.valid[:-1], left.shape[-1] + right.valid[-1])
    return Tile(data=data, dtype=left.dtype, valid=valid, sources=left.sources | right.sources)


OPS: dict[str, Any] = {
    "sort32": sort32,
    "mrgsort": mrgsort,
    "cmp": cmp,
    "concat": concat,
}
"""The names, as `pl.NAME`, `pl.tile.NAME` and `pl.tensor.NAME` (`racecheck.dsl.modules`);
the mask form of gather is reached through `racecheck.dsl.tile_math.gather`."""
