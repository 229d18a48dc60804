"""A ring shift whose host allocates flat windows and whose kernel declares rows.

``y[r] = x[(r - 1 + N) % N]``. The host views each window flat (``[SIZE]``, ``[1]``);
the per-device function and the kernel declare ``[1, SIZE]`` and ``[1, 1]`` and index
them with two offsets. A parameter's declared type is what its body is compiled
against, so the kernel sees the window bytes in its own shape (docs/model.md): the
push lands in row 0 of the right neighbour's inbox, the notify publishes it, and the
read after the wait sees it.

racecheck expects:
    ranks 1..2: proved
    ranks 3..4: proved shift-1
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
    return pl.store(pl.load(inbox, [0, 0], [1, SIZE]), [0, 0], y)


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
