"""Broadcast with stamped acknowledgements, bug: two stamps wrap the ack cell negative.

The root publishes its slice as in 07_broadcast.py; each reader then acknowledges by
adding a large stamp (1.5e9) to the root's ack cell, and the root waits ``Ge 1`` for
an acknowledgement before it returns. Signal cells are INT32 and wrap: at P=2 one
stamp fits, but at P=3 both stamps can land before the root looks, the cell wraps to
-1294967296 and the root waits forever.

racecheck expects:
    ranks 1..2: proved
    ranks 3: bug deadlock at @drain
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64
STAMP = 1_500_000_000  # an acknowledgement's stamp


def build_stamped_broadcast(nr: int, root: int = 0):
    """Broadcast rank ``root``'s slice to all ``nr`` ranks."""
    if not 0 <= root < nr:
        raise ValueError(f"root {root} is not a rank of {nr}")

    @pl.program
    class StampedBroadcast:
        @pl.function(type=pl.FunctionType.InCore)
        def broadcast_step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
            ack: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
            root_rank: pl.Scalar[pl.INT32],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(data)
            my_rank = pld.rank(ctx)
            nranks = pld.nranks(ctx)

            if my_rank == root_rank:
                local = pl.load(x, [0, 0], [1, SIZE])
                data = pl.store(local, [0, 0], data)
                for peer in pl.range(nranks):
                    if peer != my_rank:
                        pld.system.notify(
                            signal, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd
                        )
                y = pl.store(local, [0, 0], y)
                if nranks > 1:
                    pld.system.wait(ack, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)  # @drain
            else:
                pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
                recv = pld.tile.remote_load(data, peer=root_rank, offsets=[0, 0], shape=[1, SIZE])
                y = pl.store(recv, [0, 0], y)
                pld.system.notify(
                    ack, peer=root_rank, offsets=[0, 0], value=STAMP, op=pld.NotifyOp.AtomicAdd
                )
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
            ack: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
            root_rank: pl.Scalar[pl.INT32],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            return self.broadcast_step(x, y, data, signal, ack, root_rank)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def broadcast(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
            ack_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
                ack = pld.window(ack_buf, [1, 1], dtype=pl.INT32)
                self.per_rank(x[r], y[r], data, signal, ack, root, device=r)
            return y

    return StampedBroadcast


def expected_broadcast(inputs: torch.Tensor, root: int) -> torch.Tensor:
    return inputs[root : root + 1].expand_as(inputs).clone()


def main() -> int:
    parser = argparse.ArgumentParser(description="broadcast with stamped acknowledgements")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    parser.add_argument("--root", type=int, default=0)
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_stamped_broadcast(nr, args.root),
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
