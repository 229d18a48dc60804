"""The twin of 271 whose wait threshold is the raw input credit, not clamped at all.

The sender adds ``max(min(credit, MAX_CREDIT), 1)``; the receiver waits for ``credit``
itself. A credit past ``MAX_CREDIT`` waits for more than any sender adds (a deadlock);
one below 1 passes at once, before the neighbour's row lands (a race with the push).
racecheck solves for such credits and shows them.

racecheck expects:
    ranks 2..3: bug
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 16
MAX_CREDIT = 3


def build_credit_shift(nr: int):
    @pl.program
    class CreditShift:
        @pl.function(type=pl.FunctionType.InCore)
        def step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            credit: pl.Tensor[[1], pl.INT32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            inbox: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            arrived: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(inbox)
            me = pld.rank(ctx)
            right = (me + 1) % nr
            sent = pl.max(pl.min(pl.read(credit, [0]), MAX_CREDIT), 1)  # @send_credit
            row = pl.load(x, [0, 0], [1, SIZE])
            pld.tile.remote_store(row, inbox, peer=right, offsets=[0, 0])  # @push
            pld.system.notify(arrived, peer=right, offsets=[0, 0], value=sent,
                              op=pld.NotifyOp.AtomicAdd)
            needed = pl.read(credit, [0])  # @threshold
            pld.system.wait(arrived, offsets=[0, 0], expected=needed, cmp=pld.WaitCmp.Ge)
            got = pl.load(inbox, [0, 0], [1, SIZE])  # @take
            return pl.store(got, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            credit: pl.Tensor[[1], pl.INT32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            inbox: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            arrived: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            return self.step(x, credit, y, inbox, arrived)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def credit_shift(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            credit: pl.Tensor[[1], pl.INT32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            inbox_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            arrived_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                inbox = pld.window(inbox_buf, [1, SIZE], dtype=pl.FP32)
                arrived = pld.window(arrived_buf, [1, 1], dtype=pl.INT32)
                self.per_rank(x[r], credit, y[r], inbox, arrived, device=r)
            return y

    return CreditShift


def main() -> int:
    parser = argparse.ArgumentParser(description="shift with an input credit")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    parser.add_argument("-c", "--credit", type=int, default=2)
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_credit_shift(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    compiled(x, torch.tensor([args.credit], dtype=torch.int32), y)
    ok = torch.equal(y, torch.roll(x, 1, dims=0))
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
