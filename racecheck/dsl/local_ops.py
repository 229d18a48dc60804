"""`pl.*` operations of one rank: loads, stores, element reads/writes, tile math, loops.

A window view used by a local op means the rank's own instance (`t[me]`); a host
view means the shared host tensor. Inside a kernel, tensor-level forms lower to
loads and stores as PyPTO lowers them: a view given to tile math is read whole, a
slice (`t[a:b, c:d]`, `pl.tensor.slice`) that is not one contiguous block is loaded
where it is taken, and `t[block] = value` stores into the block. Memory accesses go
through the active rank context, which bounds-checks, schedules and records them;
tile math is plain numpy.
"""

from __future__ import annotations

import dis
import functools
import linecache
import math
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import CodeType, FrameType
from typing import Any

import numpy as np

from racecheck.dsl.context import rank_context
from racecheck.dsl.dtypes import INDEX, DType
from racecheck.dsl.groups import loop_indices
from racecheck.dsl.location import innermost_user_frame, unsupported
from racecheck.dsl.parallel import record_local, tracked
from racecheck.dsl.scalars import (
    DeviceIndex,
    DeviceInt,
    Tainted,
    as_data,
    as_index,
    chosen_scalar,
    device_scalar,
    sources_of,
    typed,
)
from racecheck.dsl.summary import summarised, widened_indices
from racecheck.dsl.summary_state import active as summary_active
from racecheck.dsl.symbolic import Forms, InputBlock, Op, first_form, within
from racecheck.dsl.tensors import KernelOps, TensorView, Tile, provide_kernel_ops
from racecheck.dsl.types import DimExpr
from racecheck.events import HOST_OWNER, LOOPS


def indices(values: Sequence[object]) -> list[int]:
    """Offsets or a shape as the user gave them: a list or tuple of integers."""
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"offsets and shapes are lists such as [i, j], got {values!r}")
    if not summary_active():
        return [as_index(value) for value in values]
    return widened_indices(values)


def local_owner(view: TensorView, rank: int) -> int:
    return rank if view.is_window else HOST_OWNER


def require_view(value: object, construct: str, role: str) -> TensorView:
    if not isinstance(value, TensorView):
        raise TypeError(f"{construct}: {role} must be a tensor or window view, got {value!r}")
    return value


def make_tile(
    values: np.ndarray,
    dtype: DType,
    shape: Sequence[int],
    sources: frozenset,
    symbols: Forms | None = None,
) -> Tile:
    extent = tuple(values.shape)
    if tuple(shape) == extent:
        return Tile(data=values, dtype=dtype, valid=extent, sources=sources, symbols=symbols)
    data = np.zeros(tuple(shape), dtype=dtype.compute)
    valid = tuple(slice(0, size) for size in extent)
    data[valid] = values
    padded: Forms | None = None
    if isinstance(symbols, InputBlock):
        padded = symbols.padded(tuple(shape))
    elif symbols is not None:
        padded = np.full(tuple(shape), None, dtype=object)
        padded[valid] = symbols
    return Tile(data=data, dtype=dtype, valid=extent, sources=sources, symbols=padded)


def load_region(
    view: TensorView,
    owner: int,
    offsets: Sequence[object],
    shape: Sequence[object],
    valid_shape: Sequence[object] | None,
    label: str,
) -> Tile:
    context = rank_context(label)
    tile_shape = indices(shape)
    extent = indices(valid_shape) if valid_shape is not None else tile_shape
    if len(extent) != len(tile_shape) or any(
        valid > full for valid, full in zip(extent, tile_shape, strict=True)
    ):
        raise ValueError(f"{label}: valid_shape {extent} does not fit in the shape {tile_shape}")
    start = indices(offsets)
    values, ref = context.load(view, owner, start, extent, label)
    # the forms a rank context keeps are those of its own instance (a peer's: opaque)
    own = owner == local_owner(view, context.rank)
    symbols = context.input_symbols(view, start, extent) if own else None
    return make_tile(values, view.dtype, tile_shape, frozenset({ref}), symbols)


