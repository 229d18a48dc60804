"""What a builtin collective's lowering does on one rank, for two interpreters.

The builtins the all-P tracer follows are lowered once (`racecheck.dsl.lowering`),
against `CollectiveOps`. The co-simulation runs that code through `RankOps`, on one
rank at one P, with real values; the all-P tracer runs it through
`racecheck.allp.shadow`, with the rank and N symbolic, recording event templates.
An operation the tracer cannot follow leaves its fragment there (that program gets
no all-P answer), so the two sides may differ in what they accept, never in the
events of what both accept (tests/allp_instances.py compares them).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Protocol, TypeVar

import numpy as np

from racecheck.dsl.context import RankContextProxy
from racecheck.dsl.local_ops import local_owner
from racecheck.dsl.scalars import DeviceInt, Tainted, chosen_scalar
from racecheck.dsl.symbolic import Op, first_form
from racecheck.dsl.tensors import TensorView
from racecheck.errors import UnsupportedConstruct
from racecheck.events import NotifyOp, WaitCmp
from racecheck.report.reasons import ReasonCode, reason

Index = TypeVar("Index")  # a rank or an offset: int here, a symbolic integer in the tracer
Dim_contra = TypeVar("Dim_contra", contravariant=True)  # an extent: int, or an expression
Dim_co = TypeVar("Dim_co", covariant=True)
View_contra = TypeVar("View_contra", contravariant=True)


class Shaped(Protocol[Dim_co]):
    """A view as the lowering sees it: its shape only."""

    @property
    def shape(self) -> tuple[Dim_co, ...]: ...

    @property
    def ndim(self) -> int: ...


class CollectiveOps(Protocol[Index, Dim_contra, View_contra]):
    """The operations of one rank running a builtin's lowering. `label` names the
    builtin on the co-simulation's events; a region is (offsets, extent)."""

    @property
    def rank(self) -> Index: ...

    @property
    def ranks(self) -> Index:
        """P, the number of ranks."""
        ...

    def quotient(self, dim: Dim_contra | int, divisor: Index | Dim_contra | int) -> int:
        """`dim // divisor` of a positive divisor, as the kernel computes a block size
        (a number at every P, or the tracer leaves its fragment)."""
        ...

    def scaled(self, index: Index, factor: int) -> Index:
        """`index * factor`: the first row of block `index`."""
        ...

    def publish_count(
        self,
        send_counts: View_contra,
        cell: tuple[Sequence[Index | int], Sequence[Dim_contra | int]],
        most: int,
        recv_counts: View_contra,
        destination: Index,
        recv_cell: Sequence[Index | int],
        label: str,
    ) -> None:
        """Read the count in `cell` of the own `send_counts` and Set-notify
        `min(count, most)` into `recv_cell` of `destination`'s `recv_counts`
        (all_to_all_v: no lower clamp, PyPTO's kernel has none)."""
        ...

    def peers(self) -> Iterator[Index]:
        """Every other rank, in rank order."""
        ...

    def each_rank(self) -> Iterator[Index]:
        """Every rank, this one included, in rank order."""
        ...

    def notify(
        self,
        view: View_contra,
        peer: Index,
        offsets: Sequence[Index | int],
        value: int,
        op: NotifyOp,
        label: str,
    ) -> None: ...

    def wait(
        self,
        view: View_contra,
        offsets: Sequence[Index | int],
        expected: int,
        cmp: WaitCmp,
        label: str,
    ) -> None: ...

    def put(
        self,
        source: View_contra,
        source_region: tuple[Sequence[Index | int], Sequence[Dim_contra | int]],
        target: View_contra,
        owner: Index,
        target_region: tuple[Sequence[Index | int], Sequence[Dim_contra | int]],
        label: str,
    ) -> None:
        """This rank's `source_region` into `owner`'s `target_region` of `target`."""
        ...

    def get(
        self,
        data: View_contra,
        owner: Index,
        region: tuple[Sequence[Index | int], Sequence[Dim_contra | int]],
        label: str,
    ) -> None:
        """`owner`'s `region` of the window `data` into this rank's."""
        ...

    def require_rank(self, index: Index, what: str) -> None:
        """An out-of-bounds access unless `index` is a rank; `what` names it."""
        ...


class RankOps(RankContextProxy):
    """`CollectiveOps` on a rank of the co-simulation: the rank context, with the
    loops over the ranks and the copies of the lowering on real values."""

    def peers(self) -> Iterator[int]:
        me = self.rank
        return (other for other in range(self.ranks) if other != me)

    def each_rank(self) -> Iterator[int]:
        return iter(range(self.ranks))

    def put(
        self,
        source: TensorView,
        source_region: tuple[Sequence[int], Sequence[int]],
        target: TensorView,
        owner: int,
        target_region: tuple[Sequence[int], Sequence[int]],
        label: str,
    ) -> None:
        offsets, extent = source_region
        values, _ = self.load(source, local_owner(source, self.rank), offsets, extent, label)
        if values.size != math.prod(target_region[1]):
            raise UnsupportedConstruct(
                reason(
                    ReasonCode.DSL_COPY_SIZES,
                    label=label,
                    extent=str(list(extent)),
                    source=repr(source),
                    target_extent=str(list(target_region[1])),
                    target=repr(target),
                )
            )
        self.store(target, owner, target_region[0], values.reshape(target_region[1]), label)

    def get(
        self,
        data: TensorView,
        owner: int,
        region: tuple[Sequence[int], Sequence[int]],
        label: str,
    ) -> None:
        offsets, extent = region
        values, _ = self.load(data, owner, offsets, extent, label)
        self.store(data, self.rank, offsets, values, label)

    def quotient(self, dim: int, divisor: int) -> int:
        return dim // divisor

    def scaled(self, index: int, factor: int) -> int:
        return index * factor

    def publish_count(
        self,
        send_counts: TensorView,
        cell: tuple[Sequence[int], Sequence[int]],
        most: int,
        recv_counts: TensorView,
        destination: int,
        recv_cell: Sequence[int],
        label: str,
    ) -> None:
        offsets, extent = cell
        loaded, ref = self.load(
            send_counts, local_owner(send_counts, self.rank), offsets, extent, label
        )
        count = Tainted(
            np.asarray(loaded).reshape(-1)[0],
            frozenset({ref}),
            first_form(self.input_symbols(send_counts, offsets, extent)),
        )
        # min(count, M), no lower clamp: an exact choice, no branch (`chosen_scalar`)
        published = chosen_scalar(Op.MIN, count, DeviceInt(most))
        self.notify(recv_counts, destination, recv_cell, published, NotifyOp.SET, label)

    def require_rank(self, index: int, what: str) -> None:
        if not 0 <= index < self.ranks:
            self.fail_bounds(f"{what} {index} is outside [0, {self.ranks})")
