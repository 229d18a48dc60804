"""The push/receive/scrub ring shift in ``pl.manual_scope()`` without ``deps=``.

``pl.manual_scope()`` turns PyPTO's dependency inference off for the tasks started in
it (docs/model.md): only ``pl.at(..., deps=[...])`` orders them. Here no task names
another, so even the edges 91_receive_then_scrub_bug_war.py had are gone; the scrub
can still run before the receive, which copies out zeros or races the left
neighbour's push. 94_manual_scope_deps.py chains the three with ``deps=``.

racecheck expects:
    ranks 1..4: bug race write-after-write at @scrub, @push
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
    recv = pl.load(inbox, [0, 0], [1, SIZE])
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
    with pl.manual_scope():
        push_step(x, inbox, signal)
        receive_step(inbox, signal, y)
        scrub_step(inbox)


@pl.jit.host
def manual_shift(
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
    parser = argparse.ArgumentParser(description="ring shift in a manual scope, no deps")
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
    compiled = manual_shift.compile(x, y, config=config)
    compiled(x, y, config=config)
    print("OK" if torch.equal(y, expected_shift(x)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