def load(
    tensor: object,
    offsets: Sequence[object],
    shapes: Sequence[object] | None = None,
    valid_shape: Sequence[object] | None = None,
    target_memory: object = None,
    *,
    shape: Sequence[object] | None = None,
) -> Tile:
    """`pl.load(t, offsets, shapes, valid_shape=None, target_memory=Vec)` (also `shape=`);
    from a kernel-local tensor it is a copy of the block, with no event."""
    extent = shapes if shapes is not None else shape
    if extent is None:
        raise TypeError("pl.load needs shapes=")
    if isinstance(tensor, Tile):
        return tile_block(tensor, offsets, valid_shape if valid_shape is not None else extent)
    view = require_view(tensor, "pl.load", "the source")
    context = rank_context("pl.load")
    return load_region(
        view, local_owner(view, context.rank), offsets, extent, valid_shape, "pl.load"
    )


def tile_block(tile: Tile, offsets: Sequence[object], extent: Sequence[object]) -> Tile:
    """A block of a tile or kernel-local tensor, as a new tile."""
    starts, sizes = indices(offsets), indices(extent)
    record_local(tile, starts, sizes, write=False)
    region = tuple(slice(start, start + size) for start, size in zip(starts, sizes, strict=True))
    data = np.array(tile.data[region])
    return Tile(data=data, dtype=tile.dtype, valid=tuple(data.shape), sources=tile.sources)


def tile_update(
    target: Tile, offsets: Sequence[object], values: np.ndarray, sources: frozenset
) -> Tile:
    """`target` with `values` written at `offsets`: stores into kernel-local memory."""
    data = np.array(target.data)
    starts = indices(offsets)
    block = np.asarray(values).reshape(_trailing(values, len(starts)))
    record_local(target, starts, list(block.shape), write=True)
    data[
        tuple(slice(start, start + size) for start, size in zip(starts, block.shape, strict=True))
    ] = block
    return Tile(
        data=data,
        dtype=target.dtype,
        valid=target.valid,
        sources=target.sources | sources,
        storage=target.storage,
    )


def _trailing(values: np.ndarray, ndim: int) -> tuple[int, ...]:
    shape = list(np.shape(values))
    while len(shape) > ndim and shape[0] == 1:
        shape.pop(0)
    return tuple([1] * (ndim - len(shape)) + shape)


def load_block(
    view: TensorView, offsets: Sequence[int], extent: Sequence[int], kept: Sequence[int]
) -> Tile:
    """A kernel's `t[a:b, c:d]` or `pl.tensor.slice`: this rank's block as a tile, shaped
    by the axes the selection keeps."""
    context = rank_context("a tensor slice")
    values, ref = context.load(
        view, local_owner(view, context.rank), offsets, extent, "tensor.slice"
    )
    shape = tuple(kept)
    symbols = context.input_symbols(view, offsets, extent)
    return Tile(
        data=values.reshape(shape),
        dtype=view.dtype,
        valid=shape,
        sources=frozenset({ref}),
        symbols=None if symbols is None else symbols.reshape(shape),
    )


def tensor_slice(
    tensor: object,
    shape: Sequence[object],
    offsets: Sequence[object],
    valid_shape: Sequence[object] | None = None,
) -> Tile:
    view = require_view(tensor, "pl.tensor.slice", "the source")
    extent = indices(valid_shape if valid_shape is not None else shape)
    return load_block(view, indices(offsets), extent, extent)


def _as_operand(value: object) -> object:
    """A tensor operand of tile math is read whole (tensor ops lower to loads); a
    pl.dynamic dim is its value in the running program."""
    if isinstance(value, TensorView):
        return load(value, [0] * value.ndim, list(value.shape))
    if isinstance(value, DimExpr):
        return value.__index__()
    return value


