"""The CP ring (330_cp_ring_kv.py) that skips the receive wait at step 0.

The first block is assumed to be there already, since every rank sends its own block
before it reads; but nothing orders the previous rank's send before this rank's read,
so step 0 can fold in a slot the previous rank has not written yet (zeros on a fresh
window, a stale block on a reused one).

racecheck expects:
    ranks 2..8: bug race read-after-write at @consume, @send_own
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
ROWS = 2
SIZE = 4


@pl.jit
def cp_ring_step(
    kv: pl.Tensor[[ROWS, SIZE], pl.FP32],
    acc: pl.Out[pl.Tensor[[ROWS, SIZE], pl.FP32]],
    kv_in: pld.DistributedTensor[[2 * ROWS, SIZE], pl.FP32],
    ready: pld.DistributedTensor[[2, 1], pl.INT32],
    free: pld.DistributedTensor[[2, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(kv_in)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    nxt = (me + 1) % n
    prv = (me + n - 1) % n
    steps = n - 1
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="cp_kv_ring"):
        total = pl.load(kv, [0, 0], [ROWS, SIZE])
        for s in pl.range(steps):
            slot = s % 2
            if s >= 2:
                pld.system.wait(  # @free_wait
                    free, offsets=[slot, 0], expected=s // 2, cmp=pld.WaitCmp.Ge
                )
            if s == 0:
                pld.tensor.put(  # @send_own
                    kv_in, nxt, kv, dst_offsets=[0, 0], src_offsets=[0, 0], shape=[ROWS, SIZE]
                )
            else:
                held = (s - 1) % 2
                pld.tensor.put(  # @forward
                    kv_in,
                    nxt,
                    kv_in,
                    dst_offsets=[slot * ROWS, 0],
                    src_offsets=[held * ROWS, 0],
                    shape=[ROWS, SIZE],
                )
                pld.system.notify(  # @free_forwarded
                    free, peer=prv, offsets=[held, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
            pld.system.notify(
                ready, peer=nxt, offsets=[slot, 0], value=1, op=pld.NotifyOp.AtomicAdd
            )
            if s > 0:
                pld.system.wait(  # @ready_wait
                    ready, offsets=[slot, 0], expected=s // 2 + 1, cmp=pld.WaitCmp.Ge
                )
            block = pl.load(kv_in, [slot * ROWS, 0], [ROWS, SIZE])  # @consume
            total = pl.add(total, block)
        last = (steps - 1) % 2
        pld.system.notify(  # @free_last
            free, peer=prv, offsets=[last, 0], value=1, op=pld.NotifyOp.AtomicAdd
        )
        pl.store(total, [0, 0], acc)
        for k in pl.range(2):
            uses = (steps - k + 1) // 2  # how many steps used slot k
            pld.system.wait(free, offsets=[k, 0], expected=uses, cmp=pld.WaitCmp.Ge)
            pld.system.notify(
                ready, peer=me, offsets=[k, 0], value=-uses, op=pld.NotifyOp.AtomicAdd
            )
            pld.system.notify(free, peer=me, offsets=[k, 0], value=-uses, op=pld.NotifyOp.AtomicAdd)
    return acc


@pl.jit.host
def l3_prefill_cp_ring(
    kv: pl.Tensor[[NR, ROWS, SIZE], pl.FP32],
    acc: pl.Out[pl.Tensor[[NR, ROWS, SIZE], pl.FP32]],
):
    kv_in_buf = pld.alloc_window_buffer([2 * ROWS, SIZE], dtype=pl.FP32)
    ready_buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
    free_buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        kv_in = pld.window(kv_in_buf, [2 * ROWS, SIZE], dtype=pl.FP32)
        ready = pld.window(ready_buf, [2, 1], dtype=pl.INT32)
        free = pld.window(free_buf, [2, 1], dtype=pl.INT32)
        cp_ring_step(kv[r], acc[r], kv_in, ready, free, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="CP ring exchange of KV blocks")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    kv = torch.randn((nr, ROWS, SIZE), dtype=torch.float32)
    acc = torch.zeros((nr, ROWS, SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    l3_prefill_cp_ring.compile(kv, acc, config=config)(kv, acc, config=config)
    expected = kv.sum(dim=0).expand(nr, ROWS, SIZE)  # every rank folded in every block
    print("OK" if torch.allclose(acc, expected, atol=1e-5) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
