"""Butterfly (recursive-doubling) all-reduce: log2(P) rounds, one partner per round.

In round k rank r exchanges its partial sum with partner ``r ^ 2**k``: it publishes the
sum in row k of its ``stage`` window, notifies the partner on signal column k, waits
for the partner's notify on its own column k, pulls the partner's row k and stores
the sum of both in row k + 1. After the last round every rank holds the sum of all
ranks' inputs in its last row.

Why it is race-free: row k of a rank is written once, before the notify of round k,
and read by the partner only after the matching wait; the rank itself writes row
k + 1 next, never row k again, so no write can meet the partner's read. Each round
has its own signal column, so a notify of round k never satisfies a wait of another
round. P must be a power of two (each rank needs a partner every round), at least 2.

racecheck expects:
    ranks 1,3,5,6,7: skipped
    ranks 2,4,8: proved allreduce-sum
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 8


def build_butterfly_allreduce(nr: int, size: int = SIZE):
    """The butterfly all-reduce for ``nr`` ranks, a power of two."""
    if nr < 2 or nr & (nr - 1) != 0:
        raise ValueError(f"the butterfly needs a power-of-two rank count >= 2, got {nr}")
    rounds = nr.bit_length() - 1

    @pl.program
    class ButterflyAllreduce:
        @pl.function(type=pl.FunctionType.InCore)
        def butterfly_step(
            self,
            x: pl.Tensor[[1, size], pl.FP32],
            y: pl.Out[pl.Tensor[[1, size], pl.FP32]],
            stage: pl.InOut[pld.DistributedTensor[[rounds + 1, size], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[1, rounds], pl.INT32]],
        ) -> pl.Tensor[[1, size], pl.FP32]:
            ctx = pld.get_comm_ctx(stage)
            my_rank = pld.rank(ctx)

            acc = pl.load(x, [0, 0], [1, size])
            for k in range(rounds):
                partner = my_rank ^ (1 << k)
                stage = pl.store(acc, [k, 0], stage)
                pld.system.notify(
                    signal, peer=partner, offsets=[0, k], value=1, op=pld.NotifyOp.AtomicAdd
                )
                pld.system.wait(signal, offsets=[0, k], expected=1, cmp=pld.WaitCmp.Ge)
                theirs = pld.tile.remote_load(stage, peer=partner, offsets=[k, 0], shape=[1, size])
                acc = pl.add(acc, theirs)
            stage = pl.store(acc, [rounds, 0], stage)
            return pl.store(acc, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, size], pl.FP32],
            y: pl.Out[pl.Tensor[[1, size], pl.FP32]],
            stage: pl.InOut[pld.DistributedTensor[[rounds + 1, size], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[1, rounds], pl.INT32]],
        ) -> pl.Tensor[[1, size], pl.FP32]:
            return self.butterfly_step(x, y, stage, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def butterfly_allreduce(
            self,
            x: pl.Tensor[[nr, 1, size], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, size], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, size], pl.FP32]:
            stage_buf = pld.alloc_window_buffer([rounds + 1, size], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([1, rounds], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                stage = pld.window(stage_buf, [rounds + 1, size], dtype=pl.FP32)
                signal = pld.window(signal_buf, [1, rounds], dtype=pl.INT32)
                self.per_rank(x[r], y[r], stage, signal, device=r)
            return y

    return ButterflyAllreduce


def expected_allreduce(inputs: torch.Tensor) -> torch.Tensor:
    return inputs.sum(dim=0, keepdim=True).expand_as(inputs).clone()


def main() -> int:
    parser = argparse.ArgumentParser(description="butterfly all-reduce")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_butterfly_allreduce(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
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
