"""Shift between two hand-rolled barriers that never reset: the second call races.

The twin of 04_shift_counter_barrier.py without the ``AtomicAdd -1`` resets. One call
is correct (the exit barrier passes at once, but nothing follows it). Called again on
the same windows, every cell already holds the first call's credits, so the second
entry barrier's ``Ge 1`` passes at once and a rank reads its neighbour's window before
the neighbour restaged it.

racecheck expects:
    ranks 1: proved
    ranks 2..8: proved shift+1
    ranks 2..8 --repeat 2: bug race read-after-write at @fetch, @stage
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64


def build_counter_shift(nr: int):
    """The barrier-protected shift for ``nr`` ranks."""

    @pl.program
    class NoResetBarrierShift:
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

            local = pl.load(x, [0, 0], [1, SIZE])
            data = pl.store(local, [0, 0], data)  # @stage

            # Entry barrier: every slice is staged.
            for peer in pl.range(nr):
                if peer != my_rank:
                    pld.system.notify(
                        signal, peer=peer, offsets=[my_rank, 0], value=1, op=pld.NotifyOp.AtomicAdd
                    )
            for src in pl.range(nr):
                if src != my_rank:
                    pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)

            recv = pld.tile.remote_load(  # @fetch
                data, peer=(my_rank + 1) % nr, offsets=[0, 0], shape=[1, SIZE]
            )
            y = pl.store(recv, [0, 0], y)

            # Exit barrier: every read of our window is done.
            for peer in pl.range(nr):
                if peer != my_rank:
                    pld.system.notify(
                        signal, peer=peer, offsets=[my_rank, 0], value=1, op=pld.NotifyOp.AtomicAdd
                    )
            for src in pl.range(nr):
                if src != my_rank:
                    pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
            return y

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

    return NoResetBarrierShift


def expected_shift(inputs: torch.Tensor) -> torch.Tensor:
    return torch.roll(inputs, shifts=-1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="shift between resetting barriers")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    parser.add_argument("--iterations", type=int, default=2)
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_counter_shift(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    for _ in range(args.iterations):
        y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
        compiled(x, y)
        if not torch.equal(y, expected_shift(x)):
            print("MISMATCH")
            return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
