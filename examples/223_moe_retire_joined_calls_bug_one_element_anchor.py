"""The per-call signal retire of 222_moe_retire_joined_calls_every_writer.py anchored
on one element of a multi-task output: pypto-lib's open EP8 hang.

As pypto-lib's DeepSeek V4 forwards do, the retire region reads a single element of the
output, ``y[0, 0]``, to order itself after the tasks that produce it. Two tasks write
``y``, one row each, and the runtime orders a task after the writers of the bytes it
reads: the retire follows lane 0's wait only. Lane 1's wait only reads ``arrived``
(write-after-read is not tracked), so the retire can subtract lane 1's count after the
peers' notifies landed and before lane 1's wait has seen them: the count is back at
zero and lane 1 spins forever, in the first call already. pypto-lib's DeepSeek V4 Pro
prefill ships with the retire switched off at EP8 (``DSV4_DISABLE_MOE_RETIRE``).

racecheck expects:
    ranks 2..3: bug deadlock at @lane_wait
    ranks 2 --repeat 2 --rounds joined: bug deadlock at @lane_wait
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
        _anchor = pl.read(y, [0, 0])  # @anchor
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
    parser = argparse.ArgumentParser(description="MoE combine calls, one-element retire anchor")
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
