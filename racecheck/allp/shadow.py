"""The DSL surface the symbolic tracer runs user code against (`pl`, `pld` stand-ins).

While a program is traced symbolically its module's `pl` and `pld` names (and its
module-level DSL functions) are swapped for these objects; a factory's body defines
its program with them. Types, dtypes and enums are the real DSL's; every operation
either records a template or leaves the fragment (`OutsideFragment`). The modelled
operations: `pld.rank/nranks/world_size/get_comm_ctx`, `alloc_window_buffer`,
`window`, `pl.load/store` on windows and host rows, `remote_load/remote_store`,
`notify`, `wait`, `put`, `get`, `pl.range`, element-wise tile arithmetic, and the
builtin barrier, broadcast, allgather and all_to_all inside a kernel, by the one
lowering the co-simulation runs too (`TracedOps` is its symbolic `CollectiveOps`).
Memory and addresses live in `views`; DSL functions and programs in `functions`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any

from racecheck.allp.expr import (
    WORLD,
    All,
    Cmp,
    Cond,
    Const,
    Expr,
    Op,
    OutsideFragment,
    Rel,
    Sym,
    Var,
    extremum,
    to_expr,
)
from racecheck.allp.functions import Jit, ShadowFunction, ShadowProgram
from racecheck.allp.templates import Effect, Footprint
from racecheck.allp.tracer import Tracer
from racecheck.allp.views import (
    SymBuffer,
    SymTile,
    SymView,
    add,
    as_tile,
    as_view,
    as_window,
    exprs,
    host_dim,
    in_range,
    mul,
    product,
    strides,
)
from racecheck.assumptions import Assumption, narrowed
from racecheck.dsl import dist_ops, local_ops, lowering, modules
from racecheck.dsl.builtins import HOST_MAX_RANKS
from racecheck.dsl.dtypes import DType
from racecheck.dsl.location import user_location
from racecheck.dsl.lowering import Lowering
from racecheck.dsl.program import FunctionRole, _role_of
from racecheck.dsl.types import AtomicType, DimExpr, Direction, TensorType
from racecheck.events import INT32_MAX, INT32_MIN, NotifyOp, WaitCmp
from racecheck.report.reasons import ReasonCode, reason


class Surface:
    """`pl` and `pld` for one symbolic run."""

    def __init__(
        self,
        tracer: Tracer,
        real_pl: ModuleType,
        real_pld: ModuleType,
        assumed: tuple[Assumption, ...] = (),
    ) -> None:
        self.tracer = tracer
        self.assumed = assumed
        self.inputs: dict[str, str] = {}  # host input tensor memory -> its parameter name
        self.read_ranges: dict[str, str] = {}  # what each input read ranges over, once
        self.read_memories: set[str] = set()  # the host tensors read
        self.windows = 0
        self.rank_dims: frozenset[str] = frozenset()  # pl.dynamic names bound to N
        self.dispatched = False
        self.kernel_calls = 0
        self.in_kernel = False  # tracing a kernel's body (not a per-device function's)
        self.ops = TracedOps(self)
        self.pl = _Namespace("pl", real_pl, self._pl_members())
        self.pld = _Namespace("pld", real_pld, self._pld_members())

    # --- namespaces ---------------------------------------------------------------------

    def _pl_members(self) -> dict[str, Any]:
        def elementwise(*operands: object, **_: object) -> SymTile:
            tiles = [operand for operand in operands if isinstance(operand, SymTile)]
            if not tiles:
                raise OutsideFragment(reason(ReasonCode.SHADOW_SCALAR_ARITHMETIC))
            return tiles[0]

        def scalar_or_tile(op: Op) -> Callable[..., object]:
            def apply(*operands: object, **keywords: object) -> object:
                if len(operands) == 2 and not any(isinstance(o, SymTile) for o in operands):
                    return extremum(op, *operands)
                return elementwise(*operands, **keywords)

            return apply

        members: dict[str, Any] = {
            "range": self.range_,
            "parallel": self.parallel,
            "load": self.load,
            "store": self.store,
            "program": self.program,
            "function": self.function,
            "jit": Jit(self),
            "read": self.read,
            "write": self.write,
        }
        for name in ("add", "sub", "mul", "div", "maximum", "minimum"):
            members[name] = elementwise
        members["min"], members["max"] = scalar_or_tile(Op.MIN), scalar_or_tile(Op.MAX)
        members["cast"] = lambda value, *args, **kwargs: (
            _scalar_cast(value, *args, **kwargs)
            if isinstance(value, (Sym, int))
            else elementwise(value, *args, **kwargs)
        )
        return members

    def _pld_members(self) -> dict[str, Any]:
        system = _Namespace(
            "pld.system",
            None,
            {
                "notify": self.notify,
                "wait": self.wait,
                "rank": self.rank,
                "nranks": self.nranks,
                "world_size": self.world_size,
            },
        )
        tile = _Namespace(
            "pld.tile", None, {"remote_load": self.remote_load, "remote_store": self.remote_store}
        )
        tensor = _Namespace(
            "pld.tensor",
            None,
            {
                "put": self.put,
                "get": self.get,
                "barrier": self.barrier,
                "broadcast": self.broadcast,
                "allgather": self.allgather,
                "all_to_all": self.all_to_all,
                "all_to_all_v": self.all_to_all_v,
            },
        )
        return {
            "system": system,
            "tile": tile,
            "tensor": tensor,
            "remote_load": self.remote_load,
            "remote_store": self.remote_store,
            "rank": self.rank,
            "nranks": self.nranks,
            "world_size": self.world_size,
            "get_comm_ctx": lambda *args, **kwargs: dist_ops.CommCtx(),
            "alloc_window_buffer": self.alloc_window_buffer,
            "window": self.window,
        }

    # --- structure ----------------------------------------------------------------------

    def program(self, cls: type | None = None, **_: object) -> Any:
        if cls is None:
            return self.program
        return ShadowProgram(cls)

    def function(
        self, fn: Callable[..., Any] | None = None, *, type: object = None, **options: object
    ) -> Any:
        role = _role_of(type, options.get("level"), options.get("role"))
        if fn is not None:
            return ShadowFunction(fn, role, self)
        return lambda wrapped: ShadowFunction(wrapped, role, self)

    def dispatch(
        self,
        device: object,
        function: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        role: FunctionRole,
    ):
        tracer = self.tracer
        if self.dispatched:
            raise OutsideFragment(reason(ReasonCode.SHADOW_DISPATCH_LOOPS))
        loop = tracer.slots[-1].var if len(tracer.slots) == 1 else None
        if not (isinstance(device, Sym) and loop is not None and device.expr == Var(loop)):
            raise OutsideFragment(reason(ReasonCode.SHADOW_DEVICE_NOT_INDEX))
        if tracer.bounds[-1] != (Const(0), 1):
            # PyPTO puts the windows of a loop up to pld.world_size() in the all-devices
            # group whatever its start and step, those of a loop up to a constant in the
            # group of its indices (docs/model.md): here both stops are N.
            raise OutsideFragment(reason(ReasonCode.SHADOW_DISPATCH_START))
        tracer.check(in_range(device.expr, Const(0), Var(WORLD)), "a dispatch's device")
        self.dispatched = True
        rank = tracer.enter_rank()
        self.in_kernel = role is FunctionRole.KERNEL  # a kernel dispatched itself
        try:
            function(*args, **kwargs)
        except OutsideFragment as outside:
            # The reason names the rank as the user does, not by its loop variable.
            raise OutsideFragment(re.sub(rf"\b{rank}\b", "rank", outside.reason)) from None
        finally:
            tracer.rank = None
            self.in_kernel = False

    def call(self, role: FunctionRole, function: Callable[..., Any], args: tuple, kwargs: dict):
        if role is FunctionRole.KERNEL and self.tracer.rank is not None:
            self.kernel_calls += 1
            if self.kernel_calls > 1 or len(self.tracer.slots) > 1:
                raise OutsideFragment(reason(ReasonCode.SHADOW_TWO_KERNELS))
            self.in_kernel = True
            try:
                return function(*args, **kwargs)
            finally:
                self.in_kernel = False
        return function(*args, **kwargs)

    # --- builtin collectives ------------------------------------------------------------

    # The builtins run the co-simulation's own InCore lowering (racecheck/dsl/lowering.py)
    # through `TracedOps`; these check and convert their arguments only.

    def barrier(self, signal: object) -> object:
        lowering.barrier(self.ops, Lowering.INCORE, as_window(signal), label="pld.tensor.barrier")
        return signal

    def broadcast(self, data: object, signal: object, *, root: object = 0) -> object:
        root_rank = self.tracer.sym(to_expr(root))
        label = "pld.tensor.broadcast"
        lowering.incore_broadcast(self.ops, as_window(data), as_window(signal), root_rank, label)
        return data

    def allgather(
        self,
        local: object,
        target: object,
        signal: object,
        out: object = None,
        *,
        defer: object = False,
    ) -> object:
        if defer:
            raise OutsideFragment(reason(ReasonCode.SHADOW_DEFERRED_ALLGATHER))
        return self._exchange(
            "pld.tensor.allgather", lowering.allgather, local, target, signal, out
        )

    def all_to_all(
        self, source: object, target: object, signal: object, out: object = None
    ) -> object:
        label = "pld.tensor.all_to_all"
        return self._exchange(label, lowering.all_to_all, source, target, signal, out)

    def all_to_all_v(
        self,
        source: object,
        target: object,
        signal: object,
        send_counts: object = None,
        recv_counts: object = None,
        **keywords: object,
    ) -> object:
        """Inside a kernel, PyPTO's InCore lowering of all_to_all_v: each count is read
        as `pl.read` reads it (a host input's value, or a window cell's). Elsewhere it
        runs PyPTO's host kernel, which does nothing above 16 ranks: no proof for
        every P exists (the concrete checks say so above 16)."""
        label = "pld.tensor.all_to_all_v"
        if not self.in_kernel:
            where = user_location().line
            raise OutsideFragment(
                reason(
                    ReasonCode.SHADOW_HOST_KERNEL_CAP, label=label, line=where, most=HOST_MAX_RANKS
                )
            )
        if keywords:
            names = ", ".join(f"{name}=" for name in keywords)
            raise OutsideFragment(reason(ReasonCode.BUILTIN_KEYWORDS, label=label, keywords=names))
        if (send_counts is None) != (recv_counts is None):
            raise OutsideFragment(reason(ReasonCode.BUILTIN_COUNTS, label=label))
        source_view, target_view = as_view(source), as_window(target)
        if source_view.memory == target_view.memory:
            raise OutsideFragment(reason(ReasonCode.SHADOW_SOURCE_IS_TARGET, label=label))
        counts = () if send_counts is None else (as_view(send_counts), as_window(recv_counts))
        lowering.all_to_all_v(
            self.ops,
            Lowering.INCORE,
            source_view,
            target_view,
            as_window(signal),
            *counts,
            label=label,
        )
        return target

    def _exchange(
        self,
        label: str,
        lower: Callable[..., None],
        source: object,
        target: object,
        signal: object,
        out: object,
    ) -> object:
        """A builtin that puts `source` (or rows of it) into every rank's `target`."""
        if out is not None:
            raise OutsideFragment(reason(ReasonCode.SHADOW_FOUR_ARGUMENTS, label=label))
        source_view, target_view = as_view(source), as_window(target)
        if source_view.memory == target_view.memory:
            # docs/guide.md: the source is not the target (the co-simulation refuses it)
            raise OutsideFragment(reason(ReasonCode.SHADOW_SOURCE_IS_TARGET, label=label))
        lower(self.ops, Lowering.INCORE, source_view, target_view, as_window(signal), label)
        return source if source_view.window else target

    # --- context ------------------------------------------------------------------------

    def rank(self, ctx: object = None) -> Sym:
        return self.tracer.sym(Var(self.tracer.rank_var()))

    def nranks(self, ctx: object = None) -> Sym:
        self.tracer.rank_var()
        return self.tracer.world()

    def world_size(self) -> Sym:
        return self.tracer.world()

    def parallel(self, *args: object, init_values: object = None, **_: object) -> Any:
        """`pl.parallel`: in a kernel its iterations may run concurrently (docs/model.md),
        an obligation of their own; on the host it is `pl.range`."""
        return self.range_(*args, init_values=init_values, parallel=self.tracer.rank is not None)

    def range_(
        self, *args: object, init_values: object = None, parallel: bool = False, **_: object
    ) -> Any:
        if init_values is not None:
            raise OutsideFragment(reason(ReasonCode.SHADOW_RANGE_CARRY))
        if not 1 <= len(args) <= 3:
            raise OutsideFragment(reason(ReasonCode.SHADOW_RANGE_ARGS, args=repr(args)))
        bounds: tuple[object, ...] = (0, *args) if len(args) == 1 else args
        start, stop, step = (*bounds, 1)[:3]
        if not isinstance(step, int):
            raise OutsideFragment(reason(ReasonCode.SHADOW_SYMBOLIC_STEP))
        return self.tracer.loop(start, stop, step, parallel=parallel)

    # --- memory -------------------------------------------------------------------------

    def alloc_window_buffer(self, size: object, dtype: DType | None = None, **_: object):
        if isinstance(size, (list, tuple)):
            if dtype is None:
                raise OutsideFragment(reason(ReasonCode.SHADOW_ALLOC_NO_DTYPE))
            nbytes = mul(product(self._dims(size)), Const(dtype.nbytes))
        else:
            (nbytes,) = self._dims([size])
        if self.tracer.slots or self.tracer.rank is not None:
            raise OutsideFragment(reason(ReasonCode.SHADOW_ALLOC_INSIDE))
        self.windows += 1
        return SymBuffer(name=f"window{self.windows}", nbytes=nbytes)

    def window(self, buf: object, shape: Sequence[object], *, dtype: DType) -> SymView:
        if not isinstance(buf, SymBuffer):
            raise OutsideFragment(reason(ReasonCode.SHADOW_WINDOW_OF))
        view = SymView(memory=buf.name, window=True, shape=self._dims(shape), dtype=dtype)
        size = mul(product(view.shape), Const(dtype.nbytes))
        self.tracer.check(Cmp(Rel.LE, size, buf.nbytes), f"a window view of {buf.name}")
        return view

    def _dims(self, values: Sequence[object]) -> tuple[Expr, ...]:
        """Sizes on the host: integers, symbolic values, or `pl.dynamic` dims."""
        return tuple(
            host_dim(value, self.tracer, self.rank_dims)
            if isinstance(value, DimExpr)
            else to_expr(value)
            for value in values
        )

    def host_tensor(self, name: str, annotation: TensorType, rank_dims: frozenset[str]) -> SymView:
        """A host tensor argument; `rank_dims` are the `pl.dynamic` names bound to N."""
        shape = tuple(host_dim(dim, self.tracer, rank_dims) for dim in annotation.dims)
        if annotation.direction is Direction.IN:
            self.inputs[f"host {name}"] = name
        return SymView(memory=f"host {name}", window=False, shape=shape, dtype=annotation.dtype)

    def _footprint(
        self, view: SymView, owner: Expr | None, offsets: Sequence[object], extent: Sequence[object]
    ) -> Footprint:
        offs, ext = exprs(offsets), exprs(extent)
        if len(offs) != len(view.shape) or len(ext) != len(view.shape):
            raise OutsideFragment(reason(ReasonCode.SHADOW_ACCESS_RANK))
        holds: list[Cond] = list(view.checks)
        for offset, size, dim in zip(offs, ext, view.shape, strict=True):
            holds += [Cmp(Rel.LE, Const(0), offset), Cmp(Rel.LE, Const(0), size)]
            holds.append(Cmp(Rel.LE, add(offset, size), dim))
        if owner is not None:
            holds.append(in_range(owner, Const(0), Var(WORLD)))
        self.tracer.check(All(tuple(holds)), f"an access to {view.memory}")
        return Footprint(  # in the coordinates of the whole memory: its rows selected first
            memory=view.memory,
            owner=owner,
            strides=strides((*view.outer, *view.shape)),
            offsets=(*view.rows, *offs),
            extent=(*(Const(1) for _ in view.rows), *ext),
            itemsize=view.dtype.nbytes,
        )

    def _local_owner(self, view: SymView) -> Expr | None:
        return Var(self.tracer.rank_var()) if view.window else None

    def _access(
        self,
        effect: Effect,
        view: object,
        owner: Expr | None,
        offsets: Sequence[object],
        extent: Sequence[object],
        written: Expr | None = None,
    ) -> None:
        if not isinstance(view, SymView):
            raise OutsideFragment(reason(ReasonCode.SHADOW_ACCESS_TO, view=repr(view)))
        self.tracer.rank_var()
        footprint = self._footprint(view, owner, offsets, extent)
        self.tracer.event(effect, footprint, written=written)

    def load(
        self,
        tensor: object,
        offsets: Sequence[object],
        shape: Sequence[object],
        valid_shape: Sequence[object] | None = None,
        **_: object,
    ) -> SymTile:
        view = as_view(tensor)
        extent = valid_shape if valid_shape is not None else shape
        self._access(Effect.READ, view, self._local_owner(view), offsets, extent)
        return SymTile(extent=exprs(extent))

    def read(self, tensor: object, offsets: object) -> Sym:
        """`pl.read` of one element of a host input tensor in a kernel: a fresh value of
        its dtype's range, narrowed by the user's assumptions (`racecheck.assumptions`).
        Of a window's element: `_window_read`."""
        offsets = local_ops.element_offsets(offsets)
        view = as_view(tensor)
        if view.window:
            return self._window_read(view, offsets)
        name = self.inputs.get(view.memory)
        if name is None:
            raise OutsideFragment(reason(ReasonCode.SHADOW_READ_NOT_INPUT, memory=view.memory))
        limits = view.dtype.limits
        if limits is None or not (limits[0] >= INT32_MIN and limits[1] <= INT32_MAX):
            raise OutsideFragment(
                reason(ReasonCode.SHADOW_READ_DTYPE, memory=name, dtype=view.dtype.name)
            )
        self._access(Effect.READ, view, None, offsets, [1] * len(view.shape))
        low, high = narrowed(limits, self.assumed, name)
        why = "assumed" if (low, high) != limits else f"its dtype {view.dtype.name}"
        self.read_ranges.setdefault(name, f"{name} in {low}..{high} ({why})")
        self.read_memories.add(view.memory)
        return self.tracer.input_value(low, high)

    def _window_read(self, view: SymView, offsets: Sequence[object]) -> Sym:
        """`pl.read` of one INT32 element of the rank's own window: 0 or a value its Set
        notifies store (`Tracer.window_value`); the read is an access, ordered after
        those notifies by the obligations like any other."""
        if view.dtype.limits != (INT32_MIN, INT32_MAX):
            raise OutsideFragment(
                reason(ReasonCode.SHADOW_READ_DTYPE, memory=view.memory, dtype=view.dtype.name)
            )
        self._access(Effect.READ, view, self._local_owner(view), offsets, [1] * len(view.shape))
        return self.tracer.window_value(view.memory, view.dtype.nbytes, user_location())

    def write(self, tensor: object, offsets: object, value: object) -> None:
        """`pl.write` of one element of a tensor or the rank's own window: a write of
        exactly that element. Into an INT32 window the interval of its value is kept, as
        a Set notify's is, for the `pl.read`s of that window (`allp._require_covered`).
        A host input it writes is no longer read symbolically."""
        offsets = local_ops.element_offsets(offsets)
        written = to_expr(value)
        view = as_view(tensor)
        kept = view.window and view.dtype.limits == (INT32_MIN, INT32_MAX)
        owner, extent = self._local_owner(view), [1] * len(view.shape)
        self._access(Effect.WRITE, view, owner, offsets, extent, written if kept else None)

    def store(self, tile: object, offsets: Sequence[object], output_tensor: object) -> SymView:
        view = as_view(output_tensor)
        self._access(Effect.WRITE, view, self._local_owner(view), offsets, as_tile(tile).extent)
        return view

    def remote_load(
        self,
        target: object,
        peer: object,
        offsets: Sequence[object],
        shape: Sequence[object],
        valid_shape: Sequence[object] | None = None,
    ) -> SymTile:
        view = as_window(target)
        extent = valid_shape if valid_shape is not None else shape
        self._access(Effect.READ, view, to_expr(peer), offsets, extent)
        return SymTile(extent=exprs(extent))

    def remote_store(
        self,
        src_tile: object,
        target: object,
        peer: object,
        offsets: Sequence[object],
        *,
        atomic: object = AtomicType.None_,
    ) -> None:
        view = as_window(target)
        effect = Effect.ATOMIC_ADD if atomic is AtomicType.Add else Effect.WRITE
        self._access(effect, view, to_expr(peer), offsets, as_tile(src_tile).extent)

    def notify(
        self, target: object, peer: object, offsets: Sequence[object], value: object, *, op: object
    ) -> None:
        view = as_window(target)
        event_op = dist_ops.NOTIFY_OPS.get(op)  # type: ignore[call-overload]
        if event_op is None:
            raise OutsideFragment(reason(ReasonCode.SHADOW_NOTIFY_OP, op=repr(op)))
        self._notify(view, peer, offsets, value, event_op)

    def _notify(
        self, view: SymView, peer: object, offsets: Sequence[object], value: object, op: NotifyOp
    ) -> None:
        footprint = self._footprint(view, to_expr(peer), offsets, [1] * len(view.shape))
        self.tracer.event(Effect.NOTIFY, footprint, notify_op=op, value=to_expr(value))

    def wait(
        self,
        signal: object = None,
        offsets: Sequence[object] | None = None,
        expected: object = None,
        *,
        cmp: object,
        target: object = None,
    ) -> None:
        view = as_window(signal if signal is not None else target)
        if offsets is None or expected is None:
            raise OutsideFragment(reason(ReasonCode.SHADOW_WAIT_ARGUMENTS))
        event_cmp = dist_ops.WAIT_CMPS.get(cmp)  # type: ignore[call-overload]
        if event_cmp is None:
            raise OutsideFragment(reason(ReasonCode.SHADOW_WAIT_CMP, cmp=repr(cmp)))
        self._wait(view, offsets, expected, event_cmp)

    def _wait(
        self, view: SymView, offsets: Sequence[object], expected: object, cmp: WaitCmp
    ) -> None:
        owner = Var(self.tracer.rank_var())
        footprint = self._footprint(view, owner, offsets, [1] * len(view.shape))
        self.tracer.event(Effect.WAIT, footprint, value=to_expr(expected), cmp=cmp)

    def _transfer(
        self, dst: object, peer: object, src: object, regions: tuple, *, push: bool, atomic: object
    ) -> None:
        label = "pld.tensor.put" if push else "pld.tensor.get"
        dst_view, src_view = as_view(dst), as_view(src)
        dst_offsets, src_offsets, shape = regions
        if dist_ops.regions_given(label, *regions):
            src_region, dst_region = (src_offsets, shape), (dst_offsets, shape)
        else:  # the whole slice, as the co-simulation copies it: flat, sizes equal
            if product(src_view.shape) != product(dst_view.shape):
                raise OutsideFragment(reason(ReasonCode.SHADOW_WHOLE_SLICE_SIZES, label=label))
            src_region = ([0] * len(src_view.shape), list(src_view.shape))
            dst_region = ([0] * len(dst_view.shape), list(dst_view.shape))
        target = to_expr(peer)
        src_owner = self._local_owner(src_view) if push else target
        dst_owner = target if push else self._local_owner(dst_view)
        if not (dst_view.window if push else src_view.window):
            raise OutsideFragment(reason(ReasonCode.SHADOW_REMOTE_NOT_WINDOW))
        self._access(Effect.READ, src_view, src_owner, *src_region)
        effect = Effect.ATOMIC_ADD if atomic is AtomicType.Add else Effect.WRITE
        self._access(effect, dst_view, dst_owner, *dst_region)

    def put(
        self,
        dst: object,
        peer: object,
        src: object,
        dst_offsets=None,
        src_offsets=None,
        shape=None,
        *,
        atomic: object = AtomicType.None_,
        **_: object,
    ) -> None:
        self._transfer(dst, peer, src, (dst_offsets, src_offsets, shape), push=True, atomic=atomic)

    def get(
        self,
        dst: object,
        peer: object,
        src: object,
        dst_offsets=None,
        src_offsets=None,
        shape=None,
        **_: object,
    ) -> None:
        self._transfer(dst, peer, src, (dst_offsets, src_offsets, shape), push=False, atomic=None)


