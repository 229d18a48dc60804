"""Memory of one simulated run: the bytes of every window instance and host tensor.

Memory ids are indices into `memories` (and into `Trace.memories`). A window buffer
has one zero-initialised byte array per rank; a host tensor has one shared array
(owner `HOST_OWNER`). Views are read and written through numpy views of those bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from racecheck.dsl.dtypes import DType
from racecheck.dsl.tensors import TensorView, element_slices
from racecheck.events import HOST_OWNER, Memory, MemoryKind, SignalCell


class MemoryState:
    def __init__(self, ranks: int) -> None:
        self.ranks = ranks
        self.memories: list[Memory] = []
        self.instances: dict[tuple[int, int], np.ndarray] = {}
        self.inputs: dict[int, str] = {}  # host tensors the run starts from: id -> name
        self.written: set[int] = set()  # memories some write has changed

    def add_window(self, name: str, nbytes: int) -> Memory:
        memory = Memory(id=len(self.memories), kind=MemoryKind.WINDOW, name=name, nbytes=nbytes)
        self.memories.append(memory)
        for rank in range(self.ranks):
            self.instances[(memory.id, rank)] = np.zeros(nbytes, dtype=np.uint8)
        return memory

    def add_host_tensor(self, name: str, values: np.ndarray, dtype: DType) -> TensorView:
        stored = np.ascontiguousarray(dtype.encode(values))
        raw = stored.reshape(-1).view(np.uint8).copy()
        memory = Memory(id=len(self.memories), kind=MemoryKind.HOST, name=name, nbytes=raw.size)
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

    def _elements(self, view: TensorView, owner: int) -> np.ndarray:
        raw = self.instances[(view.memory, owner)]
        return raw[view.base : view.base + view.nbytes].view(view.dtype.storage).reshape(view.shape)

    def read(
        self, view: TensorView, owner: int, offsets: Sequence[int], extent: Sequence[int]
    ) -> np.ndarray:
        return view.dtype.decode(self._elements(view, owner)[element_slices(offsets, extent)])

    def write(
        self, view: TensorView, owner: int, offsets: Sequence[int], values: np.ndarray
    ) -> None:
        target = self._elements(view, owner)[element_slices(offsets, values.shape)]
        target[...] = view.dtype.encode(values)
        self.written.add(view.memory)

    def accumulate(
        self, view: TensorView, owner: int, offsets: Sequence[int], values: np.ndarray
    ) -> None:
        current = self.read(view, owner, offsets, values.shape)
        self.write(view, owner, offsets, (current + values).astype(view.dtype.compute))

    def cell(self, cell: SignalCell) -> int:
        raw = self.instances[(cell.memory, cell.owner)]
        return int(raw[cell.offset : cell.offset + 4].view(np.int32)[0])

    def set_cell(self, cell: SignalCell, value: int) -> None:
        raw = self.instances[(cell.memory, cell.owner)]
        wrapped = (value + 2**31) % 2**32 - 2**31
        raw[cell.offset : cell.offset + 4].view(np.int32)[0] = wrapped

    def snapshot(self, view: TensorView) -> np.ndarray:
        return view.dtype.decode(self._elements(view, HOST_OWNER))
