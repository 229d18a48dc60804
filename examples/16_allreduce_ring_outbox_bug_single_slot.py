"""Ring all-reduce with a single outbox slot: a rank refills it before its neighbour read it.

The twin of 15_allreduce_ring_outbox.py that saves window memory by publishing every
round's chunk in row 0 of a one-row outbox. Rank r refills the slot at the end of
round k, right after its own wait on the left neighbour; nothing makes it wait for
its right neighbour to have pulled round k's chunk first (that only happens nr - 1
hops later around the ring). The right neighbour can then pull round k + 1's chunk
in round k: a write-after-read race, at every rank count the ring accepts.

racecheck expects:
    ranks 1,5,7: skipped
    ranks 2,3,4,6,8: bug race write-after-read at @pull, @refill
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 48


def build_ring_allreduce(nr: int):
    """The outbox ring all-reduce for ``nr`` ranks."""
    if nr < 2:
        raise ValueError(f"the ring needs at least 2 ranks, got {nr}")
    if SIZE % nr != 0:
        raise ValueError(f"SIZE={SIZE} must be divisible by the rank count, got {nr}")
    chunk = SIZE // nr
    rounds = 2 * (nr - 1)

    @pl.program
    class RingSingleSlotAllreduce:
        @pl.function(type=pl.FunctionType.InCore)
        def ring_step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            scratch: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            outbox: pl.InOut[pld.DistributedTensor[[1, chunk], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[rounds, nr], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(scratch)
            my_rank = pld.rank(ctx)
            nranks = pld.nranks(ctx)
            left = (my_rank - 1 + nranks) % nranks
            right = (my_rank + 1) % nranks

            staged = pl.load(x, [0, 0], [1, SIZE])
            scratch = pl.store(staged, [0, 0], scratch)
            first = pl.load(x, [0, my_rank * chunk], [1, chunk])
            outbox = pl.store(first, [0, 0], outbox)
            pld.system.notify(
                signal, peer=right, offsets=[0, my_rank], value=1, op=pld.NotifyOp.AtomicAdd
            )

            for k in pl.range(rounds):
                c = (my_rank - k - 1 + 2 * nranks) % nranks
                pld.system.wait(signal, offsets=[k, left], expected=1, cmp=pld.WaitCmp.Ge)
                recv = pld.tile.remote_load(  # @pull
                    outbox, peer=left, offsets=[0, 0], shape=[1, chunk]
                )
                if k < nranks - 1:
                    own = pl.load(scratch, [0, c * chunk], [1, chunk])
                    recv = pl.add(own, recv)
                scratch = pl.store(recv, [0, c * chunk], scratch)
                if k < rounds - 1:
                    outbox = pl.store(recv, [0, 0], outbox)  # @refill
                    pld.system.notify(
                        signal,
                        peer=right,
                        offsets=[k + 1, my_rank],
                        value=1,
                        op=pld.NotifyOp.AtomicAdd,
                    )

            reduced = pl.load(scratch, [0, 0], [1, SIZE])
            return pl.store(reduced, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            scratch: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            outbox: pl.InOut[pld.DistributedTensor[[1, chunk], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[rounds, nr], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            return self.ring_step(x, y, scratch, outbox, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def ring_allreduce(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            scratch_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            outbox_buf = pld.alloc_window_buffer([1, chunk], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([rounds, nr], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                scratch = pld.window(scratch_buf, [1, SIZE], dtype=pl.FP32)
                outbox = pld.window(outbox_buf, [1, chunk], dtype=pl.FP32)
                signal = pld.window(signal_buf, [rounds, nr], dtype=pl.INT32)
                self.per_rank(x[r], y[r], scratch, outbox, signal, device=r)
            return y

    return RingSingleSlotAllreduce


def expected_allreduce(inputs: torch.Tensor) -> torch.Tensor:
    return inputs.sum(dim=0, keepdim=True).expand_as(inputs).clone()


def main() -> int:
    parser = argparse.ArgumentParser(description="ring all-reduce with outboxes")
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