class TracedOps:
    """`CollectiveOps` in the symbolic tracer: the builtins' lowering
    (racecheck/dsl/lowering.py) run with the rank and N symbolic, each operation
    recording its event templates on the surface's tracer. A loop over the ranks is
    one symbolic iteration (as a `pl.range` is), so the lowering carries nothing from
    one iteration to the next."""

    def __init__(self, surface: Surface) -> None:
        self.surface = surface
        self.tracer = surface.tracer

    @property
    def rank(self) -> Sym:
        return self.surface.rank()

    @property
    def ranks(self) -> Sym:
        return self.tracer.world()

    def quotient(self, dim: Expr | int, divisor: Sym | Expr | int) -> int:
        """A block size the same number at every P (`(P * M) // P`), or the fragment ends."""
        quotient = self.tracer.sym(to_expr(dim)) // self.tracer.sym(to_expr(divisor))
        if not isinstance(quotient, int):
            raise OutsideFragment(
                reason(ReasonCode.SHADOW_BLOCK_SIZE, dim=str(to_expr(dim)), divisor=str(divisor))
            )
        return quotient

    def scaled(self, index: Sym, factor: int) -> Sym:
        scaled = index * factor
        if not isinstance(scaled, Sym):
            raise OutsideFragment(reason(ReasonCode.SHADOW_SCALAR_ARITHMETIC))
        return scaled

    def publish_count(
        self,
        send_counts: SymView,
        cell: tuple[Sequence[Sym | int], Sequence[Expr | int]],
        most: int,
        recv_counts: SymView,
        destination: Sym,
        recv_cell: Sequence[Sym | int],
        label: str,
    ) -> None:
        offsets, extent = cell
        if any(to_expr(size) != Const(1) for size in extent):
            # the co-simulation loads the row and takes its first element
            raise OutsideFragment(reason(ReasonCode.SHADOW_ACCESS_RANK))
        count = self.surface.read(send_counts, list(offsets))
        published = extremum(Op.MIN, count, most)
        self.surface._notify(recv_counts, destination, recv_cell, published, NotifyOp.SET)

    def peers(self) -> Iterator[Sym]:
        me = self.rank
        for other in self.tracer.loop(0, self.tracer.world(), 1):
            if other != me:
                yield other

    def each_rank(self) -> Iterator[Sym]:
        return self.tracer.loop(0, self.tracer.world(), 1)

    def notify(
        self,
        view: SymView,
        peer: Sym,
        offsets: Sequence[Sym | int],
        value: int,
        op: NotifyOp,
        label: str,
    ) -> None:
        self.surface._notify(view, peer, offsets, value, op)

    def wait(
        self, view: SymView, offsets: Sequence[Sym | int], expected: int, cmp: WaitCmp, label: str
    ) -> None:
        self.surface._wait(view, offsets, expected, cmp)

    def put(
        self,
        source: SymView,
        source_region: tuple[Sequence[Sym | int], Sequence[Expr | int]],
        target: SymView,
        owner: Sym,
        target_region: tuple[Sequence[Sym | int], Sequence[Expr | int]],
        label: str,
    ) -> None:
        if product(exprs(source_region[1])) != product(exprs(target_region[1])):
            raise OutsideFragment(reason(ReasonCode.SHADOW_REGION_SIZES, label=label))
        surface = self.surface
        surface._access(Effect.READ, source, surface._local_owner(source), *source_region)
        surface._access(Effect.WRITE, target, to_expr(owner), *target_region)

    def get(
        self,
        data: SymView,
        owner: Sym,
        region: tuple[Sequence[Sym | int], Sequence[Expr | int]],
        label: str,
    ) -> None:
        surface = self.surface
        surface._access(Effect.READ, data, to_expr(owner), *region)
        surface._access(Effect.WRITE, data, surface._local_owner(data), *region)

    def require_rank(self, index: Sym, what: str) -> None:
        self.tracer.check(in_range(to_expr(index), Const(0), Var(WORLD)), what)


def _scalar_cast(value: Sym | int, dtype: object = None, *_: object, **__: object) -> Sym | int:
    """`pl.cast` of a device scalar: every scalar here fits INT32 (reads are INT32 or
    narrower, computed values are checked), so a cast to a signed integer type of 32
    bits or more keeps it; any other cast leaves the fragment."""
    limits = dtype.limits if isinstance(dtype, DType) else None
    if limits is None or not (limits[0] <= INT32_MIN and limits[1] >= INT32_MAX):
        raise OutsideFragment(reason(ReasonCode.SHADOW_CAST, dtype=repr(dtype)))
    return value


class _Namespace:
    """Attribute lookup: the shadow's members, then the real module's types and enums."""

    def __init__(self, display: str, real: ModuleType | None, members: dict[str, Any]) -> None:
        self._display = display
        self._real = real
        self._members = members

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._members:
            return self._members[name]
        if self._real is not None and name in modules.TYPE_NAMES:
            return getattr(self._real, name)
        raise OutsideFragment(reason(ReasonCode.SHADOW_NAME, name=f"{self._display}.{name}"))
