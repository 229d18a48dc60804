"""228_dispatched_split_aiv_guarded_notify.py with one notify, of both halves, by sub-lane 0.

Sub-lane 0 notifies with value 2 on behalf of both sub-lanes (guarded with ``aiv_id ==
0``), but nothing orders sub-lane 1's store before it: PyPTO's guarded notify must
order the other sub-lane's writes itself. The neighbour's sub-lane 0 can see the
counter at 2 and copy ``inbox`` out while this rank's sub-lane 1's half is still to
land.

racecheck expects:
    ranks 1: bug race write-after-read at @fetch, @push ranks 0 0
    ranks 2..3: bug race read-after-write at @fetch, @push ranks 1 0
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
SIZE = 16
HALF = SIZE // 2


@pl.jit.incore
def shift_halves(
    x: pl.Tensor[[SIZE, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[SIZE, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[SIZE, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.NONE):
        rows = pl.load(x, [aiv_id * HALF, 0], [HALF, SIZE])
        pld.tile.remote_store(rows, inbox, peer=right, offsets=[aiv_id * HALF, 0])  # @push
        if aiv_id == 0:
            pld.system.notify(
                signal, peer=right, offsets=[0, 0], value=2, op=pld.NotifyOp.AtomicAdd
            )
            pld.system.wait(signal, offsets=[0, 0], expected=2, cmp=pld.WaitCmp.Ge)
            recv = pl.load(inbox, [0, 0], [SIZE, SIZE])  # @fetch
            y = pl.store(recv, [0, 0], y)
    return y


@pl.jit.host
def dispatched_split_aiv_guarded_notify(
    x: pl.Tensor[[NR, SIZE, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, SIZE, SIZE], pl.FP32]],
):
    inbox_buf = pld.alloc_window_buffer([SIZE, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        inbox = pld.window(inbox_buf, [SIZE, SIZE], dtype=pl.FP32)
        signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
        shift_halves(x[r], y[r], inbox, signal, device=r)


def expected(x: torch.Tensor) -> torch.Tensor:
    return torch.roll(x, shifts=1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="sub-lane 0 notifies for both")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, SIZE, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, SIZE, SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    compiled = dispatched_split_aiv_guarded_notify.compile(x, y, config=config)
    compiled(x, y, config=config)
    print("OK" if torch.equal(y, expected(x)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
