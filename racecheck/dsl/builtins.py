"""`pld.tensor.*` builtin collectives: where they are called decides what runs.

Each returns its target window (docs/model.md).

Inside a kernel a builtin runs its InCore lowering on the calling rank, in program
order. In the host function (docs/model.md) it becomes one dispatch per device of the
domain (the group of its windows, `racecheck.dsl.groups`; every rank if no dispatch
names them), each running the builtin's host kernel; its events carry the line of the
host call. PyPTO's host kernels return at
once, with no synchronisation and no data, above 16 ranks: that is reported as
unsupported, never checked. The sequences themselves are in `racecheck.dsl.lowering`.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable
from typing import Any

from racecheck.dsl import lanes, lowering, scopes
from racecheck.dsl.collective_ops import RankOps
from racecheck.dsl.context import HostContext, current, is_rank_context, rank_context
from racecheck.dsl.dist_ops import _window, window
from racecheck.dsl.dtypes import INT32
from racecheck.dsl.groups import in_group
from racecheck.dsl.local_ops import require_view
from racecheck.dsl.location import attributed, pinned, unsupported, user_location
from racecheck.dsl.scalars import as_index
from racecheck.dsl.tensors import TensorView
from racecheck.dsl.types import Direction, ReduceOp
from racecheck.events import SourceLocation, WaitCmp
from racecheck.report.reasons import ReasonCode, reason

HOST_MAX_RANKS = 16
HOST_DTYPES = frozenset({"FP32"})  # the mesh allreduce also takes FP16 (docs/model.md)
Lower = Callable[..., None]

_signal_less_sites: weakref.WeakKeyDictionary[object, set[SourceLocation]] = (
    weakref.WeakKeyDictionary()
)


def _host() -> HostContext | None:
    context = current()
    if context is None or is_rank_context(context):
        return None
    return context  # type: ignore[return-value]


def _rank_ops(label: str, window: TensorView) -> RankOps:
    """The calling rank, numbered within `window`'s group, as the lowering runs on it."""
    return RankOps(in_group(rank_context(label), window))


def _on_rank(
    where: SourceLocation, label: str, lower: Lower, *operands: Any, **options: Any
) -> None:
    """One device's dispatch of a host builtin: its kernel, at the host call's line.
    No frame on the rank thread's stack is the user's (the dispatch calls this, and the
    lowering calls no user code), so every location is that line: attributed once, not
    searched for along the whole stack per event."""
    with attributed(where):
        context = _rank_ops(label, operands[0])
        lower(context, lowering.Lowering.HOST, *operands, label=label, **options)


def _launch(
    label: str,
    lower: Lower,
    operands: tuple[TensorView, ...],
    *,
    host_dtypes: frozenset[str] = HOST_DTYPES,
    **options: Any,
) -> None:
    """Run `lower` here (in a kernel) or dispatch it to every device (on the host). On
    the host, the first operand holds the data, in one of `host_dtypes`."""
    window = next(operand for operand in operands if operand.is_window)
    host = _host()
    chip = scopes.chip_tasks()
    if host is None and chip is not None:
        _chip_task(chip, label, lower, operands, window, options)
        return
    if host is None:
        lanes.note_comm(label)
        context = _rank_ops(label, window)
        # Every event of the lowering is at the kernel's call line, the innermost user
        # frame all along (the lowering calls no user code): looked up once, not per event.
        with attributed(user_location()):
            lower(context, lowering.Lowering.INCORE, *operands, label=label, **options)
        return
    if host.ranks > HOST_MAX_RANKS:
        raise unsupported(
            reason(
                ReasonCode.BUILTIN_HOST_RANKS, label=label, ranks=host.ranks, most=HOST_MAX_RANKS
            )
        )
    _require_distinct_windows(label, operands)
    data = operands[0]
    if host_dtypes and data.dtype.name not in host_dtypes:
        dtypes = " or ".join(sorted(host_dtypes))
        raise unsupported(
            reason(ReasonCode.BUILTIN_HOST_DTYPE, label=label, data=repr(data), dtypes=dtypes)
        )
    task = functools.partial(_on_rank, user_location(), label, lower)
    for rank in range(host.ranks):
        host.dispatch(rank, task, operands, dict(options), group_of=window)


_CHIP_RAIL = {
    "pld.tensor.all_to_all_v": (
        Direction.IN,
        Direction.INOUT,
        Direction.INOUT,
        Direction.IN,
        Direction.INOUT,
    ),
}
"""The builtins PyPTO lowers in a CHIP orchestration body, with the directions of the
kernel it synthesizes for them (docs/model.md)."""


