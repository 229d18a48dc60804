"""Two-phase all-reduce that leaves the tail unreduced when P does not divide SIZE.

The twin of 11_allreduce_two_phase.py without its rank-count check: the factory
computes ``chunk = size // nr`` and every rank reduces and gathers ``nr`` chunks, so
when ``nr`` does not divide ``size`` the last ``size - nr * chunk`` elements of every
output row are never written (a real PyPTO test had this shape). The protocol itself
is race-free at every P; the outputs are an all-reduce where P divides SIZE and match
no model elsewhere, so those P are a wrong result against all-reduce (issue 10.11),
without any ``--expect``.

racecheck expects:
    ranks 1: proved
    ranks 2,3,4,6,8: proved allreduce-sum
    ranks 5,7: bug wrong-result
    ranks 5,7 --expect allreduce-sum: bug wrong-result
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 48


def build_two_phase_allreduce(nr: int, size: int = SIZE):
    """The two-phase all-reduce for ``nr`` ranks; the tail past ``nr`` chunks is lost."""
    chunk = size // nr

    @pl.program
    class TwoPhaseAllreduce:
        @pl.function(type=pl.FunctionType.InCore)
        def reduce_step(
            self,
            x: pl.Tensor[[1, size], pl.FP32],
            y: pl.Out[pl.Tensor[[1, size], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, size], pl.FP32]],
            result: pl.InOut[pld.DistributedTensor[[1, size], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[2, nr], pl.INT32]],
        ) -> pl.Tensor[[1, size], pl.FP32]:
            ctx = pld.get_comm_ctx(data)
            my_rank = pld.rank(ctx)
            nranks = pld.nranks(ctx)

            local = pl.load(x, [0, 0], [1, size])
            data = pl.store(local, [0, 0], data)

            # Barrier A (row 0): every input is staged.
            for peer in pl.range(nranks):
                if peer != my_rank:
                    pld.system.notify(
                        signal, peer=peer, offsets=[0, my_rank], value=1, op=pld.NotifyOp.AtomicAdd
                    )
            for src in pl.range(nranks):
                if src != my_rank:
                    pld.system.wait(signal, offsets=[0, src], expected=1, cmp=pld.WaitCmp.Ge)

            # Reduce-scatter: this rank owns chunk my_rank of the result.
            acc = pl.load(data, [0, my_rank * chunk], [1, chunk])
            for peer in pl.range(nranks):
                if peer != my_rank:
                    part = pld.tile.remote_load(
                        data, peer=peer, offsets=[0, my_rank * chunk], shape=[1, chunk]
                    )
                    acc = pl.add(acc, part)
            result = pl.store(acc, [0, my_rank * chunk], result)

            # Barrier B (row 1): every reduced chunk is published.
            for peer in pl.range(nranks):
                if peer != my_rank:
                    pld.system.notify(
                        signal, peer=peer, offsets=[1, my_rank], value=1, op=pld.NotifyOp.AtomicAdd
                    )
            for src in pl.range(nranks):
                if src != my_rank:
                    pld.system.wait(signal, offsets=[1, src], expected=1, cmp=pld.WaitCmp.Ge)

            # All-gather: chunk c comes from its owner, rank c.
            for c in pl.range(nranks):
                reduced = pld.tile.remote_load(
                    result, peer=c, offsets=[0, c * chunk], shape=[1, chunk]
                )
                y = pl.store(reduced, [0, c * chunk], y)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, size], pl.FP32],
            y: pl.Out[pl.Tensor[[1, size], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, size], pl.FP32]],
            result: pl.InOut[pld.DistributedTensor[[1, size], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[2, nr], pl.INT32]],
        ) -> pl.Tensor[[1, size], pl.FP32]:
            return self.reduce_step(x, y, data, result, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def two_phase_allreduce(
            self,
            x: pl.Tensor[[nr, 1, size], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, size], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, size], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, size], dtype=pl.FP32)
            result_buf = pld.alloc_window_buffer(size * pl.FP32.get_byte())
            signal_buf = pld.alloc_window_buffer([2, nr], dtype=pl.INT32)
            for r in pl.range(nr):
                data = pld.window(data_buf, [1, size], dtype=pl.FP32)
                result = pld.window(result_buf, [1, size], dtype=pl.FP32)
                signal = pld.window(signal_buf, [2, nr], dtype=pl.INT32)
                self.per_rank(x[r], y[r], data, result, signal, device=r)
            return y

    return TwoPhaseAllreduce


def expected_allreduce(inputs: torch.Tensor) -> torch.Tensor:
    return inputs.sum(dim=0, keepdim=True).expand_as(inputs).clone()


def main() -> int:
    parser = argparse.ArgumentParser(description="two-phase all-reduce")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_two_phase_allreduce(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    if args.compile_only:
        return 0

    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    compiled(x, y)
    if not torch.allclose(y, expected_allreduce(x), rtol=1e-5, atol=1e-5):
        print("MISMATCH")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
