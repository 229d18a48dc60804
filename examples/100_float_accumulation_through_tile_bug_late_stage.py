"""A branch on a floating-point sum that passes through a kernel-local tile first.

The twin of 72_float_accumulation_branch_bug_late_stage.py whose rank 0 copies the
accumulated sum into a tile made with ``pl.full`` and branches on the tile's element.
The tile remembers the load it was filled from, so the branch still depends on the
order of the two atomic adds: racecheck must follow the other order through the tile
and find the race on the side the traced run did not take.

racecheck expects:
    ranks 3: bug race read-after-write at @peek, @late
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 8


def build_tile_float_branch(nr: int):
    if nr != 3:
        raise ValueError("this example is written for 3 ranks")

    @pl.program
    class TileFloatBranch:
        @pl.function(type=pl.FunctionType.InCore)
        def step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            acc: pl.InOut[pld.DistributedTensor[[1, 1], pl.FP32]],
            cells: pl.InOut[pld.DistributedTensor[[2, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            me = pld.rank(pld.get_comm_ctx(data))
            row = pl.load(x, [0, 0], [1, SIZE])
            if me == 0:
                pl.write(acc, [0, 0], -1.0e8)
                for peer in pl.range(1, nr):
                    pld.system.notify(
                        cells, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.Set
                    )
                pld.system.wait(cells, offsets=[1, 0], expected=2, cmp=pld.WaitCmp.Ge)
                total = pl.full([1, 1], pl.FP32, pl.read(acc, [0, 0]))
                if pl.read(total, [0, 0]) > 0.5:
                    y = pl.store(row, [0, 0], y)
                else:
                    got = pld.tile.remote_load(  # @peek
                        data, peer=1, offsets=[0, 0], shape=[1, SIZE]
                    )
                    y = pl.store(got, [0, 0], y)
            else:
                pld.system.wait(cells, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
                part = 1.0e8 if me == 1 else 1.0
                pld.tile.remote_store(part, acc, peer=0, offsets=[0, 0], atomic=pld.AtomicType.Add)
                pld.system.notify(cells, peer=0, offsets=[1, 0], value=1, op=pld.NotifyOp.AtomicAdd)
                data = pl.store(row, [0, 0], data)  # @late
                y = pl.store(row, [0, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def float_branch(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            acc_buf = pld.alloc_window_buffer([1, 1], dtype=pl.FP32)
            cells_buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                acc = pld.window(acc_buf, [1, 1], dtype=pl.FP32)
                cells = pld.window(cells_buf, [2, 1], dtype=pl.INT32)
                self.step(x[r], y[r], data, acc, cells, device=r)
            return y

    return TileFloatBranch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_tile_float_branch(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    compiled(x, y)
    print(y)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
