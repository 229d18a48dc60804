"""Butterfly all-reduce that publishes every round's partial sum in the same row.

The twin of 300_allreduce_butterfly.py with a one-row ``stage`` window: in round k + 1
a rank overwrites the row its round-k partner may still be pulling. Its partner's
notify came before that partner's pull, and nothing the rank waits for comes after
it, so the store of round k + 1 and the pull of round k are unordered: a race from
P = 4 (two rounds) on, and the partner may add the next round's sum. At P = 2 there
is one round and nothing to overwrite.

racecheck expects:
    ranks 2: proved allreduce-sum
    ranks 1,3: skipped
    ranks 4,8: bug race write-after-read at @publish, @pull
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 8


def build_butterfly_one_row(nr: int, size: int = SIZE):
    """The butterfly all-reduce for ``nr`` ranks with one staging row for every round."""
    if nr < 2 or nr & (nr - 1) != 0:
        raise ValueError(f"the butterfly needs a power-of-two rank count >= 2, got {nr}")
    rounds = nr.bit_length() - 1

    @pl.program
    class ButterflyOneRow:
        @pl.function(type=pl.FunctionType.InCore)
        def butterfly_step(
            self,
            x: pl.Tensor[[1, size], pl.FP32],
            y: pl.Out[pl.Tensor[[1, size], pl.FP32]],
            stage: pl.InOut[pld.DistributedTensor[[1, size], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[1, rounds], pl.INT32]],
        ) -> pl.Tensor[[1, size], pl.FP32]:
            ctx = pld.get_comm_ctx(stage)
            my_rank = pld.rank(ctx)

            acc = pl.load(x, [0, 0], [1, size])
            for k in range(rounds):
                partner = my_rank ^ (1 << k)
                stage = pl.store(acc, [0, 0], stage)  # @publish
                pld.system.notify(
                    signal, peer=partner, offsets=[0, k], value=1, op=pld.NotifyOp.AtomicAdd
                )
                pld.system.wait(signal, offsets=[0, k], expected=1, cmp=pld.WaitCmp.Ge)
                theirs = pld.tile.remote_load(  # @pull
                    stage, peer=partner, offsets=[0, 0], shape=[1, size]
                )
                acc = pl.add(acc, theirs)
            return pl.store(acc, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, size], pl.FP32],
            y: pl.Out[pl.Tensor[[1, size], pl.FP32]],
            stage: pl.InOut[pld.DistributedTensor[[1, size], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[1, rounds], pl.INT32]],
        ) -> pl.Tensor[[1, size], pl.FP32]:
            return self.butterfly_step(x, y, stage, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def butterfly_allreduce(
            self,
            x: pl.Tensor[[nr, 1, size], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, size], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, size], pl.FP32]:
            stage_buf = pld.alloc_window_buffer([1, size], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([1, rounds], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                stage = pld.window(stage_buf, [1, size], dtype=pl.FP32)
                signal = pld.window(signal_buf, [1, rounds], dtype=pl.INT32)
                self.per_rank(x[r], y[r], stage, signal, device=r)
            return y

    return ButterflyOneRow


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
        build_butterfly_one_row(nr),
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
