"""Runtime values of the DSL: window buffers, tensor views, tiles, and regions.

A `TensorView` is a row-major block of one memory (a window buffer, whose owner is
picked per access, or a host tensor) starting at a byte offset: `pld.window` views
start at byte 0 (two views of one buffer alias), `x[r]` drops the leading dim.
A `Tile` is a local value (numpy array) with the part that holds data (`valid`) and
the load events its values came from. `region_runs` turns offsets + extent into the
contiguous byte runs an access touches, one per run, never one per element.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from racecheck.dsl.active import current, is_rank_context
from racecheck.dsl.dtypes import DType
from racecheck.dsl.location import user_location
from racecheck.dsl.scalars import Tainted, as_index
from racecheck.dsl.symbolic import Forms, InputBlock, Var
from racecheck.errors import UnsupportedConstruct
from racecheck.events import EventRef, MemoryKind
from racecheck.report.reasons import ReasonCode, reason


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class WindowBuffer:
    """`pld.alloc_window_buffer(...)`: one zero-initialised instance per rank. `devices`
    collects the ranks its views are dispatched to (docs/model.md): once the host body
    has run, they are the buffer's communication group."""

    memory: int
    nbytes: int
    name: str
    devices: set[int] = field(default_factory=set)


def _valid_part(items: tuple[object, ...], value: object) -> tuple[object, ...]:
    """A partly valid tile stores its valid region only (its TSTORE's valid shape): the
    slices of `t[a:b, c:d] = tile` end where the tile's valid part does, so a tile of 16
    rows with 8 valid is stored into an 8-row tensor (pypto-lib's boxed matmul rows)."""
    if not isinstance(value, Tile) or value.valid == value.shape or len(items) != len(value.shape):
        return items
    clipped: list[object] = []
    for item, valid in zip(items, value.valid, strict=True):
        if not isinstance(item, slice) or item.step not in (None, 1):
            return items
        if item.start is not None and item.stop is not None:
            start, stop = as_index(item.start), as_index(item.stop)
            item = slice(start, min(stop, start + valid))
        clipped.append(item)
    return tuple(clipped)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class TensorView:
    memory: int
    kind: MemoryKind
    name: str
    base: int  # byte offset of the view in its memory
    shape: tuple[int, ...]
    dtype: DType
    memory_nbytes: int
    devices: set[int] | None = None  # a window's buffer's `devices`; None for host tensors

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.nbytes

    @property
    def is_window(self) -> bool:
        return self.kind is MemoryKind.WINDOW

    def row(self, index: int) -> TensorView:
        row_shape = self.shape[1:]
        row_bytes = math.prod(row_shape) * self.dtype.nbytes
        return TensorView(
            memory=self.memory,
            kind=self.kind,
            name=f"{self.name}[{index}]",
            base=self.base + index * row_bytes,
            shape=row_shape,
            dtype=self.dtype,
            memory_nbytes=self.memory_nbytes,
            devices=self.devices,
        )

    def __getitem__(self, index: object) -> TensorView | Tile:
        if isinstance(index, tuple):
            return self._index_axes(index)
        if isinstance(index, slice):
            return self._select((index,))
        return self._index_row(index)

    def __setitem__(self, index: object, value: object) -> None:
        """`t[a:b, c:d] = src` in a kernel (PyPTO's slice-assign, lowered to a store):
        writes the selected block of this rank's view; the block may be strided."""
        items = index if isinstance(index, tuple) else (index,)
        offsets, extent, _ = self._selection(_valid_part(items, value))
        kernel_ops().assign(self, offsets, extent, value)

    def bind_dynamic(self, axis: object, var: object) -> None:
        """`t.bind_dynamic(axis, DYN)`: PyPTO's specializer reads it from the source to
        keep an axis dynamic; at run time it does nothing."""
        del axis, var

    def _index_row(self, index: object) -> TensorView | Any:
        context = current()
        if self.ndim == 1 and is_rank_context(context):
            return kernel_ops().read(self, [index])  # `t[i]` of a 1-D tensor: tensor.read
        row = as_index(index)
        if context is not None and not is_rank_context(context):
            return context.row_view(self, row)  # type: ignore[attr-defined]
        if not 0 <= row < (self.shape[0] if self.shape else 0):
            message = reason(
                ReasonCode.VIEW_ROW_OUTSIDE, row=row, tensor=self.name, shape=str(list(self.shape))
            )
            _fail_bounds(message)
            raise IndexError(message)
        return self.row(row)

    def _index_axes(self, index: tuple[object, ...]) -> TensorView | Tile:
        """`t[r, 0:1, a:b]`: a leading integer drops a row as `t[r]` does; the rest
        selects a block, which must be contiguous (a view has no strides) unless the
        slice is taken in a kernel, where it is a load."""
        if index and not isinstance(index[0], slice):
            return self._index_row(index[0])._select(index[1:])
        return self._select(index)

    def _selection(self, index: tuple[object, ...]) -> tuple[list[int], list[int], list[int]]:
        """Offsets and extent of `index` on every axis, and the extents of the axes kept."""
        if len(index) > self.ndim:
            raise IndexError(f"{len(index)} indices for {self!r}")
        offsets: list[int] = []
        extent: list[int] = []
        kept: list[int] = []
        for axis, size in enumerate(self.shape):
            try:
                start, length, keeps = _axis_selection(
                    index[axis] if axis < len(index) else slice(None), size, self, axis
                )
            except IndexError as error:
                _fail_bounds(str(error))
                raise
            offsets.append(start)
            extent.append(length)
            if keeps:
                kept.append(length)
        return offsets, extent, kept

    def _select(self, index: tuple[object, ...]) -> TensorView | Tile:
        offsets, extent, kept = self._selection(index)
        contiguous = is_contiguous_block(self.shape, extent)
        if not contiguous and is_rank_context(current()):
            # In a kernel a strided slice is a tensor.slice, which lowers to a load.
            return kernel_ops().load_block(self, offsets, extent, kept)
        if not contiguous:
            where = user_location()
            raise UnsupportedConstruct(
                reason(ReasonCode.VIEW_NOT_CONTIGUOUS, view=repr(self), index=_index_text(index)),
                file=where.file,
                line=where.line,
            )
        return self.block(offsets, kept, f"{self.name}[{_index_text(index)}]")

    def block(self, offsets: Sequence[int], shape: Sequence[int], name: str) -> TensorView:
        """The view of a contiguous block starting at `offsets`, shaped `shape`."""
        strides = _strides(self.shape)
        first = sum(start * stride for start, stride in zip(offsets, strides, strict=True))
        return TensorView(
            memory=self.memory,
            kind=self.kind,
            name=name,
            base=self.base + first * self.dtype.nbytes,
            shape=tuple(shape),
            dtype=self.dtype,
            memory_nbytes=self.memory_nbytes,
            devices=self.devices,
        )

    def __repr__(self) -> str:
        # a shape is said to be one: `name[i]` in a report is always rank i's copy
        return f"{self.name} (shape {list(self.shape)}, {self.dtype.name})"


