"""Shift through a window, ordered by the builtin barrier: ``y[r] = x[(r + 1) % N]``.

Every rank stages its slice, calls ``pld.tensor.barrier`` and then reads its right
neighbour's window. The builtin is a self-clearing signal barrier (every rank adds 1
to each peer's cell ``[me, 0]``, waits for its own cells, then subtracts what it
received), so the result proves the barrier ordered each store before the peer's
load. Called twice on the same windows (``--repeat 2``) it is not safe: a fast rank
restages its slice for the second call while its left neighbour may still be reading
the first one, since nothing follows the read.

racecheck expects:
    ranks 1: proved
    ranks 2..8: proved shift+1
    ranks 2..8 --repeat 2: bug race write-after-read at @fetch, @stage
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64


def build_shift(nr: int):
    """The builtin-barrier shift for ``nr`` ranks."""

    @pl.program
    class BuiltinBarrierShift:
        @pl.function(type=pl.FunctionType.InCore)
        def shift_step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(data)
            my_rank = pld.rank(ctx)
            nranks = pld.nranks(ctx)

            local = pl.load(x, [0, 0], [1, SIZE])
            data = pl.store(local, [0, 0], data)  # @stage

            signal = pld.tensor.barrier(signal)

            peer = (my_rank + 1) % nranks
            recv = pld.tile.remote_load(data, peer=peer, offsets=[0, 0], shape=[1, SIZE])  # @fetch
            return pl.store(recv, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            return self.shift_step(x, y, data, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def shift(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(nr):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                self.per_rank(x[r], y[r], data, signal, device=r)
            return y

    return BuiltinBarrierShift


def expected_shift(inputs: torch.Tensor) -> torch.Tensor:
    return torch.roll(inputs, shifts=-1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="shift behind pld.tensor.barrier")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_shift(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    compiled(x, y)
    print("OK" if torch.equal(y, expected_shift(x)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
