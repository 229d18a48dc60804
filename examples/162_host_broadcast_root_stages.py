"""Broadcast from the host function, with only the root staging its input.

Only the root's data matters to a broadcast, so only the root's device runs the staging
kernel; every device then copies the result out. A window's communication group is the
set of devices its ``device=`` sites name, the copy-out loop after the broadcast
included (docs/model.md), so the host broadcast runs on every device: each non-root
copies the root's tile after the barrier generation the root passes once it has
staged it.

racecheck expects:
    ranks 1: proved
    ranks 2..4: proved broadcast-root0
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
    return pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], data)


@pl.jit.incore
def copy_out(
    data: pld.DistributedTensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]]
):
    return pl.store(pl.load(data, [0, 0], [1, SIZE]), [0, 0], y)


@pl.jit.host
def root_broadcast(
    x: pl.Tensor[[NR, 1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]
):
    data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
    data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
    signal = pld.window(signal_buf, [pld.world_size(), 1], dtype=pl.INT32)
    stage(x[ROOT], data, device=ROOT)
    data = pld.tensor.broadcast(data, signal, root=ROOT)
    for r in pl.range(pld.world_size()):
        copy_out(data, y[r], device=r)
    return y


def main() -> int:
    parser = argparse.ArgumentParser(description="host broadcast staged by the root only")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, 1, SIZE))
    y = torch.zeros_like(x)
    root_broadcast(x, y, config=RunConfig(platform=args.platform, device_ids=device_ids))
    print("OK" if torch.equal(y, x[ROOT : ROOT + 1].expand_as(y)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
