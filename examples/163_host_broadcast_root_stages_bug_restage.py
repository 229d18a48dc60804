"""The root stages and broadcasts twice from the host function: the second staging races.

As 162_host_broadcast_root_stages.py, but the root stages a second input and
broadcasts again. The host broadcast has no read-complete barrier (docs/model.md): the
root leaves its first broadcast once every rank has passed the tile's barrier, and its
second staging kernel can overwrite the tile while a slower rank still copies it, a
write-after-read race between that copy and the staging store. The signal is
reusable; the data is not.

racecheck expects:
    ranks 1: proved
    ranks 2..4: bug race write-after-read at @broadcast, @stage
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
SIZE = 64
ROOT = 0


@pl.jit.incore
def stage(
    x: pl.Tensor[[1, SIZE], pl.FP32], data: pl.Out[pld.DistributedTensor[[1, SIZE], pl.FP32]]
):
    return pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)  # @stage


@pl.jit.incore
def copy_out(
    data: pld.DistributedTensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]]
):
    return pl.store(pl.load(data, [0, 0], [1, SIZE]), [0, 0], y)


@pl.jit.host
def root_broadcast_twice(
    x: pl.Tensor[[NR, 1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]
):
    data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
    data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
    signal = pld.window(signal_buf, [pld.world_size(), 1], dtype=pl.INT32)
    for _ in pl.range(2):
        stage(x[ROOT], data, device=ROOT)
        data = pld.tensor.broadcast(data, signal, root=ROOT)  # @broadcast
    for r in pl.range(pld.world_size()):
        copy_out(data, y[r], device=r)
    return y


def main() -> int:
    parser = argparse.ArgumentParser(description="two host broadcasts staged by the root")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, 1, SIZE))
    y = torch.zeros_like(x)
    root_broadcast_twice(x, y, config=RunConfig(platform=args.platform, device_ids=device_ids))
    print("OK" if torch.equal(y, x[ROOT : ROOT + 1].expand_as(y)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
