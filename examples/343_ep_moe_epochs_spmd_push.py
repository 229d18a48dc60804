"""The EP MoE prefill (310_ep_moe_epochs.py) with its dispatch push as SPMD blocks.

pypto-lib folds the payload notify into the push blocks: ``dispatch_push`` is one
``pl.spmd(LANES)`` task whose block ``e`` puts the token row into lane ``e`` of every
rank's ``recv`` window and then bumps each receiver's ``arrived[me]``, so a receiver
still sees ``LANES`` arrivals per source and epoch and ``dispatch_wait`` still waits for
``epoch * LANES``. The blocks run concurrently, each notify after its own block's puts,
and the protocol is as correct as 310's; 231_ep_dispatch_combine_inline_bug_count.py
has the twin that counts one arrival per source.

Each block is a thread of its own, so every order of the blocks' puts and notifies
is checked.

racecheck expects:
    ranks 2..3: proved
    ranks 2 --repeat 2: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
MAX_RANKS = 8
LANES = 2
SIZE = 4
LAYERS = 2
TILES = 2
ROWS = LANES * MAX_RANKS


@pl.jit.inline
def moe_layer(x, y, recv, back, arrived, combined, consumed, me, n, epoch, after):
    # The received row count: written by dispatch_wait, read by combine_push. It is
    # manual_dep, as pypto-lib's recv_meta_local is, so only deps= orders the two.
    count = pl.create_tensor([1, 1], dtype=pl.INT32, manual_dep=True)
    """One MoE layer; returns the task that ends its communication."""
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="moe_reuse_wait", deps=[after]) as reused:
        if epoch > 1:
            for src in pl.range(n):
                if src != me:
                    pld.system.wait(  # @reuse_wait
                        consumed, offsets=[src, 0], expected=epoch - 1, cmp=pld.WaitCmp.Ge
                    )
    with pl.spmd(LANES, name_hint="dispatch_push", deps=[reused]) as pushed:
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
                pld.system.notify(  # @dispatch_notify
                    arrived, peer=dst, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="dispatch_wait", deps=[pushed]) as waited:
        for src in pl.range(n):
            if src != me:
                pld.system.wait(  # @dispatch_wait
                    arrived, offsets=[src, 0], expected=epoch * LANES, cmp=pld.WaitCmp.Ge
                )
        pl.write(count, [0, 0], n * LANES)  # @count_write
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="combine_push", deps=[waited]) as returned:
        rows = pl.read(count, [0, 0]) // LANES  # @count_read
        for lane in pl.range(LANES):
            for src in pl.range(rows):
                row = lane * MAX_RANKS + src
                tile = pl.load(recv, [row, 0], [1, SIZE])  # @expert_read
                pl.store(pl.add(tile, tile), [row, 0], recv)
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
                    combined, peer=src, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="combine_wait", deps=[returned]) as landed:
        for src in pl.range(n):
            if src != me:
                pld.system.wait(  # @combine_wait
                    combined, offsets=[src, 0], expected=epoch, cmp=pld.WaitCmp.Ge
                )
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="combine_reduce", deps=[landed]):
        for lane in pl.range(LANES):
            for src in pl.range(n):
                row = lane * MAX_RANKS + src
                y[row : row + 1, :] = back[row : row + 1, :]  # @combine_read
        for dst in pl.range(n):
            if dst != me:
                pld.system.notify(
                    consumed, peer=dst, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
    return landed


@pl.jit
def moe_tile(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[LAYERS, ROWS, SIZE], pl.FP32]],
    recv: pld.DistributedTensor[[ROWS, SIZE], pl.FP32],
    back: pld.DistributedTensor[[ROWS, SIZE], pl.FP32],
    arrived: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    combined: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    consumed: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    tile: pl.Scalar[pl.INT32],
):
    ctx = pld.get_comm_ctx(recv)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    done = pl.system.task_invalid()
    for layer in range(LAYERS):
        epoch = tile * LAYERS + layer + 1
        done = moe_layer(x, y[layer], recv, back, arrived, combined, consumed, me, n, epoch, done)
    return y


@pl.jit
def moe_signal_retire(
    arrived: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    combined: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    consumed: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(arrived)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    epochs = TILES * LAYERS
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="moe_signal_retire"):
        for src in pl.range(n):
            if src != me:
                pld.system.notify(  # @retire
                    arrived,
                    peer=me,
                    offsets=[src, 0],
                    value=-epochs * LANES,
                    op=pld.NotifyOp.AtomicAdd,
                )
                pld.system.notify(
                    combined, peer=me, offsets=[src, 0], value=-epochs, op=pld.NotifyOp.AtomicAdd
                )
                pld.system.notify(
                    consumed, peer=me, offsets=[src, 0], value=-epochs, op=pld.NotifyOp.AtomicAdd
                )


@pl.jit.host
def l3_moe_prefill(
    x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, TILES, LAYERS, ROWS, SIZE], pl.FP32]],
):
    recv_buf = pld.alloc_window_buffer([ROWS, SIZE], dtype=pl.FP32)
    back_buf = pld.alloc_window_buffer([ROWS, SIZE], dtype=pl.FP32)
    arrived_buf = pld.alloc_window_buffer([MAX_RANKS, 1], dtype=pl.INT32)
    combined_buf = pld.alloc_window_buffer([MAX_RANKS, 1], dtype=pl.INT32)
    consumed_buf = pld.alloc_window_buffer([MAX_RANKS, 1], dtype=pl.INT32)
    for tile in pl.range(TILES):
        for r in pl.range(pld.world_size()):
            recv = pld.window(recv_buf, [ROWS, SIZE], dtype=pl.FP32)
            back = pld.window(back_buf, [ROWS, SIZE], dtype=pl.FP32)
            arrived = pld.window(arrived_buf, [MAX_RANKS, 1], dtype=pl.INT32)
            combined = pld.window(combined_buf, [MAX_RANKS, 1], dtype=pl.INT32)
            consumed = pld.window(consumed_buf, [MAX_RANKS, 1], dtype=pl.INT32)
            moe_tile(x[r], y[r][tile], recv, back, arrived, combined, consumed, tile, device=r)
    for r in pl.range(pld.world_size()):
        arrived = pld.window(arrived_buf, [MAX_RANKS, 1], dtype=pl.INT32)
        combined = pld.window(combined_buf, [MAX_RANKS, 1], dtype=pl.INT32)
        consumed = pld.window(consumed_buf, [MAX_RANKS, 1], dtype=pl.INT32)
        moe_signal_retire(arrived, combined, consumed, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="EP MoE dispatch/combine with epoch counters")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, TILES, LAYERS, ROWS, SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    l3_moe_prefill.compile(x, y, config=config)(x, y, config=config)
    for lane in range(LANES):  # every layer of every tile gets each source's row, doubled
        for src in range(nr):
            got = y[:, :, :, lane * MAX_RANKS + src]
            if not torch.allclose(got, (2 * x[src, 0]).expand_as(got)):
                print("MISMATCH")
                return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
