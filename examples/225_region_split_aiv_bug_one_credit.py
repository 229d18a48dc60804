"""224_region_split_aiv_halves.py whose ``arrive`` region waits for one notify of two.

Each AIV sub-lane of the ``push`` region stores its half into the right neighbour's
``inbox`` and notifies, but ``arrive`` waits only until the counter reaches 1: once the
left neighbour's first sub-lane has notified, its other sub-lane's half can still be
landing while ``fetch`` copies ``inbox`` out. At one rank the neighbour is the rank
itself, whose ``fetch`` reads the window its own ``push`` writes: the runtime orders it
after the whole region, both sub-lanes (PyPTO #1683), and it is correct.

racecheck expects:
    ranks 1: proved
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


@pl.jit
def per_rank(
    x: pl.Tensor[[SIZE, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[SIZE, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[SIZE, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="push"):
        for aiv_id in pl.split_aiv(2, mode=pl.SplitMode.NONE):
            rows = pl.load(x, [aiv_id * HALF, 0], [HALF, SIZE])
            pld.tile.remote_store(rows, inbox, peer=right, offsets=[aiv_id * HALF, 0])  # @push
            pld.system.notify(
                signal, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd
            )
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="arrive") as arrived:
        pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="fetch", deps=[arrived]):
        recv = pl.load(inbox, [0, 0], [SIZE, SIZE])  # @fetch
        pl.store(recv, [0, 0], y)
    return y


@pl.jit.host
def region_split_aiv_one_credit(
    x: pl.Tensor[[NR, SIZE, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, SIZE, SIZE], pl.FP32]],
):
    inbox_buf = pld.alloc_window_buffer([SIZE, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        inbox = pld.window(inbox_buf, [SIZE, SIZE], dtype=pl.FP32)
        signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
        per_rank(x[r], y[r], inbox, signal, device=r)


def expected(x: torch.Tensor) -> torch.Tensor:
    return torch.roll(x, shifts=1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="arrive waits for one half")
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
    compiled = region_split_aiv_one_credit.compile(x, y, config=config)
    compiled(x, y, config=config)
    print("OK" if torch.equal(y, expected(x)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
