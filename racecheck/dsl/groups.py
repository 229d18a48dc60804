"""Communication groups (docs/model.md): inside a kernel, ranks and peers are numbered
within the group of devices a window is dispatched to.

A window's group is the sorted set of ranks its buffer's views were dispatched to
(`WindowBuffer.devices`, collected while the host body runs, so complete before any
rank runs); a buffer no dispatch names belongs to every rank. `pld.rank(ctx)` is the
rank's index in the group of the ctx's window, and a peer given to a remote access is
an index into the accessed window's group, mapped here to the world rank that owns the
instance. A group of every rank numbers its members as the world does, so programs
whose windows reach every rank are unaffected.
"""

from __future__ import annotations

import ast
import linecache
from collections.abc import Iterator, Sequence
from functools import cache

import numpy as np

from racecheck.dsl.context import RankContext, RankContextProxy
from racecheck.dsl.dtypes import INT64
from racecheck.dsl.location import innermost_user_frame, user_location
from racecheck.dsl.scalars import DeviceIndex, DeviceInt, Tainted
from racecheck.dsl.symbolic import Forms
from racecheck.dsl.tensors import TensorView
from racecheck.errors import UnsupportedConstruct
from racecheck.events import EventRef, NotifyOp
from racecheck.report.reasons import ReasonCode, reason


class WorldSize(DeviceInt):
    """`pld.world_size()`. As the stop of a host `pl.range` (directly or through one
    variable) it makes every `device=r` dispatch of the loop put its windows in the
    all-devices group, whatever the loop's start and step (PyPTO's
    MaterializeCommDomainScopes: src/ir/transforms/materialize_comm_domain_scopes_pass.cpp
    :228-237); arithmetic on it gives a plain device int, which PyPTO does not see
    through."""

    __slots__ = ()
    dtype = INT64  # as PyPTO types it (docs/model.md §1)


class WorldIndex(DeviceIndex):
    """An index of a `pl.range` whose stop is `pld.world_size()`."""

    __slots__ = ()


class UngroupedIndex(DeviceIndex):
    """An index of a `pl.range` from which PyPTO reads no device group: its stop is
    neither `pld.world_size()` nor a constant, or its stop is a constant and its start
    is not a constant or its step is not 1 (MaterializeCommDomainScopes refuses a
    `device=` dispatch over it: materialize_comm_domain_scopes_pass.cpp:238-257)."""

    __slots__ = ()


def loop_indices(bounds: tuple[object, ...], indices: range) -> Iterator[DeviceInt]:
    """The indices of `pl.range(*bounds)` (INDEX scalars): `WorldIndex` when its stop is
    the world size, `UngroupedIndex` when PyPTO cannot read a group from the loop."""
    start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds, 1)[:3]
    kind: type[DeviceIndex] = DeviceIndex
    if isinstance(stop, WorldSize):
        kind = WorldIndex
    elif not (_constant(stop) and _constant(start) and _constant(step) and step == 1):
        kind = UngroupedIndex
    return (kind(index) for index in indices)


def _constant(bound: object) -> bool:
    """A bound PyPTO sees as a constant: a Python int (a factory's or module's value),
    not a device scalar (`pld.world_size() - 1` is an expression PyPTO does not fold)."""
    return isinstance(bound, int) and not isinstance(bound, bool | DeviceInt)


def refuse_ungrouped(index: object) -> None:
    """`device=r` over a loop PyPTO reads no device group from is refused at its line."""
    if not isinstance(index, UngroupedIndex):
        return
    frame = innermost_user_frame()
    if frame is None or not _device_is_loop_target(frame.f_code.co_filename, frame.f_lineno):
        return
    where = user_location()
    raise UnsupportedConstruct(
        reason(ReasonCode.GROUP_RANGE),
        file=where.file,
        line=where.line,
    )


def spans_world_by_loop(index: object) -> bool:
    """Whether a `device=` value puts its windows in the all-devices group: the index of
    a loop up to `pld.world_size()`, passed as that loop's own variable (PyPTO reads the
    `device=` expression: only the loop's induction variable counts)."""
    if not isinstance(index, WorldIndex):
        return False
    frame = innermost_user_frame()
    return frame is not None and _device_is_loop_target(frame.f_code.co_filename, frame.f_lineno)


