"""Ring all-reduce in place, bug: each round notifies the right neighbour before storing.

The twin of 14_allreduce_ring.py with the notify that ends a round moved above the
store of the chunk it announces (the push side's "notify before the data write"). The
right neighbour's wait then passes while the chunk still holds the previous round's
value, and it pulls stale data: a read-after-write race between its remote_load and the
store. At P=2 the two neighbours are the same rank and the race is already there.

racecheck expects:
    ranks 1,5,7: skipped
    ranks 2,3,4,6,8: bug race read-after-write at @pull, @combine
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 48


def build_ring_allreduce(nr: int, size: int = SIZE):
    """The in-place ring all-reduce for ``nr`` ranks."""
    if nr < 2:
        raise ValueError(f"the ring needs at least 2 ranks, got {nr}")
    if size % nr != 0:
        raise ValueError(f"size={size} must be divisible by the rank count, got {nr}")
    chunk = size // nr
    rounds = 2 * (nr - 1)

    @pl.program
    class RingAllreduceEarlyNotify:
        @pl.function(type=pl.FunctionType.InCore)
        def ring_step(
            self,
            x: pl.Tensor[[1, size], pl.FP32],
            y: pl.Out[pl.Tensor[[1, size], pl.FP32]],
            scratch: pl.InOut[pld.DistributedTensor[[1, size], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[rounds, nr], pl.INT32]],
        ) -> pl.Tensor[[1, size], pl.FP32]:
            ctx = pld.get_comm_ctx(scratch)
            my_rank = pld.rank(ctx)
            nranks = pld.nranks(ctx)
            left = (my_rank - 1 + nranks) % nranks
            right = (my_rank + 1) % nranks

            staged = pl.load(x, [0, 0], [1, size])
            scratch = pl.store(staged, [0, 0], scratch)
            pld.system.notify(
                signal, peer=right, offsets=[0, my_rank], value=1, op=pld.NotifyOp.AtomicAdd
            )

            for k in pl.range(rounds):
                c = (my_rank - k - 1 + 2 * nranks) % nranks
                pld.system.wait(signal, offsets=[k, left], expected=1, cmp=pld.WaitCmp.Ge)
                recv = pld.tile.remote_load(  # @pull
                    scratch, peer=left, offsets=[0, c * chunk], shape=[1, chunk]
                )
                if k < nranks - 1:
                    own = pl.load(scratch, [0, c * chunk], [1, chunk])
                    recv = pl.add(own, recv)
                if k < rounds - 1:
                    pld.system.notify(
                        signal,
                        peer=right,
                        offsets=[k + 1, my_rank],
                        value=1,
                        op=pld.NotifyOp.AtomicAdd,
                    )
                scratch = pl.store(recv, [0, c * chunk], scratch)  # @combine

            reduced = pl.load(scratch, [0, 0], [1, size])
            return pl.store(reduced, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, size], pl.FP32],
            y: pl.Out[pl.Tensor[[1, size], pl.FP32]],
            scratch: pl.InOut[pld.DistributedTensor[[1, size], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[rounds, nr], pl.INT32]],
        ) -> pl.Tensor[[1, size], pl.FP32]:
            return self.ring_step(x, y, scratch, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def ring_allreduce(
            self,
            x: pl.Tensor[[nr, 1, size], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, size], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, size], pl.FP32]:
            scratch_buf = pld.alloc_window_buffer([1, size], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([rounds, nr], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                scratch = pld.window(scratch_buf, [1, size], dtype=pl.FP32)
                signal = pld.window(signal_buf, [rounds, nr], dtype=pl.INT32)
                self.per_rank(x[r], y[r], scratch, signal, device=r)
            return y

    return RingAllreduceEarlyNotify


def expected_allreduce(inputs: torch.Tensor) -> torch.Tensor:
    return inputs.sum(dim=0, keepdim=True).expand_as(inputs).clone()


def main() -> int:
    parser = argparse.ArgumentParser(description="ring all-reduce")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_ring_allreduce(nr),
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
