"""Shift then multiply in one kernel: its notify also runs on the cube lane.

``y[r] = x[(r - 1 + N) % N] @ w``. The kernel pushes its slice into its right
neighbour's ``inbox``, notifies it, waits for its own slice and multiplies it. A
kernel that mixes cube ops (``pl.matmul``, ``pl.move`` to Left/Right) with
communication runs on two lanes, and outside ``pl.split_aiv`` both run its notify,
wait and remote_load; only the vector lane pushes (docs/model.md). The cube lane's
notify can reach the neighbour before the vector lane's push has landed, so the
neighbour reads a stale inbox. 96_shift_then_matmul.py moves the matmul into a kernel
of its own.

racecheck expects:
    ranks 1: proved
    ranks 2..4: bug race read-after-write at @fetch, @push
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
SIZE = 16


@pl.jit.incore
def shift_matmul(
    x: pl.Tensor[[SIZE, SIZE], pl.FP32],
    w: pl.Tensor[[SIZE, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[SIZE, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[SIZE, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    data = pl.load(x, [0, 0], [SIZE, SIZE])
    pld.tile.remote_store(data, inbox, peer=right, offsets=[0, 0])  # @push
    pld.system.notify(signal, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    recv = pl.load(inbox, [0, 0], [SIZE, SIZE])  # @fetch
    weights = pl.load(w, [0, 0], [SIZE, SIZE])
    left = pl.move(recv, target_memory=pl.Mem.Left)
    product = pl.matmul(left, pl.move(weights, target_memory=pl.Mem.Right))
    y = pl.store(product, [0, 0], y)
    return y


@pl.jit
def per_rank(
    x: pl.Tensor[[SIZE, SIZE], pl.FP32],
    w: pl.Tensor[[SIZE, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[SIZE, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[SIZE, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    return shift_matmul(x, w, y, inbox, signal)


@pl.jit.host
def shift_and_multiply(
    x: pl.Tensor[[NR, SIZE, SIZE], pl.FP32],
    w: pl.Tensor[[NR, SIZE, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, SIZE, SIZE], pl.FP32]],
):
    inbox_buf = pld.alloc_window_buffer([SIZE, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        inbox = pld.window(inbox_buf, [SIZE, SIZE], dtype=pl.FP32)
        signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
        per_rank(x[r], w[r], y[r], inbox, signal, device=r)


def expected(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.roll(x, shifts=1, dims=0) @ w


def main() -> int:
    parser = argparse.ArgumentParser(description="shift then multiply in one kernel")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, SIZE, SIZE), dtype=torch.float32)
    w = torch.randn((nr, SIZE, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, SIZE, SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    compiled = shift_and_multiply.compile(x, w, y, config=config)
    compiled(x, w, y, config=config)
    print("OK" if torch.allclose(y, expected(x, w), atol=1e-4) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
