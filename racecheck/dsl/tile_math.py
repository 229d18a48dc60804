"""Tile arithmetic a model's kernels compute with (pypto-lib's norms, gates and
experts): element-wise math, row and column broadcasts and reductions, transposes,
accumulating matmuls, valid-shape metadata and pads. None of them accesses memory: a
tensor operand is loaded whole first (`racecheck.dsl.local_ops._as_operand`), and the
result carries the loads its values depend on, so a value that steers communication
is traced to its inputs like any other.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import numpy as np

from racecheck.dsl import lanes, sort_ops
from racecheck.dsl.dtypes import INT32
from racecheck.dsl.local_ops import _as_operand, _elementwise, indices, load
from racecheck.dsl.location import unsupported
from racecheck.dsl.scalars import as_data, sources_of
from racecheck.dsl.tensors import Tile
from racecheck.dsl.tile_ops import product, tile_create
from racecheck.report.reasons import ReasonCode, reason


class PadValue(Enum):
    """`pl.PadValue`: what `pl.fillpad` writes past a tile's valid shape."""

    null = "null"
    zero = "zero"
    max = "max"
    min = "min"


def _quiet(function: Any) -> Any:
    def computed(*arrays: Any) -> Any:
        with np.errstate(all="ignore"):  # a zero or a negative is the device's to handle
            return function(*arrays)

    return computed


def recip(value: object, high_precision: bool = False) -> Any:
    return _elementwise(_quiet(lambda a: 1 / a), value)


def rsqrt(value: object, high_precision: bool = False) -> Any:
    return _elementwise(_quiet(lambda a: 1 / np.sqrt(a)), value)


def sqrt(value: object) -> Any:
    return _elementwise(_quiet(np.sqrt), value)


def log(value: object, high_precision: bool = False) -> Any:
    return _elementwise(_quiet(np.log), value)


def _tile(value: object, construct: str) -> Tile:
    operand = _as_operand(value)
    if not isinstance(operand, Tile):
        raise TypeError(
            reason(ReasonCode.TILE_MATH_NOT_TILE, construct=construct, value=repr(value))
        )
    return operand


def _reduced(value: object, construct: str, reduce: Any) -> Tile:
    """Each valid row reduced over its valid elements: a [rows, 1] tile of the source's
    rows, valid in its valid rows."""
    source = _tile(value, construct)
    reduced = reduce(source.valid_values(), axis=-1, keepdims=True)
    data = np.zeros((*source.shape[:-1], 1), dtype=source.dtype.compute)
    data[tuple(slice(0, extent) for extent in reduced.shape)] = reduced
    valid = (*source.valid[:-1], 1)
    return Tile(data=data, dtype=source.dtype, valid=valid, sources=source.sources)


def row_sum_any(value: object, tmp_tile: object = None, **options: object) -> Tile:
    """`pl.row_sum(x[, tmp])`: each row's sum of its valid elements, [rows, 1]."""
    return _reduced(value, "pl.row_sum", np.sum)


def row_max(value: object, tmp_tile: object = None, **options: object) -> Tile:
    return _reduced(value, "pl.row_max", np.max)


def row_min(value: object, tmp_tile: object = None, **options: object) -> Tile:
    return _reduced(value, "pl.row_min", np.min)


def _column_reduced(value: object, construct: str, reduce: Any) -> Tile:
    """Each valid column reduced over its valid elements: [1, cols], valid in its
    valid columns."""
    source = _tile(value, construct)
    reduced = reduce(source.valid_values(), axis=-2, keepdims=True)
    data = np.zeros((*source.shape[:-2], 1, source.shape[-1]), dtype=source.dtype.compute)
    data[tuple(slice(0, extent) for extent in reduced.shape)] = reduced
    valid = (*source.valid[:-2], 1, source.valid[-1])
    return Tile(data=data, dtype=source.dtype, valid=valid, sources=source.sources)


def col_max(value: object, tmp_tile: object = None, **options: object) -> Tile:
    return _column_reduced(value, "pl.col_max", np.max)


def col_sum(value: object, tmp_tile: object = None, **options: object) -> Tile:
    return _column_reduced(value, "pl.col_sum", np.sum)


def _expand(value: Any, like: Any) -> Any:
    return np.broadcast_to(value, np.shape(like)).copy()


def row_expand(lhs: object, rhs: object) -> Any:
    """`pl.row_expand(x, v)`: v's [rows, 1] column repeated across x's shape."""
    return _elementwise(lambda a, b: _expand(b, a), lhs, rhs)


