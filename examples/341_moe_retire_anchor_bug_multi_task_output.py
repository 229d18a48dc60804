"""The MoE signal retire (340_moe_retire_anchor.py) anchored on a multi-task output:
pypto-lib's open EP8 hang.

The retire's anchor reads one element of ``lanes_out``, which two tasks write: the
runtime orders a task after the writers of the bytes it reads, so the retire follows
lane 0's wait only. Lane 1's wait task only reads ``arrived`` (write-after-read is not
tracked), so the retire can subtract lane 1's count after the peers' notifies landed
but before lane 1's wait has seen them: the count drops back to zero and lane 1 spins
forever. pypto-lib's DeepSeek V4 Pro forward hangs this way at EP8 and ships with the
retire switched off there (``DSV4_DISABLE_MOE_RETIRE``).

A region's loads and stores are compared by the bytes they access, so the retire
(which reads ``lanes_out[0, 0]`` only) follows lane 0's wait and not lane 1's; see also
342, the same hang written as kernel calls.

racecheck expects:
    ranks 2: bug deadlock
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


@pl.jit.inline
def combine_wait(recv, arrived, lanes_out, me, n, lane, pushed):
    """One lane's wait task: every peer's row of the lane, summed into row `lane`."""
    base = lane * MAX_RANKS
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="combine_wait", deps=[pushed]):
        for src in pl.range(n):
            if src != me:
                pld.system.wait(  # @lane_wait
                    arrived, offsets=[base + src, 0], expected=1, cmp=pld.WaitCmp.Ge
                )
        acc = pl.load(recv, [base, 0], [1, SIZE])
        for src in pl.range(1, n):
            acc = pl.add(acc, pl.load(recv, [base + src, 0], [1, SIZE]))
        pl.store(acc, [lane, 0], lanes_out)


@pl.jit
def moe_combine(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    recv: pld.DistributedTensor[[LANES * MAX_RANKS, SIZE], pl.FP32],
    arrived: pld.DistributedTensor[[LANES * MAX_RANKS, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(recv)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    lanes_out = pl.create_tensor([LANES, SIZE], dtype=pl.FP32)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="combine_push") as pushed:
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
    combine_wait(recv, arrived, lanes_out, me, n, 0, pushed)
    combine_wait(recv, arrived, lanes_out, me, n, 1, pushed)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="combine_sum"):
        total = pl.add(pl.load(lanes_out, [0, 0], [1, SIZE]), pl.load(lanes_out, [1, 0], [1, SIZE]))
        pl.store(total, [0, 0], y)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="moe_signal_retire"):
        _anchor = pl.read(lanes_out, [0, 0])  # @anchor
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
    y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
):
    recv_buf = pld.alloc_window_buffer([LANES * MAX_RANKS, SIZE], dtype=pl.FP32)
    arrived_buf = pld.alloc_window_buffer([LANES * MAX_RANKS, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        recv = pld.window(recv_buf, [LANES * MAX_RANKS, SIZE], dtype=pl.FP32)
        arrived = pld.window(arrived_buf, [LANES * MAX_RANKS, 1], dtype=pl.INT32)
        moe_combine(x[r], y[r], recv, arrived, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="MoE combine lanes and their signal retire")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    l3_moe_combine.compile(x, y, config=config)(x, y, config=config)
    expected = (LANES * x.sum(dim=0)).expand(nr, 1, SIZE)  # each lane sums every rank's row
    print("OK" if torch.allclose(y, expected, atol=1e-5) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
