"""Orchestration code that clears the inbox: write-after-read against a task.

209_receive_then_clear.py with the inbox cleared after the ``fetch`` region by the
per-device function's own code, outside any task. The runtime orders a task submitted
after orchestration code after it, and that code after the tasks whose bytes it reads
or writes; it tracks no write-after-read, so nothing orders the clear after ``fetch``,
which only reads ``inbox``: ``fetch`` can read the zeros. 212_receive_then_clear_task.py
clears in a region that names ``fetch`` in ``deps=``.

racecheck expects:
    ranks 1..3: bug race write-after-read at @fetch, @clear
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
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="fetch", deps=[arrived]):
        recv = pl.load(inbox, [0, 0], [1, SIZE])  # @fetch
        pl.store(recv, [0, 0], y)
    zeros = pl.full([1, SIZE], pl.FP32, 0.0)
    pl.store(zeros, [0, 0], inbox)  # @clear
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
    parser = argparse.ArgumentParser(description="receive, then clear in orchestration code")
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
