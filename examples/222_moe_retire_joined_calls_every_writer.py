"""Persistent MoE signal counts retired at the end of every host-joined call, the retire
anchored on every task that writes the output.

The host calls the combine again and again on the same windows, waiting for every rank
between calls (a serving or benchmark loop: ``--rounds joined``), and every call counts
its arrivals from zero with the same threshold, 1. ``combine_push`` puts the rank's row
into both lanes of every peer's ``recv`` and bumps the peer's lane cell in ``arrived``;
each lane's ``lane_wait`` kernel waits for its lane's rows and writes the lane's sum
into its own row of ``y``. The ``moe_signal_retire`` region then subtracts this call's
arrivals from the rank's own cells, so the next call's waits start from zero rather
than pass at once on this call's counts (pypto-lib's DeepSeek V4 forwards retire their
credits this way, by an AtomicAdd of minus the count: a zero write could undo a notify
still in flight).

The retire must not run before a lane's wait has seen its count, and a wait only reads
``arrived`` (write-after-read is not tracked): the retire's notifies order it after the
push alone. Its anchor orders it after the waits: it loads every row of ``y``, so the
runtime orders it after the writer of each, both lanes' waits.
223_moe_retire_joined_calls_bug_one_element_anchor.py reads one element of ``y`` instead,
as pypto-lib's retire does (its open EP8 hang).

racecheck expects:
    ranks 2..3: proved
    ranks 2 --repeat 2 --rounds joined: proved
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
RECV_ROWS = LANES * MAX_RANKS


@pl.jit.incore
def combine_push(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    recv: pld.DistributedTensor[[RECV_ROWS, SIZE], pl.FP32],
    arrived: pld.DistributedTensor[[RECV_ROWS, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(recv)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    for lane in pl.range(LANES):
        for dst in pl.range(n):
            pld.tensor.put(
                recv,
                dst,
                x,
                dst_offsets=[lane * MAX_RANKS + me, 0],
                src_offsets=[0, 0],
                shape=[1, SIZE],
            )
            if dst != me:
                pld.system.notify(
                    arrived,
                    peer=dst,
                    offsets=[lane * MAX_RANKS + me, 0],
                    value=1,
                    op=pld.NotifyOp.AtomicAdd,
                )


@pl.jit.incore
def lane_wait(
    recv: pld.DistributedTensor[[RECV_ROWS, SIZE], pl.FP32],
    arrived: pld.DistributedTensor[[RECV_ROWS, 1], pl.INT32],
    row: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    lane: pl.Scalar[pl.INT32],
):
    ctx = pld.get_comm_ctx(recv)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    base = lane * MAX_RANKS
    for src in pl.range(n):
        if src != me:
            pld.system.wait(  # @lane_wait
                arrived, offsets=[base + src, 0], expected=1, cmp=pld.WaitCmp.Ge
            )
    acc = pl.load(recv, [base, 0], [1, SIZE])
    for src in pl.range(1, n):
        acc = pl.add(acc, pl.load(recv, [base + src, 0], [1, SIZE]))
    pl.store(acc, [0, 0], row)


@pl.jit
def moe_combine(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[LANES, SIZE], pl.FP32]],
    recv: pld.DistributedTensor[[RECV_ROWS, SIZE], pl.FP32],
    arrived: pld.DistributedTensor[[RECV_ROWS, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(recv)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    combine_push(x, recv, arrived)
    lane_wait(recv, arrived, y[0:1, :], 0)
    lane_wait(recv, arrived, y[1:2, :], 1)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="moe_signal_retire"):
        _anchor = pl.load(y, [0, 0], [LANES, SIZE])  # @anchor
        for lane in pl.range(LANES):
            for src in pl.range(n):
                if src != me:
                    pld.system.notify(  # @retire
                        arrived,
                        peer=me,
                        offsets=[lane * MAX_RANKS + src, 0],
                        value=-1,
                        op=pld.NotifyOp.AtomicAdd,
                    )
    return y


@pl.jit.host
def l3_moe_combine(
    x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, LANES, SIZE], pl.FP32]],
):
    recv_buf = pld.alloc_window_buffer([RECV_ROWS, SIZE], dtype=pl.FP32)
    arrived_buf = pld.alloc_window_buffer([RECV_ROWS, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        recv = pld.window(recv_buf, [RECV_ROWS, SIZE], dtype=pl.FP32)
        arrived = pld.window(arrived_buf, [RECV_ROWS, 1], dtype=pl.INT32)
        moe_combine(x[r], y[r], recv, arrived, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="MoE combine calls, retired every call")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    parser.add_argument("--calls", type=int, default=2, help="host-joined calls to run")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    ok = True
    for _ in range(args.calls):  # each call returns before the next is launched
        x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
        y = torch.zeros((nr, LANES, SIZE), dtype=torch.float32)
        l3_moe_combine.compile(x, y, config=config)(x, y, config=config)
        expected = x.sum(dim=0).expand(nr, LANES, SIZE)  # each lane sums every rank's row
        ok = ok and torch.allclose(y, expected, atol=1e-5)
    print("OK" if ok else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