def broadcast(operation: Any) -> Any:
    """`pl.row_expand_mul` and its kin: `x op v` with v broadcast along x's rows
    ([rows, 1]) or columns ([1, cols]), as numpy broadcasts."""
    return lambda lhs, rhs: _elementwise(_quiet(operation), lhs, rhs)


def transpose(value: object, axis1: object, axis2: object) -> Tile:
    source = _tile(value, "pl.transpose")
    first, second = indices([axis1, axis2])
    data = np.swapaxes(source.data, first, second).copy()
    valid = list(source.valid)
    valid[first], valid[second] = valid[second], valid[first]
    return Tile(data=data, dtype=source.dtype, valid=tuple(valid), sources=source.sources)


def matmul_acc(
    acc: object,
    lhs: object,
    rhs: object,
    a_trans: bool = False,
    b_trans: bool = False,
    **options: object,
) -> Tile:
    """`pl.matmul_acc(acc, lhs, rhs)`: a cube op, acc + lhs @ rhs in FP32."""
    lanes.note_cube("pl.matmul_acc")
    total, left, right = (_tile(v, "pl.matmul_acc") for v in (acc, lhs, rhs))
    added, valid = product(left, right, a_trans, b_trans)
    if added.shape != total.shape:
        raise ValueError(f"pl.matmul_acc: a {list(added.shape)} product into {total!r}")
    data = (total.data.astype(np.float32) + added).astype(total.dtype.compute)
    sources = total.sources | left.sources | right.sources
    return Tile(data=data, dtype=total.dtype, valid=valid, sources=sources)


def set_validshape(value: object, valid_rows: object, valid_cols: object) -> Tile:
    """`pl.set_validshape(t, rows, cols)`: the same values with another valid shape."""
    source = _tile(value, "pl.set_validshape")
    rows, cols = indices([valid_rows, valid_cols])
    if rows > source.shape[-2] or cols > source.shape[-1]:
        raise ValueError(
            reason(
                ReasonCode.TILE_VALIDSHAPE_PAST, rows=rows, cols=cols, shape=str(list(source.shape))
            )
        )
    valid = (*source.shape[:-2], rows, cols)
    return Tile(data=source.data, dtype=source.dtype, valid=valid, sources=source.sources)


def fillpad(value: object, pad_value: object = PadValue.zero) -> Tile:
    """`pl.fillpad(t, pad)`: the elements past the valid shape set to the pad; the
    whole tile is valid afterwards."""
    source = _tile(value, "pl.fillpad")
    pad = _pad(pad_value, source)
    data = np.full(source.shape, pad, dtype=source.dtype.compute)
    region = tuple(slice(0, extent) for extent in source.valid)
    data[region] = source.data[region]
    return Tile(data=data, dtype=source.dtype, valid=source.shape, sources=source.sources)


def _pad(pad_value: object, tile: Tile) -> float:
    kind = np.dtype(tile.dtype.compute)
    limits = np.finfo(kind) if kind.kind == "f" else np.iinfo(kind)
    if pad_value in (PadValue.zero, 0):
        return 0
    if pad_value is PadValue.max or pad_value == float("inf"):
        return float(limits.max)
    if pad_value is PadValue.min or pad_value == float("-inf"):
        return float(limits.min)
    raise ValueError(reason(ReasonCode.TILE_FILLPAD_VALUE, pad_value=repr(pad_value)))


def gather(value: object, dim: object = None, index: object = None, **forms: object) -> Tile:
    """`pl.gather(x, dim=-1, index=i)` (index form): out[b, k] = x[b, i[b, k]], its values
    depending on both operands' loads; `pl.gather(x, mask_pattern=P[, output_dtype=])` is
    the mask form (`racecheck.dsl.sort_ops.gather_mask`). The compare form is not modelled."""
    if "mask_pattern" in forms and dim is None and index is None:
        return sort_ops.gather_mask(value, **forms)
    if forms or dim is None or index is None:
        raise unsupported(reason(ReasonCode.TILE_GATHER_FORM))
    source, chosen = _tile(value, "pl.gather"), _tile(index, "pl.gather")
    (axis,) = indices([dim])
    if axis not in (-1, source.data.ndim - 1):
        raise unsupported(reason(ReasonCode.TILE_GATHER_AXIS, axis=axis))
    picks = chosen.data.astype(np.int64)
    if picks.size and (picks.min() < 0 or picks.max() >= source.shape[-1]):
        raise IndexError(
            reason(ReasonCode.TILE_GATHER_INDEX, columns=source.shape[-1], tile=repr(value))
        )
    data = np.take_along_axis(source.data, picks, axis=-1).astype(source.dtype.compute)
    sources = source.sources | chosen.sources
    return Tile(data=data, dtype=source.dtype, valid=chosen.valid, sources=sources)


