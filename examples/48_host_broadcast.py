"""Broadcast called from the host function: per 256-element tile, a barrier generation.

The host broadcast kernel cuts the data into 256-element tiles; for tile ``t`` the
root re-stores its tile, all ranks pass barrier generation ``t + 1``, and every other
rank copies the root's tile; an epilogue subtracts the number of tiles, so the signal
is reusable (docs/model.md). With 600 elements that is three generations.

The data is not reusable: there is no read-complete barrier, so calling the broadcast
again on the same windows (``--repeat 2``) lets the root stage its next input while
a slower rank still copies the root's tile of the first call — a write-after-read
race between the builtin's copy and the staging store (docs/model.md.2).

racecheck expects:
    ranks 1: proved
    ranks 2..4: proved broadcast-root0
    ranks 2..3 --repeat 2: bug race write-after-read at @broadcast, @stage
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.runtime import RunConfig

SIZE = 600


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


@pl.jit
def stage_orch(
    x: pl.Tensor[[1, SIZE], pl.FP32], data: pl.Out[pld.DistributedTensor[[1, SIZE], pl.FP32]]
):
    return stage(x, data)


@pl.jit
def copy_out_orch(
    data: pld.DistributedTensor[[1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]]
):
    return copy_out(data, y)


NR = pl.dynamic("NR")


@pl.jit.host
def host_broadcast(
    x: pl.Tensor[[NR, 1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]
) -> pl.Tensor[[NR, 1, SIZE], pl.FP32]:
    data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
    data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
    signal = pld.window(signal_buf, [pld.world_size(), 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        stage_orch(x[r], data, device=r)
    data = pld.tensor.broadcast(data, signal, root=0)  # @broadcast
    for r in pl.range(pld.world_size()):
        copy_out_orch(data, y[r], device=r)
    return y


def main() -> int:
    parser = argparse.ArgumentParser(description="host-level broadcast")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, 1, SIZE))
    y = torch.zeros_like(x)
    host_broadcast(x, y, config=RunConfig(platform=args.platform, device_ids=device_ids))
    print("OK" if torch.equal(y, x[0:1].expand_as(y)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
