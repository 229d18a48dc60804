"""Shift whose ready flags are raised by atomic INT32 stores instead of notifies.

``y[r] = x[(r + 1) % N]``. Each rank stages its slice in its window, then raises its
left neighbour's ready cell ``[0, 0]`` with ``pld.tile.remote_store(..., atomic=Add)``
of an INT32 tile holding 1 — an atomic add into a signal cell, as a notify would do.
The reader waits ``Ge 1`` on its own cell and fetches from its right neighbour. Every
engine must see the atomic store raise the cell: ignoring it would report a deadlock.

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

SIZE = 64


def build_atomic_flag_shift(nr: int):
    """The shift for ``nr`` ranks, flags raised by atomic stores."""

    @pl.program
    class AtomicFlagShift:
        @pl.function(type=pl.FunctionType.InCore)
        def shift_step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
            one: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(data)
            my_rank = pld.rank(ctx)
            left = (my_rank + nr - 1) % nr

            local = pl.load(x, [0, 0], [1, SIZE])
            data = pl.store(local, [0, 0], data)  # @stage
            pl.write(one, [0, 0], 1)
            credit = pl.load(one, [0, 0], [1, 1])
            pld.tile.remote_store(  # @raise
                credit, signal, peer=left, offsets=[0, 0], atomic=pld.AtomicType.Add
            )

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
            one: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            return self.shift_step(x, y, data, signal, one)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def shift(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
            one_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
            for r in pl.range(nr):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
                one = pld.window(one_buf, [1, 1], dtype=pl.INT32)
                self.per_rank(x[r], y[r], data, signal, one, device=r)
            return y

    return AtomicFlagShift


def expected_shift(inputs: torch.Tensor) -> torch.Tensor:
    return torch.roll(inputs, shifts=-1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="shift with flags raised by atomic stores")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_atomic_flag_shift(nr),
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
