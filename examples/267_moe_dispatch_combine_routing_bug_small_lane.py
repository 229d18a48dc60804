"""The twin of 266 whose lanes hold one row fewer than a source can send to one expert.

``LANE = TOKENS - 1``: a routing that sends every token of one rank to one expert puts
its last row at slot ``TOKENS - 1``, past its lane, into the next source's lane (or past
the window for the last lane). racecheck finds that routing and shows it.

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
TOKENS = 2
EXPERTS = 2  # local experts per rank
LANE = TOKENS - 1  # one row too few: a source may send TOKENS rows to one expert


def build_moe_dispatch_combine(nr: int):
    rows = EXPERTS * nr * LANE  # a rank's recv window: EXPERTS lanes per source

    @pl.program
    class MoeDispatchCombine:
        @pl.function(type=pl.FunctionType.InCore)
        def moe(
            self,
            x: pl.Tensor[[TOKENS, SIZE], pl.FP32],
            experts: pl.Tensor[[TOKENS, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[TOKENS, SIZE], pl.FP32]],
            recv: pl.InOut[pld.DistributedTensor[[rows, SIZE], pl.FP32]],
            back: pl.InOut[pld.DistributedTensor[[rows, SIZE], pl.FP32]],
            meta: pl.InOut[pld.DistributedTensor[[nr, EXPERTS], pl.INT32]],
            arrived: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
            returned: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[TOKENS, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(recv)
            me = pld.rank(ctx)
            for dest in pl.range(nr):
                counts = pl.tile.full([1, EXPERTS], dtype=pl.INT32, value=0)
                for e in pl.range(EXPERTS):
                    slot = 0
                    for t in pl.range(TOKENS):
                        expert = pl.max(pl.min(pl.read(experts, [t, 0]), nr * EXPERTS - 1), 0)
                        if expert == dest * EXPERTS + e:  # @route
                            row = pl.load(x, [t, 0], [1, SIZE])
                            at = (e * nr + me) * LANE + slot
                            pld.tile.remote_store(row, recv, peer=dest, offsets=[at, 0])  # @push
                            slot = slot + 1
                    pl.tile.write(counts, [0, e], slot)
                pld.tile.remote_store(counts, meta, peer=dest, offsets=[me, 0])  # @publish
                pld.system.notify(arrived, peer=dest, offsets=[me, 0], value=1,
                                  op=pld.NotifyOp.AtomicAdd)
            for source in pl.range(nr):
                pld.system.wait(arrived, offsets=[source, 0], expected=1, cmp=pld.WaitCmp.Ge)
            for e in pl.range(EXPERTS):
                for source in pl.range(nr):
                    n = pl.read(meta, [source, e])  # @count
                    lane = (e * nr + source) * LANE
                    for s in pl.range(n):  # @gather
                        row = pl.load(recv, [lane + s, 0], [1, SIZE])
                        back_lane = (e * nr + me) * LANE
                        pld.tile.remote_store(row, back, peer=source, offsets=[back_lane + s, 0])
            for source in pl.range(nr):
                pld.system.notify(returned, peer=source, offsets=[me, 0], value=1,
                                  op=pld.NotifyOp.AtomicAdd)
            for source in pl.range(nr):
                pld.system.wait(returned, offsets=[source, 0], expected=1, cmp=pld.WaitCmp.Ge)
            for dest in pl.range(nr):
                for e in pl.range(EXPERTS):
                    slot = 0
                    for t in pl.range(TOKENS):
                        expert = pl.max(pl.min(pl.read(experts, [t, 0]), nr * EXPERTS - 1), 0)
                        if expert == dest * EXPERTS + e:
                            lane = (e * nr + dest) * LANE
                            row = pl.load(back, [lane + slot, 0], [1, SIZE])  # @combine
                            y = pl.store(row, [t, 0], y)
                            slot = slot + 1
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[TOKENS, SIZE], pl.FP32],
            experts: pl.Tensor[[TOKENS, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[TOKENS, SIZE], pl.FP32]],
            recv: pl.InOut[pld.DistributedTensor[[rows, SIZE], pl.FP32]],
            back: pl.InOut[pld.DistributedTensor[[rows, SIZE], pl.FP32]],
            meta: pl.InOut[pld.DistributedTensor[[nr, EXPERTS], pl.INT32]],
            arrived: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
            returned: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[TOKENS, SIZE], pl.FP32]:
            return self.moe(x, experts, y, recv, back, meta, arrived, returned)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def moe_layer(
            self,
            x: pl.Tensor[[nr, TOKENS, SIZE], pl.FP32],
            experts: pl.Tensor[[nr, TOKENS, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[nr, TOKENS, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, TOKENS, SIZE], pl.FP32]:
            recv_buf = pld.alloc_window_buffer([rows, SIZE], dtype=pl.FP32)
            back_buf = pld.alloc_window_buffer([rows, SIZE], dtype=pl.FP32)
            meta_buf = pld.alloc_window_buffer([nr, EXPERTS], dtype=pl.INT32)
            arrived_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            returned_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                recv = pld.window(recv_buf, [rows, SIZE], dtype=pl.FP32)
                back = pld.window(back_buf, [rows, SIZE], dtype=pl.FP32)
                meta = pld.window(meta_buf, [nr, EXPERTS], dtype=pl.INT32)
                arrived = pld.window(arrived_buf, [nr, 1], dtype=pl.INT32)
                returned = pld.window(returned_buf, [nr, 1], dtype=pl.INT32)
                self.per_rank(x[r], experts[r], y[r], recv, back, meta, arrived, returned,
                              device=r)
            return y

    return MoeDispatchCombine


def main() -> int:
    parser = argparse.ArgumentParser(description="MoE dispatch and combine, routed by input")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_moe_dispatch_combine(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, TOKENS, SIZE), dtype=torch.float32)
    experts = torch.randint(0, nr * EXPERTS, (nr, TOKENS, 1), dtype=torch.int32)
    y = torch.zeros((nr, TOKENS, SIZE), dtype=torch.float32)
    compiled(x, experts, y)
    print("OK" if torch.equal(y, x) else "MISMATCH")
    return 0 if torch.equal(y, x) else 1


if __name__ == "__main__":
    raise SystemExit(main())