def assign(view: TensorView, offsets: Sequence[int], extent: Sequence[int], value: object) -> None:
    """`t[block] = value`: a tile, a tensor view (read whole) or a scalar, stored into
    this rank's block of `t`."""
    context = rank_context("a slice assignment")
    source = _as_operand(value)
    if isinstance(source, Tile):
        values = source.valid_values()
        if source.shape == tuple(extent) and source.valid != source.shape:
            extent = list(source.valid)  # a partly valid tile stores its valid region
    else:
        values = np.full(tuple(extent), as_data(source), dtype=view.dtype.compute)
    if values.size != int(np.prod(extent)):
        raise ValueError(
            f"assigning {list(values.shape)} values to a {list(extent)} block of {view!r}"
        )
    context.store(
        view,
        local_owner(view, context.rank),
        offsets,
        values.reshape(tuple(extent)),
        "tensor.assemble",
        sources=sources_of(source),
    )


def tile_values(tile: object, dtype: DType) -> np.ndarray:
    if isinstance(tile, Tile):
        return tile.valid_values()
    return np.asarray(as_data(tile), dtype=dtype.compute).reshape(1, 1)


def tile_forms(tile: object) -> Forms | None:
    """The symbolic forms of what `tile_values` gives (None: none has one)."""
    if isinstance(tile, Tile):
        if tile.symbols is None:
            return None
        valid = tuple(slice(0, extent) for extent in tile.valid)
        symbols = tile.symbols
        return symbols.block(valid) if isinstance(symbols, InputBlock) else symbols[valid]
    if isinstance(tile, Tainted) and tile.symbolic is not None:
        forms = np.empty((1, 1), dtype=object)
        forms[0, 0] = tile.symbolic
        return forms
    return None


def store(
    tile: object,
    offsets: Sequence[object],
    output_tensor: object,
    shapes: Sequence[object] | None = None,
) -> TensorView | Tile:
    """`pl.store(tile, offsets, tensor[, shapes])`; `shapes`, PyPTO's ND partition
    shape, is modelled where it is the tile's own extent (the region stored)."""
    if shapes is not None:
        extent = tuple(indices(shapes))
        own = tile.valid if isinstance(tile, Tile) else None
        if own is None or math.prod(extent) != math.prod(own):
            raise unsupported(f"pl.store(..., shapes={list(extent)}) of a tile valid in {own}")
    if isinstance(output_tensor, Tile):
        values = tile_values(tile, output_tensor.dtype)
        return tile_update(output_tensor, offsets, values, sources_of(tile))
    view = require_view(output_tensor, "pl.store", "the destination")
    context = rank_context("pl.store")
    values = tile_values(tile, view.dtype)
    owner = local_owner(view, context.rank)
    context.store(
        view,
        owner,
        indices(offsets),
        values,
        "pl.store",
        sources=sources_of(tile),
        forms=tile_forms(tile),
    )
    return view


def element_offsets(offsets: object) -> Sequence[object]:
    """`pl.read`/`pl.write`'s indices: a list per dimension, or one bare index, which
    PyPTO wraps in a list (python/pypto/language/op/tensor_ops.py, read and write)."""
    return offsets if isinstance(offsets, (list, tuple)) else [offsets]


def read(tensor: object, offsets: object) -> Tainted:
    offsets = element_offsets(offsets)
    if isinstance(tensor, Tile):
        return tensor[tuple(offsets)]
    view = require_view(tensor, "pl.read", "the source")
    context = rank_context("pl.read")
    start, one = indices(offsets), [1] * len(offsets)
    values, ref = context.load(view, local_owner(view, context.rank), start, one, "pl.read")
    symbol = first_form(context.input_symbols(view, start, one))
    return Tainted(values.reshape(-1)[0], frozenset({ref}), symbol)