def _fail_bounds(message: str) -> None:
    """A slice outside its tensor is an out-of-bounds bug where it is taken: on the
    host, the dispatch it feeds would address memory past the selected rows (PyPTO does
    not clamp as torch does); in a kernel, the view (PyPTO's `tensor.slice`) addresses
    memory past the tensor that the op reading or writing it touches."""
    context = current()
    if context is not None:
        context.fail_bounds(message)


def _axis_selection(item: object, size: int, view: TensorView, axis: int) -> tuple[int, int, bool]:
    """(offset, extent, whether the axis stays) of one index item on one axis."""
    if isinstance(item, slice):
        if item.step not in (None, 1):
            raise UnsupportedConstruct(
                reason(ReasonCode.VIEW_SLICE_STEP, step=item.step, view=repr(view))
            )
        start = 0 if item.start is None else as_index(item.start)
        stop = size if item.stop is None else as_index(item.stop)
        if not 0 <= start <= stop <= size:
            raise IndexError(
                reason(
                    ReasonCode.VIEW_SLICE_OUTSIDE,
                    start=start,
                    stop=stop,
                    view=repr(view),
                    axis=axis,
                )
            )
        return start, stop - start, True
    position = as_index(item)
    if not 0 <= position < size:
        raise IndexError(
            reason(ReasonCode.VIEW_INDEX_OUTSIDE, position=position, view=repr(view), axis=axis)
        )
    return position, 1, False


def is_contiguous_block(shape: Sequence[int], extent: Sequence[int]) -> bool:
    """Row-major contiguity: once an axis spans more than one index, every later axis
    must be taken whole."""
    spread = False
    for size, length in zip(shape, extent, strict=True):
        if spread and length != size:
            return False
        spread = spread or length > 1
    return True


