"""The DSL's element types: byte size, storage encoding and compute representation.

Values live in memory as bytes. A dtype says how many bytes an element takes, how an
array of computed values is encoded into them and decoded back. BF16 has no numpy
type: it is stored as the upper 2 bytes of the float32 (truncation) and computed as
float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np


@dataclass(frozen=True, slots=True, kw_only=True)
class DType:
    name: str  # "FP32", as the user writes pl.FP32
    nbytes: int
    storage: np.dtype  # element type of the bytes in memory
    compute: np.dtype  # element type of tile values
    is_float: bool

    def get_byte(self) -> int:
        return self.nbytes

    def __repr__(self) -> str:
        return f"pl.{self.name}"

    @property
    def limits(self) -> tuple[int, int] | None:
        """The least and the greatest value of an integer dtype (None: not one; BF16 is
        stored in 16-bit unsigned integers, whose range is not its values')."""
        return None if self.is_float else _limits(self.storage)

    def encode(self, values: np.ndarray) -> np.ndarray:
        """Computed values → storage elements (same shape)."""
        if self.name == "BF16":
            as_f32 = np.ascontiguousarray(values, dtype=np.float32)
            return (as_f32.view(np.uint32) >> 16).astype(np.uint16)
        return np.asarray(values).astype(self.storage)

    def decode(self, stored: np.ndarray) -> np.ndarray:
        """Storage elements → computed values (a copy)."""
        if self.name == "BF16":
            widened = stored.astype(np.uint32) << 16
            return widened.view(np.float32).copy()
        return stored.astype(self.compute)


@cache
def _limits(storage: np.dtype) -> tuple[int, int] | None:
    """`DType.limits` of a storage type: they depend on it alone (asked on every notify,
    where building numpy's `iinfo` each time was a measurable share of a simulation)."""
    if storage.kind not in "iu":
        return None
    info = np.iinfo(storage)
    return int(info.min), int(info.max)


def _dtype(name: str, storage: str, compute: str | None = None) -> DType:
    storage_type = np.dtype(storage)
    compute_type = np.dtype(compute or storage)
    return DType(
        name=name,
        nbytes=storage_type.itemsize,
        storage=storage_type,
        compute=compute_type,
        is_float=compute_type.kind == "f",
    )


FP32 = _dtype("FP32", "float32")
FP16 = _dtype("FP16", "float16")
BF16 = _dtype("BF16", "uint16", "float32")
FP64 = _dtype("FP64", "float64")
INT8 = _dtype("INT8", "int8")
INT16 = _dtype("INT16", "int16")
INT32 = _dtype("INT32", "int32")
INT64 = _dtype("INT64", "int64")
INDEX = _dtype("INDEX", "int64")
UINT32 = _dtype("UINT32", "uint32")  # a sort's index bits (pl.sort32, pl.arange)
UINT16 = _dtype("UINT16", "uint16")
UINT8 = _dtype("UINT8", "uint8")
BOOL = _dtype("BOOL", "bool")

ALL_DTYPES: tuple[DType, ...] = (
    FP32,
    FP16,
    BF16,
    FP64,
    INT8,
    INT16,
    INT32,
    INT64,
    INDEX,
    UINT32,
    UINT16,
    UINT8,
    BOOL,
)
