"""A persistent CP ring exchange (234_cp_ring_tail.py run call after call on the same
windows) that retires its signals: each wait is followed by an ``AtomicAdd`` of -1 on
the rank's own cell, so every call leaves ``tail_ready`` and ``tail_free`` at zero, and a
``tail_free`` credit from the successor tells a rank its tail was copied before its next
call overwrites the window. 237_cp_ring_retire_bug_no_reset.py leaves ``tail_ready``
non-zero: the next call's wait passes on the stale count.

racecheck expects:
    ranks 2..4: proved
    ranks 2..3 --repeat 2: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
CHUNK = 8
OLD_TAIL = 2
TAIL = 4
WINDOW_ROWS = TAIL
D = 16


@pl.jit
def exchange_tail(
    kv: pl.Tensor[[CHUNK, D], pl.FP32],
    kv_ext: pl.Out[pl.Tensor[[TAIL + CHUNK, D], pl.FP32]],
    tail_in: pld.DistributedTensor[[WINDOW_ROWS, D], pl.FP32],
    tail_ready: pld.DistributedTensor[[1, 1], pl.INT32],
    tail_free: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(tail_in)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="tail_push"):
        nxt = (me + 1) % n
        pld.tensor.put(  # @tail_put
            tail_in, nxt, kv, dst_offsets=[0, 0], src_offsets=[CHUNK - TAIL, 0], shape=[TAIL, D]
        )
        pld.system.notify(tail_ready, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="tail_recv"):
        pld.system.wait(tail_ready, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        pld.system.notify(tail_ready, peer=me, offsets=[0, 0], value=-1, op=pld.NotifyOp.AtomicAdd)
        kv_ext[0:TAIL, :] = tail_in[0:TAIL, :]  # @tail_read
        kv_ext[TAIL : TAIL + CHUNK, :] = kv[:, :]
        prv = (me - 1 + n) % n
        pld.system.notify(tail_free, peer=prv, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(tail_free, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        pld.system.notify(tail_free, peer=me, offsets=[0, 0], value=-1, op=pld.NotifyOp.AtomicAdd)
    return kv_ext


@pl.jit.host
def l3_cp_tail(
    kv: pl.Tensor[[NR, CHUNK, D], pl.FP32],
    kv_ext: pl.Out[pl.Tensor[[NR, TAIL + CHUNK, D], pl.FP32]],
):
    tail_buf = pld.alloc_window_buffer([WINDOW_ROWS, D], dtype=pl.FP32)
    ready_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    free_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        tail_in = pld.window(tail_buf, [WINDOW_ROWS, D], dtype=pl.FP32)
        tail_ready = pld.window(ready_buf, [1, 1], dtype=pl.INT32)
        tail_free = pld.window(free_buf, [1, 1], dtype=pl.INT32)
        exchange_tail(kv[r], kv_ext[r], tail_in, tail_ready, tail_free, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(
        description="persistent CP ring exchange that retires its signals"
    )
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    kv = torch.randn((nr, CHUNK, D), dtype=torch.float32)
    kv_ext = torch.zeros((nr, TAIL + CHUNK, D), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    l3_cp_tail.compile(kv, kv_ext, config=config)(kv, kv_ext, config=config)
    previous = torch.roll(kv, shifts=1, dims=0)[:, CHUNK - TAIL :]
    ok = torch.equal(kv_ext[:, :TAIL], previous) and torch.equal(kv_ext[:, TAIL:], kv)
    print("OK" if ok else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
