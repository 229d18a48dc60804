"""Point-to-point ring shift whose left neighbour is computed with a truncating ``%``.

The twin of 02_ring_shift_p2p.py with ``left = (my_rank - 1) % nranks``. In Python
that is N - 1 for rank 0, but the device's ``%`` truncates toward zero (C semantics):
rank 0 gets -1 and puts into a peer that does not exist. At one rank, -1 % 1 is 0.

racecheck expects:
    ranks 1: proved
    ranks 2..8: bug out-of-bounds at @put ranks 0
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
def pass_left(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    my_rank = pld.rank(ctx)
    nranks = pld.nranks(ctx)
    left = (my_rank - 1) % nranks

    pld.tensor.put(inbox, left, x)  # @put
    pld.system.notify(signal, peer=left, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)

    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    recv = pl.load(inbox, [0, 0], [1, SIZE])
    y = pl.store(recv, [0, 0], y)
    return y


@pl.jit
def per_rank(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    return pass_left(x, y, inbox, signal)


@pl.jit.host
def ring_shift(
    x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
):
    inbox_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        inbox = pld.window(inbox_buf, [1, SIZE], dtype=pl.FP32)
        signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
        per_rank(x[r], y[r], inbox, signal, device=r)


def expected_shift(inputs: torch.Tensor) -> torch.Tensor:
    return torch.roll(inputs, shifts=-1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="point-to-point ring shift")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    parser.add_argument("--compile-only", action="store_true")
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
    if args.compile_only:
        return 0
    compiled(x, y, config=config)
    print("OK" if torch.equal(y, expected_shift(x)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
