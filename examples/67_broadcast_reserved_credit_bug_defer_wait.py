"""Broadcast with a reserved credit, bug: ``defer_wait`` reads the -1 as 4294967295.

The twin of 66_broadcast_reserved_credit.py with ``pld.system.defer_wait`` for the
reader's wait. ``defer_wait`` compares the cell as an unsigned 32-bit number
(docs/model.md): once the reader's own reservation made the flag -1, that is
0xFFFFFFFF, which satisfies ``Ge 1`` at once, so the reader fetches before the root
has staged its slice. PyPTO requires the deferred wait to sit in a task of its own,
with no read after it: the fetch is a second task that names it in ``deps=``.

racecheck expects:
    ranks 1: proved
    ranks 2..4: bug race at @fetch, @stage
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64


def build_deferred_credit_broadcast(nr: int, root: int = 0):
    """Broadcast rank ``root``'s slice to all ``nr`` ranks."""
    if not 0 <= root < nr:
        raise ValueError(f"root {root} is not a rank of {nr}")

    @pl.program
    class DeferredCreditBroadcast:
        @pl.function(type=pl.FunctionType.InCore)
        def stage_step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
            root_rank: pl.Scalar[pl.INT32],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(data)
            my_rank = pld.rank(ctx)
            nranks = pld.nranks(ctx)

            if my_rank == root_rank:
                local = pl.load(x, [0, 0], [1, SIZE])
                data = pl.store(local, [0, 0], data)  # @stage
                for peer in pl.range(nranks):
                    if peer != my_rank:
                        pld.system.notify(
                            signal, peer=peer, offsets=[0, 0], value=2, op=pld.NotifyOp.AtomicAdd
                        )
                y = pl.store(local, [0, 0], y)
            else:
                pld.system.notify(  # @reserve
                    signal, peer=my_rank, offsets=[0, 0], value=-1, op=pld.NotifyOp.AtomicAdd
                )
            return y

        @pl.function(type=pl.FunctionType.InCore)
        def wait_step(
            self,
            signal: pld.DistributedTensor[[1, 1], pl.INT32],
            root_rank: pl.Scalar[pl.INT32],
        ):
            if pld.rank(pld.get_comm_ctx(signal)) != root_rank:
                pld.system.defer_wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)

        @pl.function(type=pl.FunctionType.InCore)
        def fetch_step(
            self,
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pld.DistributedTensor[[1, SIZE], pl.FP32],
            root_rank: pl.Scalar[pl.INT32],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            if pld.rank(pld.get_comm_ctx(data)) != root_rank:
                recv = pld.tile.remote_load(  # @fetch
                    data, peer=root_rank, offsets=[0, 0], shape=[1, SIZE]
                )
                y = pl.store(recv, [0, 0], y)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
            root_rank: pl.Scalar[pl.INT32],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            y = self.stage_step(x, y, data, signal, root_rank)
            with pl.at(level=pl.Level.CORE_GROUP) as waited:  # @wait
                self.wait_step(signal, root_rank)
            with pl.at(level=pl.Level.CORE_GROUP, deps=[waited]):
                y = self.fetch_step(y, data, root_rank)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def broadcast(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
                self.per_rank(x[r], y[r], data, signal, root, device=r)
            return y

    return DeferredCreditBroadcast


def expected_broadcast(inputs: torch.Tensor, root: int) -> torch.Tensor:
    return inputs[root : root + 1].expand_as(inputs).clone()


def main() -> int:
    parser = argparse.ArgumentParser(description="broadcast with reserved credits")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    parser.add_argument("--root", type=int, default=0)
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_deferred_credit_broadcast(nr, args.root),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    compiled(x, y)
    print("OK" if torch.equal(y, expected_broadcast(x, args.root)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
