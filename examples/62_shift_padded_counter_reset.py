"""Shift behind a barrier whose padded counters are reset with one wide zero tile.

``y[r] = x[(r + 1) % N]``. The signal window pads each sender's counter to a row of
16 INT32 (one 64-byte line per cell, column 0 used). After the barrier and the fetch,
each rank clears its whole signal window with ONE zero tile of ``N * 16`` INT32
(its slice times 0, through a flat view of the signal buffer) — wider than
64 elements from N = 5 on. Every arrival on this rank's cells happened before the wait
that consumed it, so the reset is ordered after all of them: no race, at any N.

racecheck expects:
    ranks 1: proved
    ranks 2..6: proved shift+1
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

PAD = 16  # INT32 per counter row: one 64-byte line per cell


def build_padded_reset_shift(nr: int):
    """The shift for ``nr`` ranks, padded counters reset after use."""

    SIZE = nr * PAD  # one slice zeroes the whole signal window through a flat view

    @pl.program
    class PaddedResetShift:
        @pl.function(type=pl.FunctionType.InCore)
        def shift_step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, PAD], pl.INT32]],
            flat: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(data)
            my_rank = pld.rank(ctx)

            local = pl.load(x, [0, 0], [1, SIZE])
            data = pl.store(local, [0, 0], data)  # @stage
            for peer in pl.range(nr):
                if peer != my_rank:
                    pld.system.notify(  # @arrive
                        signal, peer=peer, offsets=[my_rank, 0], value=1, op=pld.NotifyOp.AtomicAdd
                    )
            for src in pl.range(nr):
                if src != my_rank:
                    pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
            recv = pld.tile.remote_load(  # @fetch
                data, peer=(my_rank + 1) % nr, offsets=[0, 0], shape=[1, SIZE]
            )
            y = pl.store(recv, [0, 0], y)
            zeros = pl.tile.full([1, SIZE], pl.INT32, 0)
            flat = pl.store(zeros, [0, 0], flat)  # @reset
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, PAD], pl.INT32]],
            flat: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            return self.shift_step(x, y, data, signal, flat)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def shift(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([nr, PAD], dtype=pl.INT32)
            for r in pl.range(nr):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, PAD], dtype=pl.INT32)
                flat = pld.window(signal_buf, [1, SIZE], dtype=pl.INT32)
                self.per_rank(x[r], y[r], data, signal, flat, device=r)
            return y

    return PaddedResetShift


def expected_shift(inputs: torch.Tensor) -> torch.Tensor:
    return torch.roll(inputs, shifts=-1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="shift, padded counters reset after use")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_padded_reset_shift(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, nr * PAD), dtype=torch.float32)
    y = torch.zeros((nr, 1, nr * PAD), dtype=torch.float32)
    compiled(x, y)
    if not torch.equal(y, expected_shift(x)):
        print("MISMATCH")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
