"""A row count published by two Sets to one cell: the data is safe either way, the cell is not.

The twin of example 70: ranks 1 and 2 each stage one row into rank 0's inbox, ``Set``
rank 0's ``count`` cell (to 2 and 1) and arrive on rank 0's ``done`` counter, and both
stage before they arrive. ``count`` is still 1 or 2 depending on which Set lands last,
so rank 0 copies one row or two, and both paths read only rows already staged. But a
``Set`` is a plain, non-atomic 32-bit store in PyPTO (docs/model.md): two unordered
Sets of different values to one cell are a write-after-write race, which racecheck
reports on the two Sets.

racecheck expects:
    ranks 3: bug race write-after-write at @set_two, @set_one
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 8


def build_last_set_safe(nr: int):
    if nr != 3:
        raise ValueError("this example is written for 3 ranks")

    @pl.program
    class LastSetSafe:
        @pl.function(type=pl.FunctionType.InCore)
        def step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[2, SIZE], pl.FP32]],
            inbox: pl.InOut[pld.DistributedTensor[[2, SIZE], pl.FP32]],
            cells: pl.InOut[pld.DistributedTensor[[2, 1], pl.INT32]],
        ) -> pl.Tensor[[2, SIZE], pl.FP32]:
            me = pld.rank(pld.get_comm_ctx(inbox))
            row = pl.load(x, [0, 0], [1, SIZE])
            if me == 1:
                pld.tile.remote_store(row, inbox, peer=0, offsets=[0, 0])
                pld.system.notify(  # @set_two
                    cells, peer=0, offsets=[0, 0], value=2, op=pld.NotifyOp.Set
                )
                pld.system.notify(cells, peer=0, offsets=[1, 0], value=1, op=pld.NotifyOp.AtomicAdd)
            if me == 2:
                pld.tile.remote_store(row, inbox, peer=0, offsets=[1, 0])
                pld.system.notify(  # @set_one
                    cells, peer=0, offsets=[0, 0], value=1, op=pld.NotifyOp.Set
                )
                pld.system.notify(cells, peer=0, offsets=[1, 0], value=1, op=pld.NotifyOp.AtomicAdd)
            if me == 0:
                pld.system.wait(cells, offsets=[1, 0], expected=2, cmp=pld.WaitCmp.Ge)
                count = pl.read(cells, [0, 0])
                for i in pl.range(count):
                    got = pl.load(inbox, [i, 0], [1, SIZE])
                    y = pl.store(got, [i, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def last_set(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 2, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 2, SIZE], pl.FP32]:
            inbox_buf = pld.alloc_window_buffer([2, SIZE], dtype=pl.FP32)
            cells_buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                inbox = pld.window(inbox_buf, [2, SIZE], dtype=pl.FP32)
                cells = pld.window(cells_buf, [2, 1], dtype=pl.INT32)
                self.step(x[r], y[r], inbox, cells, device=r)
            return y

    return LastSetSafe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_last_set_safe(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 2, SIZE), dtype=torch.float32)
    compiled(x, y)
    print(y)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
