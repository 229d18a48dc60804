"""The all-gather of 17, copying row ``src`` of its target into output row ``src % 8``.

Synchronisation is 17's and holds at every P, so races, deadlocks and bounds are
proved for every P. The output is another matter: from P = 9 the copies of rows 8
and on land on rows 0 and on, and rows 8 and on are never written. Only a check of
the outputs at P = 9 or above shows it: ``--ranks all --expect allgather`` checks the
outputs concretely at the P the obligations name (here the first P at which each
case of ``src % 8`` occurs, and the first at which two copies write one row) and
reports the wrong result at P = 9.

racecheck expects:
    ranks 2..8 --expect allgather: proved allgather
    ranks 9 --expect allgather: bug wrong-result
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 32


def build_allgather(nr: int):
    """All-gather of ``[1, SIZE]`` slices across ``nr`` ranks."""

    @pl.program
    class PutAllgather:
        @pl.function(type=pl.FunctionType.InCore)
        def gather_step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, SIZE], pl.FP32]],
            target: pl.InOut[pld.DistributedTensor[[nr, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[nr, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(target)
            my_rank = pld.rank(ctx)
            nranks = pld.nranks(ctx)

            for peer in pl.range(nranks):
                pld.tensor.put(target, peer, x, [my_rank, 0], [0, 0], [1, SIZE])

            for peer in pl.range(nranks):
                if peer != my_rank:
                    pld.system.notify(
                        signal, peer=peer, offsets=[my_rank, 0], value=1, op=pld.NotifyOp.AtomicAdd
                    )
            for src in pl.range(nranks):
                if src != my_rank:
                    pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)

            for src in pl.range(nranks):
                row = pl.load(target, [src, 0], [1, SIZE])
                y = pl.store(row, [src % 8, 0], y)  # @copy
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, SIZE], pl.FP32]],
            target: pl.InOut[pld.DistributedTensor[[nr, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[nr, SIZE], pl.FP32]:
            return self.gather_step(x, y, target, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def allgather(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, nr, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, nr, SIZE], pl.FP32]:
            target_buf = pld.alloc_window_buffer([nr, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                target = pld.window(target_buf, [nr, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                self.per_rank(x[r], y[r], target, signal, device=r)
            return y

    return PutAllgather


def expected_allgather(inputs: torch.Tensor) -> torch.Tensor:
    nr = inputs.shape[0]
    return inputs.reshape(1, nr, SIZE).expand(nr, nr, SIZE).clone()


def main() -> int:
    parser = argparse.ArgumentParser(description="all-gather with put")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_allgather(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, nr, SIZE), dtype=torch.float32)
    compiled(x, y)
    print("OK" if torch.equal(y, expected_allgather(x)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