def _chip_task(
    tasks: scopes.TaskContext,
    label: str,
    lower: Lower,
    operands: tuple[TensorView, ...],
    window: TensorView,
    options: dict[str, Any],
) -> None:
    """A builtin in a CHIP orchestration body: one task of the rank running the
    builtin's host kernel, tagged with its operands in the kernel's directions."""
    directions = _CHIP_RAIL.get(label)
    if directions is None or len(directions) != len(operands):
        raise unsupported(reason(ReasonCode.BUILTIN_IN_CHIP, label=label))
    where = user_location()
    _rank_ops(label, window)  # refused here, at the call, when the group is wrong

    def body() -> None:  # on the task's own thread (`racecheck.cosim.threads`)
        with pinned(where):
            context = _rank_ops(label, window)
            lower(context, lowering.Lowering.HOST, *operands, label=label, **options)

    spec = scopes.TaskSpec(
        name=label,
        location=where,
        tags=tuple(
            scopes.view_tag(operand, direction)
            for operand, direction in zip(operands, directions, strict=True)
        ),
        manual=scopes.in_manual_scope(),
    )
    tasks.call_task(spec, body, lambda lane: None)


def _require_distinct_windows(label: str, operands: tuple[TensorView, ...]) -> None:
    """The host lowering takes its operands as distinct windows (docs/model.md)."""
    for operand in operands:
        if not operand.is_window:
            raise unsupported(
                reason(ReasonCode.BUILTIN_NOT_WINDOW, label=label, operand=repr(operand))
            )
    memories = [operand.memory for operand in operands]
    if len(set(memories)) != len(memories):
        given = ", ".join(map(repr, operands))
        raise unsupported(reason(ReasonCode.BUILTIN_SAME_WINDOW, label=label, operands=given))


def _require_separate(label: str, source: TensorView, target: TensorView) -> None:
    """docs/guide.md: the source of allgather/all_to_all is not its target."""
    if source.memory == target.memory:
        raise unsupported(
            reason(
                ReasonCode.BUILTIN_SOURCE_IS_TARGET,
                label=label,
                source=repr(source),
                target=repr(target),
            )
        )


def _require_host_signal(label: str, signal: TensorView) -> None:
    """In the host function every builtin but allreduce takes a `[W]` or `[W, 1]` signal,
    which its kernel addresses flat (cell `rank`): PyPTO refuses any other shape at
    compile time (src/ir/transforms/lower_host_tensor_collectives_pass.cpp:149-178,
    585-587: one lane required, no wider lane allowed)."""
    if _host() is None or signal.ndim == 1 or (signal.ndim == 2 and signal.shape[1] == 1):
        return
    raise unsupported(reason(ReasonCode.BUILTIN_HOST_SIGNAL, label=label, signal=repr(signal)))


def barrier(signal: object) -> object:
    label = "pld.tensor.barrier"
    signal_view = _window(signal, label, "the signal")
    _require_host_signal(label, signal_view)
    _launch(label, lowering.barrier, (signal_view,), host_dtypes=frozenset())
    return signal


def allreduce(
    data: object,
    signal: object = None,
    *,
    op: ReduceOp = ReduceOp.Sum,
    mode: str = "mesh",
    core_num: object = 1,
) -> object:
    label = "pld.tensor.allreduce"
    data_view = _window(data, label, "data")
    if mode not in ("mesh", "ring"):
        raise unsupported(reason(ReasonCode.BUILTIN_MODE, label=label, mode=repr(mode)))
    cores = as_index(core_num)
    signal_view = (
        _window(signal, label, "the signal")
        if signal is not None
        else _private_signal(label, cores)
    )
    if mode == "ring":
        _launch(label, lowering.allreduce_ring, (data_view, signal_view), op=op)
    else:
        _launch(
            label,
            lowering.allreduce_mesh,
            (data_view, signal_view),
            host_dtypes=HOST_DTYPES | {"FP16"},
            op=op,
            core_num=cores,
        )
    return data


