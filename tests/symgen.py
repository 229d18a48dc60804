"""Rank-symmetric DSL collectives, as source text, for the all-P agreement test.

Unlike `dslgen` (a fixed body per concrete rank), these kernels are written once for
every rank in terms of `me` and `n`, as real collectives are: stage a slice, signal
the rank(s) that will read it, wait for the signal(s) of the rank(s) read, read a
peer's slice `(me + K) % n`, store the output. Each choice has a correct and a buggy
option (a missing wait, the store after the notify, a threshold of `n - 1` on a
per-sender cell or `1` on a cell all senders share, a signal with a fixed number of
rows): the product of the choices holds proofs and refutations.
"""

from __future__ import annotations

from dataclasses import dataclass

_PROGRAM = """\
import pypto.language as pl
import pypto.language.distributed as pld

NR = pl.dynamic("NR")
SIZE = 8


@pl.program
class Generated:
    @pl.function(type=pl.FunctionType.InCore)
    def kernel(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[{rows}, 1], pl.INT32]],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        ctx = pld.get_comm_ctx(data)
        me = pld.rank(ctx)
        n = pld.nranks(ctx)
        local = pl.load(x, [0, 0], [1, SIZE])
{body}
        acc = pld.tile.remote_load(data, peer=(me + {shift}) % n, offsets=[0, 0], shape=[1, SIZE])
        return pl.store(acc, [0, 0], y)

    @pl.function(type=pl.FunctionType.Orchestration)
    def per_rank(self, x, y, data, signal):
        return self.kernel(x, y, data, signal)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def entry(
        self,
        x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
    ) -> pl.Tensor[[NR, 1, SIZE], pl.FP32]:
        data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([{rows}, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [{rows}, 1], dtype=pl.INT32)
            self.per_rank(x[r], y[r], data, signal, device=r)
        return y
"""

_STORE = "        pl.store(local, [0, 0], data)"
_NOTIFY_ALL = """\
        for peer in pl.range(n):
            if peer != me:
                pld.system.notify(
                    signal, peer=peer, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )"""
_NOTIFY_READER = """\
        pld.system.notify(
            signal, peer=(me + n - {shift}) % n, offsets=[me, 0], value=1,
            op=pld.NotifyOp.AtomicAdd,
        )"""
_WAIT_ALL = """\
        for src in pl.range(n):
            if src != me:
                pld.system.wait(
                    signal, offsets=[src, 0], expected={expected}, cmp=pld.WaitCmp.Ge
                )"""
_NOTIFY_ALL_SHARED = """\
        for peer in pl.range(n):
            if peer != me:
                pld.system.notify(
                    signal, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )"""
_WAIT_SHARED = """\
        pld.system.wait(signal, offsets=[0, 0], expected={expected}, cmp=pld.WaitCmp.Ge)"""
_WAIT_OWNER = """\
        pld.system.wait(
            signal, offsets=[(me + {shift}) % n, 0], expected={expected}, cmp=pld.WaitCmp.Ge
        )"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Collective:
    shift: int  # read rank (me + shift) % n
    mesh: bool  # signal every peer and wait for every peer, or only the reader / owner
    store_first: bool  # the slice is stored before the notify that releases it
    wait: bool  # the reader waits at all
    expected: str  # "1", or "n - 1" (a bug on per-sender cells)
    rows: str  # "NR", or a fixed count (a bug past it)
    shared: bool = False  # mesh only: every arrival on cell [0, 0] (correct: wait n - 1)

    def render(self) -> str:
        notify = _NOTIFY_ALL if self.mesh else _NOTIFY_READER.format(shift=self.shift)
        wait = _WAIT_ALL if self.mesh else _WAIT_OWNER
        if self.mesh and self.shared:
            notify, wait = _NOTIFY_ALL_SHARED, _WAIT_SHARED
        steps = [_STORE, notify] if self.store_first else [notify, _STORE]
        if self.wait:
            steps.append(wait.format(shift=self.shift, expected=self.expected))
        return _PROGRAM.format(rows=self.rows, body="\n".join(steps), shift=self.shift)
