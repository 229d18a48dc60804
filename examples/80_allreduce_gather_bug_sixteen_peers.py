"""All-reduce through a gather window sized for 16 peers: correct up to P=16 only.

Every rank pushes its slice into row ``my_rank`` of every rank's gather window (its own
included), raises its cell ``[my_rank, 0]`` in every rank's signal (AtomicAdd 1), waits
until every row has landed (Ge 1), then sums the rows of its own window. The gather
window and the signal were sized for a fixed ``MAX_PEERS = 16`` rows, not for the world
size: at P=17 rank 16 pushes into row 16 of a 16-row window. A sweep of 2..8, or even
2..16, proves it; ``--ranks all`` finds P=17 as the smallest failing rank count without
sweeping.

racecheck expects:
    ranks 2..4: proved allreduce-sum
    ranks 16: proved allreduce-sum
    ranks 17: bug out-of-bounds at @push ranks 16
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

NR = pl.dynamic("NR")
SIZE = 32
MAX_PEERS = 16


@pl.program
class GatherAllreduce:
    @pl.function(type=pl.FunctionType.InCore)
    def gather_sum(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        gather: pl.InOut[pld.DistributedTensor[[MAX_PEERS, SIZE], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[MAX_PEERS, 1], pl.INT32]],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        """Push to every peer, notify it, wait for every row, sum the rows."""
        ctx = pld.get_comm_ctx(gather)
        my_rank = pld.rank(ctx)
        nranks = pld.nranks(ctx)

        local = pl.load(x, [0, 0], [1, SIZE])
        for peer in pl.range(nranks):
            pld.tile.remote_store(local, gather, peer=peer, offsets=[my_rank, 0])  # @push
            pld.system.notify(
                signal, peer=peer, offsets=[my_rank, 0], value=1, op=pld.NotifyOp.AtomicAdd
            )
        for src in pl.range(nranks):
            pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)

        acc = pl.load(gather, [0, 0], [1, SIZE])
        for src in pl.range(1, nranks):
            row = pl.load(gather, [src, 0], [1, SIZE])
            acc = pl.add(acc, row)
        return pl.store(acc, [0, 0], y)

    @pl.function(type=pl.FunctionType.Orchestration)
    def per_rank(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        gather: pl.InOut[pld.DistributedTensor[[MAX_PEERS, SIZE], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[MAX_PEERS, 1], pl.INT32]],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        return self.gather_sum(x, y, gather, signal)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def gather_allreduce(
        self,
        x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
    ) -> pl.Tensor[[NR, 1, SIZE], pl.FP32]:
        gather_buf = pld.alloc_window_buffer([MAX_PEERS, SIZE], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([MAX_PEERS, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            gather = pld.window(gather_buf, [MAX_PEERS, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [MAX_PEERS, 1], dtype=pl.INT32)
            self.per_rank(x[r], y[r], gather, signal, device=r)
        return y


def main() -> int:
    parser = argparse.ArgumentParser(description="all-reduce through a 16-row gather window")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        GatherAllreduce,
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    compiled(x, y)
    expected = x.sum(dim=0, keepdim=True).expand_as(x)
    if not torch.allclose(y, expected, rtol=1e-5, atol=1e-5):
        print(f"MISMATCH: max diff {(y - expected).abs().max().item()}")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