def write(tensor: object, offsets: object, value: object) -> None:
    offsets = element_offsets(offsets)
    if isinstance(tensor, Tile):  # `pl.tile.write` of one element of a local tile
        tensor[tuple(offsets)] = value
        return
    view = require_view(tensor, "pl.write", "the destination")
    context = rank_context("pl.write")
    values = np.full([1] * len(offsets), as_data(value), dtype=view.dtype.compute)
    owner = local_owner(view, context.rank)
    forms = tile_forms(value)
    context.store(
        view,
        owner,
        indices(offsets),
        values,
        "pl.write",
        sources=sources_of(value),
        forms=None if forms is None else forms.reshape(values.shape),
    )


def _elementwise(function: Callable[..., Any], *raw_operands: object) -> Any:
    operands = [_as_operand(operand) for operand in raw_operands]
    tiles = [operand for operand in operands if isinstance(operand, Tile)]
    if not tiles:
        return function(*operands)
    first = tiles[0]
    arrays = [
        operand.data if isinstance(operand, Tile) else as_data(operand) for operand in operands
    ]
    with np.errstate(all="ignore"):  # overflow and 0/0 are the device's values to produce
        data = np.asarray(function(*arrays)).astype(first.dtype.compute)
    sources = frozenset().union(*(sources_of(operand) for operand in operands))
    return Tile(data=data, dtype=first.dtype, valid=first.valid, sources=sources)


def add(lhs: object, rhs: object) -> Any:
    return _elementwise(lambda a, b: a + b, lhs, rhs)


def sub(lhs: object, rhs: object) -> Any:
    return _elementwise(lambda a, b: a - b, lhs, rhs)


def mul(lhs: object, rhs: object) -> Any:
    return _elementwise(lambda a, b: a * b, lhs, rhs)


def div(lhs: object, rhs: object) -> Any:
    return _elementwise(lambda a, b: a / b, lhs, rhs)


def maximum(lhs: Any, rhs: Any) -> Any:
    if _scalar_from_memory(lhs, rhs):
        return chosen_scalar(Op.MAX, lhs, rhs)  # an exact choice, or by comparison
    return _elementwise(np.maximum, lhs, rhs)


def minimum(lhs: Any, rhs: Any) -> Any:
    if _scalar_from_memory(lhs, rhs):
        return chosen_scalar(Op.MIN, lhs, rhs)
    return _elementwise(np.minimum, lhs, rhs)


def _scalar_from_memory(*operands: object) -> bool:
    """Scalars, one of them read from memory: the result is one of them, chosen with
    an exact form (`chosen_scalar`) or by a comparison `Tainted` records."""
    scalar = all(isinstance(operand, (int, float, Tainted)) for operand in operands)
    return scalar and any(isinstance(operand, Tainted) for operand in operands)


def neg(value: object) -> Any:
    return _elementwise(lambda a: -a, value)


def absolute(value: object) -> Any:
    return _elementwise(np.abs, value)


def exp(value: object) -> Any:
    return _elementwise(np.exp, value)


def cast(
    value: object, target_type: DType | None = None, mode: object = None, **aliases: object
) -> Any:
    target = target_type or aliases.get("dtype")
    if not isinstance(target, DType):
        raise TypeError(f"pl.cast needs target_type=<dtype>, got {target!r}")
    value = _as_operand(value)
    if isinstance(value, Tile):
        data = target.decode(target.encode(value.data.astype(target.compute)))
        return Tile(data=data, dtype=target, valid=value.valid, sources=value.sources)
    plain = as_data(value)
    if target.is_float:
        converted: float | DeviceInt = float(plain)
    else:  # truncated, then wrapped into the target's range as the device does
        stored = target.encode(np.asarray(int(plain)))
        converted = typed(target, int(target.decode(stored)))
    if not isinstance(value, Tainted):
        return converted
    symbolic = value.symbolic if within(value.symbolic, target.limits) else None
    dtype = None if target.is_float else target
    return Tainted(converted, value.sources, symbolic, dtype=dtype, guards=value.guards)


