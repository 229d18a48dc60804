"""A bidirectional halo exchange counted on one arrival cell per rank.

Each rank sends its first row to its predecessor and its last row to its successor;
both neighbours bump the receiver's single ``arrived`` cell with ``AtomicAdd``, and the
receiver waits for two arrivals. Two writers share the cell, so both must add:
239_halo_one_counter_bug_set_and_add.py lets the successor ``Set`` the cell instead,
which can overwrite the predecessor's increment.

racecheck expects:
    ranks 3..4: proved
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


@pl.jit
def halo(
    x: pl.Tensor[[ROWS, D], pl.FP32],
    y: pl.Out[pl.Tensor[[2, D], pl.FP32]],
    halos: pld.DistributedTensor[[2, D], pl.FP32],
    arrived: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(halos)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    prv = (me - 1 + n) % n
    nxt = (me + 1) % n
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="send"):
        pld.tensor.put(halos, nxt, x, dst_offsets=[0, 0], src_offsets=[ROWS - 1, 0], shape=[1, D])
        pld.system.notify(
            arrived, peer=nxt, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd
        )  # @from_prev
        pld.tensor.put(halos, prv, x, dst_offsets=[1, 0], src_offsets=[0, 0], shape=[1, D])
        pld.system.notify(
            arrived, peer=prv, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd
        )  # @from_next
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="receive"):
        pld.system.wait(arrived, offsets=[0, 0], expected=2, cmp=pld.WaitCmp.Ge)
        y[0:2, :] = halos[0:2, :]
    return y


@pl.jit.host
def l3_halo(
    x: pl.Tensor[[NR, ROWS, D], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, 2, D], pl.FP32]],
):
    halo_buf = pld.alloc_window_buffer([2, D], dtype=pl.FP32)
    arrived_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        halos = pld.window(halo_buf, [2, D], dtype=pl.FP32)
        arrived = pld.window(arrived_buf, [1, 1], dtype=pl.INT32)
        halo(x[r], y[r], halos, arrived, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="bidirectional halo exchange on one counter")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, ROWS, D), dtype=torch.float32)
    y = torch.zeros((nr, 2, D), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    l3_halo.compile(x, y, config=config)(x, y, config=config)
    before, after = torch.roll(x, shifts=1, dims=0), torch.roll(x, shifts=-1, dims=0)
    ok = torch.equal(y[:, 0], before[:, ROWS - 1]) and torch.equal(y[:, 1], after[:, 0])
    print("OK" if ok else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
