"""The flat-window ring shift of 53_flat_window_row_kernel.py, reading half a row too far.

The kernel sees the ``[SIZE]`` inbox as the ``[1, SIZE]`` it declares (docs/model.md),
and reads ``SIZE`` elements from column ``SIZE // 2``: past the end of its row, and past
the end of the window. racecheck reports the read as out of bounds on every rank.

racecheck expects:
    ranks 2: bug out-of-bounds at @read ranks 0
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
SIZE = 64


@pl.jit.incore
def shift_step(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, SIZE]), inbox, peer=right, offsets=[0, 0])
    pld.system.notify(signal, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    received = pl.load(inbox, [0, SIZE // 2], [1, SIZE])  # @read
    return pl.store(received, [0, 0], y)


@pl.jit
def per_rank(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    return shift_step(x, y, inbox, signal)


@pl.jit.host
def ring_shift(x: pl.Tensor[[NR, 1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]):
    inbox_buf = pld.alloc_window_buffer(SIZE * 4)
    signal_buf = pld.alloc_window_buffer(4)
    for r in pl.range(pld.world_size()):
        inbox = pld.window(inbox_buf, [SIZE], dtype=pl.FP32)
        signal = pld.window(signal_buf, [1], dtype=pl.INT32)
        per_rank(x[r], y[r], inbox, signal, device=r)
    return y


def main() -> int:
    parser = argparse.ArgumentParser(description="ring shift through flat windows")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    compiled = ring_shift.compile(x, y, config=config)
    compiled(x, y, config=config)
    print("OK" if torch.equal(y, torch.roll(x, shifts=1, dims=0)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
