"""Expert-parallel dispatch and combine written as a model library writes them.

Each rank has ``LANES`` local expert lanes. ``dispatch`` (a ``pl.jit.inline`` helper
spliced into the orchestration) runs one ``with pl.spmd(LANES)`` task whose body is
inline code: block ``e`` pushes this rank's token row into lane ``e`` of every rank's
``recv`` window, at the row this source owns, and then bumps a per-source arrival
counter on every peer with ``AtomicAdd``. Every block notifies, so a receiver waits for
``epoch * LANES`` arrivals from each source before its combine blocks send the rows back
the same way (``combine``), counted with a second counter. The waits compare with
``Ge`` against a threshold that grows with the epoch, so the counters never need a reset
between calls of one forward. 231_ep_dispatch_combine_inline_bug_count.py waits for one
arrival per source instead of ``LANES``.

Each block is a thread of its own, so every order of the blocks' puts and notifies is
checked: each receiver's wait for ``epoch * LANES`` arrivals covers every block's put,
and the program is proved (the rows of ranks past P are never written: the combine
copy reads them as zeros, a warning). The twin's bug is found.

racecheck expects:
    ranks 2..4: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
MAX_RANKS = 4
LANES = 2
SIZE = 16
ROWS = MAX_RANKS * LANES


@pl.jit.inline
def dispatch(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    recv: pld.DistributedTensor[[ROWS, SIZE], pl.FP32],
    arrived: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    me: pl.Scalar[pl.INT32],
    n: pl.Scalar[pl.INT32],
    epoch: pl.Scalar[pl.INT32],
):
    with pl.spmd(LANES, name_hint="dispatch_push") as push:
        lane = pl.tile.get_block_idx()
        for dst in pl.range(n):
            pld.tensor.put(  # @dispatch_put
                recv,
                dst,
                x,
                dst_offsets=[lane * MAX_RANKS + me, 0],
                src_offsets=[0, 0],
                shape=[1, SIZE],
            )
        for dst in pl.range(n):
            if dst != me:
                pld.system.notify(
                    arrived, peer=dst, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="dispatch_wait", deps=[push]) as waited:
        for src in pl.range(n):
            if src != me:
                pld.system.wait(
                    arrived, offsets=[src, 0], expected=epoch * LANES, cmp=pld.WaitCmp.Ge
                )  # @dispatch_wait
    return waited


@pl.jit.inline
def combine(
    recv: pld.DistributedTensor[[ROWS, SIZE], pl.FP32],
    back: pld.DistributedTensor[[ROWS, SIZE], pl.FP32],
    returned: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    y: pl.Out[pl.Tensor[[ROWS, SIZE], pl.FP32]],
    me: pl.Scalar[pl.INT32],
    n: pl.Scalar[pl.INT32],
    epoch: pl.Scalar[pl.INT32],
    waited: pl.Scalar[pl.TASK_ID],
):
    with pl.spmd(LANES, name_hint="combine_push", deps=[waited]) as pushed:
        lane = pl.tile.get_block_idx()
        for src in pl.range(n):
            row = lane * MAX_RANKS + src
            pld.tensor.put(  # @combine_put
                back,
                src,
                recv,
                dst_offsets=[lane * MAX_RANKS + me, 0],
                src_offsets=[row, 0],
                shape=[1, SIZE],
            )
        for src in pl.range(n):
            if src != me:
                pld.system.notify(
                    returned, peer=src, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="combine_wait", deps=[pushed]):
        for src in pl.range(n):
            if src != me:
                pld.system.wait(
                    returned, offsets=[src, 0], expected=epoch * LANES, cmp=pld.WaitCmp.Ge
                )
        for row in pl.range(ROWS):
            y[row : row + 1, :] = back[row : row + 1, :]


@pl.jit
def moe_layer(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[ROWS, SIZE], pl.FP32]],
    recv: pld.DistributedTensor[[ROWS, SIZE], pl.FP32],
    back: pld.DistributedTensor[[ROWS, SIZE], pl.FP32],
    arrived: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    returned: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    epoch: pl.Scalar[pl.INT32],
):
    ctx = pld.get_comm_ctx(recv)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    waited = dispatch(x, recv, arrived, me, n, epoch)
    combine(recv, back, returned, y, me, n, epoch, waited)
    return y


@pl.jit.host
def l3_moe_layer(
    x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, ROWS, SIZE], pl.FP32]],
):
    recv_buf = pld.alloc_window_buffer([ROWS, SIZE], dtype=pl.FP32)
    back_buf = pld.alloc_window_buffer([ROWS, SIZE], dtype=pl.FP32)
    arrived_buf = pld.alloc_window_buffer([MAX_RANKS, 1], dtype=pl.INT32)
    returned_buf = pld.alloc_window_buffer([MAX_RANKS, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        recv = pld.window(recv_buf, [ROWS, SIZE], dtype=pl.FP32)
        back = pld.window(back_buf, [ROWS, SIZE], dtype=pl.FP32)
        arrived = pld.window(arrived_buf, [MAX_RANKS, 1], dtype=pl.INT32)
        returned = pld.window(returned_buf, [MAX_RANKS, 1], dtype=pl.INT32)
        moe_layer(x[r], y[r], recv, back, arrived, returned, pl.const(1, pl.INT32), device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="EP dispatch and combine with epoch counters")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, ROWS, SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    l3_moe_layer.compile(x, y, config=config)(x, y, config=config)
    for lane in range(LANES):  # every rank gets every source's row back in each lane
        for src in range(nr):
            if not torch.equal(y[:, lane * MAX_RANKS + src], x[src].expand(nr, SIZE)):
                print("MISMATCH")
                return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
