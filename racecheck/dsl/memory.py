"""Memory of one simulated run: the bytes of every window instance and host tensor.

Memory ids are indices into `memories` (and into `Trace.memories`). A window buffer
has one zero-initialised byte array per rank; a host tensor has one shared array
(owner `HOST_OWNER`). Views are read and written through numpy views of those bytes.

Beside the bytes, an element written with a symbolic form (`dsl.symbolic`) keeps it
(concolic: it is what this run wrote there); a read of exactly that element, as the
same type, gets it back. Any other write of any of its bytes forgets it. Only a bare
integer input element in an integer type that holds every value of its own dtype is
kept: it is stored unchanged, whatever the input (a sum could wrap, a float round, an
INT64 input wrap in an INT32). One-byte types keep none: they carry bulk data rather
than counts, and a form per byte of a large tile costs more than it decides (a read
back has no form; what it steers is unknown, never proved).
"""

from __future__ import annotations

import math
import mmap
import sys
from collections.abc import Sequence

import numpy as np

from racecheck.assumptions import Assumption
from racecheck.dsl.dtypes import INT32, DType
from racecheck.dsl.symbolic import Expr, Forms, InputBlock, fits, settled, within
from racecheck.dsl.tensors import TensorView, element_slices, region_runs
from racecheck.events import HOST_OWNER, Memory, MemoryKind, SignalCell, wrap_int32

Runs = tuple[tuple[int, int], ...]
_CELL = 4  # bytes of a signal cell (INT32)


_MAP_NORESERVE = 0x4000  # Linux's value; Python's mmap module does not name it before 3.13


