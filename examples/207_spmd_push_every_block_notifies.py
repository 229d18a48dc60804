"""Correct twin of 206_spmd_push_bug_leader_block_notifies.py: every block notifies.

Each block of ``dispatch_push`` stores its own half of ``x`` into the right
neighbour's ``inbox`` and then adds 1 to the neighbour's signal: a notify is a
release, so it publishes that block's store. The receiver waits for 2, one arrival
per block, so it reads ``inbox`` only once both halves have landed, in every order of
the blocks.

racecheck expects:
    ranks 1..2: proved
    ranks 3: proved shift-1
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
SIZE = 64
HALF = SIZE // 2


@pl.jit
def per_rank(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    with pl.spmd(2, name_hint="dispatch_push"):
        block = pl.tile.get_block_idx()
        half = pl.load(x, [0, block * HALF], [1, HALF])
        pld.tile.remote_store(half, inbox, peer=right, offsets=[0, block * HALF])
        pld.system.notify(signal, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="receive"):
        pld.system.wait(signal, offsets=[0, 0], expected=2, cmp=pld.WaitCmp.Ge)
        recv = pl.load(inbox, [0, 0], [1, SIZE])
        pl.store(recv, [0, 0], y)
    return y


@pl.jit.host
def every_block_shift(
    x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
):
    inbox_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        inbox = pld.window(inbox_buf, [1, SIZE], dtype=pl.FP32)
        signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
        per_rank(x[r], y[r], inbox, signal, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="ring shift whose every block notifies")
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
    every_block_shift.compile(x, y, config=config)(x, y, config=config)
    print("OK" if torch.equal(y, torch.roll(x, shifts=1, dims=0)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
