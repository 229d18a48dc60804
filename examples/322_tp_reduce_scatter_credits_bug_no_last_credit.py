"""The TP reduce-scatter (320_tp_reduce_scatter_credits.py) whose retire skips the last
step's credit barrier.

Within one call every step's puts wait for the previous step's credits, so one call is
correct. But the retire subtracts without waiting for the last step's credits: the next
call on the same windows starts its first step (which waits for no credit) while a slow
peer may still be reading the last step's slots, and a fast rank's first put overwrites
one. Only the persistent check (``--repeat 2``) sees it.

When the host waits for every rank between calls (``--rounds joined``, as serving
does), the slow peer has finished its reads before the next call starts, and the
missing credit wait costs nothing: only free-running calls show the bug.

racecheck expects:
    ranks 2..4: proved
    ranks 2..3 --repeat 2: bug race write-after-read at @reduce_read, @push_put
    ranks 2..3 --repeat 2 --rounds joined: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
MAX_RANKS = 8
SIZE = 4
STEPS = 2


@pl.jit
def o_proj_step(
    part: pl.Tensor[[MAX_RANKS, SIZE], pl.FP32],
    out: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    partial: pld.DistributedTensor[[MAX_RANKS, SIZE], pl.FP32],
    ready: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    credit: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    step: pl.Scalar[pl.INT32],
):
    ctx = pld.get_comm_ctx(partial)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="o_proj_push") as pushed:
        for dst in pl.range(n):
            if step > 0 and dst != me:
                pld.system.wait(  # @credit_wait
                    credit, offsets=[dst, 0], expected=step, cmp=pld.WaitCmp.Ge
                )
            pld.tensor.put(  # @push_put
                partial, dst, part, dst_offsets=[me, 0], src_offsets=[dst, 0], shape=[1, SIZE]
            )
            if dst != me:
                pld.system.notify(
                    ready, peer=dst, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="o_proj_reduce", deps=[pushed]):
        for src in pl.range(n):
            if src != me:
                pld.system.wait(ready, offsets=[src, 0], expected=step + 1, cmp=pld.WaitCmp.Ge)
        acc = pl.load(partial, [0, 0], [1, SIZE])  # @reduce_first
        for src in pl.range(1, n):
            acc = pl.add(acc, pl.load(partial, [src, 0], [1, SIZE]))  # @reduce_read
        pl.store(acc, [0, 0], out)
        for src in pl.range(n):
            if src != me:
                pld.system.notify(  # @credit
                    credit, peer=src, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
    return out


@pl.jit
def tp_signal_retire(
    ready: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    credit: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(ready)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="tp_signal_retire"):
        for src in pl.range(n):
            if src != me:
                pld.system.notify(
                    ready, peer=me, offsets=[src, 0], value=-STEPS, op=pld.NotifyOp.AtomicAdd
                )
                pld.system.notify(
                    credit, peer=me, offsets=[src, 0], value=-STEPS, op=pld.NotifyOp.AtomicAdd
                )


@pl.jit.host
def l3_decode_o_proj(
    part: pl.Tensor[[NR, STEPS, MAX_RANKS, SIZE], pl.FP32],
    out: pl.Out[pl.Tensor[[NR, STEPS, 1, SIZE], pl.FP32]],
):
    partial_buf = pld.alloc_window_buffer([MAX_RANKS, SIZE], dtype=pl.FP32)
    ready_buf = pld.alloc_window_buffer([MAX_RANKS, 1], dtype=pl.INT32)
    credit_buf = pld.alloc_window_buffer([MAX_RANKS, 1], dtype=pl.INT32)
    for step in pl.range(STEPS):
        for r in pl.range(pld.world_size()):
            partial = pld.window(partial_buf, [MAX_RANKS, SIZE], dtype=pl.FP32)
            ready = pld.window(ready_buf, [MAX_RANKS, 1], dtype=pl.INT32)
            credit = pld.window(credit_buf, [MAX_RANKS, 1], dtype=pl.INT32)
            o_proj_step(part[r][step], out[r][step], partial, ready, credit, step, device=r)
    for r in pl.range(pld.world_size()):
        ready = pld.window(ready_buf, [MAX_RANKS, 1], dtype=pl.INT32)
        credit = pld.window(credit_buf, [MAX_RANKS, 1], dtype=pl.INT32)
        tp_signal_retire(ready, credit, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="TP reduce-scatter with data and credit barriers")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    part = torch.randn((nr, STEPS, MAX_RANKS, SIZE), dtype=torch.float32)
    out = torch.zeros((nr, STEPS, 1, SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    l3_decode_o_proj.compile(part, out, config=config)(part, out, config=config)
    expected = part.sum(dim=0)[:, :nr].permute(1, 0, 2).unsqueeze(2)  # rank r owns block r
    print("OK" if torch.allclose(out, expected, atol=1e-5) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
