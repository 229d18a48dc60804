"""Reduce-scatter: rank r ends with the sum over ranks of chunk r, and only that chunk.

Each rank stages its slice, joins a row-per-rank barrier, and then sums chunk
``my_rank`` of every rank's window into its output, which is one chunk long
(``SIZE // nr``; the factory rejects rank counts that do not divide SIZE).

racecheck expects:
    ranks 1: proved
    ranks 2,3,4,6,8: proved reduce_scatter-sum
    ranks 5,7: skipped
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 48


def build_reduce_scatter(nr: int):
    """Reduce-scatter (Sum) of ``[1, SIZE]`` slices into ``nr`` chunks."""
    if SIZE % nr != 0:
        raise ValueError(f"SIZE={SIZE} must be divisible by the rank count, got {nr}")
    chunk = SIZE // nr

    @pl.program
    class ReduceScatter:
        @pl.function(type=pl.FunctionType.InCore)
        def scatter_step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, chunk], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[1, chunk], pl.FP32]:
            ctx = pld.get_comm_ctx(data)
            my_rank = pld.rank(ctx)
            nranks = pld.nranks(ctx)

            local = pl.load(x, [0, 0], [1, SIZE])
            data = pl.store(local, [0, 0], data)

            for peer in pl.range(nranks):
                if peer != my_rank:
                    pld.system.notify(
                        signal, peer=peer, offsets=[my_rank, 0], value=1, op=pld.NotifyOp.AtomicAdd
                    )
            for src in pl.range(nranks):
                if src != my_rank:
                    pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)

            acc = pl.load(data, [0, my_rank * chunk], [1, chunk])
            for peer in pl.range(nranks):
                if peer != my_rank:
                    part = pld.tile.remote_load(
                        data, peer=peer, offsets=[0, my_rank * chunk], shape=[1, chunk]
                    )
                    acc = pl.add(acc, part)
            return pl.store(acc, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, chunk], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[1, chunk], pl.FP32]:
            return self.scatter_step(x, y, data, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def reduce_scatter(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, chunk], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, chunk], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(nr):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                self.per_rank(x[r], y[r], data, signal, device=r)
            return y

    return ReduceScatter


def expected_reduce_scatter(inputs: torch.Tensor) -> torch.Tensor:
    nr = inputs.shape[0]
    summed = inputs.sum(dim=0).reshape(nr, 1, SIZE // nr)
    return summed


def main() -> int:
    parser = argparse.ArgumentParser(description="reduce-scatter")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_reduce_scatter(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE // nr), dtype=torch.float32)
    compiled(x, y)
    ok = torch.allclose(y, expected_reduce_scatter(x), rtol=1e-5, atol=1e-5)
    print("OK" if ok else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
