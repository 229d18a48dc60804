"""TP all-gather (232_tp_two_barrier_credits.py) without the credit barrier.

The data-ready barrier alone orders each call's reads after the puts they read, but
nothing orders them before the next call's puts: at ``--repeat 2`` a rank that is done
puts its next row into a peer's ``gather`` window while that peer may still be copying
the row out. A single call is correct, so only the persistent check finds it.

racecheck expects:
    ranks 2..4: proved
    ranks 2..3 --repeat 2: bug race write-after-read at @gather_put, @gather_read
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
MAX_RANKS = 4
SIZE = 16


@pl.jit.inline
def barrier(counter: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32], me, n):
    """Bump every peer's cell for this rank, wait for every peer's, consume them."""
    for dst in pl.range(n):
        if dst != me:
            pld.system.notify(
                counter, peer=dst, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd
            )
    for src in pl.range(n):
        if src != me:
            pld.system.wait(counter, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
            pld.system.notify(
                counter, peer=me, offsets=[src, 0], value=-1, op=pld.NotifyOp.AtomicAdd
            )


@pl.jit
def gather_rows(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[MAX_RANKS, SIZE], pl.FP32]],
    gather: pld.DistributedTensor[[MAX_RANKS, SIZE], pl.FP32],
    ready: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    credit: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(gather)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="push"):
        for dst in pl.range(n):
            pld.tensor.put(  # @gather_put
                gather, dst, x, dst_offsets=[me, 0], src_offsets=[0, 0], shape=[1, SIZE]
            )
        for dst in pl.range(n):
            if dst != me:
                pld.system.notify(
                    ready, peer=dst, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="consume"):
        for src in pl.range(n):
            if src != me:
                pld.system.wait(ready, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
                pld.system.notify(
                    ready, peer=me, offsets=[src, 0], value=-1, op=pld.NotifyOp.AtomicAdd
                )
        for row in pl.range(n):
            y[row : row + 1, :] = gather[row : row + 1, :]  # @gather_read
    return y


@pl.jit.host
def l3_gather(
    x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, MAX_RANKS, SIZE], pl.FP32]],
):
    gather_buf = pld.alloc_window_buffer([MAX_RANKS, SIZE], dtype=pl.FP32)
    ready_buf = pld.alloc_window_buffer([MAX_RANKS, 1], dtype=pl.INT32)
    credit_buf = pld.alloc_window_buffer([MAX_RANKS, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        gather = pld.window(gather_buf, [MAX_RANKS, SIZE], dtype=pl.FP32)
        ready = pld.window(ready_buf, [MAX_RANKS, 1], dtype=pl.INT32)
        credit = pld.window(credit_buf, [MAX_RANKS, 1], dtype=pl.INT32)
        gather_rows(x[r], y[r], gather, ready, credit, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="TP all-gather with data and credit barriers")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, MAX_RANKS, SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    l3_gather.compile(x, y, config=config)(x, y, config=config)
    ok = all(torch.equal(y[r, :nr], x[:, 0]) for r in range(nr))
    print("OK" if ok else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
