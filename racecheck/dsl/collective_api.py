"""The ergonomic `pld.*` collectives (host function only): each allocates a fresh INT32
signal window, shaped as its builtin needs, and calls that `pld.tensor.*` builtin.
Two exceptions: a mesh `all_reduce` passes no signal (the builtin's private one), and
`barrier` takes the caller's signal (python/pypto/language/distributed/op/collective_api.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from racecheck.dsl import builtins
from racecheck.dsl.context import host_context
from racecheck.dsl.dist_ops import window
from racecheck.dsl.dtypes import INT32
from racecheck.dsl.local_ops import indices
from racecheck.dsl.location import user_location
from racecheck.dsl.tensors import TensorView
from racecheck.dsl.types import ReduceOp
from racecheck.errors import UnsupportedConstruct
from racecheck.report.reasons import ReasonCode, reason


def _rejected(code: ReasonCode, **facts: str) -> UnsupportedConstruct:
    where = user_location()
    why = reason(ReasonCode.PYPTO_REJECTS, why=reason(code, **facts))
    return UnsupportedConstruct(why, file=where.file, line=where.line)


def _fresh_signal(construct: str, shape: Sequence[object]) -> TensorView:
    host = host_context(construct)
    dims = indices(shape)
    buffer = host.alloc_window(INT32.nbytes * math.prod(dims), name=f"{construct}.signal")
    return window(buffer, dims, dtype=INT32)


def _static_count(construct: str, nranks: object) -> int:
    if not isinstance(nranks, int) or isinstance(nranks, bool) or nranks <= 0:
        raise _rejected(ReasonCode.COLLECTIVE_NRANKS, construct=construct, nranks=repr(nranks))
    return nranks


def all_reduce(
    target: object, *, op: ReduceOp = ReduceOp.Sum, mode: str = "mesh", nranks: object = None
) -> object:
    construct = "pld.all_reduce"
    if mode == "mesh":
        if nranks is not None:
            raise _rejected(ReasonCode.COLLECTIVE_NRANKS_MESH, construct=construct)
        return builtins.allreduce(target, op=op)
    if mode != "ring":
        raise _rejected(ReasonCode.BUILTIN_MODE, label=construct, mode=repr(mode))
    count = _static_count(construct, nranks)
    if op is not ReduceOp.Sum:
        raise _rejected(ReasonCode.BUILTIN_SUM_ONLY, label=f"{construct}(mode='ring')")
    signal = _fresh_signal(construct, [2 * (count - 1) + 1, count])
    return builtins.allreduce(target, signal, op=op, mode="ring")


def all_gather(local_data: object, target: object) -> object:
    signal = _fresh_signal("pld.all_gather", [host_context("pld.all_gather").ranks, 1])
    return builtins.allgather(local_data, target, signal)


def reduce_scatter(target: object, *, op: ReduceOp = ReduceOp.Sum) -> object:
    construct = "pld.reduce_scatter"
    if op is not ReduceOp.Sum:
        raise _rejected(ReasonCode.BUILTIN_SUM_ONLY, label=construct)
    signal = _fresh_signal(construct, [host_context(construct).ranks])
    return builtins.reduce_scatter(target, signal, op=op)


def broadcast(target: object, *, root: object) -> object:
    signal = _fresh_signal("pld.broadcast", [host_context("pld.broadcast").ranks])
    return builtins.broadcast(target, signal, root=root)


def barrier(signal: object) -> object:
    host_context("pld.barrier")
    return builtins.barrier(signal)


def all_to_all(source: object, target: object) -> object:
    signal = _fresh_signal("pld.all_to_all", [host_context("pld.all_to_all").ranks, 1])
    return builtins.all_to_all(source, target, signal)


def all_to_all_v(
    source: object, target: object, send_counts: object, recv_counts: object, *, nranks: object
) -> object:
    construct = "pld.all_to_all_v"
    signal = _fresh_signal(construct, [_static_count(construct, nranks), 1])
    return builtins.all_to_all_v(source, target, signal, send_counts, recv_counts)
