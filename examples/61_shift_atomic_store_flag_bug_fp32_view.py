"""Shift, bug: a float status word aliases the INT32 ready flag and releases it early.

The twin of 60_shift_atomic_store_flag.py with a status convention added: before
staging, each rank marks its left neighbour "busy" by storing FP32 1.0 through an FP32
view of the signal buffer. That view aliases the ready cell: the INT32 flag now holds
0x3F800000, which satisfies ``Ge 1``, so the reader fetches before the slice is staged.

racecheck expects:
    ranks 1: proved
    ranks 2..4: bug race at @stage, @fetch
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64


def build_status_flag_shift(nr: int):
    """The shift for ``nr`` ranks, with a float status word aliasing the flag."""

    @pl.program
    class StatusFlagShift:
        @pl.function(type=pl.FunctionType.InCore)
        def shift_step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
            status: pl.InOut[pld.DistributedTensor[[1, 1], pl.FP32]],
            marker: pl.InOut[pld.DistributedTensor[[1, 1], pl.FP32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(data)
            my_rank = pld.rank(ctx)
            left = (my_rank + nr - 1) % nr

            pl.write(marker, [0, 0], 1.0)
            busy = pl.load(marker, [0, 0], [1, 1])
            pld.tile.remote_store(busy, status, peer=left, offsets=[0, 0])  # @mark
            local = pl.load(x, [0, 0], [1, SIZE])
            data = pl.store(local, [0, 0], data)  # @stage
            pld.system.notify(signal, peer=left, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)

            pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)  # @wait
            recv = pld.tile.remote_load(  # @fetch
                data, peer=(my_rank + 1) % nr, offsets=[0, 0], shape=[1, SIZE]
            )
            y = pl.store(recv, [0, 0], y)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
            status: pl.InOut[pld.DistributedTensor[[1, 1], pl.FP32]],
            marker: pl.InOut[pld.DistributedTensor[[1, 1], pl.FP32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            return self.shift_step(x, y, data, signal, status, marker)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def shift(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
            marker_buf = pld.alloc_window_buffer([1, 1], dtype=pl.FP32)
            for r in pl.range(nr):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
                status = pld.window(signal_buf, [1, 1], dtype=pl.FP32)
                marker = pld.window(marker_buf, [1, 1], dtype=pl.FP32)
                self.per_rank(x[r], y[r], data, signal, status, marker, device=r)
            return y

    return StatusFlagShift


def expected_shift(inputs: torch.Tensor) -> torch.Tensor:
    return torch.roll(inputs, shifts=-1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="shift with status word aliasing the flag")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_status_flag_shift(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    compiled(x, y)
    if not torch.equal(y, expected_shift(x)):
        print("MISMATCH")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
