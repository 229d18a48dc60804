"""A pypto-lib-like MoE dispatch for bench/bench_threads.py: 64 `pl.spmd` blocks per
rank at P=16, each storing its slot into the inbox of rank `block % 16` and notifying
that rank's arrival count; then a wait for the 64 arrivals and a read of the inbox."""

import pypto.language as pl
import pypto.language.distributed as pld

P = 16
BLOCKS = 64
WIDTH = 16  # floats per slot


@pl.jit.incore
def push_block(
    x: pl.Tensor[[BLOCKS, WIDTH], pl.FP32],
    inbox: pld.DistributedTensor[[P * BLOCKS, WIDTH], pl.FP32],
    arrived: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    block = pl.tile.get_block_idx()
    peer = block % P
    row = pl.load(x, [block, 0], [1, WIDTH])
    pld.tile.remote_store(row, inbox, peer=peer, offsets=[pld.rank(ctx) * BLOCKS + block, 0])
    pld.system.notify(arrived, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)


@pl.jit.incore
def wait_arrivals(arrived: pld.DistributedTensor[[1, 1], pl.INT32]):
    pld.system.wait(arrived, offsets=[0, 0], expected=BLOCKS, cmp=pld.WaitCmp.Ge)


@pl.jit.incore
def read_inbox(
    inbox: pld.DistributedTensor[[P * BLOCKS, WIDTH], pl.FP32],
    arrived: pld.DistributedTensor[[1, 1], pl.INT32],
    y: pl.Out[pl.Tensor[[P * BLOCKS, WIDTH], pl.FP32]],
) -> pl.Tensor[[P * BLOCKS, WIDTH], pl.FP32]:
    pld.system.wait(arrived, offsets=[0, 0], expected=BLOCKS, cmp=pld.WaitCmp.Ge)
    return pl.store(pl.load(inbox, [0, 0], [P * BLOCKS, WIDTH]), [0, 0], y)


@pl.jit
def per_rank(
    x: pl.Tensor[[BLOCKS, WIDTH], pl.FP32],
    y: pl.Out[pl.Tensor[[P * BLOCKS, WIDTH], pl.FP32]],
    inbox: pld.DistributedTensor[[P * BLOCKS, WIDTH], pl.FP32],
    arrived: pld.DistributedTensor[[1, 1], pl.INT32],
):
    with pl.spmd(BLOCKS):
        push_block(x, inbox, arrived)
    wait_arrivals(arrived)
    read_inbox(inbox, arrived, y)


@pl.jit.host
def moe_dispatch(
    x: pl.Tensor[[P, BLOCKS, WIDTH], pl.FP32],
    y: pl.Out[pl.Tensor[[P, P * BLOCKS, WIDTH], pl.FP32]],
):
    inbox_buf = pld.alloc_window_buffer([P * BLOCKS, WIDTH], dtype=pl.FP32)
    arrived_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        inbox = pld.window(inbox_buf, [P * BLOCKS, WIDTH], dtype=pl.FP32)
        arrived = pld.window(arrived_buf, [1, 1], dtype=pl.INT32)
        per_rank(x[r], y[r], inbox, arrived, device=r)
