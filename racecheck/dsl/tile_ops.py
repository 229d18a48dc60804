"""Kernel-local values and the tile ops that make them (docs/model.md).

Tiles and the tensors a kernel creates for itself (`pl.full`, `pl.create_tensor`,
`pl.array.create`) live in the rank's private memory: reading and writing them is
plain numpy and records no event. `pl.slice` of a tensor is a view (its bytes are
read where the view is loaded); `pl.assemble` into a tensor is a store. Cube ops
(`pl.matmul`, `pl.move` to Left/Right) are noted for `dsl.lanes`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from racecheck.dsl import lanes
from racecheck.dsl.context import current, is_rank_context, rank_context
from racecheck.dsl.dtypes import FP32, DType
from racecheck.dsl.local_ops import (
    _as_operand,
    cast,
    indices,
    load_block,
    local_owner,
    require_view,
    tile_block,
    tile_update,
    tile_values,
)
from racecheck.dsl.location import unsupported
from racecheck.dsl.scalars import DeviceInt, as_data, sources_of
from racecheck.dsl.scopes import TaskIdArray, TaskIdType, chip_tasks
from racecheck.dsl.tensors import TensorView, Tile, is_contiguous_block
from racecheck.dsl.types import AtomicType, MemorySpace
from racecheck.report.reasons import ReasonCode, reason

CUBE_MEMORIES = frozenset({MemorySpace.Left, MemorySpace.Right})


def _dtype(value: object, construct: str) -> DType:
    if not isinstance(value, DType):
        raise TypeError(reason(ReasonCode.TILE_NEEDS_DTYPE, construct=construct, value=repr(value)))
    return value


_storages = itertools.count(1)


def _filled(shape: Sequence[object], dtype: object, value: object, construct: str) -> Tile:
    """A new kernel-local buffer."""
    kind = _dtype(dtype, construct)
    extent = tuple(indices(shape))
    data = np.full(extent, as_data(value), dtype=kind.compute)
    sources = sources_of(value)
    return Tile(data=data, dtype=kind, valid=extent, sources=sources, storage=next(_storages))


def const(value: object, dtype: object) -> Any:
    """`pl.const(value, dtype) -> Scalar`."""
    return cast(value, target_type=_dtype(dtype, "pl.const"))


def full(shape: Sequence[object], dtype: object, value: object) -> Tile:
    """`pl.full(shape, dtype, value)`: a new kernel-local tensor."""
    return _filled(shape, dtype, value, "pl.full")


def tile_full(shape: Sequence[object], dtype: object, value: object, **options: object) -> Tile:
    """`pl.tile.full(shape, dtype, value)`."""
    return _filled(shape, dtype, value, "pl.tile.full")


def tile_create(
    shape: Sequence[object], dtype: object, target_memory: object = None, **options: object
) -> Tile:
    """`pl.tile.create(shape, dtype, target_memory=Vec)`: contents undefined (zeros here)."""
    return _filled(shape, dtype, 0, "pl.tile.create")


def create_tensor(
    shape: Sequence[object],
    dtype: object = FP32,
    layout: object = None,
    manual_dep: bool = False,
    init_value: object = None,
) -> Tile | TensorView:
    """`pl.create_tensor(shape, dtype, layout=ND, manual_dep=False, init_value=None)`
    (also `pl.tensor.create`): in a per-device function, a tensor its tasks share
    (`racecheck.cosim.rank.RankContext.create_tensor`); in a kernel, a kernel-local one."""
    kind = _dtype(dtype, "pl.create_tensor")
    fill = _init_value(init_value, kind)
    tasks = chip_tasks()
    if tasks is not None:
        return tasks.create_tensor(tuple(indices(shape)), kind, manual_dep=manual_dep, fill=fill)
    if manual_dep:
        raise unsupported(reason(ReasonCode.TILE_MANUAL_DEP_OUTSIDE))
    return _filled(shape, dtype, fill, "pl.create_tensor")


def _init_value(init_value: object, dtype: DType) -> float:
    """`init_value=`: the runtime fills the new buffer before any task runs (PyPTO #823);
    a non-zero fill of a 16-bit float is rejected at PyPTO's codegen."""
    if init_value is None:
        return 0
    if not isinstance(init_value, (int, float)) or isinstance(init_value, bool):
        raise unsupported(reason(ReasonCode.TILE_INIT_VALUE, init_value=repr(init_value)))
    if init_value != 0 and dtype.is_float and dtype.nbytes == 2:
        raise unsupported(
            reason(ReasonCode.TILE_INIT_VALUE_DTYPE, init_value=repr(init_value), dtype=dtype.name)
        )
    return init_value


def reshape_tensor(value: object, shape: Sequence[object]) -> Tile | TensorView:
    """`pl.reshape(x, shape)` (also `pl.tensor.reshape`): a tensor's view with the same
    elements in another shape (no access), or a tile reshaped (`pl.tile.reshape`)."""
    if not isinstance(value, TensorView):
        return reshape(value, shape)
    extent = tuple(indices(shape))
    if math.prod(extent) != math.prod(value.shape):
        raise TypeError(
            reason(ReasonCode.TILE_RESHAPE_COUNT, tile=repr(value), shape=str(list(extent)))
        )
    return dataclasses.replace(value, shape=extent, name=f"{value.name}.reshape")


def tensor_dim(tensor: object, axis: object) -> DeviceInt:
    """`pl.tensor.dim(t, axis)`: the extent of one axis (negative counts from the end)."""
    if not isinstance(tensor, (TensorView, Tile)):
        raise TypeError(reason(ReasonCode.TILE_DIM_NOT_TENSOR, tensor=repr(tensor)))
    (index,) = indices([axis])
    shape = tensor.shape
    if not -len(shape) <= index < len(shape):
        raise IndexError(f"pl.tensor.dim axis {index} of {tensor!r}")
    return DeviceInt(shape[index])


def _tile(value: object, construct: str) -> Tile:
    operand = _as_operand(value)
    if not isinstance(operand, Tile):
        raise TypeError(reason(ReasonCode.TILE_NEEDS_TILE, construct=construct, value=repr(value)))
    return operand


def row_sum(tile: object, tmp_tile: object = None, **options: object) -> Tile:
    """`pl.tile.row_sum(tile, tmp_tile)`: the sum of each row's valid elements, [rows, 1]."""
    source = _tile(tile, "pl.tile.row_sum")
    values = source.valid_values()
    sums = values.sum(axis=-1, keepdims=True).astype(source.dtype.compute)
    return Tile(data=sums, dtype=source.dtype, valid=tuple(sums.shape), sources=source.sources)


def reshape(tile: object, shape: Sequence[object]) -> Tile:
    """`pl.tile.reshape(tile, shape)`: the valid region is carried, never widened — it
    must be a row-major prefix of the tile, and is the origin-anchored region of the
    new shape holding the same cells (PyPTO's rule)."""
    source = _tile(tile, "pl.tile.reshape")
    extent = tuple(indices(shape))
    data = source.data.reshape(extent)
    valid = extent if source.valid == source.shape else _carried(source, extent)
    return Tile(data=data, dtype=source.dtype, valid=valid, sources=source.sources)


def _carried(source: Tile, extent: tuple[int, ...]) -> tuple[int, ...]:
    count = math.prod(source.valid)
    if _prefix_region(source.shape, count) != source.valid:
        raise TypeError(
            reason(
                ReasonCode.TILE_RESHAPE_VALID,
                valid=str(list(source.valid)),
                shape=str(list(source.shape)),
            )
        )
    region = _prefix_region(extent, count)
    if region is None:
        raise TypeError(reason(ReasonCode.TILE_RESHAPE_REGION, shape=str(list(extent))))
    return region


def _prefix_region(shape: tuple[int, ...], count: int) -> tuple[int, ...] | None:
    """The origin-anchored region of `shape` whose cells are the first `count` in
    row-major order: ones, then one partial axis, then whole axes."""
    for axis in range(len(shape) - 1, -1, -1):
        inner = math.prod(shape[axis + 1 :])
        if count % inner == 0 and count // inner <= shape[axis]:
            return (*([1] * axis), count // inner, *shape[axis + 1 :])
    return None


def move(tile: object, target_memory: object = None, **options: object) -> Tile:
    """`pl.move(tile, target_memory)`: the same values in another on-chip memory."""
    if target_memory in CUBE_MEMORIES:
        lanes.note_cube(f"pl.move to {target_memory}")
    source = _tile(tile, "pl.move")
    return Tile(
        data=np.array(source.data), dtype=source.dtype, valid=source.valid, sources=source.sources
    )


def matmul(lhs: object, rhs: object, *args: object, **options: object) -> Tile:
    """`pl.matmul(lhs, rhs, ...)`: a cube op; the product is accumulated in FP32."""
    lanes.note_cube("pl.matmul")
    left, right = _tile(lhs, "pl.matmul"), _tile(rhs, "pl.matmul")
    out_dtype = options.get("out_dtype")
    kind = out_dtype if isinstance(out_dtype, DType) else FP32
    data, valid = product(left, right, bool(options.get("a_trans")), bool(options.get("b_trans")))
    return Tile(
        data=data.astype(kind.compute),
        dtype=kind,
        valid=valid,
        sources=left.sources | right.sources,
    )


def product(
    left: Tile, right: Tile, a_trans: bool, b_trans: bool
) -> tuple[np.ndarray, tuple[int, ...]]:
    """`left @ right` (each transposed first when asked) in FP32, over the valid values:
    a tile of the operands' full rows and columns, valid where both operands are."""
    a = left.valid_values().astype(np.float32)
    b = right.valid_values().astype(np.float32)
    a, b = (a.swapaxes(-1, -2) if a_trans else a), (b.swapaxes(-1, -2) if b_trans else b)
    rows = left.shape[-1] if a_trans else left.shape[-2]
    cols = right.shape[-2] if b_trans else right.shape[-1]
    if _zero_operand(a, b):
        valid = _zeros_product(a, b)
    else:
        with np.errstate(all="ignore"):  # inf * 0 is the device's NaN to produce
            valid = a @ b
    if valid.shape[-2:] == (rows, cols):
        return valid, tuple(valid.shape)
    data = np.zeros((*valid.shape[:-2], rows, cols), dtype=np.float32)
    data[..., : valid.shape[-2], : valid.shape[-1]] = valid
    return data, tuple(valid.shape)


def _zero_operand(a: np.ndarray, b: np.ndarray) -> bool:
    """One operand all zeros and the other finite: the product is zeros, known without
    the multiply (a model's weights start as zero pages; checking is linear, the
    product cubic)."""
    return (not b.any() and bool(np.isfinite(a).all())) or (
        not a.any() and bool(np.isfinite(b).all())
    )


def _zeros_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return np.zeros((*batch, a.shape[-2], b.shape[-1]), dtype=np.float32)


def slice_(
    x: object,
    shape: Sequence[object],
    offset: Sequence[object],
    valid_shape: Sequence[object] | None = None,
    **options: object,
) -> TensorView | Tile:
    """`pl.slice(x, shape, offset, valid_shape=None)`: a view of a block of `x`."""
    extent = indices(valid_shape if valid_shape is not None else shape)
    if isinstance(x, Tile):
        return tile_block(x, offset, extent)
    view = require_view(x, "pl.slice", "the source")
    offsets = indices(offset)
    full = tuple(indices(shape))
    if tuple(extent) != full and is_rank_context(current()):
        return _padded(load_block(view, offsets, extent, extent), full)
    if is_contiguous_block(view.shape, extent):
        return view.block(offsets, extent, f"{view.name}[slice]")
    return load_block(view, offsets, extent, extent)


def _padded(loaded: Tile, shape: tuple[int, ...]) -> Tile:
    """A slice `shape` large valid in what was loaded (PyPTO's `valid_shape`): only the
    valid region is read; the rest is padding no op reads."""
    data = np.zeros(shape, dtype=loaded.dtype.compute)
    data[tuple(slice(0, extent) for extent in loaded.shape)] = loaded.data
    return Tile(data=data, dtype=loaded.dtype, valid=loaded.shape, sources=loaded.sources)


def assemble(
    target: object, source: object, offset: Sequence[object], *, atomic: object = None
) -> TensorView | Tile:
    """`pl.assemble(target, source, offset, *, atomic=None_) -> target`."""
    accumulate = atomic is AtomicType.Add
    if atomic not in (None, AtomicType.None_, AtomicType.Add):
        raise TypeError(reason(ReasonCode.TILE_ASSEMBLE_ATOMIC, atomic=repr(atomic)))
    value = _as_operand(source)
    sources = sources_of(value)  # a tile's or a tainted scalar's loads
    if isinstance(target, Tile):
        values = tile_values(value, target.dtype)
        if accumulate:
            values = values + tile_block(target, offset, values.shape).data
        return tile_update(target, offset, values, sources)
    view = require_view(target, "pl.assemble", "the target")
    context = rank_context("pl.assemble")
    context.store(
        view,
        local_owner(view, context.rank),
        indices(offset),
        tile_values(value, view.dtype),
        "pl.assemble",
        accumulate=accumulate,
        sources=sources,
    )
    return view


class Array:
    """`pl.array.create(extent, dtype)`: a kernel-local array of scalars."""

    __slots__ = ("dtype", "values")

    def __init__(self, extent: int, dtype: DType) -> None:
        self.dtype = dtype
        self.values: list[object] = [0] * extent

    def __getitem__(self, index: object) -> object:
        return self.values[_position(index)]

    def __setitem__(self, index: object, value: object) -> None:
        self.values[_position(index)] = value

    def __len__(self) -> int:
        return len(self.values)


def _position(index: object) -> int:
    (position,) = indices([index])
    return position


def array_create(extent: object, dtype: object) -> Array | TaskIdArray:
    (size,) = indices([extent])
    if dtype is TaskIdType.TASK_ID:
        return TaskIdArray(size)
    return Array(size, _dtype(dtype, "pl.array.create"))