class _CarriedLoop:
    __slots__ = ("values",)

    def __init__(self, values: tuple[object, ...]) -> None:
        self.values = values


_carried = threading.local()


def _carried_stack() -> list[_CarriedLoop]:
    stack = getattr(_carried, "stack", None)
    if stack is None:
        stack = _carried.stack = []
    return stack


def _loop_indices(args: tuple[object, ...]) -> Iterator[object]:
    if not 1 <= len(args) <= 3:
        raise TypeError(f"pl.range takes 1 to 3 bounds, got {len(args)}")
    if any(isinstance(bound, Tainted) and bound.symbolic is not None for bound in args[:2]):
        return _compared(args)
    return loop_indices(args, range(*indices(args)))  # INDEX, docs/model.md §1


def _compared(args: tuple[object, ...]) -> Iterator[object]:
    """A loop with a bound that has a symbolic form: each test of the index against the
    stop is a comparison the run records (iterations while true, then the false one
    that ends it), not one pinned value of the bound. An index counted from a symbolic
    start has a form of its own."""
    start, stop = (0, args[0]) if len(args) == 1 else (args[0], args[1])
    step = as_index(args[2]) if len(args) == 3 else 1
    if step == 0:
        raise ValueError("pl.range() arg 3 must not be zero")
    form = stop.symbolic if isinstance(stop, Tainted) else None
    summary = summarised(start, stop, step, form)
    if summary is not None:  # a summary run: every iteration any input reaches
        yield from summary
        return
    first: Any = start if isinstance(start, Tainted) else DeviceIndex(as_index(start))
    index, taken = first, 0
    while index < stop if step > 0 else index > stop:
        yield index
        taken += step
        index = first + taken  # from the start each time: forms stay shallow


def _carried_iteration(
    steps: Iterator[object], init: tuple[object, ...]
) -> Iterator[tuple[object, ...]]:
    stack = _carried_stack()
    loop = _CarriedLoop(tuple(device_scalar(value, INDEX) for value in init))
    stack.append(loop)
    try:
        for index in steps:
            yield index, loop.values
    finally:
        stack.remove(loop)


_FOR_TARGET = re.compile(r"^\s*(?:async\s+)?for\s+\(?\s*([A-Za-z_]\w*)")


def _loop_variable(frame: FrameType) -> str | None:
    """The variable of the user's `for` that iterates this loop, read from its line;
    None where the loop is not a `for` statement of the user's file."""
    user = innermost_user_frame(frame)
    return None if user is None else _for_target(user.f_code.co_filename, user.f_lineno)


@functools.cache
def _for_target(filename: str, line: int) -> str | None:
    """The variable a `for` statement on this line binds (first of a tuple), else None."""
    found = _FOR_TARGET.match(linecache.getline(filename, line))
    return found.group(1) if found else None


def _named_iterations(steps: Iterator[Any], name: str | None) -> Iterator[Any]:
    """`steps`, with each iteration's (variable, value) on `LOOPS` while its body runs
    (witness steps name it); a value that is not one known number is not recorded."""
    if name is None:
        yield from steps
        return
    outer = LOOPS.stack
    try:
        for index in steps:
            value = _known_int(index)
            LOOPS.stack = outer if value is None else (*outer, (name, value))
            yield index
    finally:
        LOOPS.stack = outer


def _known_int(value: object) -> int | None:
    if isinstance(value, (bool, Tainted)):
        return None
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def range_(
    *args: object, init_values: Sequence[object] | None = None, **hints: object
) -> Iterator[Any]:
    """`pl.range`: unrolled by Python; indices are device ints (or, counted from a start
    read from memory, `Tainted`)."""
    steps = _named_iterations(_loop_indices(args), _loop_variable(sys._getframe(1)))
    if init_values is None:
        return steps
    return _carried_iteration(steps, tuple(init_values))


