"""Symbolic memory for the all-P tracer: window buffers, views, tiles, and the address
arithmetic of their footprints (row-major, in bytes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from racecheck.allp.expr import (
    WORLD,
    All,
    Bin,
    Cmp,
    Cond,
    Const,
    Expr,
    Op,
    Opaque,
    OutsideFragment,
    Rel,
    Var,
    to_expr,
)
from racecheck.allp.tracer import Tracer
from racecheck.dsl.dtypes import DType
from racecheck.dsl.types import DimBinary, DimConst, DynVar
from racecheck.report.reasons import ReasonCode, reason


@dataclass(frozen=True, slots=True, kw_only=True)
class SymBuffer:
    name: str
    nbytes: Expr


@dataclass(frozen=True, slots=True, kw_only=True)
class SymView:
    memory: str
    window: bool
    shape: tuple[Expr, ...]
    dtype: DType
    checks: tuple[Cond, ...] = ()  # row selections this view was cut with
    rows: tuple[Expr, ...] = ()  # the rows selected (`view[r]`), outermost first
    outer: tuple[Expr, ...] = ()  # the sizes of the dimensions they were selected from

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, index: object) -> SymView:
        if not self.shape or isinstance(index, (tuple, slice)):
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_HOST_ROW))
        row = to_expr(index)
        return SymView(
            memory=self.memory,
            window=self.window,
            shape=self.shape[1:],
            dtype=self.dtype,
            checks=(*self.checks, in_range(row, Const(0), self.shape[0])),
            rows=(*self.rows, row),
            outer=(*self.outer, self.shape[0]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SymTile(Opaque):
    extent: tuple[Expr, ...]

    def __getitem__(self, index: object) -> Any:
        raise OutsideFragment(reason(ReasonCode.OUTSIDE_TILE_VALUE))


def product(parts: Sequence[Expr]) -> Expr:
    total: Expr = Const(1)
    for part in parts:
        total = mul(total, part)
    return total


def mul(left: Expr, right: Expr) -> Expr:
    if isinstance(left, Const) and isinstance(right, Const):
        return Const(left.value * right.value)
    if left == Const(1):
        return right
    if right == Const(1):
        return left
    return Bin(Op.MUL, left, right)


def strides(shape: tuple[Expr, ...]) -> tuple[Expr, ...]:
    return tuple(product(shape[position + 1 :]) for position in range(len(shape)))


def exprs(values: Sequence[object]) -> tuple[Expr, ...]:
    return tuple(to_expr(value) for value in values)


def in_range(value: Expr, low: Expr, high: Expr) -> Cond:
    return All((Cmp(Rel.LE, low, value), Cmp(Rel.LT, value, high)))


def add(left: Expr, right: Expr) -> Expr:
    if isinstance(left, Const) and isinstance(right, Const):
        return Const(left.value + right.value)
    return Bin(Op.ADD, left, right)


def host_dim(dim: object, tracer: Tracer, rank_dims: frozenset[str]) -> Expr:
    if isinstance(dim, DynVar):
        if dim.name not in rank_dims:
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_DIM_NOT_P, dim=dim.name))
        return Var(WORLD)
    if isinstance(dim, DimConst):
        return Const(dim.value)
    if isinstance(dim, DimBinary):
        left = tracer.sym(host_dim(dim.left, tracer, rank_dims))
        right = tracer.sym(host_dim(dim.right, tracer, rank_dims))
        operators = {"+": left + right, "-": left - right, "*": left * right}
        if dim.symbol not in operators:
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_HOST_DIM, dim=repr(dim)))
        return to_expr(operators[dim.symbol])
    return to_expr(dim)


def as_view(value: object) -> SymView:
    if not isinstance(value, SymView):
        raise OutsideFragment(reason(ReasonCode.OUTSIDE_NOT_VIEW, value=repr(value)))
    return value


def as_window(value: object) -> SymView:
    view = as_view(value)
    if not view.window:
        raise OutsideFragment(reason(ReasonCode.OUTSIDE_REMOTE_HOST))
    return view


def as_tile(value: object) -> SymTile:
    if not isinstance(value, SymTile):
        raise OutsideFragment(reason(ReasonCode.OUTSIDE_NOT_TILE, value=repr(value)))
    return value
