"""Correct twin of 211_receive_then_clear_bug_orchestration_war.py: the clear is a task.

The inbox is cleared in a ``pl.at`` region that names the ``fetch`` region in
``deps=``, so it starts only once ``fetch`` has read the inbox.

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
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="push"):
        data = pl.load(x, [0, 0], [1, SIZE])
        pld.tile.remote_store(data, inbox, peer=right, offsets=[0, 0])
        pld.system.notify(signal, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="arrive") as arrived:
        pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="fetch", deps=[arrived]) as fetched:
        recv = pl.load(inbox, [0, 0], [1, SIZE])
        pl.store(recv, [0, 0], y)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="clear", deps=[fetched]):
        zeros = pl.full([1, SIZE], pl.FP32, 0.0)
        pl.store(zeros, [0, 0], inbox)
    return y


@pl.jit.host
def receive_then_clear(
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
    parser = argparse.ArgumentParser(description="receive, then clear in a task")
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
    receive_then_clear.compile(x, y, config=config)(x, y, config=config)
    print("OK" if torch.equal(y, torch.roll(x, shifts=1, dims=0)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
