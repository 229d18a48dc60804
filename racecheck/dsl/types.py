"""Annotation types, dynamic dims and enums of the DSL.

Annotations (`pl.Tensor[[dims], dtype]`, `pl.Out[...]`, ...) are evaluated when the
user's `def` runs and become `TensorType` / `ScalarType` records. Dims may be ints or
`DimExpr` trees over `pl.dynamic` symbols, resolved per rank count by `resolve_dim`.
Kernel parameter annotations are never checked: runtime values carry their shapes;
only the host entry's annotations create tensors, and a window parameter's declared
shape re-views a window argument of the same size (`racecheck.dsl.declared`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from racecheck.dsl.active import dim_bindings
from racecheck.dsl.dtypes import DType
from racecheck.dsl.scalars import truncating_div, truncating_mod
from racecheck.report.reasons import ReasonCode, reason


class DimExpr:
    """A dim built from `pl.dynamic` symbols and integer arithmetic."""

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        raise NotImplementedError

    def symbols(self) -> frozenset[str]:
        raise NotImplementedError

    def __index__(self) -> int:
        """A dim used as a number in a running body (`alloc_window_buffer(NR * 4)`)."""
        bindings = dim_bindings()
        if bindings is None or not self.symbols() <= bindings.keys():
            raise TypeError(reason(ReasonCode.TYPE_DYNAMIC_DIM, dim=repr(self)))
        return self.evaluate(bindings)

    def __int__(self) -> int:
        return self.__index__()

    def _combine(
        self, op: Callable[[int, int], int], symbol: str, other: object, reflected: bool
    ) -> DimExpr:
        if not isinstance(other, (int, DimExpr)):
            return NotImplemented
        operand = other if isinstance(other, DimExpr) else DimConst(int(other))
        left, right = (operand, self) if reflected else (self, operand)
        return DimBinary(op=op, symbol=symbol, left=left, right=right)

    def __add__(self, other: object) -> DimExpr:
        return self._combine(operator.add, "+", other, False)

    def __radd__(self, other: object) -> DimExpr:
        return self._combine(operator.add, "+", other, True)

    def __sub__(self, other: object) -> DimExpr:
        return self._combine(operator.sub, "-", other, False)

    def __rsub__(self, other: object) -> DimExpr:
        return self._combine(operator.sub, "-", other, True)

    def __mul__(self, other: object) -> DimExpr:
        return self._combine(operator.mul, "*", other, False)

    def __rmul__(self, other: object) -> DimExpr:
        return self._combine(operator.mul, "*", other, True)

    def __floordiv__(self, other: object) -> DimExpr:
        return self._combine(truncating_div, "//", other, False)

    def __rfloordiv__(self, other: object) -> DimExpr:
        return self._combine(truncating_div, "//", other, True)

    def __mod__(self, other: object) -> DimExpr:
        return self._combine(truncating_mod, "%", other, False)

    def __rmod__(self, other: object) -> DimExpr:
        return self._combine(truncating_mod, "%", other, True)


class DynVar(DimExpr):
    """`pl.dynamic("NR")`: a dim bound per run (the rank count, or `--arg NR=...`)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        return bindings[self.name]

    def symbols(self) -> frozenset[str]:
        return frozenset({self.name})

    def __repr__(self) -> str:
        return self.name


class DimConst(DimExpr):
    def __init__(self, value: int) -> None:
        self.value = value

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        return self.value

    def symbols(self) -> frozenset[str]:
        return frozenset()

    def __repr__(self) -> str:
        return str(self.value)


class DimBinary(DimExpr):
    def __init__(
        self, *, op: Callable[[int, int], int], symbol: str, left: DimExpr, right: DimExpr
    ) -> None:
        self.op, self.symbol, self.left, self.right = op, symbol, left, right

    def evaluate(self, bindings: Mapping[str, int]) -> int:
        return self.op(self.left.evaluate(bindings), self.right.evaluate(bindings))

    def symbols(self) -> frozenset[str]:
        return self.left.symbols() | self.right.symbols()

    def __repr__(self) -> str:
        return f"({self.left!r} {self.symbol} {self.right!r})"


Dim = int | DimExpr


