"""Mesh all-reduce built by a factory whose bool parameter ``fence`` turns the barrier off.

The same kernel as 08_allreduce_mesh.py, built by ``build_mesh(nr, fence)``. With
``fence=True`` it is that correct all-reduce; with ``fence=False`` the barrier is left
out and a peer's remote_load can run before the owner stages its slice. Racecheck
checks both variants when no ``--arg`` is given; ``--arg fence=false`` must select the
buggy one, in any usual spelling of false (issue 10.6: it used to be the truthy string
"false").

racecheck expects:
    ranks 2..8 --arg fence=true: proved allreduce-sum
    ranks 2..8 --arg fence=false: bug race read-after-write at @recv, @stage
    ranks 2..4 --arg fence=0: bug race read-after-write at @recv, @stage
    ranks 1 --arg fence=no: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64


def build_mesh(nr: int, fence: bool):
    """The mesh all-reduce for ``nr`` ranks, with or without its barrier."""

    @pl.program
    class FencedMeshAllreduce:
        @pl.function(type=pl.FunctionType.InCore)
        def reduce_step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            """Stage, barrier, accumulate, stage-out."""
            ctx = pld.get_comm_ctx(data)
            my_rank = pld.rank(ctx)
            nranks = pld.nranks(ctx)

            # Phase 1: stage this rank's slice into its window.
            local = pl.load(x, [0, 0], [1, SIZE])
            data = pl.store(local, [0, 0], data)  # @stage

            # Phase 2: barrier, only with the fence. Row my_rank of every peer's signal
            # is ours alone.
            if fence:
                for peer in pl.range(nranks):
                    if peer != my_rank:
                        pld.system.notify(
                            signal,
                            peer=peer,
                            offsets=[my_rank, 0],
                            value=1,
                            op=pld.NotifyOp.AtomicAdd,
                        )
                for src in pl.range(nranks):
                    if src != my_rank:
                        pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)

            # Phase 3: start from our own slice, add every peer's.
            acc = pl.load(data, [0, 0], [1, SIZE])
            for peer in pl.range(nranks):
                if peer != my_rank:
                    recv = pld.tile.remote_load(  # @recv
                        data, peer=peer, offsets=[0, 0], shape=[1, SIZE]
                    )
                    acc = pl.add(acc, recv)

            # Phase 4: the sum is this rank's output.
            return pl.store(acc, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            return self.reduce_step(x, y, data, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def mesh_allreduce(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [pld.world_size(), 1], dtype=pl.INT32)
                self.per_rank(x[r], y[r], data, signal, device=r)
            return y

    return FencedMeshAllreduce


def expected_allreduce(inputs: torch.Tensor) -> torch.Tensor:
    return inputs.sum(dim=0, keepdim=True).expand_as(inputs).clone()


def main() -> int:
    parser = argparse.ArgumentParser(description="fenced mesh all-reduce")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    parser.add_argument("--no-fence", action="store_true")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_mesh(nr, fence=not args.no_fence),
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