def _private_signal(label: str, cores: int) -> TensorView:
    """A signal-less host allreduce gets a fresh INT32 [N, core_num] window per call, and
    PyPTO rejects it inside a loop (docs/model.md)."""
    host = _host()
    if host is None:
        raise unsupported(reason(ReasonCode.BUILTIN_NO_SIGNAL_OFF_HOST, label=label))
    where = user_location()
    sites = _signal_less_sites.setdefault(host, set())
    if where in sites:
        raise unsupported(reason(ReasonCode.BUILTIN_NO_SIGNAL_AGAIN, label=label))
    sites.add(where)
    shape = [host.ranks, cores]
    return window(host.alloc_window(math.prod(shape) * INT32.nbytes), shape, dtype=INT32)


def broadcast(data: object, signal: object, *, root: object = 0) -> object:
    label = "pld.tensor.broadcast"
    operands = (_window(data, label, "data"), _window(signal, label, "the signal"))
    _require_host_signal(label, operands[1])
    _launch(label, lowering.broadcast, operands, root=as_index(root))
    return data


def allgather(
    local: object, target: object, signal: object, out: object = None, *, defer: bool = False
) -> object:
    label = "pld.tensor.allgather"
    if defer and (out is not None or _host() is not None):
        raise unsupported(reason(ReasonCode.BUILTIN_DEFER, label=label))
    local_view = require_view(local, label, "local")
    target_view = _window(target, label, "target")
    signal_view = _window(signal, label, "the signal")
    _require_host_signal(label, signal_view)
    _require_separate(label, local_view, target_view)
    if local_view.is_window and _host() is None:
        raise unsupported(
            reason(ReasonCode.BUILTIN_LOCAL_WINDOW, label=label, local=repr(local_view))
        )
    if out is not None:
        out_view = require_view(out, label, "out")
        _launch(label, lowering.allgather_into, (local_view, target_view, signal_view, out_view))
        return out
    # defer=True: PyPTO's task completes once the peers' cells pass its deferred
    # (unsigned) wait and its epilogue ran, so its dependents see the same order.
    cmp = WaitCmp.GE_UNSIGNED if defer else WaitCmp.GE
    _launch(label, lowering.allgather, (local_view, target_view, signal_view), cmp=cmp)
    return target


def reduce_scatter(target: object, signal: object, *, op: ReduceOp = ReduceOp.Sum) -> object:
    label = "pld.tensor.reduce_scatter"
    if op is not ReduceOp.Sum:
        raise unsupported(reason(ReasonCode.BUILTIN_SUM_ONLY, label=label))
    operands = (_window(target, label, "target"), _window(signal, label, "the signal"))
    _require_host_signal(label, operands[1])
    _launch(label, lowering.reduce_scatter, operands)
    return target


def all_to_all(source: object, target: object, signal: object, out: object = None) -> object:
    label = "pld.tensor.all_to_all"
    source_view = require_view(source, label, "input")
    operands = (source_view, _window(target, label, "target"), _window(signal, label, "the signal"))
    _require_separate(label, source_view, operands[1])
    _require_host_signal(label, operands[2])
    if out is None:
        _launch(label, lowering.all_to_all, operands)
        return target
    if _host() is not None:
        raise unsupported(reason(ReasonCode.BUILTIN_OUT_ON_HOST, label=label))
    _launch(label, lowering.all_to_all_into, (*operands, require_view(out, label, "out")))
    return out


def all_to_all_v(
    input: object,  # PyPTO's names, so each may be given by keyword as PyPTO allows
    target: object,
    signal: object,
    send_counts: object = None,
    recv_counts: object = None,
    **unknown: object,
) -> object:
    """With both counts, or (the first InCore form) neither (docs/model.md). PyPTO's
    signature has no keyword (python/pypto/language/distributed/op/tensor_ops.py:986-992)
    and, in the host function, one signal lane (`_require_host_signal`)."""
    label = "pld.tensor.all_to_all_v"
    if unknown:
        keywords = ", ".join(f"{name}=" for name in unknown)
        raise unsupported(reason(ReasonCode.BUILTIN_KEYWORDS, label=label, keywords=keywords))
    source_view = require_view(input, label, "input")
    operands = (source_view, _window(target, label, "target"), _window(signal, label, "the signal"))
    _require_host_signal(label, operands[2])
    if send_counts is not None and recv_counts is not None:
        counts = (
            require_view(send_counts, label, "send_counts"),
            _window(recv_counts, label, "recv_counts"),
        )
        _launch(label, lowering.all_to_all_v, (*operands, *counts), host_dtypes=frozenset())
    elif send_counts is None and recv_counts is None and _host() is None:
        _launch(label, lowering.all_to_all_v, operands)
    else:
        raise unsupported(reason(ReasonCode.BUILTIN_COUNTS, label=label))
    return target
