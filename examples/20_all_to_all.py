"""All-to-all with put, hand-rolled or builtin: block s of rank r's output is block r of rank s.

Each rank puts row d of its input into row ``my_rank`` of rank d's window, joins a
row-per-rank barrier (Set 1, Ge 1: one writer per cell), and copies its window out.
The factory's ``use_builtin`` flag swaps the whole exchange for
``pld.tensor.all_to_all``, which lowers to the same puts and a self-clearing barrier;
racecheck verifies both variants.

racecheck expects:
    ranks 1: proved
    ranks 2..8: proved all_to_all
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 16


def build_all_to_all(nr: int, use_builtin: bool):
    """All-to-all of ``[nr, SIZE]`` inputs across ``nr`` ranks."""

    @pl.program
    class AllToAll:
        @pl.function(type=pl.FunctionType.InCore)
        def exchange_by_hand(
            self,
            x: pl.Tensor[[nr, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, SIZE], pl.FP32]],
            inbox: pl.InOut[pld.DistributedTensor[[nr, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[nr, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(inbox)
            my_rank = pld.rank(ctx)

            for dest in pl.range(nr):
                pld.tensor.put(
                    inbox, dest, x, dst_offsets=[my_rank, 0], src_offsets=[dest, 0], shape=[1, SIZE]
                )
            for peer in pl.range(nr):
                if peer != my_rank:
                    pld.system.notify(
                        signal, peer=peer, offsets=[my_rank, 0], value=1, op=pld.NotifyOp.Set
                    )
            for src in pl.range(nr):
                if src != my_rank:
                    pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)

            for src in pl.range(nr):
                row = pl.load(inbox, [src, 0], [1, SIZE])
                y = pl.store(row, [src, 0], y)
            return y

        @pl.function(type=pl.FunctionType.InCore)
        def exchange_builtin(
            self,
            x: pl.Tensor[[nr, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, SIZE], pl.FP32]],
            inbox: pl.InOut[pld.DistributedTensor[[nr, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[nr, SIZE], pl.FP32]:
            received = pld.tensor.all_to_all(x, inbox, signal)
            for src in pl.range(nr):
                row = pl.load(received, [src, 0], [1, SIZE])
                y = pl.store(row, [src, 0], y)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank_by_hand(
            self,
            x: pl.Tensor[[nr, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, SIZE], pl.FP32]],
            inbox: pl.InOut[pld.DistributedTensor[[nr, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[nr, SIZE], pl.FP32]:
            return self.exchange_by_hand(x, y, inbox, signal)

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank_builtin(
            self,
            x: pl.Tensor[[nr, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, SIZE], pl.FP32]],
            inbox: pl.InOut[pld.DistributedTensor[[nr, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[nr, SIZE], pl.FP32]:
            return self.exchange_builtin(x, y, inbox, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def all_to_all(
            self,
            x: pl.Tensor[[nr, nr, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, nr, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, nr, SIZE], pl.FP32]:
            inbox_buf = pld.alloc_window_buffer(nr * SIZE * pl.FP32.get_byte())
            signal_buf = pld.alloc_window_buffer(nr * pl.INT32.get_byte())
            for r in pl.range(pld.world_size()):
                inbox = pld.window(inbox_buf, [nr, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                if use_builtin:
                    self.per_rank_builtin(x[r], y[r], inbox, signal, device=r)
                else:
                    self.per_rank_by_hand(x[r], y[r], inbox, signal, device=r)
            return y

    return AllToAll


def expected_all_to_all(inputs: torch.Tensor) -> torch.Tensor:
    return inputs.transpose(0, 1).contiguous()


def main() -> int:
    parser = argparse.ArgumentParser(description="all-to-all with put")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    parser.add_argument("--use-builtin", action="store_true")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_all_to_all(nr, args.use_builtin),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, nr, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, nr, SIZE), dtype=torch.float32)
    compiled(x, y)
    print("OK" if torch.equal(y, expected_all_to_all(x)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