def arange(start: object, shape: Any, dtype: object = None, descending: bool = False) -> Tile:
    """`pl.arange(start, [1, n], dtype=INT32)` (PyPTO's `ci`): start, start±1, ... along
    the row; the value of `start` (which may come from memory) is carried."""
    extent = tuple(indices(shape))
    if any(size != 1 for size in extent[:-1]):
        raise unsupported(reason(ReasonCode.TILE_ARANGE_SHAPE, shape=str(list(extent))))
    tile = tile_create(extent, INT32 if dtype is None else dtype)
    step = -1 if descending else 1
    first = as_data(start)
    tile.data[...] = (first + step * np.arange(extent[-1])).reshape(extent)
    tile.sources = sources_of(start)
    return tile


def create_l1(shape: Any, dtype: object, transpose: bool = False) -> Tile:
    """`pl.create_l1(shape, dtype)`: an on-chip accumulator a kernel fills row by row
    with `pl.gather_row`; its contents are undefined until then (zeros here)."""
    return tile_create(shape, dtype)


def gather_row(
    acc: object,
    src: object,
    dst_offset: Any,
    src_offset: Any,
    shapes: Any,
    transpose: bool = False,
    *,
    valid_shape: Any = None,
) -> Tile:
    """`pl.gather_row(acc, src, dst, src_off, [r, c])`: a load of `src`'s block at
    `src_off` (its `valid_shape` part: exactly the bytes read) placed into a copy of
    `acc` at `dst` (transposed with `transpose=True`)."""
    target = _tile(acc, "pl.gather_row")
    block = load(src, src_offset, shapes, valid_shape=valid_shape)
    values = block.valid_values()
    values = values.swapaxes(-1, -2) if transpose else values
    row, col = indices(dst_offset)
    if row + values.shape[-2] > target.shape[-2] or col + values.shape[-1] > target.shape[-1]:
        raise IndexError(
            reason(
                ReasonCode.TILE_GATHER_ROW,
                shape=str(list(values.shape)),
                at=str([row, col]),
                acc=repr(acc),
            )
        )
    data = target.data.copy()
    data[..., row : row + values.shape[-2], col : col + values.shape[-1]] = values
    sources = target.sources | block.sources
    return Tile(data=data, dtype=target.dtype, valid=target.valid, sources=sources)


def create_tile(shape: Any, dtype: object, target_memory: object = None, **options: object) -> Tile:
    """`pl.create_tile(shape, dtype, target_memory)`: as `pl.tile.create`."""
    return tile_create(shape, dtype, target_memory, **options)


BROADCASTS = {
    "row_expand_mul": broadcast(lambda a, b: a * b),
    "row_expand_div": broadcast(lambda a, b: a / b),
    "row_expand_sub": broadcast(lambda a, b: a - b),
    "row_expand_add": broadcast(lambda a, b: a + b),
    "col_expand_mul": broadcast(lambda a, b: a * b),
    "col_expand_add": broadcast(lambda a, b: a + b),
    "col_expand_sub": broadcast(lambda a, b: a - b),
    "col_expand_div": broadcast(lambda a, b: a / b),
    "col_expand_max": broadcast(np.maximum),
    "col_expand_min": broadcast(np.minimum),
    "col_expand_expdif": broadcast(lambda a, b: np.exp(a - b)),
    "col_expand": row_expand,  # v's [1, cols] row repeated down x's rows
}

OPS: dict[str, Any] = {
    "recip": recip,
    "rsqrt": rsqrt,
    "sqrt": sqrt,
    "log": log,
    "row_sum": row_sum_any,
    "row_max": row_max,
    "row_min": row_min,
    "col_max": col_max,
    "col_sum": col_sum,
    "row_expand": row_expand,
    **BROADCASTS,
    "transpose": transpose,
    "matmul_acc": matmul_acc,
    "set_validshape": set_validshape,
    "fillpad": fillpad,
    "create_tile": create_tile,
    "create_l1": create_l1,
    "gather_row": gather_row,
    "gather": gather,
    "arange": arange,
}
"""The names, as `pl.NAME` and `pl.tile.NAME` (`racecheck.dsl.modules`)."""
