"""The twin of 260 with the literal cast to INT32: the product wraps for large counts.

``pl.cast(256, pl.INT32)`` is an INT32 scalar, so ``c * pl.cast(256, pl.INT32)`` is
INT32 × INT32, computed in INT32 (docs/model.md §1): for a count of 2^23 or more (or
below -2^23) it leaves the range, where the device wraps or is undefined. The random
input does not reach it; racecheck records the product's range as a condition on the
count, z3 picks a count that breaks it, and the run with that count is ``unknown``,
naming the line and the values (racecheck does not follow a wrap).

racecheck expects:
    ranks 2..3: unknown
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir import DistributedConfig

NR = pl.dynamic("NR")
SIZE = 8


@pl.program
class PromotedRows:
    @pl.function(type=pl.FunctionType.InCore)
    def put_row(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        count: pl.Tensor[[1], pl.INT32],
        rows: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ):
        ctx = pld.get_comm_ctx(rows)
        me = pld.rank(ctx)
        c = pl.read(count, [0])
        row = (c * pl.cast(256, pl.INT32)) // 256 - c + me  # @row
        local = pl.load(x, [0, 0], [1, SIZE])
        pld.tile.remote_store(local, rows, peer=0, offsets=[row, 0])
        pld.system.notify(signal, peer=0, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)

    @pl.function(type=pl.FunctionType.Orchestration)
    def per_rank(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        count: pl.Tensor[[1], pl.INT32],
        rows: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ):
        self.put_row(x, count, rows, signal)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def entry(
        self,
        x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
        count: pl.Tensor[[NR, 1], pl.INT32],
    ):
        rows_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            rows = pld.window(rows_buf, [NR, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [NR, 1], dtype=pl.INT32)
            self.per_rank(x[r], count[r], rows, signal, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="a row computed from an input count")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1")
    parser.add_argument("-c", "--count", type=int, default=1)
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        PromotedRows,
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    count = torch.full((nr, 1), args.count, dtype=torch.int32)
    compiled(x, count)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