@cache
def _device_is_loop_target(filename: str, line: int) -> bool:
    """A call at `line` passes `device=` the target of a `for` loop around it."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except SyntaxError:
        return False
    for loop in ast.walk(tree):
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)):
            continue
        target = loop.target.id
        for node in ast.walk(loop):
            if (
                isinstance(node, ast.Call)
                and node.lineno <= line <= (node.end_lineno or 0)
                and any(_names(keyword, target) for keyword in node.keywords)
            ):
                return True
    return False


def _names(keyword: ast.keyword, target: str) -> bool:
    value = keyword.value
    return keyword.arg == "device" and isinstance(value, ast.Name) and value.id == target


def members(view: TensorView, ranks: int) -> tuple[int, ...]:
    """The world ranks of `view`'s group, in group order."""
    if not view.devices:
        return tuple(range(ranks))
    return tuple(sorted(view.devices))


def _spans_world(view: TensorView, ranks: int) -> bool:
    """Whether `members(view, ranks)` is every rank, in order; found without sorting
    the group, as it is asked on every access to a window."""
    return not view.devices or view.devices == _world(ranks)


@cache
def _world(ranks: int) -> frozenset[int]:
    """Ranks 0..ranks-1 (a function of `ranks` alone, so made once per rank count)."""
    return frozenset(range(ranks))


def world_peer(context: RankContext, view: TensorView, peer: int) -> int:
    """The world rank whose instance of window `view` is its group's member `peer`."""
    if _spans_world(view, context.ranks):
        return peer  # the access itself bounds-checks it
    group = members(view, context.ranks)
    if not 0 <= peer < len(group):
        context.fail_bounds(
            reason(
                ReasonCode.GROUP_PEER_OUTSIDE, peer=peer, view=repr(view), devices=str(list(group))
            )
        )
    return group[peer]


def in_group(context: RankContext, view: TensorView) -> RankContext:
    """`context` as seen from `view`'s group: its rank and rank count are the group's."""
    if _spans_world(view, context.ranks):
        return context
    group = members(view, context.ranks)
    if context.rank not in group:
        where = user_location()
        raise UnsupportedConstruct(
            reason(
                ReasonCode.GROUP_RANK_OUTSIDE,
                rank=context.rank,
                view=repr(view),
                devices=str(list(group)),
            ),
            file=where.file,
            line=where.line,
        )
    return GroupContext(context, group)


class GroupContext(RankContextProxy):
    """A rank context whose ranks are indices into one group: the builtins' lowerings
    run on it unchanged. Owners of window accesses are mapped to world ranks."""

    def __init__(self, inner: RankContext, group: tuple[int, ...]) -> None:
        super().__init__(inner)
        self.group = group

    @property
    def rank(self) -> int:
        return self.group.index(self.inner.rank)

    @property
    def ranks(self) -> int:
        return len(self.group)

    def _world(self, view: TensorView, owner: int) -> int:
        if not view.is_window:
            return owner
        if not 0 <= owner < self.ranks:
            self.inner.fail_bounds(
                reason(
                    ReasonCode.GROUP_PEER_OUTSIDE,
                    peer=owner,
                    view=repr(view),
                    devices=str(list(self.group)),
                )
            )
        return self.group[owner]

    def load(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        extent: Sequence[int],
        label: str,
    ) -> tuple[np.ndarray, EventRef]:
        return super().load(view, self._world(view, owner), offsets, extent, label)

    def store(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        values: np.ndarray,
        label: str,
        *,
        accumulate: bool = False,
        sources: frozenset[EventRef] | None = None,
        forms: Forms | None = None,
    ) -> None:
        world = self._world(view, owner)
        super().store(
            view, world, offsets, values, label, accumulate=accumulate, sources=sources, forms=forms
        )

    def notify(
        self,
        view: TensorView,
        peer: int,
        offsets: Sequence[int],
        value: int | Tainted,
        op: NotifyOp,
        label: str,
    ) -> None:
        super().notify(view, self._world(view, peer), offsets, value, op, label)