def resolve_dim(dim: Dim, bindings: Mapping[str, int]) -> int:
    return dim.evaluate(bindings) if isinstance(dim, DimExpr) else int(dim)


class Direction(Enum):
    IN = "in"
    OUT = "out"
    INOUT = "inout"


class TensorKind(Enum):
    TENSOR = "Tensor"
    DISTRIBUTED = "DistributedTensor"
    TILE = "Tile"


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorType:
    kind: TensorKind
    dims: tuple[Dim, ...]
    dtype: DType
    direction: Direction = Direction.IN


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalarType:
    dtype: DType


def _tensor_type(kind: TensorKind, spec: Any) -> TensorType:
    if not isinstance(spec, tuple) or len(spec) < 2:
        raise TypeError(reason(ReasonCode.TYPE_TENSOR_ARGUMENTS, kind=kind.value, spec=repr(spec)))
    dims, dtype = spec[0], spec[1]
    if not isinstance(dtype, DType):
        raise TypeError(reason(ReasonCode.TYPE_NEEDS_DTYPE, kind=kind.value, dtype=repr(dtype)))
    return TensorType(kind=kind, dims=tuple(dims), dtype=dtype)


class _TensorAnnotation:
    def __init__(self, kind: TensorKind) -> None:
        self.kind = kind

    def __getitem__(self, spec: Any) -> TensorType:
        return _tensor_type(self.kind, spec)

    def __repr__(self) -> str:
        return self.kind.value


class _DirectionAnnotation:
    def __init__(self, direction: Direction) -> None:
        self.direction = direction

    def __getitem__(self, inner: Any) -> Any:
        if isinstance(inner, TensorType):
            return TensorType(
                kind=inner.kind, dims=inner.dims, dtype=inner.dtype, direction=self.direction
            )
        return inner


class _ScalarAnnotation:
    def __getitem__(self, dtype: Any) -> ScalarType:
        return ScalarType(dtype=dtype)


Tensor = _TensorAnnotation(TensorKind.TENSOR)
DistributedTensor = _TensorAnnotation(TensorKind.DISTRIBUTED)
Tile = _TensorAnnotation(TensorKind.TILE)
Out = _DirectionAnnotation(Direction.OUT)
InOut = _DirectionAnnotation(Direction.INOUT)
Scalar = _ScalarAnnotation()


class NotifyOp(Enum):
    AtomicAdd = 0
    Set = 1


class WaitCmp(Enum):
    Eq = 0
    Ge = 1


class AtomicType(Enum):
    None_ = 0
    Add = 1


class ReduceOp(Enum):
    Sum = 0
    Max = 1
    Min = 2
    Prod = 3


class FunctionType(Enum):
    Opaque = "Opaque"
    InCore = "InCore"
    Orchestration = "Orchestration"
    AIC = "AIC"
    AIV = "AIV"
    Group = "Group"
    Spmd = "Spmd"


class Level(Enum):
    HOST = "HOST"
    CHIP = "CHIP"
    CORE = "CORE"
    CORE_GROUP = "CORE_GROUP"


class Role(Enum):
    Orchestrator = "Orchestrator"
    Worker = "Worker"
    SubWorker = "SubWorker"


class SplitMode(Enum):
    NONE = "NONE"
    UP_DOWN = "UP_DOWN"
    LEFT_RIGHT = "LEFT_RIGHT"


class MemorySpace(Enum):
    DDR = "DDR"
    Vec = "Vec"
    Mat = "Mat"
    Left = "Left"
    Right = "Right"
    Acc = "Acc"
    Bias = "Bias"


@dataclass(frozen=True, slots=True)
class ArrayType:
    """`pl.Array[extent, dtype]`: the annotation of an on-core array parameter."""

    extent: int
    dtype: object


class Array:
    """`pl.Array[extent, dtype]` in annotations (values are made by `pl.array.create`)."""

    def __class_getitem__(cls, item: object) -> ArrayType:
        if not isinstance(item, tuple) or len(item) != 2:
            raise TypeError(reason(ReasonCode.TYPE_ARRAY_ARGUMENTS))
        extent, dtype = item
        return ArrayType(int(extent), dtype)
