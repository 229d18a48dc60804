"""The hand-off of 120_ring_allreduce_then_handoff.py started before the ring all-reduce.

Each rank passes its input to its right neighbour through ``inbox`` and announces it
with an AtomicAdd on the neighbour's signal cell ``[1, me]``, and only then
all-reduces ``data`` with ``pld.tensor.allreduce(..., mode="ring")`` on the same
signal window. The InCore ring announces rank ``me`` in cell ``[row, me]`` of every
row (docs/model.md): the hand-off's AtomicAdd lands in the ring's row-1 cell, so the
neighbour passes its first row-1 barrier before this rank has announced row 1, and
reads this rank's reduce-scatter segment before it is stored. Modelled as a mesh
(cells ``[p, 0]``), the hand-off's cell looked free.

racecheck expects:
    ranks 2..4: bug race read-after-write at @call
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 24


def build_early_handoff(nr: int):
    rows = 2 * (nr - 1)

    @pl.program
    class EarlyHandoff:
        @pl.function(type=pl.FunctionType.InCore)
        def step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            total: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            received: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pld.DistributedTensor[[1, SIZE], pl.FP32],
            inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
            sig: pld.DistributedTensor[[rows, nr], pl.INT32],
        ):
            ctx = pld.get_comm_ctx(data)
            me = pld.rank(ctx)
            right = (me + 1) % pld.nranks(ctx)
            left = (me + pld.nranks(ctx) - 1) % pld.nranks(ctx)
            tile = pl.load(x, [0, 0], [1, SIZE])
            data = pl.store(tile, [0, 0], data)
            pld.tile.remote_store(tile, inbox, peer=right, offsets=[0, 0])
            pld.system.notify(sig, peer=right, offsets=[1, me], value=1, op=pld.NotifyOp.AtomicAdd)
            data = pld.tensor.allreduce(data, sig, mode="ring")  # @call
            pld.system.wait(sig, offsets=[1, left], expected=1, cmp=pld.WaitCmp.Ge)
            pld.system.notify(sig, peer=me, offsets=[1, left], value=-1, op=pld.NotifyOp.AtomicAdd)
            total = pl.store(pl.load(data, [0, 0], [1, SIZE]), [0, 0], total)
            return pl.store(pl.load(inbox, [0, 0], [1, SIZE]), [0, 0], received)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            total: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
            received: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ):
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            inbox_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            sig_buf = pld.alloc_window_buffer([rows, nr], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                self.step(
                    x[r],
                    total[r],
                    received[r],
                    pld.window(data_buf, [1, SIZE], dtype=pl.FP32),
                    pld.window(inbox_buf, [1, SIZE], dtype=pl.FP32),
                    pld.window(sig_buf, [rows, nr], dtype=pl.INT32),
                    device=r,
                )
            return total

    return EarlyHandoff


def main() -> int:
    parser = argparse.ArgumentParser(description="a hand-off, then a ring all-reduce")
    parser.add_argument("-d", "--device", default="0,1,2,3")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_early_handoff(nr),
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE))
    total = torch.zeros_like(x)
    received = torch.zeros_like(x)
    compiled(x, total, received)
    ok = torch.allclose(total, x.sum(dim=0, keepdim=True).expand_as(total), rtol=1e-4, atol=1e-5)
    ok = ok and torch.equal(received, torch.roll(x, shifts=1, dims=0))
    print("OK" if ok else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
