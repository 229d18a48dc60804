"""Ring shift whose inbox is scrubbed by a third kernel: an untracked write-after-read.

Rank r pushes its slice into its right neighbour's ``inbox`` (``push_step``), copies
its own ``inbox`` out once its signal says the left neighbour's push landed
(``receive_step``), and zeroes ``inbox`` for the next call (``scrub_step``). PyPTO
orders the scrub after the push (both write ``inbox``) but not after the receive: it
does not track write-after-read between the tasks of a rank (docs/model.md). So the
scrub can run first: it races the left neighbour's push, and the receive can copy
out zeros. 92_receive_then_scrub.py orders the two with ``pl.at(..., deps=[...])``.

racecheck expects:
    ranks 1: bug race write-after-read at @receive, @scrub
    ranks 2..4: bug race write-after-write at @scrub, @push
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
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    data = pl.load(x, [0, 0], [1, SIZE])
    pld.tile.remote_store(data, inbox, peer=right, offsets=[0, 0])  # @push
    pld.system.notify(signal, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)


@pl.jit.incore
def receive_step(
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
):
    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    recv = pl.load(inbox, [0, 0], [1, SIZE])  # @receive
    y = pl.store(recv, [0, 0], y)
    return y


@pl.jit.incore
def scrub_step(inbox: pl.Out[pld.DistributedTensor[[1, SIZE], pl.FP32]]):
    zeros = pl.full([1, SIZE], pl.FP32, 0.0)
    pl.store(zeros, [0, 0], inbox)  # @scrub


@pl.jit
def per_rank(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    push_step(x, inbox, signal)
    receive_step(inbox, signal, y)
    scrub_step(inbox)


@pl.jit.host
def shift_and_scrub(
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
    parser = argparse.ArgumentParser(description="ring shift, inbox scrubbed by a third kernel")
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
    compiled = shift_and_scrub.compile(x, y, config=config)
    compiled(x, y, config=config)
    print("OK" if torch.equal(y, expected_shift(x)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