def _index_text(index: tuple[object, ...]) -> str:
    def item_text(item: object) -> str:
        if isinstance(item, slice):
            start = "" if item.start is None else as_index(item.start)
            stop = "" if item.stop is None else as_index(item.stop)
            return f"{start}:{stop}"
        return str(as_index(item))

    return ", ".join(item_text(item) for item in index)


@dataclass(slots=True, kw_only=True, eq=False)
class Tile:
    """A local tile: values, the valid extent, the loads the values depend on and, for
    a tile loaded straight from an input, each element's symbol (`dsl.symbolic.Var`).
    `storage` names the kernel-local buffer (`pl.create_tensor`, `pl.tile.create`, ...)
    whose contents these are, kept across the stores that update it."""

    data: np.ndarray
    dtype: DType
    valid: tuple[int, ...]
    sources: frozenset[EventRef] = field(default_factory=frozenset)
    storage: int | None = None
    symbols: Forms | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    def valid_values(self) -> np.ndarray:
        return self.data[tuple(slice(0, extent) for extent in self.valid)]

    def __getitem__(self, index: object) -> Any:
        items = index if isinstance(index, tuple) else (index,)
        if any(isinstance(item, slice) for item in items):
            return self._block(items)
        key = tuple(as_index(i) for i in index) if isinstance(index, tuple) else as_index(index)
        symbol = None if self.symbols is None else self.symbols[key]
        return Tainted(self.data[key], self.sources, symbol if isinstance(symbol, Var) else None)

    def _block(self, items: tuple[object, ...]) -> Tile:
        """`tile[a:b, c:d]`: the sub-tile (PyPTO's tile slice), valid where this one is."""
        region: list[slice] = []
        valid: list[int] = []
        for axis, size in enumerate(self.shape):
            item = items[axis] if axis < len(items) else slice(None)
            if not isinstance(item, slice) or item.step not in (None, 1):
                raise IndexError(reason(ReasonCode.TILE_SLICE_STEP, index=_index_text(items)))
            start = 0 if item.start is None else as_index(item.start)
            stop = size if item.stop is None else as_index(item.stop)
            if not 0 <= start <= stop <= size:
                raise IndexError(
                    reason(
                        ReasonCode.TILE_SLICE_OUTSIDE,
                        index=_index_text(items),
                        shape=str(list(self.shape)),
                    )
                )
            region.append(slice(start, stop))
            valid.append(max(0, min(stop, self.valid[axis]) - start))
        symbols = self.symbols
        if isinstance(symbols, InputBlock):
            symbols = symbols.block(tuple(region))
        elif symbols is not None:
            symbols = symbols[tuple(region)]
        return Tile(
            data=self.data[tuple(region)].copy(),
            dtype=self.dtype,
            valid=tuple(valid),
            sources=self.sources,
            symbols=symbols if isinstance(symbols, (np.ndarray, InputBlock)) else None,
        )

    def __setitem__(self, index: object, value: object) -> None:
        """`tile[a:b, c:d] = value`: the block updated in place (a kernel-local store)."""
        kernel_ops().set_block(self, index, value)

    def __add__(self, other: object) -> Tile:
        return kernel_ops().add(self, other)

    def __sub__(self, other: object) -> Tile:
        return kernel_ops().sub(self, other)

    def __mul__(self, other: object) -> Tile:
        return kernel_ops().mul(self, other)

    def __truediv__(self, other: object) -> Tile:
        return kernel_ops().div(self, other)

    def __neg__(self) -> Tile:
        return kernel_ops().neg(self)


def region_problem(view: TensorView, offsets: Sequence[int], extent: Sequence[int]) -> str | None:
    """Why offsets + extent is not inside the view (or the view not inside its memory)."""
    shape = view.shape
    if len(offsets) != len(shape) or len(extent) != len(shape):
        return reason(
            ReasonCode.REGION_DIMS,
            offsets=str(list(offsets)),
            shape=str(list(extent)),
            dims=len(shape),
            view=repr(view),
        )
    for axis, (start, size, length) in enumerate(zip(offsets, extent, shape, strict=True)):
        if start < 0 or size < 0 or start + size > length:
            return reason(
                ReasonCode.REGION_EXCEEDS,
                offsets=str(list(offsets)),
                shape=str(list(extent)),
                view=repr(view),
                axis=axis,
            )
    if view.base + view.nbytes > view.memory_nbytes:
        return reason(
            ReasonCode.REGION_PAST_BUFFER,
            view=repr(view),
            start=view.base,
            end=view.base + view.nbytes,
            size=view.memory_nbytes,
        )
    return None


