"""CP ring exchange (234_cp_ring_tail.py) whose window is sized for an old layout.

The tail grew from ``OLD_TAIL`` to ``TAIL`` rows, but the receive window still holds
``OLD_TAIL``: the put writes past the end of every peer's window.

racecheck expects:
    ranks 2..3: bug out-of-bounds at @tail_put
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
WINDOW_ROWS = OLD_TAIL  # sized for the old layout
D = 16


@pl.jit
def exchange_tail(
    kv: pl.Tensor[[CHUNK, D], pl.FP32],
    kv_ext: pl.Out[pl.Tensor[[TAIL + CHUNK, D], pl.FP32]],
    tail_in: pld.DistributedTensor[[WINDOW_ROWS, D], pl.FP32],
    tail_ready: pld.DistributedTensor[[1, 1], pl.INT32],
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
        kv_ext[0:TAIL, :] = tail_in[0:TAIL, :]
        kv_ext[TAIL : TAIL + CHUNK, :] = kv[:, :]
    return kv_ext


@pl.jit.host
def l3_cp_tail(
    kv: pl.Tensor[[NR, CHUNK, D], pl.FP32],
    kv_ext: pl.Out[pl.Tensor[[NR, TAIL + CHUNK, D], pl.FP32]],
):
    tail_buf = pld.alloc_window_buffer([WINDOW_ROWS, D], dtype=pl.FP32)
    ready_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        tail_in = pld.window(tail_buf, [WINDOW_ROWS, D], dtype=pl.FP32)
        tail_ready = pld.window(ready_buf, [1, 1], dtype=pl.INT32)
        exchange_tail(kv[r], kv_ext[r], tail_in, tail_ready, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="context-parallel ring exchange of a KV tail")
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
