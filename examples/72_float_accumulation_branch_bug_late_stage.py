"""A branch on a floating-point sum accumulated by atomic adds: the order of the adds
decides the branch, and one side of it races.

Rank 0 sets its FP32 accumulator to -1e8 and releases ranks 1 and 2, which atomically
add 1e8 and 1.0 into it and arrive on rank 0's counter. Floating-point addition is
not associative: (-1e8 + 1e8) + 1 is 1, but (-1e8 + 1) + 1e8 is 0 in FP32, so the sum
rank 0 reads depends on which add lands first. When it is not above 0.5, rank 0 reads
rank 1's window, which rank 1 fills only after it arrived. The run where rank 1 adds
first takes the safe side; racecheck must follow the other order to find the race.

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


def build_float_branch(nr: int):
    if nr != 3:
        raise ValueError("this example is written for 3 ranks")

    @pl.program
    class FloatBranch:
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
                if pl.read(acc, [0, 0]) > 0.5:
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

    return FloatBranch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_float_branch(nr),
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