def region_runs(
    view: TensorView, offsets: Sequence[int], extent: Sequence[int]
) -> tuple[tuple[int, int], ...]:
    """Byte ranges (in the memory) of a bounds-checked region, merged and sorted."""
    if 0 in extent:
        return ()
    return _runs(view.shape, view.base, view.dtype.nbytes, tuple(offsets), tuple(extent))


@functools.lru_cache(maxsize=1024)
def _runs(
    shape: tuple[int, ...],
    base: int,
    itemsize: int,
    offsets: tuple[int, ...],
    extent: tuple[int, ...],
) -> tuple[tuple[int, int], ...]:
    """`region_runs`, kept for the regions asked for again (a load is bounds-checked,
    recorded and scheduled, each asking for its runs)."""
    inner = len(shape)
    while inner > 0 and offsets[inner - 1] == 0 and extent[inner - 1] == shape[inner - 1]:
        inner -= 1
    # dims [inner:] are fully covered; dim inner-1 contributes a contiguous span
    if inner == 0:
        return ((base, base + math.prod(shape) * itemsize),)
    strides = _strides(shape)
    span_axis = inner - 1
    span = extent[span_axis] * strides[span_axis]
    first = base + sum(map(operator.mul, offsets[:inner], strides)) * itemsize
    if all(size == 1 for size in extent[:span_axis]):
        return ((first, first + span * itemsize),)
    # one run per index of the outer axes, in row-major order: each is shorter than
    # the step of the axis outside the span, so the runs are sorted and apart
    starts = np.zeros((), dtype=np.int64) + first
    for axis in range(span_axis):
        steps = np.arange(extent[axis], dtype=np.int64) * (strides[axis] * itemsize)
        starts = np.add.outer(starts, steps)
    flat = starts.reshape(-1).tolist()
    length = span * itemsize
    return tuple((start, start + length) for start in flat)


def cell_start(view: TensorView, offsets: Sequence[int]) -> int | None:
    """The first byte, in the memory, of the one element at `offsets` of `view`; None if
    it is not inside the view or the view not inside its memory (`region_problem` of a
    one-element extent says why). `region_runs` of that region, made cheap: a signal
    cell is asked for on every notify and wait."""
    shape = view.shape
    if len(offsets) != len(shape) or view.base + view.nbytes > view.memory_nbytes:
        return None
    for start, length in zip(offsets, shape, strict=True):
        if not 0 <= start < length:
            return None
    return view.base + sum(map(operator.mul, offsets, _strides(shape))) * view.dtype.nbytes


@functools.cache
def _strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Elements per step of each axis of a row-major `shape`."""
    return tuple(math.prod(shape[axis + 1 :]) for axis in range(len(shape)))


def element_slices(offsets: Sequence[int], extent: Sequence[int]) -> tuple[slice, ...]:
    return tuple(slice(start, start + size) for start, size in zip(offsets, extent, strict=True))


@dataclass(frozen=True, slots=True)
class KernelOps:
    """What a view's or tile's Python syntax does in a kernel (a slice assignment is a
    store, a strided slice a load, `a + b` an elementwise op). `racecheck.dsl.local_ops`
    implements them on top of this module and provides them when it is imported."""

    assign: Callable[[TensorView, Sequence[int], Sequence[int], object], None]
    load_block: Callable[[TensorView, Sequence[int], Sequence[int], Sequence[int]], Tile]
    add: Callable[[object, object], Any]
    sub: Callable[[object, object], Any]
    mul: Callable[[object, object], Any]
    div: Callable[[object, object], Any]
    neg: Callable[[object], Any]
    read: Callable[[TensorView, Sequence[object]], Any]
    set_block: Callable[[Tile, object, object], None]


_provided: list[KernelOps] = []


def provide_kernel_ops(ops: KernelOps) -> None:
    _provided[:] = [ops]


def kernel_ops() -> KernelOps:
    assert _provided, "racecheck.dsl.local_ops provides the kernel operations on import"
    return _provided[0]
