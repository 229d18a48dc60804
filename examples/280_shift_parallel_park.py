"""Shift behind the builtin barrier, each rank first parking its slice in every row of a
scratch window from a ``pl.parallel`` loop: ``y[r] = x[(r + 1) % N]``.

The loop's iterations may run concurrently (PyPTO's ``pl.parallel``), and they may:
iteration ``p`` writes row ``p`` of a ``[nr, SIZE]`` scratch window, so no two of
them touch one byte at any P. Its twin (tests/fixtures/allp_parallel_wrapped_row.py)
parks in row ``p % 8`` of an 8-row window, where iterations ``p`` and ``p + 8`` share
a row from P = 9, which racecheck refuses there (``unknown``). ``--ranks all`` proves
this one for every P (no two iterations of the loop conflict at any P).

racecheck expects:
    ranks 1: proved
    ranks 2..9: proved shift+1
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64


def build_shift(nr: int):
    ROWS = nr  # noqa: N806 - a shape constant of the program
    """The builtin-barrier shift for ``nr`` ranks."""

    @pl.program
    class BuiltinBarrierShift:
        @pl.function(type=pl.FunctionType.InCore)
        def shift_step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            scratch: pl.InOut[pld.DistributedTensor[[ROWS, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(data)
            my_rank = pld.rank(ctx)
            nranks = pld.nranks(ctx)

            local = pl.load(x, [0, 0], [1, SIZE])
            for p in pl.parallel(nranks):
                scratch = pl.store(local, [p, 0], scratch)  # @park
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
            scratch: pl.InOut[pld.DistributedTensor[[ROWS, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            return self.shift_step(x, y, data, scratch, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def shift(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            scratch_buf = pld.alloc_window_buffer([ROWS, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(nr):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                scratch = pld.window(scratch_buf, [ROWS, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                self.per_rank(x[r], y[r], data, scratch, signal, device=r)
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
