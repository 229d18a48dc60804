"""What an unannotated kernel's caller gets: the arguments its `return` names, as
PyPTO reads an unannotated function's results from its return statement, called
directly or through `pl.submit`/`pl.spmd_submit` (its results, then its task id)."""

from __future__ import annotations

from pathlib import Path

import racecheck
from racecheck import Verdict

SOURCE = """
import pypto.language as pl
import pypto.language.distributed as pld

SIZE = 8


@pl.jit.incore
def exchange(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.InOut[pl.Tensor[[1, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    me = pld.rank(ctx)
    left = (me + pld.nranks(ctx) - 1) % pld.nranks(ctx)
    pld.tensor.put(inbox, left, x)
    pld.system.notify(signal, peer=left, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    y = pl.store(pl.load(inbox, [0, 0], [1, SIZE]), [0, 0], y)
    return y, signal


@pl.jit.incore
def double(x: pl.Tensor[[1, SIZE], pl.FP32], z: pl.InOut[pl.Tensor[[1, SIZE], pl.FP32]]):
    tile = pl.load(x, [0, 0], [1, SIZE])
    z = pl.store(pl.add(tile, tile), [0, 0], z)
    return z


@pl.jit
def per_rank(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.InOut[pl.Tensor[[1, SIZE], pl.FP32]],
    z: pl.InOut[pl.Tensor[[1, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    z = double(x, z)  # ordered with neither call below: every call is a thread
    y, signal = exchange(x, y, inbox, signal)
    return y, z, signal


@pl.jit.host
def entry(
    x: pl.Tensor[[2, 1, SIZE], pl.FP32],
    y: pl.InOut[pl.Tensor[[2, 1, SIZE], pl.FP32]],
    z: pl.InOut[pl.Tensor[[2, 1, SIZE], pl.FP32]],
):
    inbox_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        inbox = pld.window(inbox_buf, [1, SIZE], dtype=pl.FP32)
        signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
        per_rank(x[r], y[r], z[r], inbox, signal, device=r)
"""


SUBMITTED = SOURCE.replace(
    "    z = double(x, z)  # ordered with neither call below: every call is a thread\n",
    "    z, _tid = submit_double(x, z)\n",
).replace(
    "@pl.jit\ndef per_rank(",
    "@pl.jit.inline\ndef submit_double(x, z):\n"
    "    return pl.spmd_submit(self.double, x, z, core_num=1)  # noqa: F821\n\n\n"
    "@pl.jit\ndef per_rank(",
)


def test_an_unannotated_kernel_gives_the_arguments_its_return_names(tmp_path: Path) -> None:
    """`exchange` writes one `pl.InOut` tensor and returns it with its signal window,
    and its caller unpacks both; `double`, ordered with neither, makes every call a
    thread, whose caller goes on with its results before it runs."""
    path = tmp_path / "returns.py"
    path.write_text(SOURCE)
    report = racecheck.verify(str(path), ranks=[2], jobs=1)
    assert not report.errors
    (result,) = report.results
    assert result.verdict is Verdict.PROVED, result.findings


def test_a_submitted_unannotated_kernel_gives_its_return_then_its_task(tmp_path: Path) -> None:
    """`z, tid = pl.spmd_submit(self.double, x, z, ...)` (pypto-lib's Pro MoE reduce)."""
    assert "spmd_submit" in SUBMITTED
    path = tmp_path / "submitted.py"
    path.write_text(SUBMITTED)
    report = racecheck.verify(str(path), ranks=[2], jobs=1)
    assert not report.errors
    (result,) = report.results
    assert result.verdict is Verdict.PROVED, result.findings