def parallel(
    *args: object, init_values: Sequence[object] | None = None, **hints: object
) -> Iterator[Any]:
    """`pl.parallel`: `pl.range` whose iterations must not conflict (`dsl.parallel`)."""
    return tracked(range_(*args, init_values=init_values))


def pipeline(
    *args: object, stage: object = 1, init_values: Sequence[object] | None = None
) -> Iterator[Any]:
    """`pl.pipeline(..., stage=N)`: `pl.range`'s iterations in their order; PyPTO
    replicates the body N times for ping-pong buffers, which changes no iteration."""
    del stage
    return range_(*args, init_values=init_values)


def unroll(*args: object, **hints: object) -> Iterator[Any]:
    """`pl.unroll(stop | start, stop[, step])`: unrolled, with no carried values."""
    return range_(*args)


_unpacking_calls: dict[tuple[CodeType, int], bool] = {}


def _caller_unpacks(frame: Any) -> bool:
    key = (frame.f_code, frame.f_lasti)
    known = _unpacking_calls.get(key)
    if known is None:
        # f_lasti may point into the CALL's inline cache: the call is the last
        # instruction at or before it, and the unpacking is the one after
        instructions = list(dis.get_instructions(frame.f_code))
        following = [
            instruction for instruction in instructions if instruction.offset > frame.f_lasti
        ]
        known = bool(following) and following[0].opname == "UNPACK_SEQUENCE"
        _unpacking_calls[key] = known
    return known


def yield_(*values: object) -> Any:
    """Carry `values` into the next iteration of the innermost `init_values` loop."""
    values = tuple(device_scalar(value, INDEX) for value in values)  # a literal: INDEX
    stack = _carried_stack()
    if stack:
        stack[-1].values = values
    if len(values) == 1 and not _caller_unpacks(sys._getframe(1)):
        return values[0]
    return values


def set_block(tile: Tile, index: object, value: object) -> None:
    """`tile[a:b, c:d] = value`: the block updated in place (a kernel-local store)."""
    value = _as_operand(value)  # a tensor block is loaded first
    items = index if isinstance(index, tuple) else (index,)
    starts = [
        (0 if item.start is None else as_index(item.start))
        if isinstance(item, slice)
        else as_index(item)
        for item in items
    ]
    starts += [0] * (len(tile.shape) - len(starts))
    values = tile_values(value, tile.dtype)
    updated = tile_update(tile, starts, values, sources_of(value))
    symbols = _updated_forms(tile, starts, values, tile_forms(value))
    tile.data, tile.sources, tile.symbols = updated.data, updated.sources, symbols


def _updated_forms(
    tile: Tile, starts: list[int], values: np.ndarray, forms: Forms | None
) -> np.ndarray | None:
    """The forms of `tile`'s elements once `values` (with `forms`) are written at
    `starts`: the block takes the values' forms (none for a value without one)."""
    if tile.symbols is None and forms is None:
        return None
    kept = np.empty(tile.shape, dtype=object)
    if tile.symbols is not None:
        old = tile.symbols.forms() if isinstance(tile.symbols, InputBlock) else tile.symbols
        if old.shape != tile.shape:
            return None
        kept[...] = old
    block = _trailing(values, len(starts))
    where = tuple(slice(start, start + size) for start, size in zip(starts, block, strict=True))
    if forms is None:
        kept[where] = None
    else:
        written = forms.forms() if isinstance(forms, InputBlock) else forms
        kept[where] = written.reshape(block)
    return None if all(form is None for form in kept.reshape(-1)) else kept


provide_kernel_ops(
    KernelOps(
        assign=assign,
        load_block=load_block,
        add=add,
        sub=sub,
        mul=mul,
        div=div,
        neg=neg,
        read=read,
        set_block=set_block,
    )
)