def zero_pages(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A writable array of zeros that costs memory only where it is written or read.
    On Linux an anonymous mapping reserved without swap accounting: numpy's zeros are
    refused outright past the machine's memory (a model's 30 GiB weight), although
    never touched."""
    nbytes = math.prod(shape) * dtype.itemsize
    if sys.platform != "linux" or nbytes == 0:
        return np.zeros(shape, dtype=dtype)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE
    return np.frombuffer(mmap.mmap(-1, nbytes, flags=flags), dtype=dtype).reshape(shape)


class MemoryState:
    def __init__(self, ranks: int) -> None:
        self.ranks = ranks
        self.memories: list[Memory] = []
        self.instances: dict[tuple[int, int], np.ndarray] = {}
        self.inputs: dict[int, str] = {}  # host tensors the run starts from: id -> name
        self.assumed: tuple[Assumption, ...] = ()  # --assume: their elements' ranges
        self.written: set[int] = set()  # memories some write has changed
        self.zero_pages: set[int] = set()  # host tensors still all zeros, never touched
        # (memory, owner) -> first byte of an element -> (its dtype, its symbolic form)
        self.forms: dict[tuple[int, int], dict[int, tuple[DType, Expr]]] = {}

    def fresh_name(self, name: str) -> str:
        """`name`, or `name#id` (the next memory's id) when a memory has it already."""
        if any(memory.name == name for memory in self.memories):
            return f"{name}#{len(self.memories)}"
        return name

    def add_window(self, name: str, nbytes: int) -> Memory:
        memory = Memory(id=len(self.memories), kind=MemoryKind.WINDOW, name=name, nbytes=nbytes)
        self.memories.append(memory)
        for rank in range(self.ranks):
            self.instances[(memory.id, rank)] = np.zeros(nbytes, dtype=np.uint8)
        return memory

    def add_host_tensor(
        self, name: str, values: np.ndarray, dtype: DType, *, manual_dep: bool = False
    ) -> TensorView:
        """A tensor with one instance (`HOST_OWNER`): a host tensor, or a tensor a
        per-device function creates (`pl.create_tensor`), which only its rank sees."""
        stored = np.ascontiguousarray(dtype.encode(values))
        raw = stored.reshape(-1).view(np.uint8).copy()
        memory = Memory(
            id=len(self.memories),
            kind=MemoryKind.HOST,
            name=name,
            nbytes=raw.size,
            manual_dep=manual_dep,
        )
        self.memories.append(memory)
        self.instances[(memory.id, HOST_OWNER)] = raw
        return TensorView(
            memory=memory.id,
            kind=MemoryKind.HOST,
            name=name,
            base=0,
            shape=tuple(values.shape),
            dtype=dtype,
            memory_nbytes=raw.size,
        )

    def add_zero_host_tensor(self, name: str, shape: tuple[int, ...], dtype: DType) -> TensorView:
        """A host tensor of zeros whose bytes are not touched until read or written: the
        allocation is the operating system's zero pages, so only what a run reads or
        writes costs memory (a model's weights of many GiB, `racecheck.cosim.inputs`)."""
        nbytes = math.prod(shape) * dtype.nbytes
        memory = Memory(id=len(self.memories), kind=MemoryKind.HOST, name=name, nbytes=nbytes)
        self.memories.append(memory)
        self.instances[(memory.id, HOST_OWNER)] = zero_pages((nbytes,), np.dtype(np.uint8))
        self.zero_pages.add(memory.id)
        return TensorView(
            memory=memory.id,
            kind=MemoryKind.HOST,
            name=name,
            base=0,
            shape=shape,
            dtype=dtype,
            memory_nbytes=nbytes,
        )

    def set_element(self, view: TensorView, index: int, value: float) -> None:
        """Set one element of a host tensor before the run starts (a chosen input)."""
        self.zero_pages.discard(view.memory)
        flat = self._elements(view, HOST_OWNER).reshape(-1)
        flat[index] = view.dtype.encode(np.array([value], dtype=view.dtype.compute))[0]

    def _elements(self, view: TensorView, owner: int) -> np.ndarray:
        raw = self.instances[(view.memory, owner)]
        return raw[view.base : view.base + view.nbytes].view(view.dtype.storage).reshape(view.shape)

    def read(
        self, view: TensorView, owner: int, offsets: Sequence[int], extent: Sequence[int]
    ) -> np.ndarray:
        if view.memory in self.zero_pages and view.memory not in self.written:
            return np.zeros(tuple(extent), dtype=view.dtype.compute)  # no page touched
        return view.dtype.decode(self._elements(view, owner)[element_slices(offsets, extent)])

    def write(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        values: np.ndarray,
        forms: Forms | None = None,
    ) -> None:
        """Write `values`; `forms` (same shape, None where there is none) are their
        symbolic forms."""
        target = self._elements(view, owner)[element_slices(offsets, values.shape)]
        target[...] = view.dtype.encode(values)
        self.written.add(view.memory)
        key = (view.memory, owner)
        if forms is None and not self.forms.get(key):
            return  # nothing to forget or remember: the common case, kept fast
        runs = region_runs(view, offsets, values.shape)
        self._forget(key, runs)
        if forms is not None:
            self._remember(view, owner, runs, forms)

    def forms_at(
        self, view: TensorView, owner: int, offsets: Sequence[int], extent: Sequence[int]
    ) -> np.ndarray | None:
        """The symbolic forms of the elements of a region (None where an element has
        none), or None if none has one."""
        kept = self.forms.get((view.memory, owner))
        if not kept:
            return None
        starts = _starts(region_runs(view, offsets, extent), view.dtype)
        found = [
            form[1] if form is not None and form[0] == view.dtype else None
            for form in (kept.get(at) for at in starts)
        ]
        if all(form is None for form in found):
            return None
        forms = np.empty(len(found), dtype=object)
        forms[:] = found
        return forms.reshape(tuple(extent))

    def _forget(self, key: tuple[int, int], runs: Runs) -> None:
        kept = self.forms.get(key)
        if not kept:
            return
        for start, end in runs:
            for at in [
                at for at, (dtype, _) in kept.items() if at < end and at + dtype.nbytes > start
            ]:
                del kept[at]

    def _remember(self, view: TensorView, owner: int, runs: Runs, forms: Forms) -> None:
        if view.dtype.limits is None or view.dtype.nbytes == 1:
            return  # single bytes carry bulk data, not counts: a form per byte is waste
        if isinstance(forms, InputBlock):
            forms = forms.forms()
        kept = self.forms.setdefault((view.memory, owner), {})
        for at, expr in zip(_starts(runs, view.dtype), forms.reshape(-1), strict=True):
            if fits(expr, view.dtype.limits) or (settled(expr) and within(expr, view.dtype.limits)):
                kept[at] = (view.dtype, expr)

    def accumulate(
        self, view: TensorView, owner: int, offsets: Sequence[int], values: np.ndarray
    ) -> None:
        current = self.read(view, owner, offsets, values.shape)
        self.write(view, owner, offsets, (current + values).astype(view.dtype.compute))

    def cell(self, cell: SignalCell) -> int:
        raw = self.instances[(cell.memory, cell.owner)]
        return int(raw[cell.offset : cell.offset + 4].view(np.int32)[0])

    def set_cell(self, cell: SignalCell, value: int, form: Expr | None = None) -> None:
        """Set the INT32 cell to `value`, whose symbolic form is `form`."""
        raw = self.instances[(cell.memory, cell.owner)]
        raw[cell.offset : cell.offset + _CELL].view(np.int32)[0] = wrap_int32(value)
        self.written.add(cell.memory)
        key = (cell.memory, cell.owner)
        self._forget(key, ((cell.offset, cell.offset + _CELL),))
        if settled(form):
            self.forms.setdefault(key, {})[cell.offset] = (INT32, form)

    def snapshot(self, view: TensorView) -> np.ndarray:
        """The host tensor's values now; one no write touched since it started as zero
        pages is zeros that are not materialised either (a model's weights)."""
        if view.memory in self.zero_pages and view.memory not in self.written:
            return np.zeros(view.shape, dtype=view.dtype.compute)
        return view.dtype.decode(self._elements(view, HOST_OWNER))


def _starts(runs: Runs, dtype: DType) -> list[int]:
    """The first byte of each `dtype` element of the byte `runs` of a region, in
    row-major order."""
    return [at for start, end in runs for at in range(start, end, dtype.nbytes)]
