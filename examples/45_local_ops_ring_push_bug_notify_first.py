"""The ring push of ``44_local_ops_ring_push.py`` with the notify before the put.

The sender tells its right neighbour the row is there, then puts it through the
staging tile (``pld.tile.put``): the neighbour can wake up and copy its inbox
before the put lands (docs/guide.md, bug 2). racecheck reports the race between the
put and the receiver's load of a column of its inbox. On one rank the notify, put and
wait run in program order: proved.

racecheck expects:
    ranks 2..4: bug race read-after-write at @copy, @push
    ranks 1: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

ROWS = 8
COLS = 16


def build_ring_push(nr: int):
    @pl.program
    class RingPush:
        @pl.function(type=pl.FunctionType.InCore)
        def compute(
            self,
            x: pl.Tensor[[ROWS, COLS], pl.FP32],
            w: pl.Tensor[[COLS, COLS], pl.FP32],
            stage: pl.Out[pld.DistributedTensor[[1, ROWS], pl.FP32]],
        ) -> pld.DistributedTensor[[1, ROWS], pl.FP32]:
            lhs = pl.move(pl.load(x, [0, 0], [ROWS, COLS]), target_memory=pl.MemorySpace.Left)
            weights = pl.load(w, [0, 0], [COLS, COLS], target_memory=pl.MemorySpace.Mat)
            rhs = pl.move(weights, target_memory=pl.Mem.Right)
            product = pl.matmul(lhs, rhs)
            scratch = pl.tile.create([ROWS, COLS], pl.FP32, target_memory=pl.MemorySpace.Vec)
            sums = pl.tile.row_sum(product, scratch)
            row = pl.tile.reshape(sums, [1, ROWS])
            biased = pl.add(
                pl.add(row, pl.tile.full([1, ROWS], pl.FP32, 0.5)), pl.const(1, pl.FP32)
            )
            return pl.store(biased, offsets=[0, 0], output_tensor=stage)

        @pl.function(type=pl.FunctionType.InCore)
        def push(
            self,
            stage: pld.DistributedTensor[[1, ROWS], pl.FP32],
            inbox: pl.InOut[pld.DistributedTensor[[1, ROWS], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
            y: pl.Out[pl.Tensor[[1, ROWS], pl.FP32]],
            ctx: pld.CommCtxType,
        ) -> pl.Tensor[[1, ROWS], pl.FP32]:
            me = pld.rank(ctx)
            n = pld.nranks(ctx)
            right = (me + 1) % n
            left = pl.array.create(1, pl.INT32)
            left[0] = (me + n - 1) % n
            staging = pl.tile.create([1, ROWS], pl.FP32, target_memory=pl.MemorySpace.Vec)
            pld.system.notify(
                signal, peer=right, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd
            )
            pld.tile.put(inbox, right, stage, staging, [0, 0], [0, 0], [1, ROWS])  # @push
            pld.system.wait(signal, offsets=[left[0], 0], expected=1, cmp=pld.WaitCmp.Ge)
            received = pl.create_tensor([1, ROWS], dtype=pl.FP32)
            for col in pl.parallel(ROWS):
                column = pl.load(pl.slice(inbox, [1, 1], [0, col]), [0, 0], [1, 1])  # @copy
                received = pl.assemble(received, column, [0, col])
            for col in pl.unroll(0, ROWS, 2):
                pair = pl.load(received, offsets=[0, col], shapes=[1, 2])
                y = pl.store(pair, offsets=[0, col], output_tensor=y)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[ROWS, COLS], pl.FP32],
            w: pl.Tensor[[COLS, COLS], pl.FP32],
            stage: pl.InOut[pld.DistributedTensor[[1, ROWS], pl.FP32]],
            inbox: pl.InOut[pld.DistributedTensor[[1, ROWS], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
            y: pl.Out[pl.Tensor[[1, ROWS], pl.FP32]],
        ) -> pl.Tensor[[1, ROWS], pl.FP32]:
            ctx = pld.get_comm_ctx(inbox)
            stage = self.compute(x, w, stage)
            return self.push(stage, inbox, signal, y, ctx)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            x: pl.Tensor[[nr, ROWS, COLS], pl.FP32],
            w: pl.Tensor[[COLS, COLS], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, ROWS], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, ROWS], pl.FP32]:
            stage_buf = pld.alloc_window_buffer([1, ROWS], dtype=pl.FP32)
            inbox_buf = pld.alloc_window_buffer([1, ROWS], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                stage = pld.window(stage_buf, [1, ROWS], dtype=pl.FP32)
                inbox = pld.window(inbox_buf, [1, ROWS], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                self.per_rank(x[r], w, stage, inbox, signal, y[r], device=r)
            return y

    return RingPush


def golden(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    sums = (x @ w).sum(dim=-1) + 1.5
    return torch.roll(sums, shifts=1, dims=0).unsqueeze(1)


def main() -> int:
    parser = argparse.ArgumentParser(description="ring push, notify before put")
    parser.add_argument("-d", "--device", default="0,1,2,3")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_ring_push(nr),
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, ROWS, COLS))
    w = torch.randn((COLS, COLS))
    y = torch.zeros((nr, 1, ROWS))
    compiled(x, w, y)
    print("OK" if torch.allclose(y, golden(x, w), rtol=1e-4, atol=1e-4) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
