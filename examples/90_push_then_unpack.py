"""Ring shift in two kernels, PyPTO #1670's pattern: ``y[r] = x[(r - 1 + N) % N]``.

Rank r's first kernel pushes its slice into its right neighbour's ``inbox`` with
``remote_store``, raises the neighbour's signal cell and waits for its own; its second
kernel copies its own ``inbox`` out. Neither kernel declares ``inbox`` written, and
the orchestration calls them as two tasks, which PyPTO orders only by the
dependencies it tracks. Since #1683 the ``remote_store`` marks ``inbox`` written, so
the copy runs after the push (and its wait): correct. Under the rules before #1683
nothing orders the two tasks, the copy can run first and read the inbox before the
neighbour's push lands: the hardware failure of #1670.

racecheck expects:
    ranks 1..2: proved
    ranks 3..4: proved shift-1
    ranks 1..4 --runtime-order pre-1683: bug race read-after-write at @unpack, @push
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
def push_step(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    my_rank = pld.rank(ctx)
    right = (my_rank + 1) % pld.nranks(ctx)
    data = pl.load(x, [0, 0], [1, SIZE])
    pld.tile.remote_store(data, inbox, peer=right, offsets=[0, 0])  # @push
    pld.system.notify(signal, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)


@pl.jit.incore
def unpack_step(
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
):
    recv = pl.load(inbox, [0, 0], [1, SIZE])  # @unpack
    y = pl.store(recv, [0, 0], y)
    return y


@pl.jit
def per_rank(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    push_step(x, inbox, signal)
    return unpack_step(inbox, y)


@pl.jit.host
def shift_right(
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
    return torch.roll(inputs, shifts=1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="ring shift in two kernels")
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
    compiled = shift_right.compile(x, y, config=config)
    compiled(x, y, config=config)
    print("OK" if torch.equal(y, expected_shift(x)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
