"""213_spmd_matmul_then_push.py with ``fetch`` ordered after the push only.

Since #1683 the push blocks' ``remote_store`` marks ``inbox`` written, so ``fetch``
(which reads it) runs after this rank's own ``push``; without ``deps=[arrived]``
nothing orders it after ``arrive``, so it can copy ``inbox`` out while the left
neighbour's push is still landing (PyPTO #1670's split wait).

racecheck expects:
    ranks 1: proved
    ranks 2..3: bug race read-after-write at @fetch, @push
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


@pl.jit
def per_rank(
    x: pl.Tensor[[SIZE, SIZE], pl.FP32],
    w: pl.Tensor[[SIZE, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[SIZE, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[SIZE, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    product = pl.create_tensor([SIZE, SIZE], dtype=pl.FP32)
    for _ in pl.spmd(1, name_hint="project"):
        left = pl.move(pl.load(x, [0, 0], [SIZE, SIZE]), target_memory=pl.Mem.Left)
        weights = pl.move(pl.load(w, [0, 0], [SIZE, SIZE]), target_memory=pl.Mem.Right)
        pl.store(pl.matmul(left, weights), [0, 0], product)
    for half in pl.spmd(2, name_hint="push"):
        rows = pl.load(product, [half * HALF, 0], [HALF, SIZE])
        pld.tile.remote_store(rows, inbox, peer=right, offsets=[half * HALF, 0])  # @push
        pld.system.notify(signal, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="arrive"):
        pld.system.wait(signal, offsets=[0, 0], expected=2, cmp=pld.WaitCmp.Ge)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="fetch"):
        recv = pl.load(inbox, [0, 0], [SIZE, SIZE])  # @fetch
        pl.store(recv, [0, 0], y)
    return y


@pl.jit.host
def spmd_matmul_then_push_unordered(
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
    parser = argparse.ArgumentParser(description="fetch ordered after the push only")
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
    spmd_matmul_then_push_unordered.compile(x, w, y, config=config)(x, w, y, config=config)
    print("OK" if torch.allclose(y, expected(x, w), atol=1e-4) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
