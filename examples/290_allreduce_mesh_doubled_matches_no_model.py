"""All-reduce, mesh form, adding the received slice to itself: race-free, wrong numbers.

The twin of 08_allreduce_mesh.py with one operand changed at @acc: every rank ends with
twice the last peer's slice, which matches no golden model. Without `--expect` the run
is proved and reports "matches no model" (exit 0); `--expect allreduce-sum` (or
`require_model`, docs/ci.md) is what fails it. The wrong result is pinned to the store
of the output at @out.

racecheck expects:
    ranks 2..4: proved
    ranks 2..4 --expect allreduce-sum: bug wrong-result at @out
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
SIZE = 64


@pl.program
class MeshAllreduceDoubled:
    @pl.function(type=pl.FunctionType.InCore)
    def reduce_step(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        """Stage, barrier, accumulate, stage-out."""
        ctx = pld.get_comm_ctx(data)
        my_rank = pld.rank(ctx)
        nranks = pld.nranks(ctx)

        # Phase 1: stage this rank's slice into its window.
        local = pl.load(x, [0, 0], [1, SIZE])
        data = pl.store(local, [0, 0], data)

        # Phase 2: barrier. Row my_rank of every peer's signal is ours alone.
        for peer in pl.range(nranks):
            if peer != my_rank:
                pld.system.notify(
                    signal, peer=peer, offsets=[my_rank, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
        for src in pl.range(nranks):
            if src != my_rank:
                pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)

        # Phase 3: start from our own slice, add every peer's.
        acc = pl.load(data, [0, 0], [1, SIZE])
        for peer in pl.range(nranks):
            if peer != my_rank:
                recv = pld.tile.remote_load(data, peer=peer, offsets=[0, 0], shape=[1, SIZE])
                acc = pl.add(recv, recv)  # @acc

        # Phase 4: the sum is this rank's output.
        return pl.store(acc, [0, 0], y)  # @out

    @pl.function(type=pl.FunctionType.Orchestration)
    def per_rank(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        return self.reduce_step(x, y, data, signal)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def mesh_allreduce(
        self,
        x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
    ) -> pl.Tensor[[NR, 1, SIZE], pl.FP32]:
        data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [pld.world_size(), 1], dtype=pl.INT32)
            self.per_rank(x[r], y[r], data, signal, device=r)
        return y


def expected_allreduce(inputs: torch.Tensor) -> torch.Tensor:
    """Every rank ends with the element-wise sum of all ranks' slices."""
    return inputs.sum(dim=0, keepdim=True).expand_as(inputs).clone()


def main() -> int:
    parser = argparse.ArgumentParser(description="mesh all-reduce")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        MeshAllreduceDoubled,
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    if args.compile_only:
        print(f"compiled into {compiled.output_dir}")
        return 0

    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    compiled(x, y)
    expected = expected_allreduce(x)
    if not torch.allclose(y, expected, rtol=1e-5, atol=1e-5):
        print(f"MISMATCH: max diff {(y - expected).abs().max().item()}")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
