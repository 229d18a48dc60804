"""Parametric event templates: what rank `me` of N does, for every N at once.

A template is one event of the per-rank kernel with symbolic addresses, the guard
under which it happens (its branch conditions and the bounds of its loop indices)
and its position in program order. An instance is the template with concrete values
for N, the rank and its loop indices.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from racecheck.allp.expr import Cond, Expr
from racecheck.events import NotifyOp, SourceLocation, WaitCmp


class Effect(Enum):
    READ = "read"
    WRITE = "write"
    ATOMIC_ADD = "atomic add"
    NOTIFY = "notify"
    WAIT = "wait"

    @property
    def writes(self) -> bool:
        return self in (Effect.WRITE, Effect.ATOMIC_ADD, Effect.NOTIFY)

    @property
    def plain(self) -> bool:
        return self in (Effect.READ, Effect.WRITE)


@dataclass(frozen=True, slots=True, kw_only=True)
class Footprint:
    """Bytes `(sum_k (offsets[k] + i_k) * strides[k]) * itemsize + b`, 0 <= i_k <
    extent[k], 0 <= b < itemsize, of `memory` as owned by `owner` (None: host memory),
    in the coordinates of the whole memory (a view's selected rows are dimensions)."""

    memory: str
    owner: Expr | None
    strides: tuple[Expr, ...]
    offsets: tuple[Expr, ...]
    extent: tuple[Expr, ...]
    itemsize: int


@dataclass(frozen=True, slots=True)
class LoopItem:
    slot: int
    var: str
    parallel: bool = False  # a kernel's pl.parallel: its iterations may run concurrently


PositionItem = int | LoopItem


@dataclass(frozen=True, slots=True, kw_only=True)
class Template:
    effect: Effect
    footprint: Footprint
    guard: Cond
    position: tuple[PositionItem, ...]
    location: SourceLocation
    rank: str  # the variable that is this event's rank
    loop_vars: tuple[str, ...]
    inputs: tuple[str, ...] = ()  # the input values (`Tracer.input_value`) it mentions
    context: frozenset[tuple[Cond, bool]] = frozenset()  # branch decisions on N alone
    notify_op: NotifyOp | None = None
    value: Expr | None = None  # notify value / wait threshold
    cmp: WaitCmp | None = None
    span: tuple[int, int] | None = None  # a Set notify: the values its cell may get


@dataclass(frozen=True, slots=True, kw_only=True)
class BoundsCheck:
    """`holds` must be true wherever `guard` is: an access or view inside its memory, or
    a device scalar the program computed (`what`) inside INT32."""

    holds: Cond
    guard: Cond
    location: SourceLocation
    what: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """A branch side taken: `guard` holds right after the decision at `location`."""

    guard: Cond
    location: SourceLocation


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowRead:
    """A `pl.read` of a window cell at `location`: its value is taken to be 0 or in
    `low..high`, the values of the Set notifies on `memory` traced before it (None: no
    such notify, 0 only). Sound only if every writer of `memory` is such a notify."""

    memory: str
    itemsize: int  # of the cell read: a writer of other cells' size mixes their bytes
    low: int | None
    high: int | None
    location: SourceLocation


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejection:
    """A path on which the program raises: where `guard` holds, the program rejects P."""

    guard: Cond
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Protocol:
    """Every path of the program, merged: what the obligations are about."""

    templates: tuple[Template, ...]
    checks: tuple[BoundsCheck, ...]
    scalars: tuple[BoundsCheck, ...]  # the device scalars computed, each inside INT32
    rejections: tuple[Rejection, ...]
    cases: tuple[Case, ...]
    rank_var: str
    paths: int
    inputs: tuple[str, ...] = ()  # what the input values read range over
    read_inputs: frozenset[str] = frozenset()  # the host tensors they are read from
    window_reads: tuple[WindowRead, ...] = ()
