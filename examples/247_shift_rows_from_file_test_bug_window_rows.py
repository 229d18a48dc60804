"""The twin of 246: the file's own test states three rows for a window of two.

Only the file's `__main__` block states `rows` and ROWS (`--rows`, default 3 here);
racecheck runs it up to its harness call and checks the entry with three rows: the
third row's remote store runs past the peer's two-row inbox.

racecheck expects:
    ranks 2: bug out-of-bounds at @put
"""

import argparse
from dataclasses import dataclass

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
import torch  # noqa: F401 - as a PyPTO file imports it; this test's specs need none

SIZE = 16
WINDOW_ROWS = 2
ROWS = pl.dynamic("ROWS")
NR = pl.dynamic("NR")


@pl.jit.incore
def pass_left(
    x: pl.Tensor[[ROWS, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[ROWS, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[WINDOW_ROWS, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
    rows: pl.Scalar[pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    left = (me - 1 + n) % n
    for i in pl.range(rows):
        row = pl.load(x, [i, 0], [1, SIZE])
        pld.tile.remote_store(row, target=inbox, peer=left, offsets=[i, 0])  # @put
    pld.system.notify(signal, peer=left, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    for i in pl.range(rows):
        got = pl.load(inbox, [i, 0], [1, SIZE])
        y = pl.store(got, [i, 0], y)
    return y


@pl.jit
def per_rank(
    x: pl.Tensor[[ROWS, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[ROWS, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[WINDOW_ROWS, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
    rows: pl.Scalar[pl.INT32],
):
    return pass_left(x, y, inbox, signal, rows)


@pl.jit.host
def l3_shift(
    x: pl.Tensor[[NR, ROWS, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, ROWS, SIZE], pl.FP32]],
    rows: pl.Scalar[pl.INT32],
):
    inbox_buf = pld.alloc_window_buffer([WINDOW_ROWS, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        inbox = pld.window(inbox_buf, [WINDOW_ROWS, SIZE], dtype=pl.FP32)
        signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
        per_rank(x[r], y[r], inbox, signal, rows, device=r)


# The file's own test harness (pypto-lib's golden.TensorSpec/ScalarSpec/run_jit, in small).
@dataclass
class TensorSpec:
    name: str
    shape: list[int]
    dtype: object
    init_value: object = None
    is_output: bool = False


@dataclass
class ScalarSpec:
    name: str
    dtype: object
    value: int


def run_jit(fn, specs, golden_fn=None, **config):
    raise NotImplementedError("runs on a device")


def build_tensor_specs(rows, ranks=2):
    values = np.arange(ranks * rows * SIZE, dtype=np.float32).reshape(ranks, rows, SIZE)
    return [
        TensorSpec("x", [ranks, rows, SIZE], "float32", init_value=values),
        TensorSpec("y", [ranks, rows, SIZE], "float32", is_output=True),
        ScalarSpec("rows", "int32", rows),
    ]


def golden_shift(values):
    values["y"][:] = np.roll(values["x"], -1, axis=0)  # rank r receives rank r + 1's rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=WINDOW_ROWS + 1)
    args = parser.parse_args()
    run_jit(fn=l3_shift, specs=build_tensor_specs(args.rows), golden_fn=golden_shift)


if __name__ == "__main__":
    main()
