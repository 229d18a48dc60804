"""Ring shift into a host output each rank receives as its own row: ``y[r] = x[(r + 1) % N]``.

Every rank pushes its input into its left neighbour's inbox window, notifies it, waits
for its own inbox and stores what arrived into its output. Each dispatch takes only its
row ``y[r]`` of the host output as its ``Out`` argument: PyPTO copies an ``Out``
argument back to the host whole after the dispatch, and the rows are disjoint, so no
rank's copy-back touches another rank's row. Compare example 191, which hands every
rank the whole ``y``.

racecheck expects:
    ranks 1: proved
    ranks 2..4: proved shift+1
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
SIZE = 64


@pl.jit.incore
def shift_row(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    me = pld.rank(ctx)
    left = (me + pld.nranks(ctx) - 1) % pld.nranks(ctx)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, SIZE]), inbox, peer=left, offsets=[0, 0])
    pld.system.notify(signal, peer=left, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    return pl.store(pl.load(inbox, [0, 0], [1, SIZE]), [0, 0], y)


@pl.jit.host
def shift(x: pl.Tensor[[NR, 1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]]):
    inbox_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    inbox = pld.window(inbox_buf, [1, SIZE], dtype=pl.FP32)
    signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        shift_row(x[r], y[r : r + 1], inbox, signal, device=r)
    return y


def main() -> int:
    parser = argparse.ArgumentParser(description="ring shift, one output row per rank")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, 1, SIZE))
    y = torch.zeros((nr, SIZE))
    shift(x, y, config=RunConfig(platform=args.platform, device_ids=device_ids))
    print("OK" if torch.equal(y, torch.roll(x[:, 0], -1, dims=0)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
