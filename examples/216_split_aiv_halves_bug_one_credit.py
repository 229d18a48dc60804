"""215_split_aiv_halves.py whose reader waits for one notify of the two.

Each AIV sub-lane pushes its half of the product and notifies, but sub-lane 0 waits
only until the counter reaches 1: after the left neighbour's first sub-lane has
notified, its other sub-lane's half can still be landing while sub-lane 0 copies
``inbox`` out. At one rank the late half is this rank's own sub-lane 1's.

racecheck expects:
    ranks 1: bug race write-after-read at @fetch, @push ranks 0 0
    ranks 2..3: bug race read-after-write at @fetch, @push ranks 1 0
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
SIZE = 16
HALF = SIZE // 2


@pl.jit.incore
def matmul_shift(
    x: pl.Tensor[[SIZE, SIZE], pl.FP32],
    w: pl.Tensor[[SIZE, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[SIZE, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[SIZE, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    local = pl.load(x, [0, 0], [SIZE, SIZE])
    weights = pl.load(w, [0, 0], [SIZE, SIZE])
    left = pl.move(local, target_memory=pl.Mem.Left)
    product = pl.matmul(left, pl.move(weights, target_memory=pl.Mem.Right))
    for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.NONE):
        out = pl.aiv_shard(product)
        rows = pl.slice(out, [HALF, SIZE], [aiv_id * HALF, 0])
        pld.tile.remote_store(rows, inbox, peer=right, offsets=[aiv_id * HALF, 0])  # @push
        pld.system.notify(signal, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        if aiv_id == 0:
            pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
            recv = pl.load(inbox, [0, 0], [SIZE, SIZE])  # @fetch
            y = pl.store(recv, [0, 0], y)
    return y


@pl.jit
def per_rank(
    x: pl.Tensor[[SIZE, SIZE], pl.FP32],
    w: pl.Tensor[[SIZE, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[SIZE, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[SIZE, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    return matmul_shift(x, w, y, inbox, signal)


@pl.jit.host
def split_aiv_halves_one_credit(
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
    return torch.roll(x @ w, shifts=1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="the reader waits for one half")
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
    compiled = split_aiv_halves_one_credit.compile(x, w, y, config=config)
    compiled(x, w, y, config=config)
    print("OK" if torch.allclose(y, expected(x, w), atol=1e-4) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
