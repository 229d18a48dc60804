"""A kernel-driven paged gather into L1, as pypto-lib's sparse attention builds its K
operand: each rank sends its successor ``ROWS`` key rows into a ``pool`` window and
notifies; after the wait the successor gathers them one by one into a
``pl.create_l1`` accumulator with ``pl.gather_row`` and stores the operand it built. The sender
writes one more row, a scratch row the gather never reads, after the notify: the
gather reads exactly the rows it names (``valid_shape`` the part of each row it
transfers), so that late write races nothing.
245_paged_gather_l1_bug_late_row.py writes a gathered row late, and the gather races it.

racecheck expects:
    ranks 2..3: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
ROWS = 4
D = 16
SCRATCH = ROWS  # the pool's last row: written late, never gathered
LATE_ROW = SCRATCH


@pl.jit
def gather_keys(
    keys: pl.Tensor[[ROWS + 1, D], pl.FP32],
    operand: pl.Out[pl.Tensor[[ROWS, D], pl.FP32]],
    pool: pld.DistributedTensor[[ROWS + 1, D], pl.FP32],
    ready: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(pool)
    me = pld.rank(ctx)
    nxt = (me + 1) % pld.nranks(ctx)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="send_keys"):
        pld.tensor.put(pool, nxt, keys, dst_offsets=[0, 0], src_offsets=[0, 0], shape=[ROWS, D])
        pld.system.notify(ready, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.tensor.put(  # @late_put
            pool, nxt, keys, dst_offsets=[LATE_ROW, 0], src_offsets=[ROWS, 0], shape=[1, D]
        )
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="attend"):
        pld.system.wait(ready, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        kv = pl.create_l1([ROWS, D], pl.FP32)
        for r in pl.range(ROWS):
            kv = pl.gather_row(kv, pool, [r, 0], [r, 0], [1, D])  # @gather
        operand[:, :] = kv
    return operand


@pl.jit.host
def l3_gather_keys(
    keys: pl.Tensor[[NR, ROWS + 1, D], pl.FP32],
    operand: pl.Out[pl.Tensor[[NR, ROWS, D], pl.FP32]],
):
    pool_buf = pld.alloc_window_buffer([ROWS + 1, D], dtype=pl.FP32)
    ready_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        pool = pld.window(pool_buf, [ROWS + 1, D], dtype=pl.FP32)
        ready = pld.window(ready_buf, [1, 1], dtype=pl.INT32)
        gather_keys(keys[r], operand[r], pool, ready, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="paged gather into L1 over a ring")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    keys = torch.randn((nr, ROWS + 1, D), dtype=torch.float32)
    operand = torch.zeros((nr, ROWS, D), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    l3_gather_keys.compile(keys, operand, config=config)(keys, operand, config=config)
    previous = torch.roll(keys, shifts=1, dims=0)[:, :ROWS]
    print("OK" if torch.equal(operand, previous) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
