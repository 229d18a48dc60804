"""Ring shift into a host output every rank receives whole: each stores only its own row.

The kernel of example 190, except that every dispatch takes the unsliced host output
``y`` as its ``Out`` argument and stores into row ``me``. In racecheck's shared-memory
run the rows are disjoint and the shift is right, but PyPTO copies an ``Out`` argument
back to the host whole after the dispatch, rows the dispatch never stored included:
the rank whose dispatch ends last overwrites the other ranks' rows with its stale copy.
Which rows survive depends on when the dispatches end, which racecheck does not model,
so it proves nothing (``unknown``, naming the store and the dispatch line). The fix is
example 190's: pass each rank its row ``y[r : r + 1]``.

racecheck expects:
    ranks 1: proved
    ranks 2..4: unknown
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
    y: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    me = pld.rank(ctx)
    left = (me + pld.nranks(ctx) - 1) % pld.nranks(ctx)
    pld.tile.remote_store(pl.load(x, [0, 0], [1, SIZE]), inbox, peer=left, offsets=[0, 0])
    pld.system.notify(signal, peer=left, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    return pl.store(pl.load(inbox, [0, 0], [1, SIZE]), [me, 0], y)  # @store


@pl.jit.host
def shift(x: pl.Tensor[[NR, 1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[NR, SIZE], pl.FP32]]):
    inbox_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    inbox = pld.window(inbox_buf, [1, SIZE], dtype=pl.FP32)
    signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        shift_row(x[r], y, inbox, signal, device=r)  # @dispatch
    return y


def main() -> int:
    parser = argparse.ArgumentParser(description="ring shift, the whole output to every rank")
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
